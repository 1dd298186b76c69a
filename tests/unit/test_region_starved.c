// SPDX-License-Identifier: MIT
/*
 * test_region_starved — a region access that can find no room never
 * waits for ever.  The host budget full of what can never be evicted,
 * with nothing in flight to free some, once kept the fault waiting, its
 * access and then hmm_region_free and hmm_close with it.  Now the fault
 * gives up after config.wait_ms: the access gets SIGBUS, hmm_wait
 * returns -ENOMEM naming the region's block, the budget and what holds
 * it, and the block keeps its bytes: once room returns they read back.
 *
 *  - dead: the budget full of the blocks of a region whose evictions
 *    ended (the store refused a block: injected -ENOSPC); a second
 *    region's stored block, and then its never written one (sooner: the
 *    region starves already), fault;
 *  - nowb: the budget full of dirty tensor chunks whose write-back
 *    failed (injected -EIO), so no victims; a region write faults, and
 *    WILLNEED returns -ENOMEM instead of a SIGBUS inside the call; a
 *    flush writes the chunks, the region is written, nothing is lost;
 *  - free_close: a fault stuck that way (wait_ms 30 s) while
 *    hmm_region_free, then hmm_close, is called: both return at once;
 *  - willneed_lost: WILLNEED fails with a lost block's read error (it
 *    touched the blocks, and took the SIGBUS inside the call);
 *  - nopoison: HMM_REGION_POISON=0, as a kernel before 6.6 (no
 *    UFFDIO_POISON): the starved block is lost instead, said so.
 *
 * Embedded only: shared mode's starved region (this client's hmmd
 * quota held by its own maps) is test_region_quota's.  t: tsan
 */
#include <setjmp.h>
#include <signal.h>
#include <time.h>

#include "t.h"

#include "fault_inject.h"
#include "hmm.h"
#include "hmm_mode.h"

/* TSan takes the mmap that makes a lost block SIGBUS for a write racing
 * with the faulting read (as test_region): nopoison is skipped under it. */
#ifdef __SANITIZE_THREAD__
#define UNDER_TSAN 1
#else
#define UNDER_TSAN 0
#endif

#define BLOCK	(64u << 10)
#define BUDGET	(4 * BLOCK)		/* four blocks, four chunks */
#define WAIT_MS	600

static char base[4200];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static __thread sigjmp_buf bus_jmp;

static void on_signal(int sig)
{
	siglongjmp(bus_jmp, sig);
}

/* Read (write: 0) or write v at *p: 0, or the signal (SIGBUS; SIGSEGV
 * too with segv: a region freed under the access). */
static int access_word(volatile uint64_t *p, int write, uint64_t v,
		       int segv)
{
	struct sigaction sa = { .sa_handler = on_signal }, ob, os;
	int sig;

	sigaction(SIGBUS, &sa, &ob);
	if (segv)
		sigaction(SIGSEGV, &sa, &os);
	sig = sigsetjmp(bus_jmp, 1);
	if (!sig) {
		if (write)
			*p = v;
		else
			(void)*p;
	}
	sigaction(SIGBUS, &ob, NULL);
	if (segv)
		sigaction(SIGSEGV, &os, NULL);
	return sig;
}

static uint64_t pat(uint64_t i)
{
	return i * 0x9e3779b97f4a7c15ull ^ 0xa5;
}

/* Write the pattern over block b of p. */
static void fill_block(uint64_t *p, uint64_t b)
{
	for (uint64_t i = b * BLOCK / 8; i < (b + 1) * BLOCK / 8; i++)
		p[i] = pat(i);
}

/* Block b of p holds the pattern (zeros: 0 everywhere), read with
 * SIGBUS tried again for up to 3 s (a starved block's poison lasts
 * until the fault thread sees room).  1 when it does. */
static int block_reads(uint64_t *p, uint64_t b, int zeros)
{
	double until = now_s() + 3;

	for (uint64_t i = b * BLOCK / 8; i < (b + 1) * BLOCK / 8; i++) {
		while (access_word(&p[i], 0, 0, 0)) {
			if (now_s() > until)
				return 0;
			usleep(20 * 1000);
		}
		if (p[i] != (zeros ? 0 : pat(i)))
			return 0;
	}
	return 1;
}

/*
 * The access to word i of p (a write of its pattern with write) gets
 * SIGBUS after min_s..max_s seconds; then hmm_wait is -ENOMEM naming
 * the block and what holds the budget (have).
 */
