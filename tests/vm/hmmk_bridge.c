// SPDX-License-Identifier: GPL-2.0
/*
 * tests/vm/hmmk_bridge.c — kselftests of hmmd's module bridge
 * (daemon/bridge.c): the real hmmd (/bin/hmmd, static) attaches to
 * /dev/hmmk and serves EVICT / FILL from a store file on tmpfs.  Evict
 * then refault is byte-exact; a restarted hmmd serves what a killed one
 * took; kill -9 of hmmd while it holds a FILL -> SIGBUS, no hang.
 */
#include <sys/stat.h>

#include "hmmk_t.h"
#include "hmmk_hmmd.h"
#include "kselftest_harness.h"

#define STORE		"/tmp/hmmk_bridge.store"

/* hmmd as the module's daemon on store STORE (see hmmk_hmmd.h). */
static pid_t hmmd_start(int delay)
{
	static const char *const args[] = {
		"--host-budget", "8M", "--module", HMMK_DEVICE,
		"--module-store", STORE, "--module-store-size", "64M",
		"--metrics", HMMD_METRICS, NULL,
	};

	return hmmd_startv(delay, args);
}

FIXTURE(bridge) {
	int fd;
	pid_t hmmd;
};

FIXTURE_SETUP(bridge)
{
	self->hmmd = -1;
	self->fd = t_open();
	if (self->fd < 0)
		SKIP(return, "no %s", HMMK_DEVICE);
	if (access(HMMD, X_OK))
		SKIP(return, "no %s", HMMD);
	unlink(STORE);
	t_sigbus_catch();
}

