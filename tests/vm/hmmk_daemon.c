// SPDX-License-Identifier: GPL-2.0
/*
 * tests/vm/hmmk_daemon.c — kselftests of the NVMe tier through the test
 * daemon (tests/vm/hmmk_testd.c): evict then refault integrity, no daemon
 * -> SIGBUS, daemon killed mid-flight -> SIGBUS without a hang, a silent
 * daemon -> SIGBUS after fill_timeout_ms, N threads faulting one evicted
 * page -> one FILL; DAEMON_INFO names the attached daemon and the module
 * load; a region with a CPU limit evicts to the daemon on faults and stays
 * within it, and so do two regions under one space limit.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "hmmk_t.h"
#include "kselftest_harness.h"

#define TIMEOUT_PARAM	"/sys/module/hmmk/parameters/fill_timeout_ms"

static int write_param(const char *path, int v)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -errno;
	fprintf(f, "%d\n", v);
	return fclose(f) ? -errno : 0;
}

FIXTURE(daemon) {
	int fd;
	pid_t daemon;
};

FIXTURE_SETUP(daemon)
{
	self->daemon = -1;
	self->fd = t_open();
	if (self->fd < 0)
		SKIP(return, "no %s", HMMK_DEVICE);
	if (access(HMMK_TESTD, X_OK))
		SKIP(return, "no %s", HMMK_TESTD);
	t_sigbus_catch();
}

FIXTURE_TEARDOWN(daemon)
{
	t_daemon_stop(self->daemon);
	if (self->fd >= 0)
		close(self->fd);
	write_param(TIMEOUT_PARAM, 10000);
}

TEST_F(daemon, evict_then_refault_integrity)
{
	const uint64_t pages = 1024 + 5;
	struct hmmk_region_create rc;
	struct hmmk_range r;
	struct hmmk_stats s;
	char *p;

	self->daemon = t_daemon_start(NULL, NULL);
	ASSERT_LT(0, self->daemon);
	p = t_map(self->fd, pages * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	t_fill(p, pages, 77);
	ASSERT_EQ(0, t_range(self->fd, HMMK_IOC_EVICT, rc.handle, 0,
			     pages * T_PAGE, 0, 0, &r));
	EXPECT_EQ(pages, r.done);
	EXPECT_EQ(0, r.skipped);
	EXPECT_EQ(HMMK_TIER_NVME, t_info(self->fd, rc.handle, 0).tier);
	EXPECT_EQ(HMMK_TIER_NVME, t_info(self->fd, rc.handle, pages - 1).tier);
	EXPECT_EQ(0, t_check(p, pages, 77));
	EXPECT_EQ(HMMK_TIER_CPU, t_info(self->fd, rc.handle, 0).tier);
	ASSERT_EQ(0, t_stats(self->fd, rc.handle, &s));
	EXPECT_EQ(pages, s.evictions);
	EXPECT_EQ(pages, s.fills);
	/* Evict again after rewriting half: the new bytes come back. */
	t_fill(p, pages / 2, 78);
	ASSERT_EQ(0, t_range(self->fd, HMMK_IOC_EVICT, rc.handle, 0,
			     pages * T_PAGE, 0, 0, &r));
	EXPECT_EQ(pages, r.done);
	EXPECT_EQ(0, t_check(p, pages / 2, 78));
	EXPECT_EQ((char)t_pat(pages - 1, 0, 77), p[(pages - 1) * T_PAGE]);
	/* Untouched pages are not evicted. */
	munmap(p, pages * T_PAGE);
}

/* Pages of the region on the CPU now, by SNAPSHOT; -1 on failure. */
static int64_t cpu_pages(int fd, uint64_t handle, uint64_t pages)
{
	struct hmmk_page_info *pi = calloc(pages, sizeof(*pi));
	struct hmmk_snapshot sn;
	int64_t n = 0;

	if (!pi)
		return -1;
	memset(&sn, 0, sizeof(sn));
	sn.handle = handle;
	sn.nr_pages = pages;
	sn.entries = (uintptr_t)pi;
	if (t_ioctl(fd, HMMK_IOC_SNAPSHOT, &sn) || sn.filled != pages)
		n = -1;
	for (uint64_t i = 0; n >= 0 && i < pages; i++)
		n += pi[i].tier == HMMK_TIER_CPU;
	free(pi);
	return n;
}