static void starves(struct hmm *h, uint64_t *p, uint64_t i, int write,
		    double min_s, double max_s, const char *have,
		    const char *what)
{
	char blk[48];
	double t = now_s();
	int sig = access_word(&p[i], write, pat(i), 0), r;

	t = now_s() - t;
	t_ok(sig == SIGBUS && t >= min_s && t <= max_s, "%s: SIGBUS after "
	     "%.3f s (%.1f..%.1f)", what, t, min_s, max_s);
	r = hmm_wait(h, NULL);
	snprintf(blk, sizeof(blk), "block %llu (offset %llu)",
		 (unsigned long long)(i * 8 / BLOCK),
		 (unsigned long long)(i * 8 / BLOCK * BLOCK));
	t_eq(r, -ENOMEM, "hmm_wait: -ENOMEM: %s", hmm_last_error());
	t_ok(strstr(hmm_last_error(), "region") &&
	     strstr(hmm_last_error(), blk) &&
	     strstr(hmm_last_error(), "budget 262144") &&
	     strstr(hmm_last_error(), have), "naming the region's %s, the "
	     "budget and what holds it (%s)", blk, have);
}

static struct hmm *open_ctx(const char *name, uint32_t wait_ms)
{
	struct hmm_config cfg;
	char path[4300];
	struct hmm *h;

	snprintf(path, sizeof(path), "%s.%s", base, name);
	hmm_config_default(&cfg);
	cfg.store_path = path;
	cfg.store_size = 64 << 20;
	cfg.host_budget = BUDGET;
	cfg.chunk_bytes = BLOCK;
	cfg.wait_ms = wait_ms;
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open %s: %s", name, hmm_last_error());
	return h;
}

static uint64_t *region(struct hmm *h, uint64_t bytes)
{
	void *p;
	int r = hmm_region_new(h, bytes, &p);

	if (r == -ENOSYS || r == -EPERM)
		t_skip_all("userfaultfd unavailable: %s", hmm_last_error());
	if (r)
		t_fail_all("hmm_region_new: %s", hmm_last_error());
	return p;
}

/*
 * A region whose evictions ended holds the whole budget: a's four
 * blocks written, then the write of its COLD advice meets -ENOSPC
 * (injected), so the region evicts no more.  The store's write ends
 * after the advice returns: hmm_wait says so once it did.
 */
static uint64_t *dead_region(struct hmm *h)
{
	uint64_t *a = region(h, 8 * BLOCK);
	double until = now_s() + 5;
	int r;

	for (uint64_t b = 0; b < 4; b++)
		fill_block(a, b);
	if (hmm_fault_set("enospc@1"))
		t_fail_all("hmm_fault_set");
	r = hmm_region_advise(h, a, BLOCK, HMM_ADVISE_COLD);
	while (!(r = hmm_wait(h, NULL)) && now_s() < until)
		usleep(10 * 1000);
	hmm_fault_set(NULL);
	t_eq(r, -ENOSPC, "a region whose block the store refused evicts no "
	     "more: %s", hmm_last_error());
	return a;
}

static void dead(void)
{
	struct hmm *h = open_ctx("dead", WAIT_MS);
	double w = WAIT_MS / 1e3;
	uint64_t *a, *b;

	b = region(h, 4 * BLOCK);
	fill_block(b, 0);
	t_eq(hmm_region_advise(h, b, BLOCK, HMM_ADVISE_COLD), 0, "block 0 "
	     "of the second region stored");
	a = dead_region(h);

	t_watchdog(20, "a fault with the budget full of a dead region's "
		   "blocks");
	starves(h, b, 5, 0, w * 0.9, w + 3, "evict no more",
		"dead: a read of a stored block");
	starves(h, b, BLOCK / 8 + 7, 1, 0, w * 0.8, "evict no more",
		"dead: then a write of a never written block, sooner");
	alarm(0);

	t_eq(hmm_region_free(h, a), 0, "the dead region frees: room returns");
	t_ok(block_reads(b, 0, 0), "the stored block reads back exact");
	t_ok(block_reads(b, 1, 1), "the never written one reads zeros");
	fill_block(b, 1);
	t_ok(block_reads(b, 1, 0), "and takes a write");
	t_eq(hmm_wait(h, NULL), 0, "hmm_wait: no error since");
	hmm_region_free(h, b);
	hmm_close(h);
}

/*
 * Four dirty chunks fill the budget, each mapped and written alone
 * (pins may not take the regions' two blocks), and their write-back
 * fails (injected -EIO): no victims until written again.
 */
static struct hmm_tensor *nowb_tensor(struct hmm *h)
{
	int64_t n = BUDGET;
	struct hmm_tensor *t;
	int r;

