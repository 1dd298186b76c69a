// SPDX-License-Identifier: GPL-2.0
/*
 * tests/vm/hmmk_fuzz.c — a bounded random-ioctl fuzz of /dev/hmmk: random
 * commands (known ones, and random numbers with and without the magic),
 * random argument pointers (NULL, kernel addresses, the edge of a guard
 * page, buffers of random words or of plausible structs), random mmap /
 * munmap / touch.  The test passes when every call returns (the runner
 * then checks dmesg) and a region written before the fuzz reads back.
 * HMMK_FUZZ_SEED and HMMK_FUZZ_ITERS override the fixed seed and count.
 */
#include <setjmp.h>

#include "hmmk_t.h"
#include "kselftest_harness.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Mostly small page-aligned values, sometimes garbage. */
static uint64_t rnd_val(void)
{
	switch (rnd() % 6) {
	case 0:
		return rnd();
	case 1:
		return rnd() % 4096;
	case 2:
		return -(rnd() % 8) * T_PAGE;
	default:
		return (rnd() % 64) * T_PAGE;
	}
}

static const unsigned long cmds[] = {
	HMMK_IOC_GET_FEATURES, HMMK_IOC_REGION_CREATE, HMMK_IOC_REGION_DESTROY,
	HMMK_IOC_MIGRATE, HMMK_IOC_SNAPSHOT, HMMK_IOC_STATS, HMMK_IOC_EVICT,
	HMMK_IOC_DEV_ACCESS, HMMK_IOC_SAMPLE, HMMK_IOC_SIMDEV_CONFIG,
	HMMK_IOC_DAEMON_FETCH, HMMK_IOC_DAEMON_COMPLETE,
};

static sigjmp_buf jmp;

static void on_fault(int sig)
{
	siglongjmp(jmp, 1);
}

struct map {
	char *p;
	size_t len;
};

/* Fuzz state; static so that siglongjmp cannot clobber it. */
static struct {
	uint64_t handles[16], offs[16];
	uint64_t words[32];
	struct map maps[8];
	char *guard;
	long ok, faults;
} st;

/* A random ioctl's command. */
static unsigned long rnd_cmd(void)
{
	if (rnd() % 5)
		return cmds[rnd() % (sizeof(cmds) / sizeof(cmds[0]))];
	if (rnd() % 2)
		return _IOC(rnd() % 4, HMMK_IOC_MAGIC, rnd() % 0x20,
			    rnd() % 256);
	return (unsigned long)rnd();
}

/* Random words, or mostly a plausible range on a live region. */
static void *rnd_arg(int k, unsigned long cmd)
{
	uint64_t *w = st.words;

	for (int i = 0; i < 32; i++)
		w[i] = rnd_val();
	if (rnd() % 4) {
		w[0] = st.handles[k];
		w[1] = (rnd() % 64) * T_PAGE;
		w[2] = (1 + rnd() % 64) * T_PAGE;
		w[3] = rnd() % 3;	/* node, flags */
		for (int i = 6; i < 32; i++)
			w[i] = 0;
	}
	if (rnd() % 3 == 0)
		w[3] = rnd() % 4 ? 0 : rnd();
	if (cmd == HMMK_IOC_SIMDEV_CONFIG)
		w[0] %= 8192;	/* the VM has 1 GiB */

	switch (rnd() % 8) {
	case 0:
		return NULL;
	case 1:
		return (void *)0xffffffff81000000UL;
	case 2:
		return st.guard + T_PAGE - 8 * (rnd() % 8);
	}
	return w;
}

static void fuzz_map(int fd, int k)
{
	struct map *m = &st.maps[rnd() % 8];

	if (m->p) {
		munmap(m->p, m->len);
		m->p = NULL;
		return;
	}
	m->len = (1 + rnd() % 16) * T_PAGE;
	m->p = mmap(NULL, m->len, PROT_READ | PROT_WRITE,
		    rnd() % 8 ? MAP_SHARED : MAP_PRIVATE, fd,
		    rnd() % 4 ? st.offs[k] + rnd_val() % 8 * T_PAGE :
		    rnd_val());
	if (m->p == MAP_FAILED)
		m->p = NULL;
}

static void fuzz_one(int fd)
{
	struct hmmk_region_create rc;
	unsigned long cmd;
	int k = rnd() % 16;
	struct map *m;

	if (sigsetjmp(jmp, 1)) {
		st.faults++;
		return;
	}
	switch (rnd() % 10) {
	case 0:		/* a plausible region */
		if (!t_region(fd, (1 + rnd() % 600) * T_PAGE,
			      rnd() % 3 ? HMMK_NODE_ANY : (uint32_t)(rnd() % 3),
			      &rc)) {
			st.handles[k] = rc.handle;
			st.offs[k] = rc.mmap_offset;
		}
		return;
	case 1:
		fuzz_map(fd, k);
		return;
	case 2:		/* touch a mapping */
		m = &st.maps[rnd() % 8];
		if (m->p)
			m->p[rnd() % m->len] += 1;
		return;
	}
	cmd = rnd_cmd();
	if (cmd == HMMK_IOC_DAEMON_ATTACH)
		return;		/* would make this space the daemon */
	if (!ioctl(fd, cmd, rnd_arg(k, cmd)))
		st.ok++;
}

TEST(random_ioctls_leave_kernel_clean)
{
	struct hmmk_simdev_config c = { .capacity_pages = 4096,
		.prefetch_pct = 51, .thrash_limit = 4, .pin_ms = 200 };
	struct sigaction sa = { .sa_handler = on_fault };
	struct hmmk_region_create rc;
	long iters = 4000;
	int fd, kfd;
	char *keep;

	if (getenv("HMMK_FUZZ_SEED"))
		rng = strtoull(getenv("HMMK_FUZZ_SEED"), NULL, 0) | 1;
	if (getenv("HMMK_FUZZ_ITERS"))
		iters = atol(getenv("HMMK_FUZZ_ITERS"));
	TH_LOG("seed 0x%llx, %ld iterations", (unsigned long long)rng, iters);
	sigaction(SIGBUS, &sa, NULL);
	sigaction(SIGSEGV, &sa, NULL);

	fd = t_open();
	if (fd < 0)
		SKIP(return, "no %s", HMMK_DEVICE);
	kfd = t_open();
	ASSERT_LE(0, kfd);
	keep = t_map(kfd, 64 * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, keep);
	t_fill(keep, 64, 99);

	/* A page followed by an unmapped one: arguments that straddle it. */
	st.guard = mmap(NULL, 2 * T_PAGE, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, st.guard);
	munmap(st.guard + T_PAGE, T_PAGE);

	for (long it = 0; it < iters; it++)
		fuzz_one(fd);
	TH_LOG("%ld calls succeeded, %ld faults caught", st.ok, st.faults);
	for (int i = 0; i < 8; i++)
		if (st.maps[i].p)
			munmap(st.maps[i].p, st.maps[i].len);
	close(fd);
	EXPECT_EQ(0, t_ioctl(kfd, HMMK_IOC_SIMDEV_CONFIG, &c));
	EXPECT_EQ(0, t_check(keep, 64, 99));
	EXPECT_LT(0, st.ok);
	munmap(keep, 64 * T_PAGE);
	close(kfd);
}

TEST_HARNESS_MAIN