TEST_F(daemon, cpu_limit_evicts_on_faults)
{
	const uint64_t pages = 600, limit = 128;
	struct hmmk_region_create rc;
	struct hmmk_stats s;
	char *p;

	/* the flag and a limit go together */
	memset(&rc, 0, sizeof(rc));
	rc.size = pages * T_PAGE;
	rc.preferred_node = HMMK_NODE_ANY;
	rc.flags = HMMK_REGION_F_CPU_LIMIT;
	EXPECT_EQ(-EINVAL, t_ioctl(self->fd, HMMK_IOC_REGION_CREATE, &rc));
	rc.flags = 0;
	rc.cpu_limit = limit;
	EXPECT_EQ(-EINVAL, t_ioctl(self->fd, HMMK_IOC_REGION_CREATE, &rc));

	self->daemon = t_daemon_start(NULL, NULL);
	ASSERT_LT(0, self->daemon);
	rc.flags = HMMK_REGION_F_CPU_LIMIT;
	ASSERT_EQ(0, t_ioctl(self->fd, HMMK_IOC_REGION_CREATE, &rc));
	p = mmap(NULL, pages * T_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED,
		 self->fd, rc.mmap_offset);
	ASSERT_NE(MAP_FAILED, p);
	t_fill(p, pages, 33);
	EXPECT_GE(limit, cpu_pages(self->fd, rc.handle, pages));
	EXPECT_EQ(0, t_check(p, pages, 33));
	EXPECT_GE(limit, cpu_pages(self->fd, rc.handle, pages));
	ASSERT_EQ(0, t_stats(self->fd, rc.handle, &s));
	EXPECT_LE(pages - limit, s.evictions);
	EXPECT_LE(pages - limit, s.fills);
	EXPECT_EQ(0, s.sigbus);
	TH_LOG("%llu pages, CPU limit %llu: %llu evicted, %llu filled",
	       (unsigned long long)pages, (unsigned long long)limit,
	       (unsigned long long)s.evictions, (unsigned long long)s.fills);
	/* no daemon: nothing can go, the region grows past its limit */
	t_daemon_stop(self->daemon);
	self->daemon = -1;
	munmap(p, pages * T_PAGE);
	rc.size = 2 * limit * T_PAGE;
	rc.handle = rc.mmap_offset = 0;
	ASSERT_EQ(0, t_ioctl(self->fd, HMMK_IOC_REGION_CREATE, &rc));
	p = mmap(NULL, 2 * limit * T_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED,
		 self->fd, rc.mmap_offset);
	ASSERT_NE(MAP_FAILED, p);
	t_fill(p, 2 * limit, 34);
	EXPECT_EQ(2 * limit, cpu_pages(self->fd, rc.handle, 2 * limit));
	EXPECT_EQ(0, t_check(p, 2 * limit, 34));
	munmap(p, 2 * limit * T_PAGE);
}

TEST_F(daemon, space_limit_holds_all_regions)
{
	const uint64_t pages = 300, limit = 128;
	struct hmmk_region_create rc[2];
	struct hmmk_space_limit sl;
	char *p[2];
	int i;

	memset(&sl, 0, sizeof(sl));
	sl.reserved[1] = 1;
	EXPECT_EQ(-EINVAL, t_ioctl(self->fd, HMMK_IOC_SPACE_LIMIT, &sl));
	self->daemon = t_daemon_start(NULL, NULL);
	ASSERT_LT(0, self->daemon);
	memset(&sl, 0, sizeof(sl));
	sl.cpu_limit = limit;
	ASSERT_EQ(0, t_ioctl(self->fd, HMMK_IOC_SPACE_LIMIT, &sl));
	EXPECT_EQ(0, sl.nr_cpu);
	for (i = 0; i < 2; i++) {
		p[i] = t_map(self->fd, pages * T_PAGE, HMMK_NODE_ANY, &rc[i]);
		ASSERT_NE(NULL, p[i]);
		t_fill(p[i], pages, 40 + i);
	}
	EXPECT_GE(limit, cpu_pages(self->fd, rc[0].handle, pages) +
			 cpu_pages(self->fd, rc[1].handle, pages));
	for (i = 0; i < 2; i++)
		EXPECT_EQ(0, t_check(p[i], pages, 40 + i));
	EXPECT_GE(limit, cpu_pages(self->fd, rc[0].handle, pages) +
			 cpu_pages(self->fd, rc[1].handle, pages));
	sl.cpu_limit = 0;		/* off: both may stay now */
	ASSERT_EQ(0, t_ioctl(self->fd, HMMK_IOC_SPACE_LIMIT, &sl));
	EXPECT_GE(limit, sl.nr_cpu);
	for (i = 0; i < 2; i++)
		EXPECT_EQ(0, t_check(p[i], pages, 40 + i));
	ASSERT_EQ(0, t_ioctl(self->fd, HMMK_IOC_SPACE_LIMIT, &sl));
	EXPECT_EQ(2 * pages, sl.nr_cpu);
	for (i = 0; i < 2; i++) {
		struct hmmk_region_destroy rd = { .handle = rc[i].handle };

		munmap(p[i], pages * T_PAGE);
		EXPECT_EQ(0, t_ioctl(self->fd, HMMK_IOC_REGION_DESTROY, &rd));
	}
	ASSERT_EQ(0, t_ioctl(self->fd, HMMK_IOC_SPACE_LIMIT, &sl));
	EXPECT_EQ(0, sl.nr_cpu);	/* freed pages are not counted */
}