	if (hmm_tensor_new(h, "nowb", HMM_DTYPE_U8, 1, &n, &t))
		t_fail_all("tensor: %s", hmm_last_error());
	for (uint64_t c = 0; c < 4; c++) {
		void *q;

		if (hmm_map(t, c * BLOCK, BLOCK, HMM_TIER_HOST, HMM_WRITE, &q))
			t_fail_all("map: %s", hmm_last_error());
		t_fill(q, BLOCK, 100 + c);
		hmm_unmap(t, q);
	}
	if (hmm_fault_set("eio@1,eio@2,eio@3,eio@4"))
		t_fail_all("hmm_fault_set");
	r = hmm_writeback(t, 0, HMM_ALL);
	if (!r)
		r = hmm_wait(h, NULL);
	t_eq(r, -EIO, "four dirty chunks fill the budget, their write-back "
	     "failed (%llu faults fired)",
	     (unsigned long long)hmm_fault_fired());
	hmm_fault_set(NULL);
	return t;
}

/* t's four chunks hold their bytes. */
static int tensor_same(struct hmm_tensor *t)
{
	uint8_t *want = malloc(BLOCK);
	int same = 1;

	for (uint64_t c = 0; want && c < 4 && same; c++) {
		void *q;

		if (hmm_map(t, c * BLOCK, BLOCK, HMM_TIER_HOST, HMM_READ, &q))
			return 0;
		t_fill(want, BLOCK, 100 + c);
		same = !memcmp(q, want, BLOCK);
		hmm_unmap(t, q);
	}
	free(want);
	return want && same;
}

static void nowb(void)
{
	struct hmm *h = open_ctx("nowb", WAIT_MS);
	double w = WAIT_MS / 1e3, t0;
	struct hmm_tensor *t;
	uint64_t *p;
	int r;

	p = region(h, 4 * BLOCK);
	t = nowb_tensor(h);

	t_watchdog(20, "a fault with the budget full of chunks whose "
		   "write-back failed");
	starves(h, p, 3, 1, w * 0.9, w + 3, "write-back failed",
		"nowb: a write of a never written block");
	t0 = now_s();
	r = hmm_region_advise(h, p + BLOCK / 8, BLOCK, HMM_ADVISE_WILLNEED);
	t0 = now_s() - t0;
	t_eq(r, -ENOMEM, "WILLNEED meanwhile: -ENOMEM, not a SIGBUS in the "
	     "call (%.3f s): %s", t0, hmm_last_error());
	t_ok(strstr(hmm_last_error(), "hmm_region_advise: region") &&
	     strstr(hmm_last_error(), "block 1 "), "naming the block");
	alarm(0);

	t_eq(hmm_flush(h), 0, "a flush writes the chunks: room returns");
	fill_block(p, 1);	/* block 1 starved in WILLNEED, not poisoned */
	t_ok(block_reads(p, 0, 1), "the starved block reads zeros");
	fill_block(p, 0);
	t_ok(block_reads(p, 0, 0) && block_reads(p, 1, 0), "and takes a "
	     "write");
	t_ok(tensor_same(t), "the chunks kept their bytes");
	t_eq(hmm_wait(h, NULL), 0, "hmm_wait: no error since");
	hmm_tensor_free(t);
	hmm_region_free(h, p);
	hmm_close(h);
}

/* An access that waits in its fault; what ended it. */
struct stuck {
	uint64_t *p;
	int sig;
};

static void *stuck_main(void *arg)
{
	struct stuck *s = arg;

	s->sig = access_word(s->p, 1, 1, 1);
	return NULL;
}

/* Start an access to p that waits for room; 50 ms later it waits. */
static void stuck_start(struct stuck *s, uint64_t *p, pthread_t *thr)
{
	struct timespec ts = { 0, 50 * 1000 * 1000 };

	s->p = p;
	s->sig = -1;
	if (pthread_create(thr, NULL, stuck_main, s))
		t_fail_all("pthread_create");
	nanosleep(&ts, NULL);
}

