// SPDX-License-Identifier: MIT
/*
 * test_region — a transparent region 4x the host budget: a pattern
 * written over all of it reads back exact, the budget is never exceeded
 * (the engine's peak, and the region's own resident pages by mincore),
 * blocks went to the store and came back; advice COLD evicts, WILLNEED
 * faults in; bad arguments fail with -EINVAL; pins may not take the
 * regions' last two blocks (pinned_room); a region larger than the
 * context can ever hold is refused before its block table (too_big).
 * Runs in both modes
 * (HMM_TEST_MODE=shared: userfaultfd in this process, evicted blocks in
 * an hmmd tensor).  t: tsan
 */
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "t.h"

#include "hmm.h"
#include "hmm_mode.h"

/* TSan takes the mmap that makes a lost block SIGBUS for a write racing
 * with the faulting read: the kill -9 check is skipped under it. */
#ifdef __SANITIZE_THREAD__
#define UNDER_TSAN 1
#else
#define UNDER_TSAN 0
#endif

#define BUDGET	(4u << 20)
#define RBYTES	(4ull * BUDGET)

/* Bytes of [p, p + len) resident in this process now (mincore). */
static uint64_t resident(void *p, uint64_t len)
{
	static unsigned char vec[RBYTES / 4096];
	uint64_t n = 0;

	if (mincore(p, len, vec))
		return UINT64_MAX;
	for (uint64_t i = 0; i < len / 4096; i++)
		n += vec[i] & 1;
	return n * 4096;
}

static sigjmp_buf bus_jmp;

static void on_sigbus(int sig)
{
	siglongjmp(bus_jmp, 1);
}

/* Read *p; -1 when that is SIGBUS. */
static int64_t touch(volatile uint64_t *p)
{
	struct sigaction sa = { .sa_handler = on_sigbus }, old;
	int64_t v = -1;

	sigaction(SIGBUS, &sa, &old);
	if (!sigsetjmp(bus_jmp, 1))
		v = (int64_t)(*p & 0x7fffffffffffffffull);
	sigaction(SIGBUS, &old, NULL);
	return v;
}

/*
 * Shared mode: kill -9 hmmd while blocks of a region are in it.  A
 * resident block still reads; a stored one gets SIGBUS, promptly, never
 * zeros or a hang; advice and free still return.
 */
static void hmmd_killed(struct hmm *h)
{
	uint64_t *p, n = RBYTES / 8, last = n - 1;
	void *vp;
	int st;

	if (hmm_region_new(h, RBYTES, &vp)) {
		t_ok(0, "region for the kill -9 check: %s", hmm_last_error());
		return;
	}
	p = vp;
	for (uint64_t i = 0; i < n; i++)
		p[i] = i + 1;
	/* the last block is resident, the first went to hmmd */
	kill(hmm_mode_pid_, SIGKILL);
	waitpid(hmm_mode_pid_, &st, 0);
	hmm_mode_pid_ = 0;
	t_eq(touch(&p[last]), (int64_t)(last + 1), "hmmd killed: a resident "
	     "block still reads");
	t_eq(touch(&p[0]), -1, "a block hmmd held gets SIGBUS, not zeros");
	t_eq(touch(&p[1]), -1, "and again");
	t_ok(hmm_region_advise(h, p, RBYTES, HMM_ADVISE_COLD) < 0,
	     "COLD fails: %s", hmm_last_error());
	t_eq(hmm_region_free(h, p), 0, "free returns");
}

/*
 * An access across blocks 0 and 1 of p (a 4-block region filled with
 * 0x5a, its budget full) completes, the bytes around it intact; a hang
 * fails as the watchdog's `what`.
 */
static int straddles(char *p, const char *what)
{
	uint64_t v = 0x1122334455667788ull, got = 0;

	t_watchdog(30, what);
	memcpy(p + (64 << 10) - 4, &v, 8);
	memcpy(&got, p + (64 << 10) - 4, 8);
	alarm(0);
	return got == v && p[0] == 0x5a && p[(4 << 16) - 1] == 0x5a;
}

/*
 * One access may straddle two blocks.  A host budget of one block took
 * a region, and its first such access never ended: faulting each block
 * in evicted the other (found while writing tests/fuzz/fuzz_api).  One
 * block is refused; two serve it, after the region filled the budget
 * too.  In shared mode two are refused as well, with -EINVAL naming the
 * quota and the chunk: a block's eviction maps a whole chunk of hmmd's
 * (2 MiB) in this client's 128 KiB quota there.
 */
