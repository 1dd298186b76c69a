// SPDX-License-Identifier: MIT
/*
 * test_tensor_basic — the core path with a store: tensors totalling 4x
 * the host budget are written, evicted and read back exact; DISCARD maps
 * read nothing from the store (counted); prefetch/evict/wait/flush; the
 * sim device tier round-trips through host and store.  t: tsan
 */
#include "t.h"
#include "hmm_mode.h"

#include "hmm.h"

#define NT	8
#define TBYTES	(1 << 20)
#define CHUNK	(64 << 10)

static struct hmm *h;
static struct hmm_tensor *ts[NT];

static void stats(struct hmm_stats *st)
{
	hmm_stats(h, st);
}

static int verify(struct hmm_tensor *t, uint64_t seed, int tier)
{
	uint8_t *p, *want = malloc(TBYTES);
	void *hp;
	int ok;

	if (hmm_map(t, 0, HMM_ALL, tier, HMM_READ, &hp)) {
		t_diag("map %s: %s", hmm_tensor_name(t), hmm_last_error());
		free(want);
		return 0;
	}
	p = hp;
	t_fill(want, TBYTES, seed);
	ok = !memcmp(p, want, TBYTES);
	hmm_unmap(t, hp);
	free(want);
	return ok;
}

static int write_seed(struct hmm_tensor *t, uint64_t seed, int tier,
		      unsigned access)
{
	void *p;

	if (hmm_map(t, 0, HMM_ALL, tier, access, &p)) {
		t_diag("map %s: %s", hmm_tensor_name(t), hmm_last_error());
		return -1;
	}
	t_fill(p, TBYTES, seed);
	return hmm_unmap(t, p);
}

/* The Chrome trace: one JSON array with I/O, evictions and stalls. */
/* Embedded: the engine's events.  Shared: this process's view of hmmd's
 * work (map, evict, wait, flush as the time hmmd took). */
static void check_trace(const char *path, int sh)
{
	FILE *f = fopen(path, "r");
	static char buf[1 << 22];
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	char cmd[4400];

	if (f)
		fclose(f);
	buf[n] = 0;
	t_ok(n > 2 && buf[0] == '[' && strstr(buf, "\n]\n"),
	     "trace is a JSON array (%zu bytes)", n);
	if (sh)
		t_ok(strstr(buf, "\"map wait hmmd t0[") &&
		     strstr(buf, "\"evict in hmmd t") &&
		     strstr(buf, "\"wait hmmd ") &&
		     strstr(buf, "\"flush in hmmd "), "trace has maps, "
		     "evictions, waits and flushes through hmmd, with tensor "
		     "names");
	else
		t_ok(strstr(buf, "\"store read t") &&
		     strstr(buf, "\"store write t") &&
		     strstr(buf, "\"host to device t") &&
		     (strstr(buf, "drop host") || strstr(buf, "spare host")) &&
		     strstr(buf, "map wait host"),
		     "trace has reads, writes, device copies, evictions and "
		     "stalls, with tensor names");
	if (access("/usr/bin/python3", X_OK))
		return;
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 -c 'import json,sys; "
		 "e=json.load(open(sys.argv[1])); sys.exit(0 if all(\"ph\" in x "
		 "for x in e) else 1)' '%s'", path);
	t_eq(system(cmd), 0, "python's json module loads the trace");
}

