// SPDX-License-Identifier: GPL-2.0
/*
 * tests/vm/hmmk_memcg.c — kselftests of memory cgroup charging: a region's
 * pages are charged to the memcg of the process that opened /dev/hmmk, so
 * a 128 MiB region opened in a cgroup v2 with memory.max = 64M never holds
 * more than 62 MiB on the CPU (the module leaves 1/32 of the limit to the
 * cgroup's other kernel memory).  Without a daemon the fault that finds
 * the cgroup full gets SIGBUS (no OOM kill, no hang); with a daemon
 * attached it evicts pages of the space to it and goes on, and every byte
 * comes back.  Pages are uncharged when the region is freed.
 *
 * With a daemon the test is an eighth of that (a 16 MiB region under
 * 8M), as every eviction and FILL is a round trip to the daemon.
 *
 * The region's process is a forked child that moves itself into the test
 * cgroup before it opens the device; the daemon stays outside it.  The
 * child writes what it saw into a shared page; the parent asserts on it.
 */
#include <sys/stat.h>
#include <time.h>

#include "hmmk_t.h"
#include "kselftest_harness.h"

#define CG_ROOT		"/sys/fs/cgroup"
#define CG		CG_ROOT "/hmmk_memcg"
#define LIMIT		(64ULL << 20)
#define PAGES		((128ULL << 20) / T_PAGE)
/* With a daemon, an eighth of that: every page goes out and back. */
#define D_LIMIT		(8ULL << 20)
#define D_PAGES		(PAGES / 8)

struct seen {
	int ok;			/* the child got as far as the checks */
	uint64_t touched;	/* pages touched before the first SIGBUS */
	int sigbus;		/* a touch raised SIGBUS */
	uint64_t nr_cpu;	/* the space's pages on the CPU at the end */
	uint64_t current;	/* the cgroup's memory.current then */
	uint64_t bad;		/* bytes that did not come back */
	uint64_t ms;		/* the touches took */
	struct hmmk_stats st;
};

static uint64_t read_u64(const char *path)
{
	unsigned long long v = ~0ULL;
	FILE *f = fopen(path, "r");

	if (f) {
		if (fscanf(f, "%llu", &v) != 1)
			v = ~0ULL;
		fclose(f);
	}
	return v;
}

static int cg_enter(void)
{
	char pid[32];

	snprintf(pid, sizeof(pid), "%d\n", getpid());
	return t_write(CG "/cgroup.procs", pid);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000ULL + ts.tv_nsec / 1000000;
}

static uint64_t space_nr_cpu(int fd)
{
	struct hmmk_space_limit sl;

	memset(&sl, 0, sizeof(sl));
	return t_ioctl(fd, HMMK_IOC_SPACE_LIMIT, &sl) ? ~0ULL : sl.nr_cpu;
}

/* The child: in the cgroup, a region of pages; touch (or fill) it. */
static void child(struct seen *s, int with_daemon, uint64_t pages)
{
	struct hmmk_region_create rc;
	uint64_t t0;
	char *p;
	int fd;

	if (cg_enter())
		_exit(3);
	fd = t_open();
	if (fd < 0)
		_exit(4);
	p = t_map(fd, pages * T_PAGE, HMMK_NODE_ANY, &rc);
	if (!p)
		_exit(5);
	t_sigbus_catch();
	t0 = now_ms();
	if (with_daemon) {
		t_fill(p, pages, 91);
		s->touched = pages;
		s->bad = t_check(p, pages, 91);
	} else {
		for (s->touched = 0; s->touched < pages; s->touched++) {
			if (t_touch(p + s->touched * T_PAGE) < 0) {
				s->sigbus = 1;
				break;
			}
		}
		/* What is resident stays usable. */
		if (s->touched && t_touch(p) != 0)
			s->bad++;
	}
	s->ms = now_ms() - t0;
	s->nr_cpu = space_nr_cpu(fd);
	s->current = read_u64(CG "/memory.current");
	t_stats(fd, rc.handle, &s->st);
	s->ok = 1;
	_exit(0);
}

static int run_child(struct seen *s, int with_daemon, uint64_t pages)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -errno;
	if (!pid)
		child(s, with_daemon, pages);
	if (waitpid(pid, &st, 0) != pid)
		return -errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

