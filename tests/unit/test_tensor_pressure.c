// SPDX-License-Identifier: MIT
/*
 * test_tensor_pressure — integrity under pressure.  t: tsan
 *
 * Many tensors totalling 8x the host budget; several threads run a random
 * mix of map (read: verify; write/discard: new contents) / unmap /
 * prefetch / evict, at the host and the sim device tier; after every
 * phase every chunk of every tensor is verified by checksum against the
 * version its owner last wrote.  A sampler thread checks that no tier is
 * ever above its budget.
 *
 * In shared mode (HMM_TEST_MODE=shared, tests/unit/hmm_mode.h) the same
 * runs through hmmd, all threads on one connection; device maps are
 * then staged through hmmd's host tier (libhmm/src/remote/dev_stage.c).
 */
#include "t.h"

#include "hmm.h"
#include "hmm_mode.h"

#define NT	16
#define TBYTES	(512 << 10)
#define CHUNK	(32 << 10)
#define NCH	(TBYTES / CHUNK)
#define THREADS	4
#define PHASES	3
#ifdef __SANITIZE_THREAD__
#define OPS	80	/* TSan is ~10x slower: stay well under a minute */
#else
#define OPS	150
#endif

static struct hmm *h;
static struct hmm_tensor *ts[NT];
static uint32_t version[NT][NCH];	/* owner thread only, read between phases */
static int sampling;	/* __atomic */
static uint64_t samples, over_budget;
static uint64_t budget_host, budget_dev;

static uint64_t seed_of(int t, int c, uint32_t v)
{
	return (uint64_t)t << 40 | (uint64_t)c << 20 | v;
}

static uint64_t sum(const void *p, size_t n)
{
	const uint64_t *q = p;
	uint64_t s = 0;

	for (size_t i = 0; i < n / 8; i++)
		s = (s ^ q[i]) * 0x100000001b3ull;
	return s;
}

static uint64_t want_sum(int t, int c)
{
	static _Thread_local _Alignas(64) uint8_t buf[CHUNK];

	t_fill(buf, CHUNK, seed_of(t, c, version[t][c]));
	return sum(buf, CHUNK);
}

static void *sampler(void *arg)
{
	while (__atomic_load_n(&sampling, __ATOMIC_RELAXED)) {
		struct hmm_stats st;

		hmm_stats(h, &st);
		samples++;
		if (st.tier[HMM_TIER_HOST].resident > budget_host ||
		    st.tier[HMM_TIER_DEVICE].resident > budget_dev)
			over_budget++;
		usleep(200);
	}
	return NULL;
}

struct worker {
	int id;
	uint64_t rng;
	int errors, bad;
};

static void one_op(struct worker *w)
{
	int t = w->id + THREADS * (int)(t_rand(&w->rng) % (NT / THREADS));
	int c0 = t_rand(&w->rng) % NCH;
	int nc = 1 + t_rand(&w->rng) % 4;
	int tier = t_rand(&w->rng) % 3 ? HMM_TIER_HOST : HMM_TIER_DEVICE;
	int op = t_rand(&w->rng) % 10;
	uint8_t *p;
	void *vp;
	int c;

	if (c0 + nc > NCH)
		nc = NCH - c0;
	if (op == 0) {
		hmm_prefetch(ts[t], (uint64_t)c0 * CHUNK, (uint64_t)nc * CHUNK,
			     tier);
		return;
	}
	if (op == 1) {
		hmm_evict(ts[t], 0, HMM_ALL, t_rand(&w->rng) % 2 ?
			  HMM_TIER_HOST : HMM_TIER_DEVICE);
		return;
	}
	unsigned access = op < 6 ? HMM_READ : op < 8 ? HMM_WRITE | HMM_READ :
			  HMM_DISCARD;
	if (hmm_map(ts[t], (uint64_t)c0 * CHUNK, (uint64_t)nc * CHUNK, tier,
		    access, &vp)) {
		t_diag("map t%d [%d,+%d) tier %d: %s", t, c0, nc, tier,
		       hmm_last_error());
		w->errors++;
		return;
	}
	p = vp;
	for (c = 0; c < nc; c++) {
		uint8_t *q = p + (size_t)c * CHUNK;

		if (access & HMM_READ && !(access & HMM_DISCARD) &&
		    sum(q, CHUNK) != want_sum(t, c0 + c)) {
			w->bad++;
			t_diag("t%d chunk %d: wrong bytes (version %u)", t,
			       c0 + c, version[t][c0 + c]);
		}
		if (access & (HMM_WRITE | HMM_DISCARD)) {
			version[t][c0 + c]++;
			t_fill(q, CHUNK, seed_of(t, c0 + c,
						 version[t][c0 + c]));
		}
	}
	hmm_unmap(ts[t], vp);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < OPS; i++)
		one_op(w);
	return NULL;
}