int main(void)
{
	struct hmm_config cfg;
	struct hmm_stats st, st2;
	char path[4200], name[16], trace[4200];
	int64_t n = TBYTES;
	int i, ok, sh;
	void *p;

	hmm_test_config(&cfg, path, sizeof(path), 64 << 20, 2 << 20, CHUNK);
	cfg.device = "sim";
	cfg.device_budget = 1 << 20;
	snprintf(trace, sizeof(trace), "%s/trace.json", t_tmpdir());
	cfg.trace_path = trace;
	hmm_test_mode(&cfg);	/* HMM_TEST_MODE=shared: through hmmd */
	sh = hmm_test_shared();
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());

	for (i = 0; i < NT; i++) {
		/* t1's name: UTF-8 (e acute), then a byte UTF-8 has not,
		   which the trace once copied, and was no JSON then */
		snprintf(name, sizeof(name), i == 1 ? "t1\xc3\xa9\xff" : "t%d",
			 i);
		if (hmm_tensor_new(h, name, HMM_DTYPE_U8, 1, &n, &ts[i]))
			t_fail_all("tensor: %s", hmm_last_error());
	}
	/* fresh tensors read as zeros, without any store read */
	stats(&st);
	if (hmm_map(ts[0], 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p))
		t_fail_all("map: %s", hmm_last_error());
	ok = 1;
	for (i = 0; i < TBYTES; i++)
		ok &= ((uint8_t *)p)[i] == 0;
	t_ok(ok, "a new tensor reads as zeros");
	hmm_unmap(ts[0], p);

	/* write everything: 4x the host budget, so most goes to the store */
	ok = 1;
	for (i = 0; i < NT; i++)
		ok &= write_seed(ts[i], 100 + i, HMM_TIER_HOST, HMM_WRITE) == 0;
	t_ok(ok, "wrote %d tensors (%d MiB, budget 2 MiB)", NT,
	     NT * TBYTES >> 20);
	stats(&st);
	t_ok(st.tier[HMM_TIER_HOST].peak <= cfg.host_budget,
	     "host peak %llu <= budget", (unsigned long long)
	     st.tier[HMM_TIER_HOST].peak);
	t_ok(st.tier[HMM_TIER_STORE].bytes_in >= (NT - 2) * (uint64_t)TBYTES,
	     "evicted dirty chunks were written to the store (%llu bytes)",
	     (unsigned long long)st.tier[HMM_TIER_STORE].bytes_in);
	ok = 1;
	for (i = NT - 1; i >= 0; i--)
		ok &= verify(ts[i], 100 + i, HMM_TIER_HOST);
	t_ok(ok, "every tensor reads back exact from the store");

	/* DISCARD never reads */
	for (i = 0; i < NT; i++)
		hmm_evict(ts[i], 0, HMM_ALL, HMM_TIER_HOST);
	t_eq(hmm_wait(h, NULL), 0, "wait after evict");
	stats(&st);
	/* shared mode: hmmd answers an evict when it is done */
	t_eq(st.tier[HMM_TIER_HOST].resident, 0, "evict emptied the host");
	for (i = 0; i < NT; i++)
		ok &= write_seed(ts[i], 200 + i, HMM_TIER_HOST, HMM_DISCARD) == 0;
	stats(&st2);
	t_eq(st2.tier[HMM_TIER_STORE].bytes_out,
	     st.tier[HMM_TIER_STORE].bytes_out,
	     "DISCARD maps read 0 bytes from the store");
	/* shared mode: hmmd's engine's count (STATS2) */
	t_ok(st2.discard_skips >= (uint64_t)NT * TBYTES / CHUNK,
	     "discard skips counted (%llu)",
	     (unsigned long long)st2.discard_skips);
	ok = 1;
	for (i = 0; i < NT; i++)
		ok &= verify(ts[i], 200 + i, HMM_TIER_HOST);
	t_ok(ok, "DISCARD-written tensors read back exact");

	/* prefetch, then a map that hits */
	hmm_evict(ts[3], 0, HMM_ALL, HMM_TIER_HOST);
	hmm_wait(h, ts[3]);
	t_eq(hmm_prefetch(ts[3], 0, HMM_ALL, HMM_TIER_HOST), 0, "prefetch");
	t_eq(hmm_wait(h, ts[3]), 0, "wait for the prefetch");
	stats(&st);
	t_ok(verify(ts[3], 203, HMM_TIER_HOST), "prefetched tensor exact");
	stats(&st2);
	t_eq(st2.tier[HMM_TIER_STORE].bytes_out,
	     st.tier[HMM_TIER_STORE].bytes_out, "the map after the prefetch "
	     "read nothing more");
	t_ok(st2.prefetch_hits > st.prefetch_hits, "prefetch hits counted");

	/* the device tier (sim): write there, read back on the host */
	ok = 1;
	for (i = 0; i < 4; i++)
		ok &= write_seed(ts[i], 300 + i, HMM_TIER_DEVICE, HMM_WRITE) == 0;
	t_ok(ok, "wrote 4 tensors at the device tier (budget 1 MiB)");
	ok = 1;
	for (i = 0; i < 4; i++)
		ok &= verify(ts[i], 300 + i, HMM_TIER_HOST);
	t_ok(ok, "device-written tensors read back exact on the host");
	ok = 1;
	for (i = 4; i < NT; i++)
		ok &= verify(ts[i], 200 + i, HMM_TIER_DEVICE);
	t_ok(ok, "store-resident tensors read back exact at the device");
	stats(&st);
	t_ok(st.tier[HMM_TIER_DEVICE].peak <= cfg.device_budget,
	     "device peak %llu <= budget", (unsigned long long)
	     st.tier[HMM_TIER_DEVICE].peak);

	/* a partial range map at an offset inside a chunk */
	if (hmm_map(ts[5], 100000, 300000, HMM_TIER_HOST, HMM_WRITE, &p))
		t_fail_all("range map: %s", hmm_last_error());
	memset(p, 0xab, 300000);
	hmm_unmap(ts[5], p);
	{
		uint8_t *want = malloc(TBYTES);
		void *q;

		t_fill(want, TBYTES, 205);
		memset(want + 100000, 0xab, 300000);
		hmm_evict(ts[5], 0, HMM_ALL, HMM_TIER_HOST);
		hmm_wait(h, NULL);
		hmm_map(ts[5], 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &q);
		t_ok(!memcmp(q, want, TBYTES), "a range write lands exactly");
		hmm_unmap(ts[5], q);
		free(want);
	}

	t_eq(hmm_flush(h), 0, "flush (%s)", hmm_last_error());
	{	/* per-tensor residency after a flush: every chunk stored */
		uint64_t rb[HMM_TIERS] = { 1, 1, 1 };
		int r = hmm_tensor_residency(ts[7], rb);

		if (sh)	/* hmmd's: every chunk on its host or stored */
			t_ok(r == 0 && rb[HMM_TIER_DEVICE] == 0 &&
			     rb[HMM_TIER_HOST] <= TBYTES &&
			     rb[HMM_TIER_STORE] <= TBYTES &&
			     rb[HMM_TIER_HOST] + rb[HMM_TIER_STORE] >= TBYTES,
			     "residency (hmmd's): %llu stored, %llu on the "
			     "host (%d %s)",
			     (unsigned long long)rb[HMM_TIER_STORE],
			     (unsigned long long)rb[HMM_TIER_HOST], r,
			     r ? hmm_last_error() : "");
		else
			t_ok(r == 0 && rb[HMM_TIER_STORE] == TBYTES &&
			     rb[HMM_TIER_HOST] <= cfg.host_budget &&
			     rb[HMM_TIER_DEVICE] <= cfg.device_budget,
			     "residency: %llu stored, %llu on the host",
			     (unsigned long long)rb[HMM_TIER_STORE],
			     (unsigned long long)rb[HMM_TIER_HOST]);
		t_eq(hmm_tensor_residency(NULL, rb), -EINVAL,
		     "residency of no tensor: -EINVAL");
	}
	{	/* two device maps of one range: that range at the device,
		   in shared mode too, where each is a copy of its own */
		uint64_t rb[HMM_TIERS], q = 256 << 10;
		void *d1, *d2;
		int r;

		if (hmm_map(ts[0], 0, q, HMM_TIER_DEVICE, HMM_READ, &d1) ||
		    hmm_map(ts[0], 0, q, HMM_TIER_DEVICE, HMM_READ, &d2))
			t_fail_all("device maps: %s", hmm_last_error());
		r = hmm_tensor_residency(ts[0], rb);
		t_ok(r == 0 && rb[HMM_TIER_DEVICE] >= q &&
		     rb[HMM_TIER_DEVICE] <= (sh ? q : TBYTES),
		     "two device maps of %llu bytes: %llu at the device",
		     (unsigned long long)q,
		     (unsigned long long)rb[HMM_TIER_DEVICE]);
		hmm_unmap(ts[0], d2);
		hmm_unmap(ts[0], d1);
	}
	if (sh) {	/* a flush saves what a writable device map holds (as
			   it writes a mapped chunk as it is), though its
			   copy goes back to hmmd only at its unmap */
		uint8_t *want = malloc(TBYTES);
		void *d, *hp;

		if (!want || hmm_map(ts[1], 0, HMM_ALL, HMM_TIER_DEVICE,
				     HMM_DISCARD, &d))
			t_fail_all("device map: %s", hmm_last_error());
		t_fill(d, TBYTES, 500);
		t_fill(want, TBYTES, 500);
		t_eq(hmm_flush(h), 0, "flush with a device map (%s)",
		     hmm_last_error());
		if (hmm_map(ts[1], 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &hp))
			t_fail_all("host map: %s", hmm_last_error());
		t_ok(!memcmp(hp, want, TBYTES), "the flush took the device "
		     "map's bytes to hmmd");
		hmm_unmap(ts[1], hp);
		hmm_unmap(ts[1], d);
		free(want);
	}
	char js[4096];
	hmm_stats_json(h, js, sizeof(js));
	t_diag("%s", js);
	for (i = 0; i < NT; i++)
		t_eq(hmm_tensor_free(ts[i]), 0, "free t%d", i);
	stats(&st);
	t_eq(st.tier[HMM_TIER_HOST].resident, 0, "nothing resident on the "
	     "host after free");
	t_eq(st.tier[HMM_TIER_DEVICE].resident, 0, "nor on the device");
	hmm_close(h);
	check_trace(trace, sh);
	return t_done();
}
