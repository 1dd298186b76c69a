// SPDX-License-Identifier: MIT
/*
 * test_tensor_spare — the pages of chunks evicted, even from a full host
 * budget, are parked (recycle.c) and the next chunks read in take them:
 * counted as host_spare and in the budget, not as resident; the bytes
 * read back are the store's; the very pages come back (their frame
 * numbers, where /proc/self/pagemap shows them: root); a DISCARD map
 * gets zeros, never a parked chunk's bytes; an admission that needs room
 * frees parked pages before it evicts anything; the budget holds.  With
 * 2 MiB chunks (huge pages) and 64 KiB ones; HMM_SPARE=0 parks nothing.  Embedded engine only:
 * hmmd's host tier is memfds, whose pages are never parked.  t: tsan
 */
#include <fcntl.h>
#include <unistd.h>

#include "t.h"
#include "hmm_mode.h"

#include "hmm.h"

static struct hmm *h;

static struct hmm_stats stats(void)
{
	struct hmm_stats st;

	hmm_stats(h, &st);
	return st;
}

/* The frame number of each chunk's first page of t (0: not shown). */
static void pfns(struct hmm_tensor *t, int n, uint64_t chunk, uint64_t *out)
{
	int fd = open("/proc/self/pagemap", O_RDONLY);
	void *p;

	memset(out, 0, n * sizeof(*out));
	if (fd < 0 || hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p)) {
		if (fd >= 0)
			close(fd);
		return;
	}
	for (int i = 0; i < n; i++) {
		uint64_t e = 0, page = ((uintptr_t)p + i * chunk) / 4096;

		if (pread(fd, &e, 8, page * 8) == 8 && (e >> 63))
			out[i] = e & ((1ull << 55) - 1);
	}
	hmm_unmap(t, p);
	close(fd);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static struct hmm_tensor *tensor(const char *name, int64_t bytes)
{
	struct hmm_tensor *t;

	if (hmm_tensor_new(h, name, HMM_DTYPE_U8, 1, &bytes, &t))
		t_fail_all("tensor %s: %s", name, hmm_last_error());
	return t;
}

/* A context of 12 chunks' host budget and 256 chunks' store. */
static void open_ctx(uint64_t chunk)
{
	struct hmm_config cfg;
	char path[4200];

	hmm_test_config(&cfg, path, sizeof(path), 256 * chunk, 12 * chunk,
			(uint32_t)chunk);
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
}

static void evict(struct hmm_tensor *t)
{
	hmm_evict(t, 0, HMM_ALL, HMM_TIER_HOST);
	if (hmm_wait(h, NULL))
		t_fail_all("wait: %s", hmm_last_error());
}

