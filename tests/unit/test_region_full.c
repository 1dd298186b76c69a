// SPDX-License-Identifier: MIT
/*
 * test_region_full — a region on a store whose extent table it fills
 * fails, never spins.  A store past 1 << 22 blocks (16 GiB) gets tables
 * sized by chunks: with 64 MiB chunks a 17 GiB store names about 255
 * extents, which a region's 64 KiB blocks fill after 16 MiB.  Writing a
 * 32 MiB region over a 4 MiB host budget then used to loop for ever:
 * each eviction's write failed with -ENOSPC, the block stayed resident,
 * and the fault's reclaim picked the next block to write.  Now the
 * region evicts no more once the store says it is full; the access that
 * needs room nobody can give gets SIGBUS, and hmm_wait returns -ENOSPC
 * naming the store.  The blocks still in memory keep their bytes.
 *
 * The store is a sparse 17 GiB file (no disk space is taken beyond what
 * is written, about 16 MiB); it is unlinked on every exit, the watchdog's
 * too.  Skips where the file system cannot hold such a file, or where
 * userfaultfd is refused.  t: tsan
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>

#include "t.h"

#include "hmm.h"
#include "hmm_mode.h"

#define STORE_BYTES	(17ull << 30)
#define CHUNK		(64u << 20)
#define BUDGET		(4u << 20)
#define RBYTES		(32ull << 20)
#define BLOCK		(64u << 10)
#define WATCHDOG_S	60

static char path[4200];
static int finished;		/* __atomic: main tells the watchdog */

static void unlink_store(void)
{
	unlink(path);
}

/* Fail, rather than hang, when the region spins; the file goes too. */
static void *watchdog(void *arg)
{
	for (int i = 0; i < WATCHDOG_S * 10 &&
	     !__atomic_load_n(&finished, __ATOMIC_ACQUIRE); i++) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };

		nanosleep(&ts, NULL);
	}
	if (__atomic_load_n(&finished, __ATOMIC_ACQUIRE))
		return NULL;
	t_ok(0, "the region neither filled the store nor failed within %d s "
	     "(it spins)", WATCHDOG_S);
	unlink_store();
	_exit(1);
}

static sigjmp_buf bus_jmp;

static void on_sigbus(int sig)
{
	siglongjmp(bus_jmp, 1);
}

/* Fill block b of p with its pattern; -1 when that is SIGBUS. */
static int write_block(uint64_t *p, uint64_t b)
{
	struct sigaction sa = { .sa_handler = on_sigbus }, old;
	int r = -1;

	sigaction(SIGBUS, &sa, &old);
	if (!sigsetjmp(bus_jmp, 1)) {
		for (uint64_t i = b * BLOCK / 8; i < (b + 1) * BLOCK / 8; i++)
			p[i] = i * 0x9e3779b97f4a7c15ull;
		r = 0;
	}
	sigaction(SIGBUS, &old, NULL);
	return r;
}

static int block_ok(const uint64_t *p, uint64_t b)
{
	for (uint64_t i = b * BLOCK / 8; i < (b + 1) * BLOCK / 8; i++)
		if (p[i] != i * 0x9e3779b97f4a7c15ull)
			return 0;
	return 1;
}

int main(void)
{
	uint64_t nblocks = RBYTES / BLOCK, b, bad = 0;
	struct hmm_config cfg;
	struct hmm_stats st;
	struct hmm *h;
	pthread_t wd;
	uint64_t *p;
	int fd, r;

	if (hmm_test_shared())
		t_skip_all("shared mode: the store is hmmd's");
	hmm_test_config(&cfg, path, sizeof(path), STORE_BYTES, BUDGET, CHUNK);
	cfg.wait_ms = 1000;
	fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		t_fail_all("create %s: %s", path, strerror(errno));
	atexit(unlink_store);
	if (ftruncate(fd, (off_t)STORE_BYTES)) {
		close(fd);
		t_skip_all("%s: a sparse %llu-byte file: %s", path,
			   STORE_BYTES, strerror(errno));
	}
	close(fd);		/* all zeros: a new store, formatted sparse */
	if (pthread_create(&wd, NULL, watchdog, NULL))
		t_fail_all("watchdog thread");
	p = hmm_test_region(&cfg, RBYTES, &h);

	for (b = 0; b < nblocks; b++)
		if (write_block(p, b))
			break;
	t_ok(b < nblocks, "writing the region stops with SIGBUS at block %llu "
	     "of %llu: the store's table is full",
	     (unsigned long long)b, (unsigned long long)nblocks);
	t_ok(b * BLOCK >= BUDGET, "after more than the budget went to the "
	     "store (%llu bytes)", (unsigned long long)(b * BLOCK));
	hmm_stats(h, &st);
	t_ok(st.region_evictions > 0 && st.region_evictions < nblocks,
	     "blocks were stored until it was full (%llu)",
	     (unsigned long long)st.region_evictions);
	t_ok(st.tier[HMM_TIER_HOST].peak <= BUDGET, "the budget held (peak "
	     "%llu)", (unsigned long long)st.tier[HMM_TIER_HOST].peak);
	r = hmm_wait(h, NULL);
	t_eq(r, -ENOSPC, "hmm_wait says the store is full: %s",
	     hmm_strerror(r));
	t_ok(strstr(hmm_last_error(), path) != NULL, "naming it: %s",
	     hmm_last_error());
	/* the blocks written last could not go: they are still in memory */
	for (uint64_t i = b - 8; i < b; i++)
		bad += !block_ok(p, i);
	t_eq(bad, 0, "the 8 blocks before it keep their bytes");
	t_eq(hmm_region_free(h, p), 0, "the region frees");
	hmm_close(h);
	__atomic_store_n(&finished, 1, __ATOMIC_RELEASE);
	pthread_join(wd, NULL);
	return t_done();
}
