// SPDX-License-Identifier: MIT
/*
 * test_region_quota — a shared-mode region whose client's host quota in
 * hmmd is full for a while (the client's own tensor map holds it all,
 * longer than hmmd's wait_ms) loses nothing and gets no SIGBUS.
 *
 * A region block's eviction maps the block in hmmd (WRITE), and a fault
 * on a stored block maps it there (READ): both charge the client's
 * quota.  While a tensor map holds the whole quota, each such map fails
 * after wait_ms with -EDQUOT.  That once ended the region's evictions
 * for good (the remote backend took any failed write for hmmd gone),
 * and the next access that needed room got SIGBUS; a failed read broke
 * its block (SIGBUS too).  Now the block stays resident (or stored),
 * the eviction or read is tried again, and once the map is released
 * the accesses complete:
 *
 *  - writes: a region of 8 blocks written over a 2-block budget while
 *    the quota is full for 5x wait_ms, then released by another thread;
 *  - COLD advice while the quota is full: -EDQUOT, "stay resident";
 *  - reads: the same region's blocks, all evicted (COLD), read back
 *    while the quota is full again for 5x wait_ms;
 *  - every byte reads back, hmm_wait reports no error, evictions were
 *    counted, and the fault thread did not spin meanwhile (CPU time).
 *
 * Those holds end within the client's wait_ms (CWAIT_MS, 2x the hold):
 * the bound on how long a region fault goes without room.  A quota full
 * for longer ("starved") once made the access retry for ever; now it
 * gets SIGBUS after about the client's wait_ms and loses nothing:
 *  - a read of a stored block (hmmd refuses its map), then a write that
 *    needs an eviction (hmmd refuses that block's map): each SIGBUS after
 *    CWAIT_MS, the next access sooner (the region starves already),
 *    hmm_wait -ENOMEM naming the region and the block;
 *  - once the map is released every byte reads back, and hmm_wait is 0.
 *
 * hmmd: --chunk 64K (a block's charge is one chunk), --wait-ms 200; the
 * client's host_budget, and so its quota, 128K: two chunks.  The client
 * runs in a child, so that a SIGBUS outside the starved checks fails a
 * check instead of the test.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "t.h"
#include "hmmd_t.h"
#include "hmm.h"

#define WAIT_MS		200
#define QUOTA		(128u << 10)	/* two 64K chunks; two blocks */
#define RBYTES		(8u << 16)	/* eight blocks */
#define HOLD_MS		(5 * WAIT_MS)
#define CWAIT_MS	(2 * HOLD_MS)	/* the client's wait_ms */

static char hmmd[4096], dir[4096], sock[4096], store[4096], logf[4096];

enum { C_OK = 0, C_OPEN = 3, C_REGION = 4, C_BAD = 5, C_MAP = 6,
       C_WAIT = 7, C_SPIN = 8, C_COLD = 9, C_STARVED = 10 };

/* The tensor map that fills the quota, released by a thread after
 * HOLD_MS while the main thread touches the region. */
struct holder {
	struct hmm_tensor *t;
	void *p;
	int err;
};

static void *release_later(void *arg)
{
	struct holder *hd = arg;

	usleep(HOLD_MS * 1000);
	hd->err = hmm_unmap(hd->t, hd->p);
	return NULL;
}

