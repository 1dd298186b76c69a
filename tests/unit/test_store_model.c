// SPDX-License-Identifier: MIT
/*
 * test_store_model — thousands of random operations (write, rewrite,
 * free, read, flush, close and reopen, injected EIO and short
 * transfers) on a small store, checked against a model: after each step
 * the live extents, their bytes and the space accounting agree; after a
 * reopen the store holds exactly what the last flush held.
 */
#include "store_t.h"

#define KEYS	48
#define MAXLEN	(64 << 10)
#define STEPS	2000

struct slot {
	uint32_t len;	/* 0 = absent */
	uint64_t seed;
};

static struct slot cur[KEYS], flushed[KEYS];
static struct hmm_store *s;
static uint8_t *wb, *rb;
static const char *path;
static int bad, nospc;

static void reopen(void)
{
	hmm_store_close(s);
	s = st_open(path, 0, 0, 8);
	wb = hmm_pool_alloc(hmm_store_pool(s), MAXLEN);
	rb = hmm_pool_alloc(hmm_store_pool(s), MAXLEN);
	memcpy(cur, flushed, sizeof(cur));
}

static void check_all(const char *when, int step)
{
	struct hmm_store_stats st;
	uint64_t live = 0, n = 0;

	for (int k = 0; k < KEYS; k++) {
		int64_t len = hmm_store_extent_len(s, k);

		if (len != (cur[k].len ? (int64_t)cur[k].len : -ENOENT)) {
			t_diag("%s step %d: key %d len %lld, model %u", when,
			       step, k, (long long)len, cur[k].len);
			bad++;
			continue;
		}
		if (!cur[k].len)
			continue;
		live += cur[k].len;
		n++;
		t_fill(wb, cur[k].len, cur[k].seed);
		if (st_io(s, HMM_IO_READ, k, 0, rb, cur[k].len) ||
		    memcmp(rb, wb, cur[k].len)) {
			t_diag("%s step %d: key %d bytes differ: %s", when, step,
			       k, hmm_last_error());
			bad++;
		}
	}
	hmm_store_stats(s, &st);
	if (st.extents != n || st.used_bytes - st.quarantined_bytes != live) {
		t_diag("%s step %d: stats %llu extents %llu used %llu quar, "
		       "model %llu / %llu", when, step,
		       (unsigned long long)st.extents,
		       (unsigned long long)st.used_bytes,
		       (unsigned long long)st.quarantined_bytes,
		       (unsigned long long)n, (unsigned long long)live);
		bad++;
	}
}

static void do_write(uint64_t *rng, int k)
{
	uint32_t len = 4096u * (1 + t_rand(rng) % (MAXLEN / 4096));
	uint64_t seed = t_rand(rng);
	int fault = t_rand(rng) % 10, r;

	t_fill(wb, len, seed);
	hmm_fault_set(fault == 0 ? "eio@1" : fault == 1 ? "short@1" : NULL);
	r = st_io(s, HMM_IO_WRITE, k, 0, wb, len);
	hmm_fault_set(NULL);
	if (r == -ENOSPC) {	/* full: flush frees the quarantine */
		nospc++;
		if (hmm_store_flush(s))
			bad++;
		memcpy(flushed, cur, sizeof(cur));
		t_fill(wb, len, seed);
		r = st_io(s, HMM_IO_WRITE, k, 0, wb, len);
	}
	if (r == 0)
		cur[k] = (struct slot){ len, seed };
	else if (!(r == -EIO && fault == 0) && r != -ENOSPC)
		bad++;
}

int main(void)
{
	uint64_t rng = 12345;
	int flushes = 0, reopens = 0;

	path = st_path("model.store");
	s = st_open(path, 4 << 20, HMM_STORE_CREATE, 8);
	wb = hmm_pool_alloc(hmm_store_pool(s), MAXLEN);
	rb = hmm_pool_alloc(hmm_store_pool(s), MAXLEN);
	for (int step = 0; step < STEPS && bad < 5; step++) {
		uint64_t r = t_rand(&rng) % 100;
		int k = (int)(t_rand(&rng) % KEYS);

		if (r < 60) {
			do_write(&rng, k);
		} else if (r < 75) {
			int e = hmm_store_extent_free(s, k);

			if (e != (cur[k].len ? 0 : -ENOENT))
				bad++;
			cur[k].len = 0;
		} else if (r < 90) {
			if (cur[k].len) {
				t_fill(wb, cur[k].len, cur[k].seed);
				if (st_io(s, HMM_IO_READ, k, 0, rb, cur[k].len) ||
				    memcmp(rb, wb, cur[k].len))
					bad++;
			}
		} else if (r < 97) {
			if (hmm_store_flush(s))
				bad++;
			memcpy(flushed, cur, sizeof(cur));
			flushes++;
		} else {
			reopen();
			reopens++;
			check_all("reopen", step);
		}
		if (step % 500 == 0)
			check_all("check", step);
	}
	check_all("end", STEPS);
	t_eq(bad, 0, "%d random steps (%d flushes, %d reopens, %d full) match "
	     "the model", STEPS, flushes, reopens, nospc);
	t_ok(nospc > 0, "the store filled up on the way");
	reopen();
	check_all("final reopen", STEPS);
	t_eq(bad, 0, "a final reopen holds the last flush");
	hmm_store_close(s);
	return t_done();
}
