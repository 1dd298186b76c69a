// SPDX-License-Identifier: GPL-2.0
/*
 * tests/vm/hmmk_stress.c — threads racing every region operation (touch,
 * EVICT, MIGRATE, DEV_ACCESS, SAMPLE, SNAPSHOT, mmap / munmap, REGION
 * create / destroy) on shared regions while the test daemon is killed and
 * restarted under them.  Bytes are not checked (the writes race); the test
 * asserts that every thread finishes (nothing hangs), that faults after the
 * daemon died raised SIGBUS rather than wrong data, and, once the daemon is
 * back, that a region written by one thread alone reads back intact.  The
 * runner then checks dmesg.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>

#include "hmmk_t.h"
#include "kselftest_harness.h"

#define THREADS	4
#define PAGES	256

static __thread uint64_t rng;
static __thread sigjmp_buf jmp;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void on_fault(int sig)
{
	siglongjmp(jmp, 1);
}

static struct {
	int fd, nodes;
	uint64_t handle, offset;
	char *p;
	atomic_int stop;
	atomic_long ops, sigbus;
} sh;

static void one_op(void)
{
	uint64_t pg = rnd() % PAGES, n = 1 + rnd() % 64;
	struct hmmk_region_create rc;
	struct hmmk_page_info pi[64];
	struct hmmk_snapshot sn;
	char *q;

	if (pg + n > PAGES)
		n = PAGES - pg;
	switch (rnd() % 9) {
	case 0:
	case 1:
		sh.p[pg * T_PAGE + rnd() % T_PAGE] += 1;
		break;
	case 2:
		t_range(sh.fd, HMMK_IOC_EVICT, sh.handle, pg * T_PAGE,
			n * T_PAGE, 0, 0, NULL);
		break;
	case 3:
		t_range(sh.fd, HMMK_IOC_MIGRATE, sh.handle, pg * T_PAGE,
			n * T_PAGE, rnd() % sh.nodes, 0, NULL);
		break;
	case 4:
		t_range(sh.fd, HMMK_IOC_DEV_ACCESS, sh.handle, pg * T_PAGE,
			n * T_PAGE, 0, rnd() % 2, NULL);
		break;
	case 5:
		t_range(sh.fd, HMMK_IOC_SAMPLE, sh.handle, pg * T_PAGE,
			n * T_PAGE, 0, 0, NULL);
		break;
	case 6:
		memset(&sn, 0, sizeof(sn));
		sn.handle = sh.handle;
		sn.first_page = pg;
		sn.nr_pages = n;
		sn.entries = (uintptr_t)pi;
		t_ioctl(sh.fd, HMMK_IOC_SNAPSHOT, &sn);
		break;
	case 7:		/* a second mapping of part of the region */
		q = mmap(NULL, n * T_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED,
			 sh.fd, sh.offset + pg * T_PAGE);
		if (q != MAP_FAILED) {
			q[rnd() % (n * T_PAGE)] += 1;
			munmap(q, n * T_PAGE);
		}
		break;
	case 8:		/* a short-lived region */
		q = t_map(sh.fd, n * T_PAGE, HMMK_NODE_ANY, &rc);
		if (q) {
			q[0] = 1;
			t_range(sh.fd, HMMK_IOC_DEV_ACCESS, rc.handle, 0,
				T_PAGE, 0, 0, NULL);
			munmap(q, n * T_PAGE);
			t_ioctl(sh.fd, HMMK_IOC_REGION_DESTROY,
				&(struct hmmk_region_destroy){ .handle =
							       rc.handle });
		}
		break;
	}
}

static void *worker(void *arg)
{
	rng = 0x1234567ULL * (uintptr_t)arg + 99;
	while (!atomic_load(&sh.stop)) {
		if (sigsetjmp(jmp, 1)) {
			atomic_fetch_add(&sh.sigbus, 1);
			continue;
		}
		one_op();
		atomic_fetch_add(&sh.ops, 1);
	}
	return NULL;
}

static void run_for(int ms)
{
	usleep(ms * 1000);
}

TEST(threads_race_region_ops_and_daemon_death)
{
	struct hmmk_simdev_config small = { .capacity_pages = 96,
		.prefetch_pct = 51, .thrash_limit = 2, .pin_ms = 50 };
	struct hmmk_simdev_config dflt = { .capacity_pages = 4096,
		.prefetch_pct = 51, .thrash_limit = 4, .pin_ms = 200 };
	struct sigaction sa = { .sa_handler = on_fault };
	struct hmmk_region_create rc;
	pthread_t th[THREADS];
	pid_t d;
	char *p;

	sh.fd = t_open();
	if (sh.fd < 0)
		SKIP(return, "no %s", HMMK_DEVICE);
	if (access(HMMK_TESTD, X_OK))
		SKIP(return, "no %s", HMMK_TESTD);
	sh.nodes = t_nr_nodes() >= 2 ? 2 : 1;
	sigaction(SIGBUS, &sa, NULL);
	/* A small device, so eviction and thrash pins race too. */
	ASSERT_EQ(0, t_ioctl(sh.fd, HMMK_IOC_SIMDEV_CONFIG, &small));
	sh.p = t_map(sh.fd, PAGES * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, sh.p);
	sh.handle = rc.handle;
	sh.offset = rc.mmap_offset;

	d = t_daemon_start(NULL, NULL);
	ASSERT_LT(0, d);
	for (long i = 0; i < THREADS; i++)
		ASSERT_EQ(0, pthread_create(&th[i], NULL, worker, (void *)i));
	run_for(2500);
	t_daemon_stop(d);		/* dies under them */
	run_for(1500);
	d = t_daemon_start(NULL, NULL);
	ASSERT_LT(0, d);
	run_for(1500);
	atomic_store(&sh.stop, 1);
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	TH_LOG("%ld operations, %ld SIGBUS", atomic_load(&sh.ops),
	       atomic_load(&sh.sigbus));
	EXPECT_LT(100, atomic_load(&sh.ops));

	/* With a daemon again, a fresh region round-trips through NVMe. */
	p = t_map(sh.fd, 64 * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	t_fill(p, 64, 12);
	ASSERT_EQ(0, t_range(sh.fd, HMMK_IOC_EVICT, rc.handle, 0,
			     64 * T_PAGE, 0, 0, NULL));
	EXPECT_EQ(0, t_check(p, 64, 12));
	munmap(p, 64 * T_PAGE);
	t_daemon_stop(d);
	munmap(sh.p, PAGES * T_PAGE);
	EXPECT_EQ(0, t_ioctl(sh.fd, HMMK_IOC_SIMDEV_CONFIG, &dflt));
	close(sh.fd);
}

TEST_HARNESS_MAIN
