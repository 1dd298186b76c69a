// SPDX-License-Identifier: GPL-2.0
/*
 * tests/vm/hmmk_region.c — libhmm's transparent regions in shared mode,
 * in the VM with hmmk.ko loaded and the real hmmd (/bin/hmmd, static) as
 * its daemon: hmm_region_new makes a module region (seen in the module's
 * debugfs summary), COLD advice is the module's EVICT, every evicted page
 * comes back byte-exact through a FILL that hmmd served (the module's
 * counters say so), free destroys it and hmmd drops its pages from the
 * module store (FORGET) while keeping a live region's; two regions of 2x
 * config.host_budget each stay within the budget together (the module's
 * space limit) and read back exact; kill -9 of hmmd while the client
 * faults -> SIGBUS, no hang; hmmd not attached to the module -> the
 * userfaultfd fallback, byte-exact over 4x the host budget.
 *
 * Linked static with libhmm (tests/vm/run).
 */
#include <stdio.h>
#include <sys/stat.h>

#include "hmm.h"
#include "pool.h"
#include "store.h"
#include "hmmk_t.h"
#include "hmmk_hmmd.h"
#include "kselftest_harness.h"

#define MSTORE		"/tmp/hmmk_region.mstore"
#define ESTORE		"/tmp/hmmk_region.estore"
#define SUMMARY		"/sys/kernel/debug/hmmk/summary"

/* One region's line of the module's debugfs summary. */
struct sum {
	unsigned long long handle, pages, faults, zero, fills, evict, sigbus;
	long long cpu;			/* pages on the CPU now */
	unsigned long long limit;	/* its CPU limit; 0: none */
};

/*
 * The counters of the one region of `pages` pages in the module: 0, or
 * -ENOENT (none), -EEXIST (more than one), -errno (no summary).
 */
static int summary_find(uint64_t pages, struct sum *out)
{
	FILE *f = fopen(SUMMARY, "r");
	char line[512];
	int found = 0;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		struct sum s;
		long long skip[5];
		int node;

		if (sscanf(line, " region %llu pages %llu node %d faults %llu "
			   "zero %llu fills %llu evict %llu migr %lld dev_in "
			   "%lld dev_out %lld dev_evict %lld prefetch %lld "
			   "sigbus %llu cpu %lld limit %llu", &s.handle,
			   &s.pages, &node, &s.faults, &s.zero, &s.fills,
			   &s.evict, &skip[0], &skip[1], &skip[2], &skip[3],
			   &skip[4], &s.sigbus, &s.cpu, &s.limit) != 15 ||
		    s.pages != pages)
			continue;
		*out = s;
		found++;
	}
	fclose(f);
	return found == 1 ? 0 : found ? -EEXIST : -ENOENT;
}

struct count {
	uint64_t region, n;
};

static int count_one(void *arg, uint64_t key, uint32_t len)
{
	struct count *c = arg;

	c->n += key >> 32 == c->region;
	return 0;
}

/* Extents of region in the module store hmmd left (it is stopped). */
static int64_t store_pages_of(uint64_t region)
{
	struct hmm_store_config sc;
	struct hmm_store *st;
	struct count c = { region, 0 };

	memset(&sc, 0, sizeof(sc));
	sc.path = MSTORE;
	sc.numa_node = -1;
	sc.pool_bytes = 1 << 20;
	sc.pool_flags = HMM_POOL_NOHUGE;
	if (hmm_store_open(&sc, &st))
		return -1;
	hmm_store_extent_each(st, count_one, &c);
	hmm_store_close(st);
	return c.n;
}

/* Wait until the module has no request for its daemon left; 0 or -1. */
static int daemon_idle(void)
{
	struct hmmk_daemon_info di;
	int fd = t_open(), i, ret = -1;

	for (i = 0; fd >= 0 && i < 1000; i++, usleep(10000)) {
		memset(&di, 0, sizeof(di));
		if (t_ioctl(fd, HMMK_IOC_DAEMON_INFO, &di))
			break;
		if (!di.pending && !di.inflight) {
			ret = 0;
			break;
		}
	}
	if (fd >= 0)
		close(fd);
	return ret;
}

/* hmmd with the module bridge (module 1) or without it (module 0). */
static pid_t hmmd_start(int delay, int module)
{
	static const char *const with[] = {
		"--host-budget", "8M", "--module", HMMK_DEVICE,
		"--module-store", MSTORE, "--module-store-size", "64M", NULL,
	};
	static const char *const without[] = {
		"--host-budget", "8M", "--chunk", "64K", "--store", ESTORE,
		"--store-size", "64M", "--module", "none", NULL,
	};

	return hmmd_startv(delay, module ? with : without);
}

/* A shared-mode context on hmmd: 0 or hmm_open's error. */
static int client_open(struct hmm **h, uint64_t host_budget)
{
	struct hmm_config cfg;

	hmm_config_default(&cfg);
	cfg.daemon = "unix:" HMMD_SOCK;
	cfg.host_budget = host_budget;
	return hmm_open(&cfg, h);
}

FIXTURE(region) {
	pid_t hmmd;
	struct hmm *h;
};