static void run(uint64_t chunk)
{
	struct hmm_tensor *a, *b, *c;
	struct hmm_stats s0, s1;
	uint64_t before[4], after[4], res[HMM_TIERS];
	uint8_t *zero;
	void *p;

	t_diag("chunk %llu KiB", (unsigned long long)chunk >> 10);
	open_ctx(chunk);
	a = tensor("a", 4 * chunk);
	t_eq(hmm_test_pass(a, 4 * chunk, chunk, 1, 1), 0, "a written");
	pfns(a, 4, chunk, before);

	s0 = stats();
	evict(a);
	s1 = stats();
	t_eq(s1.tier[HMM_TIER_HOST].resident, 0, "a evicted: nothing resident");
	t_eq(s1.host_spare, 4 * chunk, "its 4 chunks' pages parked");
	t_eq(s1.tier[HMM_TIER_STORE].bytes_in - s0.tier[HMM_TIER_STORE].bytes_in,
	     4 * chunk, "and written to the store");
	hmm_tensor_residency(a, res);
	t_eq(res[HMM_TIER_HOST], 0, "a has no host bytes");

	t_eq(hmm_test_pass(a, 4 * chunk, chunk, 1, 0), 0,
	     "a read back into parked pages: the store's bytes");
	s0 = stats();
	t_eq(s0.host_spare, 0, "every parked page taken");
	t_eq(s0.tier[HMM_TIER_HOST].resident, 4 * chunk, "a resident again");
	t_eq(s0.tier[HMM_TIER_STORE].bytes_out - s1.tier[HMM_TIER_STORE].bytes_out,
	     4 * chunk, "read from the store");
	pfns(a, 4, chunk, after);
	if (!before[0] || !after[0]) {
		t_ok(1, "# SKIP page frames not shown here (not root)");
	} else {
		qsort(before, 4, 8, cmp_u64);
		qsort(after, 4, 8, cmp_u64);
		t_ok(!memcmp(before, after, sizeof(before)),
		     "the chunks came back in the very pages they left");
	}

	/* a DISCARD map is never handed a parked chunk's bytes */
	evict(a);
	t_eq(stats().host_spare, 4 * chunk, "a parked again");
	b = tensor("b", chunk);
	zero = calloc(1, chunk);
	if (!zero || hmm_map(b, 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD, &p))
		t_fail_all("map b: %s", hmm_last_error());
	t_ok(!memcmp(p, zero, chunk), "a DISCARD map reads zeros");
	memset(p, 0x5a, chunk);
	hmm_unmap(b, p);
	t_eq(stats().host_spare, 4 * chunk, "and took no parked pages");

	/* 4 parked + b = 5 chunks of 12: c's 8 need one parked chunk freed,
	 * and nothing resident evicted for it */
	s0 = stats();
	c = tensor("c", 8 * chunk);
	if (hmm_map(c, 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD, &p))
		t_fail_all("map c: %s", hmm_last_error());
	s1 = stats();
	t_eq(s1.host_spare, 3 * chunk, "room for c came from a parked chunk");
	t_eq(s1.tier[HMM_TIER_HOST].evictions,
	     s0.tier[HMM_TIER_HOST].evictions, "nothing evicted for it");
	hmm_tensor_residency(b, res);
	t_eq(res[HMM_TIER_HOST], chunk, "b still resident");
	t_ok(s1.tier[HMM_TIER_HOST].resident + s1.host_spare <=
	     s1.tier[HMM_TIER_HOST].capacity &&
	     s1.tier[HMM_TIER_HOST].peak <= s1.tier[HMM_TIER_HOST].capacity,
	     "resident + parked within the budget, and the peak");
	hmm_unmap(c, p);

	/* b's dirty chunk was never lost: a full budget evicts it */
	t_eq(hmm_test_pass(a, 4 * chunk, chunk, 1, 0), 0, "a read once more");
	if (hmm_map(b, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p))
		t_fail_all("map b: %s", hmm_last_error());
	memset(zero, 0x5a, chunk);
	t_ok(!memcmp(p, zero, chunk), "b's bytes intact");
	hmm_unmap(b, p);
	t_eq(hmm_tensor_free(a) | hmm_tensor_free(b) | hmm_tensor_free(c), 0,
	     "tensors freed");
	t_eq(stats().tier[HMM_TIER_HOST].resident, 0, "nothing resident");
	free(zero);
	hmm_close(h);
}

/* A full budget parks too: a's 12 chunks fill it, and every one of them
 * evicted is parked (before, none was: "room wanted"), then read back
 * into those pages, the budget held throughout. */
static void full(uint64_t chunk)
{
	struct hmm_tensor *a;
	struct hmm_stats s;

	open_ctx(chunk);
	a = tensor("a", 12 * chunk);
	t_eq(hmm_test_fill(a, 12 * chunk, 3), 0, "a fills the budget");
	t_eq(stats().tier[HMM_TIER_HOST].resident, 12 * chunk, "all resident");
	evict(a);
	s = stats();
	t_eq(s.host_spare, 12 * chunk, "evicted from a full budget: all parked");
	t_ok(hmm_test_same(a, 12 * chunk, 3), "a read back exact");
	s = stats();
	t_eq(s.host_spare, 0, "into the parked pages");
	t_ok(s.tier[HMM_TIER_HOST].peak <= s.tier[HMM_TIER_HOST].capacity,
	     "the peak within the budget");
	t_eq(hmm_tensor_free(a), 0, "freed");
	hmm_close(h);
}

/* HMM_SPARE=0: nothing parked, the bytes come back all the same */
static void off(uint64_t chunk)
{
	struct hmm_tensor *a;

	setenv("HMM_SPARE", "0", 1);
	open_ctx(chunk);
	a = tensor("a", 4 * chunk);
	t_eq(hmm_test_fill(a, 4 * chunk, 7), 0, "HMM_SPARE=0: a written");
	evict(a);
	t_eq(stats().host_spare, 0, "HMM_SPARE=0: nothing parked");
	t_eq(stats().tier[HMM_TIER_HOST].resident, 0, "nor resident");
	t_ok(hmm_test_same(a, 4 * chunk, 7), "a read back exact");
	t_eq(hmm_tensor_free(a), 0, "freed");
	hmm_close(h);
	unsetenv("HMM_SPARE");
}

int main(void)
{
	if (hmm_test_shared())
		t_skip_all("hmmd's host tier is memfds: nothing is parked");
	run(2 << 20);
	run(64 << 10);
	full(2 << 20);
	off(2 << 20);
	return t_done();
}
