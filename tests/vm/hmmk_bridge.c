// SPDX-License-Identifier: GPL-2.0
/*
 * tests/vm/hmmk_bridge.c — kselftests of hmmd's module bridge
 * (daemon/bridge.c): the real hmmd (/bin/hmmd, static) attaches to
 * /dev/hmmk and serves EVICT / FILL from a store file on tmpfs.  Evict
 * then refault is byte-exact; a restarted hmmd serves what a killed one
 * took; kill -9 of hmmd while it holds a FILL -> SIGBUS, no hang; a
 * store never serves a page of an earlier module load.
 */
#include <sys/stat.h>

#include "hmmk_t.h"
#include "hmmk_hmmd.h"
#include "kselftest_harness.h"

#define STORE		"/tmp/hmmk_bridge.store"
#define STORE2		"/tmp/hmmk_bridge2.store"
#define HMMK_KO		"/lib/hmmk.ko"	/* tests/vm/run loads it */

/* hmmd as the module's daemon on store path (see hmmk_hmmd.h). */
static pid_t hmmd_start_on(const char *path, int delay)
{
	const char *const args[] = {
		"--host-budget", "8M", "--module", HMMK_DEVICE,
		"--module-store", path, "--module-store-size", "64M",
		"--metrics", HMMD_METRICS, NULL,
	};

	return hmmd_startv(delay, args);
}

static pid_t hmmd_start(int delay)
{
	return hmmd_start_on(STORE, delay);
}

/*
 * rmmod + insmod HMMK_KO (nothing may hold /dev/hmmk), and wait for the
 * device node: 0, or -errno.
 */
static int hmmk_reload(void)
{
	int fd, i, ret = -EBUSY;

	for (i = 0; i < 50 && ret; i++) {	/* a release may still run */
		ret = syscall(SYS_delete_module, "hmmk", O_NONBLOCK);
		ret = ret ? -errno : 0;
		if (ret)
			usleep(100000);
	}
	if (ret)
		return ret;
	fd = open(HMMK_KO, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = syscall(SYS_finit_module, fd, "", 0) ? -errno : 0;
	close(fd);
	for (i = 0; !ret && i < 50 && access(HMMK_DEVICE, F_OK); i++)
		usleep(100000);
	return ret ? ret : access(HMMK_DEVICE, F_OK) ? -ENODEV : 0;
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
	unlink(STORE2);
	t_sigbus_catch();
}

FIXTURE_TEARDOWN(bridge)
{
	t_daemon_stop(self->hmmd);
	if (self->fd >= 0)
		close(self->fd);
	unlink(STORE);
	unlink(STORE2);
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

/*
 * A region of pages on fd, page pg holding t_pat(pg, 0, seed), all of
 * them evicted to the daemon: its mapping, or NULL.
 */
static char *evicted_region(int fd, uint64_t pages, uint32_t seed,
			    struct hmmk_region_create *rc)
{
	struct hmmk_range r;
	char *p = t_map(fd, pages * T_PAGE, HMMK_NODE_ANY, rc);

	if (!p)
		return NULL;
	t_fill(p, pages, seed);
	if (t_range(fd, HMMK_IOC_EVICT, rc->handle, 0, pages * T_PAGE, 0, 0,
		    &r) || r.done != pages) {
		munmap(p, pages * T_PAGE);
		return NULL;
	}
	return p;
}

/*
 * Region handles start again after a module reload.  Region A evicts to
 * hmmd on STORE, hmmd stops, A is freed (its FORGET is lost: no daemon),
 * the module reloads; region B of a new space gets A's handle, evicts to
 * an hmmd on STORE2, and then an hmmd on STORE serves B's faults: B must
 * get SIGBUS (STORE never had its pages), never A's bytes.
 */
TEST_F_TIMEOUT(bridge, store_never_serves_an_earlier_module_load, 240)
{
	const uint64_t pages = 8;
	struct hmmk_region_create ra, rb;
	struct hmmk_daemon_info di;
	uint64_t load_id;
	char *p;

	if (access(HMMK_KO, R_OK))
		SKIP(return, "no %s to reload", HMMK_KO);
	close(self->fd);
	self->fd = -1;
	ASSERT_EQ(0, hmmk_reload());	/* handles from the start */
	self->fd = t_open();
	ASSERT_LE(0, self->fd);
	memset(&di, 0, sizeof(di));
	ASSERT_EQ(0, t_ioctl(self->fd, HMMK_IOC_DAEMON_INFO, &di));
	load_id = di.load_id;
	self->hmmd = hmmd_start(0);
	ASSERT_LT(0, self->hmmd);
	p = evicted_region(self->fd, pages, 81, &ra);
	ASSERT_NE(NULL, p);
	EXPECT_EQ(0, hmmd_term(self->hmmd));
	self->hmmd = -1;
	munmap(p, pages * T_PAGE);
	close(self->fd);		/* A is freed, nobody hears of it */
	self->fd = -1;
	ASSERT_EQ(0, hmmk_reload());
	self->fd = t_open();
	ASSERT_LE(0, self->fd);
	ASSERT_EQ(0, t_ioctl(self->fd, HMMK_IOC_DAEMON_INFO, &di));
	EXPECT_NE(load_id, di.load_id);		/* what names a load */
	self->hmmd = hmmd_start_on(STORE2, 0);
	ASSERT_LT(0, self->hmmd);
	p = evicted_region(self->fd, pages, 82, &rb);
	ASSERT_NE(NULL, p);
	ASSERT_EQ(ra.handle, rb.handle);	/* the same key in a store */
	EXPECT_EQ(0, hmmd_term(self->hmmd));
	self->hmmd = hmmd_start(0);		/* STORE: A's pages, not B's */
	ASSERT_LT(0, self->hmmd);
	for (uint64_t pg = 0; pg < pages; pg++) {
		int v = t_touch(p + pg * T_PAGE);

		EXPECT_NE(t_pat(pg, 0, 81), v);	/* A's bytes: the hole */
		EXPECT_EQ(-1, v);		/* SIGBUS */
	}
	EXPECT_EQ(HMMK_TIER_NVME, t_info(self->fd, rb.handle, 0).tier);
	munmap(p, pages * T_PAGE);
	/* and that hmmd serves a new region on STORE */
	p = evicted_region(self->fd, pages, 83, &rb);
	ASSERT_NE(NULL, p);
	EXPECT_EQ(0, t_check(p, pages, 83));
	munmap(p, pages * T_PAGE);
}

TEST_HARNESS_MAIN
