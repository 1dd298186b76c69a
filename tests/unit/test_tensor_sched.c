// SPDX-License-Identifier: MIT
/*
 * test_tensor_sched — the schedule-aware policy reads fewer bytes from
 * the store than LRU on a cyclic layer trace (counted, not timed), keeps
 * the contents exact, and re-records when the trace changes.
 *
 * In shared mode (HMM_TEST_MODE=shared, tests/unit/hmm_mode.h) the maps
 * go through hmmd, whose engine runs its own policy (LRU): config.policy
 * and the step markers do not reach it.  The LRU and exactness checks
 * hold there; the schedule-aware ones are skipped, saying so.
 */
#include "t.h"

#include "hmm.h"
#include "hmm_mode.h"

#define WHY_SHARED "shared mode: hmmd's engine runs its own policy (LRU); " \
	"config.policy and hmm_step_begin/end do not reach it"

#define L	8
#define LBYTES	(256 << 10)
#define CHUNK	(64 << 10)
#define STEPS	6

struct run {
	uint64_t store_read, recordings, divergences, prefetch_hits;
	int bad;
};

static int layer_ok(const uint8_t *p, int l)
{
	for (int i = 0; i < LBYTES; i += 4096)
		if (p[i] != (uint8_t)(l + 1) || p[i + 4095] != (uint8_t)(l + 1))
			return 0;
	return 1;
}

/*
 * Open h with cfg (its budget, chunk size, policy and prefetch depth)
 * over a 32 MiB store t_tmpdir()/store<tag> (cfg->store_path points into
 * path), and make the L layers ts[], LBYTES each, every byte of layer l
 * set to l + 1.  The two runs below start so.
 */
static struct hmm *layers_open(struct hmm_config *cfg, char *path,
			       size_t len, const char *tag,
			       struct hmm_tensor *ts[L])
{
	char name[16];
	int64_t n = LBYTES;
	struct hmm *h;
	void *p;

