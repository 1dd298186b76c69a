// SPDX-License-Identifier: MIT
/*
 * test_tensor_fault — injected store errors (the store's fault setter,
 * as HMM_FAULT would) surface as errors from the call that needed the
 * I/O, with a detail naming the tensor; the failing chunk keeps its data
 * (a failed write-back leaves it dirty in memory), other tensors stay
 * intact, and the same call succeeds once the fault is gone.
 *
 * In shared mode (HMM_TEST_MODE=shared, tests/unit/hmm_mode.h) the store
 * is hmmd's: hmm_fault_set() here arms only this process, which has no
 * store, and no message arms hmmd's.  hmmd reads HMM_FAULT once, at its
 * store's open, so it starts with "eio@1": its first store operation,
 * alpha's first write-back, fails; that error must reach the client
 * (from the evict, which hmmd answers when the eviction is done, or from
 * hmm_wait), name alpha, keep alpha's bytes in memory and let beta and a
 * later eviction of alpha go through.  The checks that need a fault set
 * at a chosen moment are skipped, saying so.
 */
#include "t.h"

#include "fault_inject.h"
#include "hmm.h"
#include "hmm_mode.h"

#define TB	(256 << 10)
#define CHUNK	(64 << 10)

static struct hmm *h;

static int check(struct hmm_tensor *t, uint64_t seed)
{
	static uint8_t want[TB];
	void *p;
	int r, ok;

	r = hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p);
	if (r)
		return r;
	t_fill(want, TB, seed);
	ok = !memcmp(p, want, TB);
	hmm_unmap(t, p);
	return ok ? 0 : 1;
}

static void evict(struct hmm_tensor *t)
{
	hmm_evict(t, 0, HMM_ALL, HMM_TIER_HOST);
	hmm_wait(h, t);
}