static void two_blocks(const struct hmm_config *base)
{
	struct hmm_config cfg = *base;
	char path[4300], *p;
	struct hmm *h;
	void *vp;

	/* a store of its own: the first context holds its store's lock */
	snprintf(path, sizeof(path), "%s.two", base->store_path);
	cfg.store_path = path;
	cfg.host_budget = 64 << 10;
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	t_eq(hmm_region_new(h, 4 << 16, &vp), -EINVAL, "a one-block budget "
	     "is refused: %s", hmm_last_error());
	hmm_close(h);
	cfg.host_budget = 128 << 10;
	if (hmm_test_shared()) {
		/* a block evicted to hmmd maps one of its chunks, past a
		   128 KiB quota: refused at once, naming them */
		char want[2][64];
		uint32_t chunk = base->chunk_bytes ? base->chunk_bytes :
				 2u << 20;
		int r;

		if (hmm_open(&cfg, &h))
			t_fail_all("hmm_open: %s", hmm_last_error());
		r = hmm_region_new(h, 4 << 16, &vp);
		snprintf(want[0], sizeof(want[0]), "quota %u", 128u << 10);
		snprintf(want[1], sizeof(want[1]), "chunk %u", chunk);
		t_ok(r == -EINVAL && strstr(hmm_last_error(), want[0]) &&
		     strstr(hmm_last_error(), want[1]), "shared mode: a "
		     "two-block budget under a block's chunk in hmmd is "
		     "refused, naming the quota and the chunk: %d %s", r,
		     hmm_last_error());
		if (!r)
			hmm_region_free(h, vp);
		hmm_close(h);
		return;
	}

	p = hmm_test_region(&cfg, 4 << 16, &h);
	memset(p, 0x5a, 4 << 16);	/* the budget full, blocks stored */
	t_ok(straddles(p, "an access across two blocks, "
		       "two-block budget"), "a two-block budget: an "
	     "access across two blocks completes");
	hmm_region_free(h, p);
	hmm_close(h);
}

/*
 * Pinned chunks left the regions room for fewer than two blocks: an
 * access across two blocks then never ended (each block's fault evicted
 * the other), and with no block of room a fault waited for ever, with
 * no error.  Now pins may not take the regions' two blocks: a map that
 * would fails with -ENOMEM (at once when it alone is too large, after
 * wait_ms when other pins are in the way), as does a region made while
 * pins leave less than two blocks; next to the most that may be
 * pinned, an access across two blocks completes.
 */
