// SPDX-License-Identifier: MIT
/*
 * test_tensor_discard — a DISCARD map skips the read-in only for the
 * chunks its range covers whole (the tensor's end counts as covered):
 * a 100-byte DISCARD map inside a stored 16 KiB chunk keeps the chunk's
 * other 16284 bytes, at the host and at the (sim) device tier; a map
 * that covers a chunk whole (or a short last chunk to the tensor's end)
 * still reads nothing from the store; a DISCARD map refused (-ENOMEM:
 * larger than the device budget, not the host's) changes nothing, the
 * stored bytes all there (in shared mode its staging host map in hmmd,
 * taken first, made the chunks dirty and unread, and its end after the
 * refusal left them zeros: found by test_hmmd_stress).
 */
#include "t.h"
#include "hmm_mode.h"

#include "hmm.h"

#define CHUNK	(16 << 10)
#define TBYTES	(2 * CHUNK)
#define DEVICE	(512 << 10)		/* the device budget */
#define BIG	(DEVICE + 2 * CHUNK)	/* past it; within the host's */

static struct hmm *h;

/* Evict t to the store and wait: no copy left on the host. */
static void to_store(struct hmm_tensor *t)
{
	hmm_evict(t, 0, HMM_ALL, HMM_TIER_DEVICE);
	hmm_evict(t, 0, HMM_ALL, HMM_TIER_HOST);
	hmm_wait(h, NULL);
}

/* Whole t (n bytes) as the host sees it equals want, a piece at a time. */
static int same_n(struct hmm_tensor *t, const uint8_t *want, uint64_t n)
{
	uint64_t off, k, i, bad = 0;
	void *p;

	for (off = 0; off < n; off += k) {
		k = n - off < (256 << 10) ? n - off : (256 << 10);
		if (hmm_map(t, off, k, HMM_TIER_HOST, HMM_READ, &p)) {
			t_diag("map: %s", hmm_last_error());
			return 0;
		}
		for (i = 0; i < k; i++)
			bad += ((uint8_t *)p)[i] != want[off + i];
		hmm_unmap(t, p);
	}
	if (bad)
		t_diag("%llu of %llu bytes differ", (unsigned long long)bad,
		       (unsigned long long)n);
	return !bad;
}

static int same(struct hmm_tensor *t, const uint8_t *want)
{
	return same_n(t, want, TBYTES);
}

/* A tensor larger than the device budget, stored: a DISCARD map of it
 * all at the device is -ENOMEM, and every byte stays 0xAB. */
static void refused(void)
{
	static uint8_t want[BIG];
	int64_t n = BIG;
	struct hmm_tensor *t;
	uint64_t off, k;
	void *p;
	int r;

	if (hmm_tensor_new(h, "big", HMM_DTYPE_U8, 1, &n, &t))
		t_fail_all("tensor: %s", hmm_last_error());
	memset(want, 0xab, sizeof(want));
	for (off = 0; off < BIG; off += k) {
		k = BIG - off < (256 << 10) ? BIG - off : (256 << 10);
		if (hmm_map(t, off, k, HMM_TIER_HOST, HMM_WRITE, &p))
			t_fail_all("fill map: %s", hmm_last_error());
		memset(p, 0xab, k);
		hmm_unmap(t, p);
	}
	to_store(t);
	r = hmm_map(t, 0, HMM_ALL, HMM_TIER_DEVICE, HMM_DISCARD, &p);
	t_eq(r, -ENOMEM, "a DISCARD device map past the device budget: "
	     "ENOMEM (%s)", hmm_last_error());
	if (!r)
		hmm_unmap(t, p);
	t_ok(same_n(t, want, BIG), "... and the tensor's bytes are all "
	     "still there");
	t_eq(hmm_tensor_free(t), 0, "free the big tensor");
}

/* Fill t with 0xAB, store it, DISCARD-map [off, +len) at tier, write
 * 0xCD there, unmap; 1 when every other byte is still 0xAB. */