/* Shared mode (see the top): hmmd started with HMM_FAULT=eio@1. */
static int shared_main(struct hmm_config *cfg)
{
	static const char *why = "shared mode: hmm_fault_set() arms only "
		"this process, and the store is hmmd's (it reads HMM_FAULT "
		"once, at its start)";
	struct hmm_tensor *a, *b;
	int64_t n = TB;
	int r;

	setenv("HMM_FAULT", "eio@1", 1);	/* for hmmd, inherited */
	hmm_test_mode(cfg);
	unsetenv("HMM_FAULT");
	if (hmm_open(cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	if (hmm_tensor_new(h, "alpha", HMM_DTYPE_U8, 1, &n, &a) ||
	    hmm_tensor_new(h, "beta", HMM_DTYPE_U8, 1, &n, &b))
		t_fail_all("tensor: %s", hmm_last_error());
	t_ok(!hmm_test_fill(a, TB, 1) && !hmm_test_fill(b, TB, 2),
	     "filled alpha and beta");
	r = hmm_evict(a, 0, HMM_ALL, HMM_TIER_HOST);
	if (r == 0)
		r = hmm_wait(h, a);
	t_eq(r, -EIO, "hmmd's first write-back (alpha's) fails: -EIO from "
	     "evict or wait");
	t_ok(strstr(hmm_last_error(), "alpha") != NULL, "detail names the "
	     "tensor: %s", hmm_last_error());
	t_eq(check(a, 1), 0, "alpha's contents stayed in memory");
	evict(b);
	t_eq(check(b, 2), 0, "beta evicted and read back exact");
	t_eq(hmm_evict(a, 0, HMM_ALL, HMM_TIER_HOST), 0, "alpha evicts once "
	     "the fault is spent");
	t_eq(hmm_wait(h, a), 0, "and the wait is clean");
	t_eq(check(a, 1), 0, "alpha exact from the store");
	hmm_test_skip("a failed read: map fails -EIO, naming the tensor", why);
	hmm_test_skip("a failed flush (ENOSPC), then a clean one", why);
	hmm_test_skip("short transfers are resubmitted, invisibly", why);
	hmm_tensor_free(a);
	hmm_tensor_free(b);
	hmm_close(h);
	return t_done();
}

int main(void)
{
	struct hmm_config cfg;
	struct hmm_tensor *a, *b;
	struct hmm_stats st;
	int64_t n = TB;
	char path[4200];
	int r;

	hmm_test_config(&cfg, path, sizeof(path), 32 << 20, 1 << 20, CHUNK);
	if (hmm_test_shared())
		return shared_main(&cfg);
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	if (hmm_tensor_new(h, "alpha", HMM_DTYPE_U8, 1, &n, &a) ||
	    hmm_tensor_new(h, "beta", HMM_DTYPE_U8, 1, &n, &b))
		t_fail_all("tensor: %s", hmm_last_error());
	t_ok(!hmm_test_fill(a, TB, 1) && !hmm_test_fill(b, TB, 2),
	     "filled alpha and beta");
	evict(a);
	evict(b);

	/* a failed read */
	t_eq(hmm_fault_set("eio@1"), 0, "inject eio on the next store op");
	r = check(a, 1);
	t_eq(r, -EIO, "map of alpha fails with -EIO");
	t_ok(strstr(hmm_last_error(), "alpha") != NULL, "detail names the "
	     "tensor: %s", hmm_last_error());
	hmm_fault_set(NULL);
	t_eq(check(b, 2), 0, "beta intact");
	t_eq(check(a, 1), 0, "alpha reads exact once the fault is gone");
	hmm_stats(h, &st);
	t_ok(st.io_errors >= 1, "io_errors counted (%llu)",
	     (unsigned long long)st.io_errors);
	t_eq(st.tier[HMM_TIER_HOST].pinned, 0, "the failed map left no pin");

	/* every chunk of a map failing: the detail is still the store's
	   (before, the map named its first chunk with "Input/output
	   error" alone: the store's reason was kept for the latest) */
	evict(a);
	t_eq(hmm_fault_set("eio@1,eio@2,eio@3,eio@4"), 0, "inject eio on "
	     "the next 4 store ops");
	r = check(a, 1);
	t_eq(r, -EIO, "map of alpha, its 4 chunks failing: -EIO");
	t_ok(strstr(hmm_last_error(), "alpha") &&
	     strstr(hmm_last_error(), path) &&
	     strstr(hmm_last_error(), "offset"), "detail names the tensor, "
	     "the store and the offset: %s", hmm_last_error());
	t_eq(hmm_wait(h, a), 0, "the failed map's other reads end; the map "
	     "said so, hmm_wait does not again");
	hmm_fault_set(NULL);
	t_eq(check(a, 1), 0, "alpha reads exact once the fault is gone");

	/* a prefetch's failed read, which no map waits for: the next
	   hmm_wait reports it (before, it was dropped: hmm_wait said 0) */
	evict(a);
	t_eq(hmm_fault_set("eio@1"), 0, "inject eio on the next store op");
	t_eq(hmm_prefetch(a, 0, CHUNK, HMM_TIER_HOST), 0, "prefetch alpha's "
	     "first chunk");
	r = hmm_wait(h, a);
	t_eq(r, -EIO, "the prefetch's error comes out of hmm_wait");
	t_ok(strstr(hmm_last_error(), "alpha") &&
	     strstr(hmm_last_error(), path), "detail names the tensor and "
	     "the store: %s", hmm_last_error());
	hmm_fault_set(NULL);
	t_eq(hmm_wait(h, NULL), 0, "reported once");
	t_eq(check(a, 1), 0, "alpha reads exact after");

	/* a failed write-back */
	t_ok(!hmm_test_fill(a, TB, 3), "alpha rewritten (dirty)");
	t_eq(hmm_fault_set("eio@1,eio@2,eio@3,eio@4"), 0, "inject eio on "
	     "the next 4 store ops");
	hmm_evict(a, 0, HMM_ALL, HMM_TIER_HOST);
	r = hmm_wait(h, a);
	t_eq(r, -EIO, "the write-back's error comes out of hmm_wait");
	t_ok(strstr(hmm_last_error(), "alpha") != NULL, "detail: %s",
	     hmm_last_error());
	hmm_fault_set(NULL);
	t_eq(check(a, 3), 0, "alpha's new contents stayed in memory");
	t_eq(check(b, 2), 0, "beta intact");

	/* ENOSPC on flush, then a clean flush */
	t_ok(!hmm_test_fill(b, TB, 4), "beta rewritten");
	t_eq(hmm_fault_set("enospc@1"), 0, "inject enospc");
	r = hmm_flush(h);
	t_ok(r == -ENOSPC || r == -EIO, "flush fails: %s (%s)",
	     hmm_strerror(r), hmm_last_error());
	hmm_fault_set(NULL);
	t_eq(hmm_flush(h), 0, "flush succeeds after (%s)", hmm_last_error());
	evict(a);
	evict(b);
	t_eq(check(a, 3), 0, "alpha exact from the store");
	t_eq(check(b, 4), 0, "beta exact from the store");

	/* short transfers are resubmitted by the store: no error at all */
	evict(a);
	t_eq(hmm_fault_set("short@1,short@2"), 0, "inject short reads");
	t_eq(check(a, 3), 0, "short transfers are invisible");
	hmm_fault_set(NULL);

	hmm_tensor_free(a);
	hmm_tensor_free(b);
	hmm_close(h);
	return t_done();
}