FIXTURE(memcg) {
	struct seen *s;
	pid_t daemon;
	int made;
};

FIXTURE_SETUP(memcg)
{
	char ctl[256] = "";
	FILE *f;
	void *p;

	self->daemon = -1;
	self->made = 0;
	self->s = NULL;
	if (access(HMMK_DEVICE, F_OK))
		SKIP(return, "no %s", HMMK_DEVICE);
	f = fopen(CG_ROOT "/cgroup.controllers", "r");
	if (!f)
		SKIP(return, "no cgroup2 at %s", CG_ROOT);
	if (!fgets(ctl, sizeof(ctl), f))
		ctl[0] = 0;
	fclose(f);
	if (!strstr(ctl, "memory"))
		SKIP(return, "no memory controller in %s", CG_ROOT);
	ASSERT_EQ(0, t_write(CG_ROOT "/cgroup.subtree_control", "+memory\n"));
	ASSERT_EQ(0, mkdir(CG, 0755));
	self->made = 1;
	ASSERT_EQ(0, t_write(CG "/memory.max", "64M\n"));
	ASSERT_EQ(LIMIT, read_u64(CG "/memory.max"));
	p = mmap(NULL, sizeof(struct seen), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, p);
	self->s = p;
}

FIXTURE_TEARDOWN(memcg)
{
	t_daemon_stop(self->daemon);
	if (self->made && rmdir(CG))
		perror("# rmdir " CG);
	if (self->s)
		munmap(self->s, sizeof(*self->s));
}

TEST_F(memcg, no_daemon_fault_past_memory_max_sigbus)
{
	struct seen *s = self->s;

	ASSERT_EQ(0, run_child(s, 0, PAGES));
	ASSERT_EQ(1, s->ok);
	TH_LOG("%llu of %llu pages resident, then SIGBUS %d; nr_cpu %llu, "
	       "memory.current %llu KiB", (unsigned long long)s->touched,
	       (unsigned long long)PAGES, s->sigbus,
	       (unsigned long long)s->nr_cpu,
	       (unsigned long long)(s->current >> 10));
	EXPECT_EQ(1, s->sigbus);
	EXPECT_EQ(0, s->bad);
	EXPECT_LE(s->nr_cpu * T_PAGE, LIMIT - LIMIT / 32);	/* headroom */
	EXPECT_EQ(s->touched, s->nr_cpu);
	EXPECT_LE(LIMIT / 2, s->nr_cpu * T_PAGE);	/* most of it got in */
	EXPECT_LE(s->nr_cpu * T_PAGE, s->current);	/* and is charged */
	EXPECT_EQ(1, s->st.sigbus);
	/* The child is gone, its region freed: uncharged. */
	EXPECT_GT(8ULL << 20, read_u64(CG "/memory.current"));
}

TEST_F_TIMEOUT(memcg, daemon_evicts_at_memory_max_and_every_byte_comes_back,
	       240)
{
	struct seen *s = self->s;

	if (access(HMMK_TESTD, X_OK))
		SKIP(return, "no %s", HMMK_TESTD);
	self->daemon = t_daemon_start(NULL, NULL);
	ASSERT_LT(0, self->daemon);
	ASSERT_EQ(0, t_write(CG "/memory.max", "8M\n"));
	ASSERT_EQ(0, run_child(s, 1, D_PAGES));
	ASSERT_EQ(1, s->ok);
	TH_LOG("%llu pages written and read back in %llu ms under 8M: "
	       "%llu evictions, %llu fills, nr_cpu %llu, memory.current %llu "
	       "KiB", (unsigned long long)D_PAGES, (unsigned long long)s->ms,
	       (unsigned long long)s->st.evictions,
	       (unsigned long long)s->st.fills, (unsigned long long)s->nr_cpu,
	       (unsigned long long)(s->current >> 10));
	EXPECT_EQ(0, s->bad);
	EXPECT_EQ(0, s->st.sigbus);
	EXPECT_LE(s->nr_cpu * T_PAGE, D_LIMIT - D_LIMIT / 32);
	EXPECT_LE(D_PAGES / 2, s->st.evictions);
	EXPECT_LE(D_PAGES / 2, s->st.fills);
	EXPECT_GT(8ULL << 20, read_u64(CG "/memory.current"));
}

TEST_HARNESS_MAIN
