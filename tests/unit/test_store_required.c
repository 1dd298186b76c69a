// SPDX-License-Identifier: MIT
/*
 * test_store_required — hmm_store_required(B, C) is the store size that
 * holds B bytes of tensors in chunks of C: a context with that store
 * takes exactly B bytes (every chunk written to the store, rewritten,
 * read back exact), and one chunk more fails with -ENOSPC whose detail
 * names the store, losing nothing (the extra chunk stays in memory, the
 * others read back exact).  Also the formula's edges: a bad chunk size
 * is 0, sizes grow with B, and a store of a whole-chunk size gets its
 * tables sized by chunks (the data area the stats report holds B plus
 * the 64 chunks of slack, not one table entry per 4 KiB block).
 */
#include "t.h"

#include "hmm.h"
#include "hmm_mode.h"

#define CHUNK	(64u << 10)
#define NCHUNK	40u

static struct hmm *h;

/* Fill (or check) bytes of t chunk by chunk (hmm_mode.h). */
static int pass(struct hmm_tensor *t, uint64_t bytes, uint64_t seed,
		int write)
{
	return hmm_test_pass(t, bytes, CHUNK, seed, write);
}

static int fill(struct hmm_tensor *t, uint64_t bytes, uint64_t seed)
{
	return pass(t, bytes, seed, 1);
}

static int check(struct hmm_tensor *t, uint64_t bytes, uint64_t seed)
{
	return pass(t, bytes, seed, 0);
}

static int evict(struct hmm_tensor *t)
{
	int r = hmm_evict(t, 0, HMM_ALL, HMM_TIER_HOST);

	return r ? r : hmm_wait(h, t);
}

int main(void)
{
	uint64_t s = hmm_store_required((uint64_t)NCHUNK * CHUNK, CHUNK);
	struct hmm_tensor *a, *b;
	struct hmm_config cfg;
	struct hmm_stats st;
	int64_t na = (int64_t)NCHUNK * CHUNK, nb = 1;
	char path[4200];
	int r;

	t_eq(hmm_store_required(1 << 20, 1000), 0, "a chunk size not a "
	     "multiple of 4096 is 0");
	t_eq(hmm_store_required(1, 0), hmm_store_required(2 << 20, 2 << 20),
	     "chunk 0 is 2 MiB, and a part chunk counts whole");
	t_ok(hmm_store_required(NCHUNK * CHUNK + 1, CHUNK) > s, "one byte "
	     "more needs more");
	t_eq(s % 4096, 0, "a whole number of blocks (%llu)",
	     (unsigned long long)s);

	if (hmm_test_shared())
		t_skip_all("shared mode: the store is hmmd's, sized by it");
	/* the host holds 4 chunks: the rest must live in the store */
	hmm_test_config(&cfg, path, sizeof(path), s, 4 * CHUNK, CHUNK);
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	hmm_stats(h, &st);
	t_ok(st.tier[HMM_TIER_STORE].capacity >= (uint64_t)(NCHUNK + 8) * CHUNK,
	     "data area: at least the chunks and the slack (%llu)",
	     (unsigned long long)st.tier[HMM_TIER_STORE].capacity);
	/* beta: more than the data area leaves once alpha is in */
	nb = (int64_t)(st.tier[HMM_TIER_STORE].capacity - (uint64_t)na) + 1;
	if (hmm_tensor_new(h, "alpha", HMM_DTYPE_U8, 1, &na, &a) ||
	    hmm_tensor_new(h, "beta", HMM_DTYPE_U8, 1, &nb, &b))
		t_fail_all("tensor: %s", hmm_last_error());
	t_eq(fill(a, na, 1), 0, "alpha filled (%u chunks)", NCHUNK);
	t_eq(evict(a), 0, "all of alpha goes to the store (%s)",
	     hmm_last_error());
	t_eq(fill(a, na, 2), 0, "alpha rewritten");
	t_eq(evict(a), 0, "and evicted again: rewrites fit (%s)",
	     hmm_last_error());
	t_eq(check(a, na, 2), 0, "alpha reads back exact");
	t_eq(evict(a), 0, "alpha back in the store");

	t_eq(fill(b, nb, 3), 0, "beta: past what the data area has left");
	r = evict(b);
	t_eq(r, -ENOSPC, "its write-back fails: %s", hmm_strerror(r));
	t_ok(strstr(hmm_last_error(), path) != NULL &&
	     (strstr(hmm_last_error(), "full") ||
	      strstr(hmm_last_error(), "no room")), "the detail names the "
	     "store and says it is full: %s", hmm_last_error());
	t_eq(check(b, nb, 3), 0, "beta's bytes stayed in memory");
	t_eq(check(a, na, 2), 0, "alpha intact");

	hmm_tensor_free(a);
	hmm_tensor_free(b);
	hmm_close(h);
	return t_done();
}