/* Map the whole tensor (the whole quota) and start its release. */
static int hold(int fd, struct holder *hd, pthread_t *thr)
{
	int r = hmm_map(hd->t, 0, QUOTA, HMM_TIER_HOST, HMM_WRITE, &hd->p);

	if (r) {
		dprintf(fd, "map %d %s\n", r, hmm_last_error());
		return r;
	}
	memset(hd->p, 0x77, 64);
	r = -pthread_create(thr, NULL, release_later, hd);
	if (r) {
		dprintf(fd, "pthread_create %d\n", r);
		hmm_unmap(hd->t, hd->p);
	}
	return r;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static uint64_t pat(uint64_t i)
{
	return i * 0x9e3779b97f4a7c15ull ^ 0x5a5a;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static sigjmp_buf bus_jmp;
static char note[160];	/* the starved accesses' times, for the line */

static void on_sigbus(int sig)
{
	siglongjmp(bus_jmp, 1);
}

/* Read (or, write: 1, store v at) *p: 0, or -1 when that is SIGBUS. */
static int access_word(volatile uint64_t *p, int write, uint64_t v)
{
	struct sigaction sa = { .sa_handler = on_sigbus }, old;
	int r = -1;

	sigaction(SIGBUS, &sa, &old);
	if (!sigsetjmp(bus_jmp, 1)) {
		if (write)
			*p = v;
		else
			(void)*p;
		r = 0;
	}
	sigaction(SIGBUS, &old, NULL);
	return r;
}

/*
 * One starved access: the quota held, block b is read (or written with
 * pat): SIGBUS, after at least min_s and at most max_s seconds; hmm_wait
 * then -ENOMEM naming the region's block b.  0, or 1 with the line.
 */
static int starved(int fd, struct hmm *h, uint64_t *p, uint64_t b,
		   int write, double min_s, double max_s)
{
	uint64_t i = b * (64 << 10) / 8;
	double t = now_s();
	char want[32];
	int r = access_word(&p[i], write, pat(i));

	t = now_s() - t;
	if (r != -1 || t < min_s || t > max_s) {
		dprintf(fd, "starved %s of block %llu: %s after %.3f s, not "
			"SIGBUS after %.1f..%.1f s\n", write ? "write" : "read",
			(unsigned long long)b, r ? "SIGBUS" : "served", t,
			min_s, max_s);
		return 1;
	}
	snprintf(note + strlen(note), sizeof(note) - strlen(note), " %s %llu "
		 "SIGBUS %.2f s", write ? "write" : "read",
		 (unsigned long long)b, t);
	r = hmm_wait(h, NULL);
	snprintf(want, sizeof(want), "block %llu ", (unsigned long long)b);
	if (r != -ENOMEM || !strstr(hmm_last_error(), "region") ||
	    !strstr(hmm_last_error(), want)) {
		dprintf(fd, "starved %s of block %llu: hmm_wait %d %s\n",
			write ? "write" : "read", (unsigned long long)b, r,
			hmm_last_error());
		return 1;
	}
	return 0;
}

/* Every word of the region reads back, a SIGBUS tried again for up to
 * 3 s (a starved block's poison lasts until the fault thread sees
 * room, REGION_RETRY_S at most after it returned).  0, or 1. */
static int reads_back(int fd, uint64_t *p)
{
	double until = now_s() + 3;

	for (uint64_t i = 0; i < RBYTES / 8; i++) {
		while (access_word(&p[i], 0, 0)) {
			if (now_s() > until) {
				dprintf(fd, "word %llu: SIGBUS 3 s after the "
					"quota came back\n",
					(unsigned long long)i);
				return 1;
			}
			usleep(20 * 1000);
		}
		if (p[i] != pat(i)) {
			dprintf(fd, "word %llu: %llx, not %llx\n",
				(unsigned long long)i,
				(unsigned long long)p[i],
				(unsigned long long)pat(i));
			return 1;
		}
	}
	return 0;
}

/*
 * The quota full for longer than the client's wait_ms: a read of a
 * stored block, a second access (the region starves: sooner), then a
 * write that needs an eviction; each SIGBUS, and nothing is lost.
 * 0 or C_STARVED, the why written to fd.
 */
static int client_starved(int fd, struct hmm *h, struct holder *hd,
			  uint64_t *p)
{
	double w = CWAIT_MS / 1e3;
	int r;

	r = hmm_region_advise(h, p, RBYTES, HMM_ADVISE_COLD);
	if (r) {
		dprintf(fd, "advise %d %s\n", r, hmm_last_error());
		return C_STARVED;
	}
	if ((r = hmm_map(hd->t, 0, QUOTA, HMM_TIER_HOST, HMM_WRITE, &hd->p))) {
		dprintf(fd, "map %d %s\n", r, hmm_last_error());
		return C_STARVED;
	}
	/* the budget is empty: hmmd refuses the read of block 1 */
	if (starved(fd, h, p, 1, 0, w * 0.9, w + 3) ||
	    starved(fd, h, p, 2, 0, 0, w / 2))
		return C_STARVED;
	/* released: every byte back; the last two blocks read stay
	   resident, so block 0's room needs an eviction, refused while
	   the quota is held again */
	hmm_unmap(hd->t, hd->p);
	if (reads_back(fd, p))
		return C_STARVED;
	if ((r = hmm_wait(h, NULL))) {
		dprintf(fd, "wait after the starved reads: %d %s\n", r,
			hmm_last_error());
		return C_STARVED;
	}
	if ((r = hmm_map(hd->t, 0, QUOTA, HMM_TIER_HOST, HMM_WRITE, &hd->p))) {
		dprintf(fd, "map %d %s\n", r, hmm_last_error());
		return C_STARVED;
	}
	if (starved(fd, h, p, 0, 1, w * 0.9, w + 3)) {
		hmm_unmap(hd->t, hd->p);
		return C_STARVED;
	}
	hmm_unmap(hd->t, hd->p);
	if (reads_back(fd, p))
		return C_STARVED;
	r = hmm_wait(h, NULL);
	if (r) {
		dprintf(fd, "wait after the starved accesses: %d %s\n", r,
			hmm_last_error());
		return C_STARVED;
	}
	return 0;
}

/* In the child: the writes, then the reads, each with the quota full
 * for HOLD_MS; report to fd. */
static int client(int fd, void *arg)
{
	char addr[4200];
	struct hmm_config cfg;
	struct holder hd = { 0 };
	struct hmm_stats st;
	int64_t n = QUOTA;
	uint64_t *p, bad = 0;
	double cpu;
	pthread_t thr;
	struct hmm *h;
	void *vp;
	int r;

	alarm(60);			/* a hang fails, never blocks */
	snprintf(addr, sizeof(addr), "unix:%s", sock);
	hmm_config_default(&cfg);
	cfg.daemon = addr;
	cfg.host_budget = QUOTA;
	cfg.wait_ms = CWAIT_MS;
	if ((r = hmm_open(&cfg, &h))) {
		dprintf(fd, "open %d %s\n", r, hmm_last_error());
		return C_OPEN;
	}
	r = hmm_tensor_new(h, "fill", HMM_DTYPE_U8, 1, &n, &hd.t);
	if (r) {
		dprintf(fd, "tensor %d %s\n", r, hmm_last_error());
		return C_MAP;
	}
	if ((r = hmm_region_new(h, RBYTES, &vp))) {
		dprintf(fd, "region %d %s\n", r, hmm_last_error());
		return C_REGION;
	}
	p = vp;

	/* writes: every block after the second evicts one */
	if (hold(fd, &hd, &thr))
		return C_MAP;
	cpu = cpu_s();
	for (uint64_t i = 0; i < RBYTES / 8; i++)
		p[i] = pat(i);
	pthread_join(thr, NULL);
	cpu = cpu_s() - cpu;
	if (hd.err) {
		dprintf(fd, "unmap %d\n", hd.err);
		return C_MAP;
	}
	/* about two evictions' wait in hmmd per WAIT_MS: a spin would
	   take a core for the whole hold */
	if (cpu > HOLD_MS / 1e3 / 2) {
		dprintf(fd, "spin: %.3f s of CPU over %d ms of writes\n", cpu,
			HOLD_MS);
		return C_SPIN;
	}

	/* COLD advice meanwhile: refused for now, the blocks stay */
	if (hold(fd, &hd, &thr))
		return C_MAP;
	r = hmm_region_advise(h, vp, RBYTES, HMM_ADVISE_COLD);
	pthread_join(thr, NULL);
	if (r != -EDQUOT || !strstr(hmm_last_error(), "stay resident") ||
	    hd.err) {
		dprintf(fd, "cold advice with the quota full: %d %s\n", r,
			hmm_last_error());
		return C_COLD;
	}

	/* reads: every block stored (the budget empty, so the first
	   fault's room is there at once), each fault maps one in hmmd */
	r = hmm_region_advise(h, vp, RBYTES, HMM_ADVISE_COLD);
	if (r) {
		dprintf(fd, "advise %d %s\n", r, hmm_last_error());
		return C_BAD;
	}
	if (hold(fd, &hd, &thr))
		return C_MAP;
	for (uint64_t i = 0; i < RBYTES / 8; i++)
		bad += p[i] != pat(i);
	pthread_join(thr, NULL);
	if (hd.err) {
		dprintf(fd, "unmap %d\n", hd.err);
		return C_MAP;
	}
	if (bad) {
		dprintf(fd, "bad %llu words\n", (unsigned long long)bad);
		return C_BAD;
	}
	r = hmm_wait(h, NULL);
	if (r) {
		dprintf(fd, "wait %d %s\n", r, hmm_last_error());
		return C_WAIT;
	}
	r = hmm_stats(h, &st);
	if (!r && (r = client_starved(fd, h, &hd, p)))
		return r;
	hmm_region_free(h, vp);
	hmm_tensor_free(hd.t);
	hmm_close(h);
	dprintf(fd, "ok evictions %llu faults %llu cpu %.3f;%s\n",
		(unsigned long long)(r ? 0 : st.region_evictions),
		(unsigned long long)(r ? 0 : st.region_faults), cpu, note);
	return r || st.region_evictions < 14 ? C_BAD : C_OK;
}

int main(void)
{
	char wait[16], line[1024];
	pid_t pid;
	int code, st;

	T_HMMD_PATHS(hmmd, dir, sock, store, logf, "rq");
	snprintf(wait, sizeof(wait), "%d", WAIT_MS);
	{
		char *argv[] = { hmmd, "--socket", sock, "--store", store,
				 "--store-size", "64M", "--host-budget", "16M",
				 "--chunk", "64K", "--wait-ms", wait,
				 "--module", "none", NULL };

		unlink(sock);
		unlink(store);
		pid = t_hmmd_spawn(hmmd, argv, logf, 1, NULL);
		t_hmmd_wait_listen(pid, sock, 20, logf);
	}
	code = t_child(client, NULL, line, sizeof(line));
	if (code == C_REGION && (strstr(line, "region -1 ") ||
				 strstr(line, "region -38 ")))
		t_skip_all("userfaultfd unavailable: %s", line);
	t_diag("client: exit %d: %s", code, line);
	t_ok(code != 128 + SIGBUS, "quota full for %d ms (hmmd's wait_ms %d, "
	     "the client's %d): no SIGBUS", HOLD_MS, WAIT_MS, CWAIT_MS);
	t_ok(code != 128 + SIGALRM, "no hang");
	t_ok(code != C_STARVED, "quota full for longer than the client's "
	     "wait_ms: SIGBUS after it, hmm_wait names the block, nothing "
	     "lost (%s)", line);
	t_ok(code != C_SPIN, "evictions retried without spinning (%s)", line);
	t_ok(code != C_COLD, "COLD advice with the quota full: -EDQUOT, the "
	     "blocks stay resident (%s)", line);
	t_eq(code, C_OK, "every byte read back, no error in hmm_wait, "
	     "blocks evicted (%s)", line);

	kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
	t_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "hmmd: exit 0");
	return t_done();
}