TEST_F(daemon, evict_without_daemon_enodev)
{
	struct hmmk_region_create rc;
	char *p;

	p = t_map(self->fd, 4 * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	p[0] = 5;
	EXPECT_EQ(-ENODEV, t_range(self->fd, HMMK_IOC_EVICT, rc.handle, 0,
				   4 * T_PAGE, 0, 0, NULL));
	EXPECT_EQ(5, p[0]);
	munmap(p, 4 * T_PAGE);
}

TEST_F(daemon, second_daemon_ebusy)
{
	int fd2 = t_open();

	self->daemon = t_daemon_start(NULL, NULL);
	ASSERT_LT(0, self->daemon);
	ASSERT_LE(0, fd2);
	EXPECT_EQ(-EBUSY, t_ioctl(fd2, HMMK_IOC_DAEMON_ATTACH, NULL));
	close(fd2);
}

TEST_F(daemon, daemon_info_names_the_attached_process)
{
	struct hmmk_daemon_info di;
	uint64_t load_id;

	memset(&di, 0xff, sizeof(di));
	ASSERT_EQ(0, t_ioctl(self->fd, HMMK_IOC_DAEMON_INFO, &di));
	EXPECT_EQ(0, di.attached);
	EXPECT_EQ(0, di.pid);
	EXPECT_EQ(0, di.pending + di.inflight);
	EXPECT_EQ(0, di.reserved[0] | di.reserved[1]);
	EXPECT_NE(0, di.load_id);	/* random, fixed for this load */
	load_id = di.load_id;
	self->daemon = t_daemon_start(NULL, NULL);
	ASSERT_LT(0, self->daemon);
	ASSERT_EQ(0, t_ioctl(self->fd, HMMK_IOC_DAEMON_INFO, &di));
	EXPECT_EQ(1, di.attached);
	EXPECT_EQ(load_id, di.load_id);
	EXPECT_EQ((uint32_t)self->daemon, di.pid);
	t_daemon_stop(self->daemon);
	self->daemon = -1;
	ASSERT_EQ(0, t_ioctl(self->fd, HMMK_IOC_DAEMON_INFO, &di));
	EXPECT_EQ(0, di.attached);
	EXPECT_EQ(0, di.pid);
}

TEST_F(daemon, no_daemon_sigbus)
{
	struct hmmk_region_create rc;
	struct hmmk_stats s;
	char *p;

	self->daemon = t_daemon_start(NULL, NULL);
	ASSERT_LT(0, self->daemon);
	p = t_map(self->fd, 4 * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	t_fill(p, 4, 2);
	ASSERT_EQ(0, t_range(self->fd, HMMK_IOC_EVICT, rc.handle, 0,
			     4 * T_PAGE, 0, 0, NULL));
	t_daemon_stop(self->daemon);
	self->daemon = -1;
	EXPECT_EQ(-1, t_touch(p));
	EXPECT_EQ(-1, t_touch(p + 3 * T_PAGE));
	EXPECT_EQ(HMMK_TIER_NVME, t_info(self->fd, rc.handle, 0).tier);
	ASSERT_EQ(0, t_stats(self->fd, rc.handle, &s));
	EXPECT_EQ(2, s.sigbus);
	munmap(p, 4 * T_PAGE);
}

TEST_F(daemon, daemon_killed_midflight_sigbus)
{
	struct hmmk_region_create rc;
	pid_t killer;
	char *p;
	int st;

	self->daemon = t_daemon_start("--stall-fill", NULL);
	ASSERT_LT(0, self->daemon);
	p = t_map(self->fd, 4 * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	t_fill(p, 4, 3);
	ASSERT_EQ(0, t_range(self->fd, HMMK_IOC_EVICT, rc.handle, 0,
			     4 * T_PAGE, 0, 0, NULL));
	killer = fork();
	ASSERT_LE(0, killer);
	if (!killer) {
		/* Kill the daemon once it holds our FILL. */
		for (int i = 0; i < 500; i++) {
			if (!access("/tmp/hmmk_testd.stalled", F_OK)) {
				kill(self->daemon, SIGKILL);
				_exit(0);
			}
			usleep(10000);
		}
		_exit(1);
	}
	EXPECT_EQ(-1, t_touch(p));	/* sleeps until the daemon dies */
	ASSERT_EQ(killer, waitpid(killer, &st, 0));
	EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	t_daemon_stop(self->daemon);
	self->daemon = -1;
	EXPECT_EQ(-1, t_touch(p + T_PAGE));	/* and later faults too */
	munmap(p, 4 * T_PAGE);
}

TEST_F(daemon, silent_daemon_times_out)
{
	struct hmmk_region_create rc;
	char *p;

	ASSERT_EQ(0, write_param(TIMEOUT_PARAM, 300));
	self->daemon = t_daemon_start("--stall-fill", NULL);
	ASSERT_LT(0, self->daemon);
	p = t_map(self->fd, 2 * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	p[0] = 1;
	ASSERT_EQ(0, t_range(self->fd, HMMK_IOC_EVICT, rc.handle, 0,
			     T_PAGE, 0, 0, NULL));
	EXPECT_EQ(-1, t_touch(p));
	EXPECT_EQ(HMMK_TIER_NVME, t_info(self->fd, rc.handle, 0).tier);
	munmap(p, 2 * T_PAGE);
}

struct crowd {
	volatile char *p;
	pthread_barrier_t go;
	int got[8];
};

static void *crowd_touch(void *arg)
{
	struct crowd *c = arg;
	static atomic_int next;
	int me = atomic_fetch_add(&next, 1) % 8;

	pthread_barrier_wait(&c->go);
	c->got[me] = t_touch(c->p);
	return NULL;
}

TEST_F(daemon, concurrent_faults_one_fill)
{
	struct hmmk_region_create rc;
	struct crowd c = { 0 };
	struct hmmk_stats s;
	pthread_t th[8];
	char *p;

	self->daemon = t_daemon_start("--fill-delay-ms", "200");
	ASSERT_LT(0, self->daemon);
	p = t_map(self->fd, 4 * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	p[0] = 42;
	ASSERT_EQ(0, t_range(self->fd, HMMK_IOC_EVICT, rc.handle, 0,
			     T_PAGE, 0, 0, NULL));
	c.p = p;
	pthread_barrier_init(&c.go, NULL, 8);
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(0, pthread_create(&th[i], NULL, crowd_touch, &c));
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 8; i++)
		EXPECT_EQ(42, c.got[i]);
	ASSERT_EQ(0, t_stats(self->fd, rc.handle, &s));
	EXPECT_EQ(1, s.fills);
	EXPECT_EQ(1, s.evictions);
	munmap(p, 4 * T_PAGE);
}

struct waiter {
	volatile char *p;
	atomic_int done;
	int got;
};

static void *wait_touch(void *arg)
{
	struct waiter *w = arg;

	w->got = t_touch(w->p);
	atomic_store(&w->done, 1);
	return NULL;
}

TEST_F(daemon, fault_wait_drops_mmap_lock)
{
	struct hmmk_region_create rc, rc2;
	struct waiter w = { 0 };
	pthread_t th;
	char *p, *q;
	int i;

	self->daemon = t_daemon_start("--stall-fill", NULL);
	ASSERT_LT(0, self->daemon);
	p = t_map(self->fd, 4 * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	p[0] = 9;
	ASSERT_EQ(0, t_range(self->fd, HMMK_IOC_EVICT, rc.handle, 0,
			     T_PAGE, 0, 0, NULL));
	w.p = p;
	ASSERT_EQ(0, pthread_create(&th, NULL, wait_touch, &w));
	for (i = 0; i < 500 && access("/tmp/hmmk_testd.stalled", F_OK); i++)
		usleep(10000);
	ASSERT_GT(500, i);
	/* The fault sleeps on the daemon; mmap and munmap need mmap_lock. */
	q = t_map(self->fd, 4 * T_PAGE, HMMK_NODE_ANY, &rc2);
	ASSERT_NE(NULL, q);
	q[0] = 1;
	ASSERT_EQ(0, munmap(q, 4 * T_PAGE));
	EXPECT_EQ(0, atomic_load(&w.done));
	t_daemon_stop(self->daemon);
	self->daemon = -1;
	pthread_join(th, NULL);
	EXPECT_EQ(-1, w.got);
	munmap(p, 4 * T_PAGE);
}

TEST_HARNESS_MAIN