static void pinned_room(const struct hmm_config *base)
{
	struct hmm_config cfg = *base;
	struct hmm_tensor *t, *u;
	int64_t tn = 256 << 10, un = 64 << 10;
	struct timespec ts0, ts1;
	char path[4300], *p;
	struct hmm *h;
	void *vt, *vu, *vp;
	double w;
	int r;

	if (hmm_test_shared()) {
		hmm_test_skip("pins leave regions two blocks", "shared mode: "
			      "pins are hmmd's, regions this process's");
		return;
	}
	snprintf(path, sizeof(path), "%s.pin", base->store_path);
	cfg.store_path = path;
	cfg.host_budget = 256 << 10;
	cfg.chunk_bytes = 64 << 10;
	cfg.wait_ms = 50;
	p = hmm_test_region(&cfg, 4 << 16, &h);
	if (hmm_tensor_new(h, "pin_t", HMM_DTYPE_U8, 1, &tn, &t) ||
	    hmm_tensor_new(h, "pin_u", HMM_DTYPE_U8, 1, &un, &u))
		t_fail_all("tensor: %s", hmm_last_error());
	memset(p, 0x5a, 4 << 16);	/* the budget full, blocks stored */
	if (hmm_map(t, 0, 128 << 10, HMM_TIER_HOST, HMM_WRITE, &vt))
		t_fail_all("map t: %s", hmm_last_error());
	clock_gettime(CLOCK_MONOTONIC, &ts0);
	r = hmm_map(u, 0, HMM_ALL, HMM_TIER_HOST, HMM_WRITE, &vu);
	clock_gettime(CLOCK_MONOTONIC, &ts1);
	w = ts1.tv_sec - ts0.tv_sec + (ts1.tv_nsec - ts0.tv_nsec) * 1e-9;
	t_eq(r, -ENOMEM, "a map leaving the region one block, next to "
	     "another's pins, fails after wait_ms (%.3f s): %s", w,
	     r ? hmm_last_error() : "mapped");
	t_ok(w >= 0.045 && w < 5, "after a bounded wait");
	t_ok(strstr(hmm_last_error(), "pin_u") &&
	     strstr(hmm_last_error(), "region"), "the detail names the "
	     "tensor and the regions");

	t_ok(straddles(p, "a region access next to pinned "
		       "chunks"), "half the budget pinned: "
	     "an access across two blocks completes");
	if (!r)
		hmm_unmap(u, vu);
	memset(vt, 0x33, 128 << 10);
	hmm_unmap(t, vt);
	r = hmm_map(t, 0, 192 << 10, HMM_TIER_HOST, HMM_WRITE, &vt);
	t_eq(r, -ENOMEM, "a map that alone leaves the region one block fails "
	     "at once: %s", r ? hmm_last_error() : "mapped");
	if (!r)
		hmm_unmap(t, vt);
	hmm_region_free(h, p);

	/* pins first: a region would get less than two blocks */
	if (hmm_map(t, 0, 192 << 10, HMM_TIER_HOST, HMM_WRITE, &vt))
		t_fail_all("map t: %s", hmm_last_error());
	r = hmm_region_new(h, 4 << 16, &vp);
	t_eq(r, -ENOMEM, "a region next to pins that leave one block is "
	     "refused: %s", hmm_last_error());
	if (!r)
		hmm_region_free(h, vp);
	hmm_unmap(t, vt);
	r = hmm_region_new(h, 4 << 16, &vp);
	t_eq(r, 0, "and made once they are unpinned");
	if (!r) {
		memset(vp, 0x77, 4 << 16);
		t_ok(((uint8_t *)vp)[0] == 0x77, "it works");
		hmm_region_free(h, vp);
	}
	hmm_close(h);
}

/* This process's peak RSS so far, KiB. */
static long maxrss_kb(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) ? -1 : ru.ru_maxrss;
}

/*
 * A region larger than everything the context can ever hold (the
 * store's data area + host budget + device budget; shared mode: hmmd's,
 * where its blocks go) fails with -ENOMEM, its detail naming the region,
 * its size and those capacities, before its block table is allocated: a
 * 2^45-byte region in this 68 MiB context used to be made, with 512 MiB
 * of block states (1 GiB at 2^46), each walked at its free.  A region of
 * the whole capacity, in blocks, passes; one block more does not.  Runs
 * before anything here grows the peak RSS (getrusage's, which never
 * falls), so that a jump would show.
 */
static void too_big(struct hmm *h, int sh)
{
	uint64_t cap = 0, fit;
	struct hmm_stats st;
	char size[32];
	long kb0, kb1;
	void *vp;
	int r, i;

	kb0 = maxrss_kb();
	r = hmm_region_new(h, 1ull << 45, &vp);
	kb1 = maxrss_kb();
	snprintf(size, sizeof(size), "%llu", 1ull << 45);
	t_eq(r, -ENOMEM, "a 2^45-byte region in a small context: -ENOMEM");
	t_ok(strstr(hmm_last_error(), "hmm_region_new: region") &&
	     strstr(hmm_last_error(), size) &&
	     strstr(hmm_last_error(), sh ? "more than hmmd can ever hold" :
		    "more than this context can ever hold"), "the detail "
	     "names the region, its size and whose capacities: %s",
	     hmm_last_error());
	t_ok(kb0 >= 0 && kb1 - kb0 < (32 << 10), "refused before its block "
	     "table: peak RSS +%ld KiB", kb1 - kb0);
	if (!r)
		hmm_region_free(h, vp);

	hmm_stats(h, &st);
	for (i = 0; i < HMM_TIERS; i++)
		cap += st.tier[i].capacity;
	fit = cap / (64 << 10) * (64 << 10);
	r = hmm_region_new(h, fit + (64 << 10), &vp);
	t_eq(r, -ENOMEM, "a region one block past the capacity (%llu "
	     "bytes): -ENOMEM", (unsigned long long)cap);
	if (!r)
		hmm_region_free(h, vp);
	/* shared mode: hmmd's store quota for this client, its
	 * config.store_size (64 MiB), is smaller and refuses it */
	r = hmm_region_new(h, fit, &vp);
	t_eq(r, sh ? -EDQUOT : 0, "a region of the whole capacity %s (%s)",
	     sh ? "passes it, to hmmd's store quota" : "is made",
	     r ? hmm_last_error() : "ok");
	if (!r)
		hmm_region_free(h, vp);
}