static int verify_all(void)
{
	int bad = 0;

	for (int t = 0; t < NT; t++) {
		void *vp;

		if (hmm_map(ts[t], 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &vp)) {
			t_diag("verify map t%d: %s", t, hmm_last_error());
			return -1;
		}
		for (int c = 0; c < NCH; c++)
			if (sum((uint8_t *)vp + (size_t)c * CHUNK, CHUNK) !=
			    want_sum(t, c))
				bad++;
		hmm_unmap(ts[t], vp);
	}
	return bad;
}

int main(void)
{
	struct hmm_config cfg;
	struct worker w[THREADS];
	pthread_t thr[THREADS], samp;
	struct hmm_stats st;
	char path[4200], name[16];
	int64_t n = TBYTES;

	/* host budget 8x oversubscribed */
	hmm_test_config(&cfg, path, sizeof(path), 64 << 20, NT * TBYTES / 8,
			CHUNK);
	cfg.device = "sim";
	cfg.device_budget = NT * TBYTES / 16;
	budget_host = cfg.host_budget;
	budget_dev = cfg.device_budget;
	hmm_test_mode(&cfg);
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	for (int i = 0; i < NT; i++) {
		snprintf(name, sizeof(name), "p%d", i);
		if (hmm_tensor_new(h, name, HMM_DTYPE_U8, 1, &n, &ts[i]))
			t_fail_all("tensor: %s", hmm_last_error());
	}
	/* version 0 contents everywhere */
	for (int t = 0; t < NT; t++) {
		void *vp;

		for (int c = 0; c < NCH; c++) {
			if (hmm_map(ts[t], (uint64_t)c * CHUNK, CHUNK,
				    HMM_TIER_HOST, HMM_DISCARD, &vp))
				t_fail_all("init: %s", hmm_last_error());
			t_fill(vp, CHUNK, seed_of(t, c, 0));
			hmm_unmap(ts[t], vp);
		}
	}
	t_eq(verify_all(), 0, "initial contents verified (%d MiB over a "
	     "%llu KiB host budget)", NT * TBYTES >> 20,
	     (unsigned long long)cfg.host_budget >> 10);

	__atomic_store_n(&sampling, 1, __ATOMIC_RELAXED);
	pthread_create(&samp, NULL, sampler, NULL);
	for (int ph = 0; ph < PHASES; ph++) {
		int errors = 0, bad = 0;

		for (int i = 0; i < THREADS; i++) {
			w[i] = (struct worker){ .id = i,
						.rng = 1000 * ph + i };
			pthread_create(&thr[i], NULL, worker_main, &w[i]);
		}
		for (int i = 0; i < THREADS; i++) {
			pthread_join(thr[i], NULL);
			errors += w[i].errors;
			bad += w[i].bad;
		}
		t_eq(errors, 0, "phase %d: no map failed", ph);
		t_eq(bad, 0, "phase %d: every read saw its owner's last write",
		     ph);
		t_eq(hmm_wait(h, NULL), 0, "phase %d: async work done", ph);
		t_eq(verify_all(), 0, "phase %d: every chunk verified by "
		     "checksum", ph);
	}
	__atomic_store_n(&sampling, 0, __ATOMIC_RELAXED);
	pthread_join(samp, NULL);
	hmm_stats(h, &st);
	t_eq(over_budget, 0, "no tier above its budget in %llu samples",
	     (unsigned long long)samples);
	t_ok(st.tier[HMM_TIER_HOST].peak <= budget_host &&
	     st.tier[HMM_TIER_DEVICE].peak <= budget_dev,
	     "peaks within budgets (host %llu/%llu, device %llu/%llu)",
	     (unsigned long long)st.tier[HMM_TIER_HOST].peak,
	     (unsigned long long)budget_host,
	     (unsigned long long)st.tier[HMM_TIER_DEVICE].peak,
	     (unsigned long long)budget_dev);
	t_ok(st.tier[HMM_TIER_STORE].bytes_out > 0 &&
	     st.tier[HMM_TIER_STORE].bytes_in > 0,
	     "the store was used both ways (%llu read, %llu written)",
	     (unsigned long long)st.tier[HMM_TIER_STORE].bytes_out,
	     (unsigned long long)st.tier[HMM_TIER_STORE].bytes_in);
	for (int i = 0; i < NT; i++)
		hmm_tensor_free(ts[i]);
	hmm_close(h);
	return t_done();
}