FIXTURE_TEARDOWN(bridge)
{
	t_daemon_stop(self->hmmd);
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F_TIMEOUT(bridge, hmmd_serves_evict_and_fill, 180)
{
	const uint64_t pages = 1024 + 7;
	struct hmmk_region_create rc;
	struct hmmk_range r;
	struct hmmk_stats s;
	struct stat st;
	int fd2 = t_open();
	double t0, t1, t2;
	char *p;

	self->hmmd = hmmd_start(0);
	ASSERT_LT(0, self->hmmd);
	/* hmmd holds the daemon channel */
	ASSERT_LE(0, fd2);
	EXPECT_EQ(-EBUSY, t_ioctl(fd2, HMMK_IOC_DAEMON_ATTACH, NULL));
	close(fd2);
	p = t_map(self->fd, pages * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	t_fill(p, pages, 41);
	t0 = hmmd_now_s();
	ASSERT_EQ(0, t_range(self->fd, HMMK_IOC_EVICT, rc.handle, 0,
			     pages * T_PAGE, 0, 0, &r));
	t1 = hmmd_now_s();
	EXPECT_EQ(pages, r.done);
	EXPECT_EQ(0, r.skipped);
	EXPECT_EQ(HMMK_TIER_NVME, t_info(self->fd, rc.handle, 0).tier);
	EXPECT_EQ(HMMK_TIER_NVME, t_info(self->fd, rc.handle, pages - 1).tier);
	ASSERT_EQ(0, stat(STORE, &st));
	EXPECT_LT(0, st.st_size);
	t2 = hmmd_now_s();
	EXPECT_EQ(0, t_check(p, pages, 41));
	t2 = hmmd_now_s() - t2;
	TH_LOG("%llu pages through hmmd (qemu TCG): EVICT %.0f pages/s, "
	       "refault %.0f pages/s", (unsigned long long)pages,
	       pages / (t1 - t0), pages / t2);
	EXPECT_EQ(HMMK_TIER_CPU, t_info(self->fd, rc.handle, pages - 1).tier);
	ASSERT_EQ(0, t_stats(self->fd, rc.handle, &s));
	EXPECT_EQ(pages, s.evictions);
	EXPECT_EQ(pages, s.fills);
	EXPECT_EQ(0, s.sigbus);
	/* hmmd counts what it served, in its metrics */
	EXPECT_EQ((long long)pages, hmmd_metric("hmmd_bridge_evictions_total"));
	EXPECT_LE((long long)pages, hmmd_metric("hmmd_bridge_fills_total"));
	EXPECT_EQ(0, hmmd_metric("hmmd_bridge_failed_total"));
	/* rewrite half, evict all again: the new bytes come back */
	t_fill(p, pages / 2, 42);
	ASSERT_EQ(0, t_range(self->fd, HMMK_IOC_EVICT, rc.handle, 0,
			     pages * T_PAGE, 0, 0, &r));
	EXPECT_EQ(pages, r.done);
	EXPECT_EQ(0, t_check(p, pages / 2, 42));
	EXPECT_EQ((char)t_pat(pages - 1, 0, 41), p[(pages - 1) * T_PAGE]);
	/* every byte of one page, not only the sampled ones */
	for (uint64_t o = 0; o < T_PAGE; o++)
		p[3 * T_PAGE + o] = (char)(o * 13 + 5);
	ASSERT_EQ(0, t_range(self->fd, HMMK_IOC_EVICT, rc.handle, 3 * T_PAGE,
			     T_PAGE, 0, 0, &r));
	EXPECT_EQ(1, r.done);
	for (uint64_t o = 0; o < T_PAGE; o++)
		if (p[3 * T_PAGE + o] != (char)(o * 13 + 5)) {
			EXPECT_EQ(o * 13 + 5, (unsigned char)p[3 * T_PAGE + o]);
			break;
		}
	EXPECT_EQ(0, hmmd_term(self->hmmd));	/* clean stop */
	self->hmmd = -1;
	munmap(p, pages * T_PAGE);
}

TEST_F_TIMEOUT(bridge, restarted_hmmd_serves_what_a_killed_one_took, 180)
{
	const uint64_t pages = 300;
	struct hmmk_region_create rc;
	struct hmmk_range r;
	char *p;

	self->hmmd = hmmd_start(0);
	ASSERT_LT(0, self->hmmd);
	p = t_map(self->fd, pages * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	t_fill(p, pages, 51);
	ASSERT_EQ(0, t_range(self->fd, HMMK_IOC_EVICT, rc.handle, 0,
			     pages * T_PAGE, 0, 0, &r));
	EXPECT_EQ(pages, r.done);
	t_daemon_stop(self->hmmd);		/* kill -9, idle */
	self->hmmd = hmmd_start(0);
	ASSERT_LT(0, self->hmmd);
	EXPECT_EQ(0, t_check(p, pages, 51));
	munmap(p, pages * T_PAGE);
}

TEST_F_TIMEOUT(bridge, kill9_hmmd_during_faults_sigbus_no_hang, 180)
{
	const uint64_t pages = 64;
	struct hmmk_region_create rc;
	struct hmmk_stats s;
	uint64_t first_bus;
	int bad;
	char *p;

	self->hmmd = hmmd_start(100);		/* every FILL held 100 ms */
	ASSERT_LT(0, self->hmmd);
	p = t_map(self->fd, pages * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	t_fill(p, pages, 61);
	ASSERT_EQ(0, t_range(self->fd, HMMK_IOC_EVICT, rc.handle, 0,
			     pages * T_PAGE, 0, 0, NULL));
	first_bus = hmmd_kill_during_faults(self->hmmd, p, pages, 61, &bad);
	self->hmmd = -1;
	EXPECT_EQ(0, bad);
	TH_LOG("hmmd killed holding a FILL: pages 0..%llu served, "
	       "SIGBUS from page %llu on", (unsigned long long)first_bus - 1,
	       (unsigned long long)first_bus);
	EXPECT_LE(2, first_bus);
	EXPECT_GT(pages, first_bus);
	ASSERT_EQ(0, t_stats(self->fd, rc.handle, &s));
	EXPECT_EQ(pages - first_bus, s.sigbus);
	EXPECT_EQ(HMMK_TIER_NVME, t_info(self->fd, rc.handle, first_bus).tier);
	/* a new hmmd on the same store serves the rest, byte-exact */
	self->hmmd = hmmd_start(0);
	ASSERT_LT(0, self->hmmd);
	EXPECT_EQ(0, t_check(p, pages, 61));
	munmap(p, pages * T_PAGE);
}

TEST_F_TIMEOUT(bridge, page_missing_from_store_sigbus_not_zeros, 180)
{
	struct hmmk_region_create rc;
	struct hmmk_range r;
	char *p;

	self->hmmd = hmmd_start(0);
	ASSERT_LT(0, self->hmmd);
	p = t_map(self->fd, 4 * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	t_fill(p, 4, 71);
	ASSERT_EQ(0, t_range(self->fd, HMMK_IOC_EVICT, rc.handle, 0,
			     4 * T_PAGE, 0, 0, &r));
	EXPECT_EQ(4, r.done);
	EXPECT_EQ(0, hmmd_term(self->hmmd));
	/* the store is lost: a new hmmd must not answer with zeros */
	ASSERT_EQ(0, unlink(STORE));
	self->hmmd = hmmd_start(0);
	ASSERT_LT(0, self->hmmd);
	EXPECT_EQ(-1, t_touch(p));
	EXPECT_EQ(-1, t_touch(p + 3 * T_PAGE));
	EXPECT_EQ(HMMK_TIER_NVME, t_info(self->fd, rc.handle, 0).tier);
	munmap(p, 4 * T_PAGE);
	/* and hmmd still serves: a new region round-trips */
	p = t_map(self->fd, 4 * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	t_fill(p, 4, 72);
	ASSERT_EQ(0, t_range(self->fd, HMMK_IOC_EVICT, rc.handle, 0,
			     4 * T_PAGE, 0, 0, &r));
	EXPECT_EQ(4, r.done);
	EXPECT_EQ(0, t_check(p, 4, 72));
	munmap(p, 4 * T_PAGE);
}

TEST_HARNESS_MAIN
