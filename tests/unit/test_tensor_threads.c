// SPDX-License-Identifier: MIT
/*
 * test_tensor_threads — hmm.h's threading rule for the tensor calls:
 * any thread, at the same time.  Two threads make, write and free
 * tensors of their own in a loop while a third opens a saved tensor the
 * context holds (-ENOENT, "already open") and a fourth flushes: every
 * call returns 0 or that error, nothing crashes, and each tensor holds
 * its own thread's bytes; then, in a context reopened each round, two
 * threads open one saved tensor at once: one gets it, the other -ENOENT
 * (a context opens a saved tensor once).  The flush thread runs in
 * shared mode only: embedded, it reads the chunks a maker writes (hmm.h:
 * mapped chunks are written as they are), a race by design.
 *
 * In shared mode (HMM_TEST_MODE=shared) the open and the flush walk the
 * context's tensors, reading each one's hmmd handle: a tensor made
 * meanwhile was listed before its handle was set (a NULL dereference,
 * found by test_hmmd_stress), one freed meanwhile after its handle was
 * freed (a use after free), a flush failed with -ENOENT ("not yours")
 * for a tensor freed since it listed them, and both threads of one open
 * got the tensor (a second handle, whose free deletes it under the
 * first; seen under TSan's timing).  t: tsan
 */
#include "t.h"
#include "hmm_mode.h"

#include "hmm.h"

#define TB	(4 << 10)
#define ROUNDS	400

static struct hmm *h;
static int stop;	/* __atomic */

struct worker {
	int id;
	int bad;		/* the first failure's round, or 0 */
	char why[512];
};

static void *maker(void *arg)
{
	struct worker *w = arg;
	int64_t n = TB;
	char name[16];

	snprintf(name, sizeof(name), "m%d", w->id);
	for (int i = 1; i <= ROUNDS && !w->bad; i++) {
		struct hmm_tensor *t;
		uint8_t want[TB];
		void *p;
		int r = hmm_tensor_new(h, name, HMM_DTYPE_U8, 1, &n, &t);

		if (r) {
			w->bad = i;
			snprintf(w->why, sizeof(w->why), "new: %s",
				 hmm_last_error());
			break;
		}
		t_fill(want, TB, w->id * 100000 + i);
		r = hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD, &p);
		if (!r) {
			memcpy(p, want, TB);
			hmm_unmap(t, p);
			r = hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p);
		}
		if (!r) {
			if (memcmp(p, want, TB))
				r = -EIO;
			hmm_unmap(t, p);
		}
		if (r) {
			w->bad = i;
			snprintf(w->why, sizeof(w->why), "map: %d %s", r,
				 hmm_last_error());
		}
		r = hmm_tensor_free(t);
		if (r && !w->bad) {
			w->bad = i;
			snprintf(w->why, sizeof(w->why), "free: %s",
				 hmm_last_error());
		}
	}
	return NULL;
}

/* Open "held", which this context holds: -ENOENT every time. */
static void *opener(void *arg)
{
	struct worker *w = arg;

	for (int i = 1; !__atomic_load_n(&stop, __ATOMIC_ACQUIRE) && !w->bad;
	     i++) {
		struct hmm_tensor *t;
		int r = hmm_tensor_open(h, "held", &t);

		if (r != -ENOENT) {
			w->bad = i;
			snprintf(w->why, sizeof(w->why), "open: %d %s", r,
				 hmm_last_error());
		}
	}
	return NULL;
}

static void *flusher(void *arg)
{
	struct worker *w = arg;

	for (int i = 1; !__atomic_load_n(&stop, __ATOMIC_ACQUIRE) && !w->bad;
	     i++) {
		int r = hmm_flush(h);

		if (r) {
			w->bad = i;
			snprintf(w->why, sizeof(w->why), "flush: %s",
				 hmm_last_error());
		}
	}
	return NULL;
}

/* Open "held" on a thread: its tensor, or NULL. */
static void *open_held(void *arg)
{
	struct hmm_tensor *t = NULL;

	(void)arg;
	return hmm_tensor_open(h, "held", &t) ? NULL : t;
}

/* Two threads open "held" in a fresh context, ROUNDS / 4 times: one
 * gets it.  Returns the tensor of the last round (h keeps it), or NULL
 * after a round that did not go so. */
static struct hmm_tensor *twins(struct hmm_config *cfg)
{
	struct hmm_tensor *got = NULL;

	cfg->flags = HMM_CONFIG_STORE_KEEP;
	for (int i = 0; i < ROUNDS / 4; i++) {
		pthread_t a, b;
		void *ra, *rb;

		hmm_close(h);
		if (hmm_open(cfg, &h))
			t_fail_all("reopen: %s", hmm_last_error());
		if (pthread_create(&a, NULL, open_held, NULL) ||
		    pthread_create(&b, NULL, open_held, NULL))
			t_fail_all("pthread_create");
		pthread_join(a, &ra);
		pthread_join(b, &rb);
		if (!ra == !rb) {
			t_diag("round %d: %s", i, ra ? "both opened it" :
			       "neither opened it");
			return NULL;
		}
		got = ra ? ra : rb;
	}
	return got;
}

int main(void)
{
	static const char *const what[] = { "maker", "maker", "opener",
		"flusher" };
	void *(*fn[])(void *) = { maker, maker, opener, flusher };
	struct worker w[4] = { { 1 }, { 2 }, { 3 }, { 4 } };
	struct hmm_config cfg;
	struct hmm_tensor *held;
	pthread_t th[4];
	char path[4200];
	int64_t n = TB;
	int nthreads;

	hmm_test_config(&cfg, path, sizeof(path), 64 << 20, 4 << 20,
			64 << 10);
	hmm_test_mode(&cfg);
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	if (hmm_tensor_new(h, "held", HMM_DTYPE_U8, 1, &n, &held) ||
	    hmm_flush(h))
		t_fail_all("a saved tensor: %s", hmm_last_error());
	/* embedded, a flush writes a chunk mapped for writing as it is
	   (hmm.h), reading what a maker writes: a race by design, which
	   TSan would report; in shared mode hmmd does that */
	nthreads = hmm_test_shared() ? 4 : 3;
	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&th[i], NULL, fn[i], &w[i]))
			t_fail_all("pthread_create");
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 2; i < nthreads; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < nthreads; i++)
		t_ok(!w[i].bad, "%s thread %d: %s%s", what[i], w[i].id,
		     w[i].bad ? "failed: " : i < 2 ? "400 tensors made, "
		     "written, read back and freed" : "every call as "
		     "documented", w[i].why);
	if (nthreads < 4)
		hmm_test_skip("a flush on a fourth thread", "embedded, it "
			      "reads the chunks the makers write (by design)");
	held = twins(&cfg);
	t_ok(held, "two threads open a saved tensor at once: one gets it, "
	     "%d times", ROUNDS / 4);
	t_eq(held ? hmm_tensor_free(held) : -1, 0, "free the saved tensor");
	hmm_close(h);
	return t_done();
}