static int partial(struct hmm_tensor *t, uint64_t off, uint64_t len,
		   int tier)
{
	uint8_t want[TBYTES];
	void *p;

	memset(want, 0xab, sizeof(want));
	if (hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_WRITE, &p))
		t_fail_all("fill map: %s", hmm_last_error());
	memset(p, 0xab, TBYTES);
	hmm_unmap(t, p);
	to_store(t);
	if (hmm_map(t, off, len, tier, HMM_DISCARD, &p)) {
		t_diag("discard map: %s", hmm_last_error());
		return 0;
	}
	if (tier == HMM_TIER_HOST)
		memset(p, 0xcd, len);
	else	/* the sim device's memory is this process's */
		memset((void *)(uintptr_t)p, 0xcd, len);
	hmm_unmap(t, p);
	memset(want + off, 0xcd, len);
	to_store(t);
	return same(t, want);
}

int main(void)
{
	struct hmm_config cfg;
	struct hmm_stats st, st2;
	struct hmm_tensor *t;
	char path[4200];
	int64_t n = TBYTES;
	void *p;

	hmm_test_config(&cfg, path, sizeof(path), 16 << 20, 1 << 20, CHUNK);
	cfg.device = "sim";
	cfg.device_budget = DEVICE;
	hmm_test_mode(&cfg);
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	if (hmm_tensor_new(h, "d", HMM_DTYPE_U8, 1, &n, &t))
		t_fail_all("tensor: %s", hmm_last_error());

	t_ok(partial(t, 100, 100, HMM_TIER_HOST),
	     "host DISCARD of [100, +100) keeps the chunk's other 16284 "
	     "bytes");
	t_ok(partial(t, CHUNK - 50, 100, HMM_TIER_HOST),
	     "host DISCARD across two chunks keeps both chunks' other bytes");
	t_ok(partial(t, 100, 100, HMM_TIER_DEVICE),
	     "device DISCARD of [100, +100) keeps the chunk's other 16284 "
	     "bytes");
	t_ok(partial(t, CHUNK + 7, CHUNK - 7,
		     HMM_TIER_DEVICE),
	     "device DISCARD of a chunk's tail keeps its head");

	/* a chunk covered whole, and the tensor's end, need no read-in */
	t_ok(partial(t, CHUNK, CHUNK, HMM_TIER_HOST),
	     "host DISCARD of the whole last chunk writes it exactly");
	to_store(t);	/* shared mode: hmmd's engine's counts (STATS2) */
	hmm_stats(h, &st);
	if (hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD, &p))
		t_fail_all("map: %s", hmm_last_error());
	hmm_unmap(t, p);
	hmm_stats(h, &st2);
	t_eq(st2.tier[HMM_TIER_STORE].bytes_out,
	     st.tier[HMM_TIER_STORE].bytes_out,
	     "a DISCARD of whole chunks reads nothing from the store");
	t_eq(st2.discard_skips - st.discard_skips, 2,
	     "both read-ins counted as skipped");
	t_eq(hmm_tensor_free(t), 0, "free");

	/* a short last chunk counts as covered from its start to the end */
	n = CHUNK + 1000;
	if (hmm_tensor_new(h, "short", HMM_DTYPE_U8, 1, &n, &t))
		t_fail_all("tensor: %s", hmm_last_error());
	if (hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_WRITE, &p))
		t_fail_all("map: %s", hmm_last_error());
	memset(p, 0xab, n);
	hmm_unmap(t, p);
	to_store(t);
	hmm_stats(h, &st);
	if (hmm_map(t, CHUNK, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD, &p))
		t_fail_all("map: %s", hmm_last_error());
	hmm_unmap(t, p);
	hmm_stats(h, &st2);
	t_eq(st2.tier[HMM_TIER_STORE].bytes_out,
	     st.tier[HMM_TIER_STORE].bytes_out, "a DISCARD from a short last "
	     "chunk's start to the tensor's end reads nothing");
	t_eq(st2.discard_skips - st.discard_skips, 1, "one read-in skipped");
	t_eq(hmm_tensor_free(t), 0, "free the short tensor");
	refused();
	hmm_close(h);
	return t_done();
}