FIXTURE_SETUP(region)
{
	self->hmmd = -1;
	self->h = NULL;
	if (access(HMMK_DEVICE, F_OK))
		SKIP(return, "no %s", HMMK_DEVICE);
	if (access(HMMD, X_OK))
		SKIP(return, "no %s", HMMD);
	if (access(SUMMARY, R_OK))
		SKIP(return, "no %s (debugfs)", SUMMARY);
	unlink(MSTORE);
	unlink(ESTORE);
	t_sigbus_catch();
}

FIXTURE_TEARDOWN(region)
{
	hmm_close(self->h);
	t_daemon_stop(self->hmmd);
}

TEST_F_TIMEOUT(region, shared_mode_region_is_served_by_hmmd, 240)
{
	const uint64_t pages = 1024, half = pages / 2, kept = 16;
	uint64_t handle, kept_handle;
	struct sum s;
	void *vp, *kp;
	char *p;

	self->hmmd = hmmd_start(0, 1);
	ASSERT_LT(0, self->hmmd);
	ASSERT_EQ(0, client_open(&self->h, 8 << 20));
	ASSERT_EQ(0, hmm_region_new(self->h, pages * T_PAGE, &vp));
	p = vp;
	/* a module region, not userfaultfd in this process */
	ASSERT_EQ(0, summary_find(pages, &s));
	EXPECT_EQ(0, s.faults);
	handle = s.handle;
	t_fill(p, pages, 81);
	ASSERT_EQ(0, summary_find(pages, &s));
	EXPECT_EQ(pages, s.zero);
	/* COLD: every page to hmmd; reading faults each back from it */
	ASSERT_EQ(0, hmm_region_advise(self->h, p, pages * T_PAGE,
				       HMM_ADVISE_COLD));
	ASSERT_EQ(0, summary_find(pages, &s));
	EXPECT_EQ(pages, s.evict);
	EXPECT_EQ(0, s.fills);
	EXPECT_EQ(0, t_check(p, pages, 81));
	ASSERT_EQ(0, summary_find(pages, &s));
	EXPECT_EQ(pages, s.fills);
	EXPECT_EQ(0, s.sigbus);
	/* rewrite half, COLD it, WILLNEED brings it in before any access */
	t_fill(p, half, 82);
	ASSERT_EQ(0, hmm_region_advise(self->h, p, half * T_PAGE,
				       HMM_ADVISE_COLD));
	ASSERT_EQ(0, hmm_region_advise(self->h, p, half * T_PAGE,
				       HMM_ADVISE_WILLNEED));
	ASSERT_EQ(0, summary_find(pages, &s));
	EXPECT_EQ(pages + half, s.evict);
	EXPECT_EQ(pages + half, s.fills);
	EXPECT_EQ(0, t_check(p, half, 82));
	EXPECT_EQ((char)t_pat(pages - 1, 0, 81), p[(pages - 1) * T_PAGE]);
	ASSERT_EQ(0, summary_find(pages, &s));
	EXPECT_EQ(pages + half, s.fills);	/* no refault */
	TH_LOG("module region of %llu pages: %llu faults, %llu evicted to "
	       "and %llu filled from hmmd", (unsigned long long)pages,
	       s.faults, s.evict, s.fills);
	/* bad advice is refused by libhmm, not the module */
	EXPECT_EQ(-EINVAL, hmm_region_advise(self->h, p, pages * T_PAGE + 1,
					     HMM_ADVISE_COLD));
	/* a second region, all in hmmd, stays while the first goes */
	ASSERT_EQ(0, hmm_region_new(self->h, kept * T_PAGE, &kp));
	ASSERT_EQ(0, summary_find(kept, &s));
	kept_handle = s.handle;
	t_fill(kp, kept, 83);
	ASSERT_EQ(0, hmm_region_advise(self->h, kp, kept * T_PAGE,
				       HMM_ADVISE_COLD));
	EXPECT_EQ(0, hmm_region_free(self->h, p));
	EXPECT_EQ(-ENOENT, summary_find(pages, &s));	/* destroyed */
	ASSERT_EQ(0, daemon_idle());		/* hmmd served the FORGET */
	EXPECT_EQ(0, hmmd_term(self->hmmd));	/* flushed */
	self->hmmd = -1;
	EXPECT_EQ(0, store_pages_of(handle));
	EXPECT_EQ(kept, store_pages_of(kept_handle));
	hmm_close(self->h);
	self->h = NULL;
}

