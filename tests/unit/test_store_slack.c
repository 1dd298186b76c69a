// SPDX-License-Identifier: MIT
/*
 * test_store_slack — a store sized by hmm_store_required() holds its
 * chunks whatever config.io_depth is.  The store keeps a rewritten
 * chunk's old place until its new copy is written, and its slack is 8
 * chunks at this size, so io_depth 16 or 64 used to hand it more
 * rewrites at once than it had room for: the write-backs past the
 * slack failed with -ENOSPC ("no room for extent").  Now the I/O thread
 * holds a write back while the store has no room and others are in
 * flight (their completions free room), so every rewrite lands and
 * reads back exact; a store that is really full still fails with
 * -ENOSPC naming it, at once, losing nothing.
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

static int evict(struct hmm_tensor *t)
{
	int r = hmm_evict(t, 0, HMM_ALL, HMM_TIER_HOST);

	return r ? r : hmm_wait(h, t);
}

static void round_at(uint32_t depth)
{
	uint64_t s = hmm_store_required((uint64_t)NCHUNK * CHUNK, CHUNK);
	int64_t na = (int64_t)NCHUNK * CHUNK, nb;
	struct hmm_tensor *a, *b;
	struct hmm_config cfg;
	struct hmm_stats st;
	char path[4200];
	int r;

	/* the host holds every chunk: one eviction rewrites all at once */
	hmm_test_config(&cfg, path, sizeof(path), s,
			(uint64_t)(NCHUNK + 16) * CHUNK, CHUNK);
	cfg.io_depth = depth;
	unlink(path);
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open (io_depth %u): %s", depth,
			   hmm_last_error());
	if (hmm_tensor_new(h, "alpha", HMM_DTYPE_U8, 1, &na, &a))
		t_fail_all("tensor: %s", hmm_last_error());
	t_eq(pass(a, na, 1, 1), 0, "io_depth %u: alpha filled", depth);
	r = evict(a);
	t_eq(r, 0, "io_depth %u: all of alpha written%s%s", depth,
	     r ? ": " : "", r ? hmm_last_error() : "");
	t_eq(pass(a, na, 2, 1), 0, "io_depth %u: alpha rewritten in memory",
	     depth);
	r = evict(a);
	t_eq(r, 0, "io_depth %u: %u rewrites at once fit the slack%s%s",
	     depth, NCHUNK, r ? ": " : "", r ? hmm_last_error() : "");
	hmm_stats(h, &st);
	t_eq(st.tier[HMM_TIER_HOST].resident, 0, "io_depth %u: nothing left on "
	     "the host", depth);
	t_eq(pass(a, na, 2, 0), 0, "io_depth %u: alpha reads back exact",
	     depth);
	t_eq(evict(a), 0, "io_depth %u: and goes back", depth);

	/* beta: one byte more than the data area leaves once alpha is in */
	nb = (int64_t)(st.tier[HMM_TIER_STORE].capacity - (uint64_t)na) + 1;
	if (hmm_tensor_new(h, "beta", HMM_DTYPE_U8, 1, &nb, &b))
		t_fail_all("tensor: %s", hmm_last_error());
	t_eq(pass(b, nb, 3, 1), 0, "io_depth %u: beta filled", depth);
	r = evict(b);
	t_eq(r, -ENOSPC, "io_depth %u: a really full store fails: %s", depth,
	     hmm_strerror(r));
	t_ok(strstr(hmm_last_error(), path) != NULL, "io_depth %u: the "
	     "detail names the store: %s", depth, hmm_last_error());
	t_eq(pass(b, nb, 3, 0), 0, "io_depth %u: beta's bytes stayed in "
	     "memory", depth);
	t_eq(pass(a, na, 2, 0), 0, "io_depth %u: alpha intact", depth);
	hmm_tensor_free(a);
	hmm_tensor_free(b);
	hmm_close(h);
	unlink(path);
}

int main(void)
{
	if (hmm_test_shared())
		t_skip_all("shared mode: the store is hmmd's, sized by it");
	round_at(16);
	round_at(64);
	return t_done();
}