static void free_close(void)
{
	struct hmm *h = open_ctx("free", 30000);
	struct hmm_tensor *t;
	struct stuck s;
	pthread_t thr;
	uint64_t *p;
	double t0;

	p = region(h, 4 * BLOCK);
	t = nowb_tensor(h);
	t_watchdog(20, "hmm_region_free with a fault waiting for room");
	stuck_start(&s, p, &thr);
	t0 = now_s();
	t_eq(hmm_region_free(h, p), 0, "hmm_region_free with a fault waiting "
	     "for room (wait_ms 30 s)");
	t0 = now_s() - t0;
	pthread_join(thr, NULL);
	t_ok(t0 < 2, "returns at once (%.3f s)", t0);
	t_ok(s.sig == SIGBUS || s.sig == SIGSEGV, "the waiting access got "
	     "SIGBUS (%d; SIGSEGV once the region is unmapped)", s.sig);
	hmm_wait(h, NULL);

	p = region(h, 4 * BLOCK);
	t_watchdog(20, "hmm_close with a fault waiting for room");
	stuck_start(&s, p, &thr);
	t0 = now_s();
	hmm_close(h);
	t0 = now_s() - t0;
	pthread_join(thr, NULL);
	alarm(0);
	t_ok(t0 < 2, "hmm_close with a fault waiting for room returns at "
	     "once (%.3f s)", t0);
	t_ok(s.sig == SIGBUS || s.sig == SIGSEGV, "the access got SIGBUS "
	     "(%d)", s.sig);
	(void)t;	/* freed by hmm_close */
}

/*
 * WILLNEED of a stored block whose read fails (injected -EIO): the call
 * returns the error (it touched the block, and the SIGBUS of a lost
 * block hit inside it); an access then gets SIGBUS, at once.
 */
static void willneed_lost(void)
{
	struct hmm *h = open_ctx("lost", WAIT_MS);
	double until = now_s() + 5;
	struct hmm_stats st;
	uint64_t *p;
	int r;

	p = region(h, 4 * BLOCK);
	fill_block(p, 0);
	do {	/* the fault may end after the access; the write after
		   the advice */
		hmm_region_advise(h, p, BLOCK, HMM_ADVISE_COLD);
		usleep(5 * 1000);
	} while (!hmm_stats(h, &st) && !st.region_evictions &&
		 now_s() < until);
	t_watchdog(20, "WILLNEED of a block whose read fails");
	if (hmm_fault_set("eio@1"))
		t_fail_all("hmm_fault_set");
	r = hmm_region_advise(h, p, 2 * BLOCK, HMM_ADVISE_WILLNEED);
	hmm_fault_set(NULL);
	t_eq(r, -EIO, "WILLNEED of a block whose read fails: -EIO, no SIGBUS "
	     "in the call: %s", hmm_last_error());
	t_eq(access_word(p, 0, 0, 0), SIGBUS, "an access then gets SIGBUS");
	alarm(0);
	t_eq(hmm_wait(h, NULL), -EIO, "hmm_wait says the block is lost: %s",
	     hmm_last_error());
	hmm_region_free(h, p);
	hmm_close(h);
}

static void nopoison(void)
{
	struct hmm *h;
	struct hmm_tensor *t;
	uint64_t *p;
	int r;

	if (UNDER_TSAN) {
		t_ok(1, "no UFFDIO_POISON # SKIP TSan reports the SIGBUS "
		     "mapping as a race");
		return;
	}
	setenv("HMM_REGION_POISON", "0", 1);
	h = open_ctx("nopoison", 200);
	p = region(h, 4 * BLOCK);
	unsetenv("HMM_REGION_POISON");
	t = nowb_tensor(h);
	t_watchdog(20, "a starved fault without UFFDIO_POISON");
	r = access_word(p, 1, 1, 0);
	t_eq(r, SIGBUS, "no UFFDIO_POISON: the starved access gets SIGBUS");
	r = hmm_wait(h, NULL);
	t_ok(r == -ENOMEM && strstr(hmm_last_error(), "bytes are lost"),
	     "the block is lost, said so: %d %s", r, hmm_last_error());
	t_eq(hmm_flush(h), 0, "room returns");
	t_eq(access_word(p, 0, 0, 0), SIGBUS, "the block stays lost");
	alarm(0);
	hmm_tensor_free(t);
	hmm_region_free(h, p);
	hmm_close(h);
}

/* Run the checks named on the command line, or all. */
int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		void (*fn)(void);
	} cases[] = {
		{ "dead", dead }, { "nowb", nowb },
		{ "free_close", free_close },
		{ "willneed_lost", willneed_lost }, { "nopoison", nopoison },
	};
	struct hmm_config cfg;

	if (hmm_test_shared())
		t_skip_all("shared mode: a starved region there is "
			   "test_region_quota's (this client's hmmd quota)");
	hmm_test_config(&cfg, base, sizeof(base), 0, BUDGET, 0);
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int run = argc < 2;

		for (int j = 1; j < argc; j++)
			run |= !strcmp(argv[j], cases[i].name);
		if (run)
			cases[i].fn();
	}
	return t_done();
}