TEST_F_TIMEOUT(region, four_times_the_budget_within_it, 240)
{
	const uint64_t budget = 1 << 20, limit = budget / T_PAGE;
	/* two regions of about twice the budget (sizes tell them apart) */
	const uint64_t pages[2] = { 2 * limit, 2 * limit + 16 };
	struct hmm_stats st;
	struct sum s[2];
	void *vp[2];
	int i;

	self->hmmd = hmmd_start(0, 1);
	ASSERT_LT(0, self->hmmd);
	ASSERT_EQ(0, client_open(&self->h, budget));
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, hmm_region_new(self->h, pages[i] * T_PAGE,
					    &vp[i]));
		t_fill(vp[i], pages[i], 85 + i);
	}
	for (i = 0; i < 2; i++)
		EXPECT_EQ(0, t_check(vp[i], pages[i], 85 + i));
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, summary_find(pages[i], &s[i]));
		EXPECT_EQ(0, s[i].sigbus);
		EXPECT_EQ(0, s[i].limit);	/* the space's, not its own */
	}
	/* together within the budget, so most went through hmmd */
	EXPECT_GE((long long)limit, s[0].cpu + s[1].cpu);
	EXPECT_LE(pages[0] + pages[1] - limit, s[0].evict + s[1].evict);
	EXPECT_LE(pages[0] + pages[1] - limit, s[0].fills + s[1].fills);
	ASSERT_EQ(0, hmm_stats(self->h, &st));
	TH_LOG("2 regions, %llu + %llu pages, budget %llu pages: %lld + %lld "
	       "on the CPU, %llu evicted to and %llu filled from hmmd; "
	       "hmm_stats: %llu region faults, %llu evictions",
	       (unsigned long long)pages[0], (unsigned long long)pages[1],
	       (unsigned long long)limit, s[0].cpu, s[1].cpu,
	       s[0].evict + s[1].evict, s[0].fills + s[1].fills,
	       (unsigned long long)st.region_faults,
	       (unsigned long long)st.region_evictions);
	for (i = 0; i < 2; i++)
		EXPECT_EQ(0, hmm_region_free(self->h, vp[i]));
	hmm_close(self->h);
	self->h = NULL;
	EXPECT_EQ(0, hmmd_term(self->hmmd));
	self->hmmd = -1;
}

TEST_F_TIMEOUT(region, kill9_hmmd_during_faults_sigbus_no_hang, 240)
{
	const uint64_t pages = 64;
	uint64_t first_bus;
	struct sum s;
	void *vp;
	char *p;
	int bad;

	self->hmmd = hmmd_start(100, 1);	/* every FILL held 100 ms */
	ASSERT_LT(0, self->hmmd);
	ASSERT_EQ(0, client_open(&self->h, 8 << 20));
	ASSERT_EQ(0, hmm_region_new(self->h, pages * T_PAGE, &vp));
	p = vp;
	ASSERT_EQ(0, summary_find(pages, &s));
	t_fill(p, pages, 91);
	ASSERT_EQ(0, hmm_region_advise(self->h, p, pages * T_PAGE,
				       HMM_ADVISE_COLD));
	first_bus = hmmd_kill_during_faults(self->hmmd, p, pages, 91, &bad);
	self->hmmd = -1;
	EXPECT_EQ(0, bad);
	TH_LOG("hmmd killed holding a FILL: pages 0..%llu served, SIGBUS "
	       "from page %llu on", (unsigned long long)first_bus - 1,
	       (unsigned long long)first_bus);
	EXPECT_LE(2, first_bus);
	EXPECT_GT(pages, first_bus);
	ASSERT_EQ(0, summary_find(pages, &s));
	EXPECT_EQ(pages - first_bus, s.sigbus);
	/* the client's calls return: advice fails, free and close work */
	EXPECT_GT(0, hmm_region_advise(self->h, p, T_PAGE, HMM_ADVISE_COLD));
	EXPECT_EQ(0, hmm_region_free(self->h, p));
	EXPECT_EQ(-ENOENT, summary_find(pages, &s));
	hmm_close(self->h);
	self->h = NULL;
}

TEST_F_TIMEOUT(region, no_module_daemon_userfaultfd_fallback, 240)
{
	const uint64_t budget = 1 << 20, bytes = 4 * budget;
	uint64_t *p, bad = 0;
	struct hmm_stats st;
	struct sum s;
	void *vp;
	int r;

	self->hmmd = hmmd_start(0, 0);		/* not the module's daemon */
	ASSERT_LT(0, self->hmmd);
	ASSERT_EQ(0, client_open(&self->h, budget));
	r = hmm_region_new(self->h, bytes, &vp);
	if (r == -ENOSYS || r == -EPERM)
		SKIP(return, "userfaultfd: %s", hmm_last_error());
	ASSERT_EQ(0, r) TH_LOG("%s", hmm_last_error());
	EXPECT_EQ(-ENOENT, summary_find(bytes / T_PAGE, &s));
	p = vp;
	for (uint64_t i = 0; i < bytes / 8; i++)
		p[i] = i * 0x9e3779b97f4a7c15ull ^ 3;
	for (uint64_t i = 0; i < bytes / 8; i++)
		bad += p[i] != (i * 0x9e3779b97f4a7c15ull ^ 3);
	EXPECT_EQ(0, bad);
	ASSERT_EQ(0, hmm_stats(self->h, &st));
	TH_LOG("userfaultfd region, 4x the budget: %llu faults, %llu "
	       "evictions", (unsigned long long)st.region_faults,
	       (unsigned long long)st.region_evictions);
	EXPECT_EQ(0, hmm_region_free(self->h, p));
	hmm_close(self->h);
	self->h = NULL;
	EXPECT_EQ(0, hmmd_term(self->hmmd));
	self->hmmd = -1;
}

TEST_HARNESS_MAIN