	snprintf(path, len, "%s/store%s", t_tmpdir(), tag);
	cfg->store_path = path;
	cfg->store_size = 32 << 20;
	if (hmm_open(cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	for (int l = 0; l < L; l++) {
		snprintf(name, sizeof(name), "layer%d", l);
		if (hmm_tensor_new(h, name, HMM_DTYPE_U8, 1, &n, &ts[l]) ||
		    hmm_map(ts[l], 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD, &p))
			t_fail_all("layer %d: %s", l, hmm_last_error());
		memset(p, l + 1, LBYTES);
		hmm_unmap(ts[l], p);
	}
	return h;
}

static void layers_close(struct hmm *h, struct hmm_tensor *ts[L])
{
	for (int l = 0; l < L; l++)
		hmm_tensor_free(ts[l]);
	hmm_close(h);
}

static int run_policy(uint32_t policy, int change_at, struct run *out)
{
	struct hmm_tensor *ts[L];
	struct hmm_config cfg;
	struct hmm_stats st0, st;
	struct hmm *h;
	char path[4200], tag[16];
	void *p;

	snprintf(tag, sizeof(tag), "%u", policy);
	hmm_config_default(&cfg);
	cfg.host_budget = L * LBYTES / 2;
	cfg.chunk_bytes = CHUNK;
	cfg.policy = policy;
	cfg.prefetch_depth = 4;
	hmm_test_mode(&cfg);
	h = layers_open(&cfg, path, sizeof(path), tag, ts);
	for (int l = 0; l < L; l++)
		hmm_evict(ts[l], 0, HMM_ALL, HMM_TIER_HOST);
	hmm_wait(h, NULL);
	hmm_stats(h, &st0);
	memset(out, 0, sizeof(*out));
	for (int s = 0; s < STEPS; s++) {
		hmm_step_begin(h);
		for (int i = 0; i < L; i++) {
			/* from change_at on, the trace runs backwards */
			int l = s >= change_at ? L - 1 - i : i;

			if (hmm_map(ts[l], 0, HMM_ALL, HMM_TIER_HOST, HMM_READ,
				    &p)) {
				t_diag("map: %s", hmm_last_error());
				out->bad++;
				continue;
			}
			out->bad += !layer_ok(p, l);
			hmm_unmap(ts[l], p);
			/* the layer's compute, as long as the I/O takes: the
			 * prefetches land before the next map (without it,
			 * whether one lands first is a race) */
			hmm_wait(h, NULL);
		}
		hmm_step_end(h);
	}
	hmm_wait(h, NULL);
	hmm_stats(h, &st);
	out->store_read = st.tier[HMM_TIER_STORE].bytes_out -
			  st0.tier[HMM_TIER_STORE].bytes_out;
	out->recordings = st.recordings;
	out->divergences = st.divergences;
	out->prefetch_hits = st.prefetch_hits;
	t_ok(st.tier[HMM_TIER_HOST].peak <= cfg.host_budget,
	     "policy %u: host peak within budget", policy);
	layers_close(h, ts);
	return 0;
}

/*
 * The cyclic trace with room for one layer and one chunk, prefetching a
 * layer ahead, the I/O let finish after each layer (its compute).  While
 * layer X is mapped, its successor's first chunk fits and the others do
 * not (X is pinned, and evicting that first chunk would only bring what
 * is needed sooner): their prefetch must start as soon as X is unmapped,
 * not at the next map, where it would be too late.  Returns the host
 * misses of the steps after the record (0: every map found its layer).
 */
static uint64_t run_unmap_retry(int *bad)
{
	struct hmm_tensor *ts[L];
	struct hmm_config cfg;
	struct hmm_stats st0, st;
	struct hmm *h;
	char path[4200];
	void *p;

	hmm_config_default(&cfg);
	cfg.host_budget = LBYTES + CHUNK;
	cfg.chunk_bytes = CHUNK;
	cfg.policy = HMM_POLICY_SCHEDULE;
	cfg.prefetch_depth = LBYTES / CHUNK;
	h = layers_open(&cfg, path, sizeof(path), "-unmap", ts);
	*bad = 0;
	for (int s = 0; s < 4; s++) {
		if (s == 1)
			hmm_stats(h, &st0);
		hmm_step_begin(h);
		for (int l = 0; l < L; l++) {
			if (hmm_map(ts[l], 0, HMM_ALL, HMM_TIER_HOST, HMM_READ,
				    &p))
				t_fail_all("map: %s", hmm_last_error());
			*bad += !layer_ok(p, l);
			hmm_unmap(ts[l], p);
			hmm_wait(h, NULL);
		}
		hmm_step_end(h);
		hmm_wait(h, NULL);	/* the next step's first layer */
	}
	hmm_stats(h, &st);
	t_ok(st.tier[HMM_TIER_HOST].peak <= cfg.host_budget,
	     "one layer and a chunk: host peak within budget");
	layers_close(h, ts);
	return st.tier[HMM_TIER_HOST].misses - st0.tier[HMM_TIER_HOST].misses;
}

int main(void)
{
	struct run lru, sch, chg;

	run_policy(HMM_POLICY_LRU, STEPS, &lru);
	run_policy(HMM_POLICY_SCHEDULE, STEPS, &sch);
	t_diag("cyclic trace, %d layers x %d KiB, budget half: LRU read %llu "
	       "bytes, schedule-aware %llu", L, LBYTES >> 10,
	       (unsigned long long)lru.store_read,
	       (unsigned long long)sch.store_read);
	t_eq(lru.bad + sch.bad, 0, "every layer read back exact");
	t_eq(lru.store_read, (uint64_t)STEPS * L * LBYTES,
	     "LRU misses every access of a cyclic trace larger than memory");
	if (hmm_test_shared()) {
		t_eq(sch.store_read, lru.store_read, "shared mode: hmmd's LRU "
		     "whatever config.policy says");
		hmm_test_skip("schedule-aware reads fewer store bytes, "
			      "records once, hits prefetches", WHY_SHARED);
		run_policy(HMM_POLICY_SCHEDULE, 3, &chg);
		t_eq(chg.bad, 0, "changed trace: layers exact");
		hmm_test_skip("the changed trace diverges and is recorded "
			      "anew", WHY_SHARED);
		return t_done();
	}
	t_ok(sch.store_read < lru.store_read,
	     "schedule-aware reads fewer store bytes than LRU");
	t_ok(sch.store_read <= lru.store_read * 3 / 4,
	     "... at least a quarter fewer (%.2fx)",
	     (double)sch.store_read / lru.store_read);
	t_eq(sch.recordings, 1, "one recording");
	t_ok(sch.prefetch_hits > 0, "prefetches were hit (%llu)",
	     (unsigned long long)sch.prefetch_hits);

	run_policy(HMM_POLICY_SCHEDULE, 3, &chg);
	t_eq(chg.bad, 0, "changed trace: layers exact");
	t_ok(chg.divergences >= 1, "the changed trace was seen to diverge "
	     "(%llu)", (unsigned long long)chg.divergences);
	t_eq(chg.recordings, 2, "and recorded anew");

	{
		int bad;
		uint64_t miss = run_unmap_retry(&bad);

		t_eq(bad, 0, "one layer and a chunk: layers exact");
		t_eq(miss, 0, "a prefetch with no room at the map starts "
		     "at the unmap: no map misses after the record");
	}
	return t_done();
}