int main(void)
{
	struct hmm_config cfg;
	struct hmm_stats st, st2;
	struct hmm *h;
	char path[4200];
	uint64_t *p, seed, bad = 0, rss = 0;
	void *vp;
	int r, sh;

	hmm_test_config(&cfg, path, sizeof(path), 64 << 20, BUDGET, 0);
	hmm_test_mode(&cfg);	/* HMM_TEST_MODE=shared: through hmmd */
	sh = hmm_test_shared();
	p = hmm_test_region(&cfg, RBYTES, &h);
	too_big(h, sh);

	/* untouched memory reads as zeros */
	t_ok(p[12345] == 0 && p[RBYTES / 8 - 1] == 0, "fresh region reads 0");

	seed = 7;
	for (uint64_t i = 0; i < RBYTES / 8; i++) {
		p[i] = i * 0x9e3779b97f4a7c15ull ^ seed;
		if (i % (256 << 10) == 0) {	/* every 2 MiB */
			uint64_t n = resident(p, RBYTES);

			rss = n > rss ? n : rss;
		}
	}
	t_ok(rss <= BUDGET, "the region's resident bytes (mincore) %llu <= "
	     "budget %u while writing 4x the budget", (unsigned long long)rss,
	     BUDGET);
	hmm_stats(h, &st);
	t_ok(st.tier[HMM_TIER_HOST].peak <= BUDGET, "%s host peak %llu <= "
	     "budget %u", sh ? "hmmd's" : "the",
	     (unsigned long long)st.tier[HMM_TIER_HOST].peak, BUDGET);
	t_ok(st.region_evictions >= (RBYTES - BUDGET) / (64 << 10),
	     "blocks were evicted to the store (%llu)",
	     (unsigned long long)st.region_evictions);
	for (uint64_t i = 0; i < RBYTES / 8; i++)
		bad += p[i] != (i * 0x9e3779b97f4a7c15ull ^ seed);
	t_eq(bad, 0, "the pattern reads back exact");
	/* again backwards, with a new pattern on every other word */
	for (uint64_t i = RBYTES / 8; i-- > 0;)
		if (i & 1)
			p[i] = ~i;
	bad = 0;
	for (uint64_t i = 0; i < RBYTES / 8; i++)
		bad += p[i] != ((i & 1) ? ~i : i * 0x9e3779b97f4a7c15ull ^ seed);
	t_eq(bad, 0, "a second pass reads back exact");
	t_ok(resident(p, RBYTES) <= BUDGET, "resident bytes within budget "
	     "after it");
	hmm_stats(h, &st);
	t_ok(st.tier[HMM_TIER_HOST].peak <= BUDGET, "peak still within "
	     "budget");
	t_ok(st.region_faults > RBYTES / (64 << 10), "faults counted (%llu)",
	     (unsigned long long)st.region_faults);

	/* advice */
	t_eq(hmm_region_advise(h, p, 1 << 20, HMM_ADVISE_COLD), 0, "COLD");
	hmm_wait(h, NULL);
	hmm_stats(h, &st);
	t_eq(hmm_region_advise(h, p, 1 << 20, HMM_ADVISE_WILLNEED), 0,
	     "WILLNEED");
	hmm_stats(h, &st2);
	t_ok(st2.region_faults >= st.region_faults + 16, "WILLNEED faulted "
	     "the range in (%llu faults)", (unsigned long long)
	     (st2.region_faults - st.region_faults));
	t_ok(p[2] == (2 * 0x9e3779b97f4a7c15ull ^ seed) && p[5] == ~5ull,
	     "contents survive COLD + WILLNEED");

	/* tensors and the region share the host budget and evict each other */
	{
		struct hmm_tensor *t;
		int64_t tn = 2 * BUDGET;
		uint8_t *tp;
		void *v;
		uint64_t tbad = 0;

		if (hmm_tensor_new(h, "shared", HMM_DTYPE_U8, 1, &tn, &t))
			t_fail_all("tensor: %s", hmm_last_error());
		if (hmm_map(t, 0, BUDGET / 2, HMM_TIER_HOST, HMM_DISCARD, &v))
			t_fail_all("map: %s", hmm_last_error());
		t_fill(v, BUDGET / 2, 77);
		hmm_unmap(t, v);
		hmm_stats(h, &st);
		if (sh)		/* hmmd's tensors are in hmmd's budget */
			hmm_test_skip("a tensor map evicted region blocks",
				      "shared mode: the tensor is in hmmd");
		else
			t_ok(st.tier[HMM_TIER_HOST].peak <= BUDGET, "a tensor "
			     "map evicted region blocks to fit");
		uint64_t wr0 = st.tier[HMM_TIER_STORE].bytes_in;
		uint64_t ev0 = st.tier[HMM_TIER_HOST].evictions;

		bad = 0;
		for (uint64_t i = 0; i < RBYTES / 8; i += 512)
			bad += p[i] != ((i & 1) ? ~i :
					i * 0x9e3779b97f4a7c15ull ^ seed);
		t_eq(bad, 0, "the region reads back exact after the tensor");
		hmm_stats(h, &st);
		if (sh)
			hmm_test_skip("region faults evicted the tensor",
				      "shared mode: the tensor is in hmmd");
		else
			t_ok(st.tier[HMM_TIER_HOST].evictions > ev0 &&
			     st.tier[HMM_TIER_STORE].bytes_in >= wr0 + BUDGET / 2,
			     "region faults evicted the tensor's dirty chunks "
			     "to the store");
		if (hmm_map(t, 0, BUDGET / 2, HMM_TIER_HOST, HMM_READ, &v))
			t_fail_all("map: %s", hmm_last_error());
		tp = malloc(BUDGET / 2);
		t_fill(tp, BUDGET / 2, 77);
		tbad = memcmp(v, tp, BUDGET / 2) != 0;
		free(tp);
		hmm_unmap(t, v);
		t_eq(tbad, 0, "the tensor reads back exact after region faults "
		     "evicted it");
		hmm_stats(h, &st);
		t_ok(st.tier[HMM_TIER_HOST].peak <= BUDGET, "peak within budget "
		     "with both");
		hmm_tensor_free(t);
	}

	t_eq(hmm_region_advise(h, p, RBYTES + 1, HMM_ADVISE_COLD), -EINVAL,
	     "advise past the end: %s", hmm_last_error());
	t_eq(hmm_region_advise(h, p, 4096, 99), -EINVAL, "unknown advice");
	t_eq(hmm_region_free(h, p + 1), -EINVAL, "free of a non-start: %s",
	     hmm_last_error());
	t_eq(hmm_region_new(h, 0, &vp), -EINVAL, "zero-byte region");
	t_eq(hmm_region_free(h, p), 0, "free");
	hmm_stats(h, &st);
	if (sh)
		hmm_test_skip("free gave the budget back", "shared mode: "
			      "hmm_stats is hmmd's host tier");
	else
		t_eq(st.tier[HMM_TIER_HOST].resident, 0, "free gave the "
		     "budget back");
	/* the budget really is back: a second region fills it again */
	r = hmm_region_new(h, BUDGET, &vp);
	t_eq(r, 0, "a second region (%s)", r ? hmm_last_error() : "ok");
	if (!r) {
		hmm_stats(h, &st);
		memset(vp, 0x5a, BUDGET);
		hmm_stats(h, &st2);
		t_ok(((uint8_t *)vp)[BUDGET - 1] == 0x5a &&
		     resident(vp, BUDGET) == BUDGET &&
		     st2.region_evictions == st.region_evictions, "it fills "
		     "the whole budget without an eviction");
		hmm_region_free(h, vp);
	}
	two_blocks(&cfg);
	pinned_room(&cfg);
	if (sh && UNDER_TSAN)
		hmm_test_skip("kill -9 of hmmd", "TSan reports the SIGBUS "
			      "mapping as a race");
	else if (sh)
		hmmd_killed(h);
	hmm_close(h);
	return t_done();
}
