// SPDX-License-Identifier: GPL-2.0
/*
 * tests/vm/hmmk_basic.c — kselftests of /dev/hmmk's core: spaces, regions,
 * mmap rules, first touch, round trip, fork, bad input, unload refusal.
 * Runs inside the VM (tests/vm/run) with hmmk.ko loaded.
 */
#include <pthread.h>
#include <setjmp.h>

#include "hmmk_t.h"
#include "kselftest_harness.h"

FIXTURE(hmmk) {
	int fd;
};

FIXTURE_SETUP(hmmk)
{
	self->fd = t_open();
	if (self->fd < 0)
		SKIP(return, "no %s: %s", HMMK_DEVICE, strerror(errno));
}

FIXTURE_TEARDOWN(hmmk)
{
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(hmmk, open_close)
{
	struct hmmk_features f;
	int fd2;

	memset(&f, 0xaa, sizeof(f));
	ASSERT_EQ(0, t_ioctl(self->fd, HMMK_IOC_GET_FEATURES, &f));
	EXPECT_EQ(HMMK_F_ALL, f.features);
	EXPECT_EQ(HMMK_API_VERSION, f.api_version);
	EXPECT_EQ(T_PAGE, f.page_size);
	EXPECT_EQ(T_BLOCK, f.block_size);
	EXPECT_LE(1, f.nr_nodes);
	EXPECT_EQ(0, f.reserved[0] | f.reserved[1] | f.reserved[2] |
		     f.reserved[3]);
	fd2 = t_open();
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, close(fd2));
}

TEST_F(hmmk, mmap_rejects_private)
{
	struct hmmk_region_create rc;
	void *p;

	ASSERT_EQ(0, t_region(self->fd, 4 * T_PAGE, HMMK_NODE_ANY, &rc));
	p = mmap(NULL, 4 * T_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE,
		 self->fd, rc.mmap_offset);
	ASSERT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
}

TEST_F(hmmk, mmap_rejects_readonly)
{
	struct hmmk_region_create rc;
	void *p;

	ASSERT_EQ(0, t_region(self->fd, 4 * T_PAGE, HMMK_NODE_ANY, &rc));
	p = mmap(NULL, 4 * T_PAGE, PROT_READ, MAP_SHARED, self->fd,
		 rc.mmap_offset);
	ASSERT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EACCES, errno);
	/* Past the region's end, and at an offset no region has. */
	p = mmap(NULL, 8 * T_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED,
		 self->fd, rc.mmap_offset);
	ASSERT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
	p = mmap(NULL, T_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd,
		 rc.mmap_offset + (1UL << 30));
	ASSERT_EQ(MAP_FAILED, p);
	EXPECT_EQ(EINVAL, errno);
}

static void first_touch_on(struct __test_metadata *_metadata, int fd,
			   uint32_t node)
{
	struct hmmk_region_create rc;
	struct hmmk_page_info pi;
	struct hmmk_stats s;
	uint64_t sum = 0;
	char *p;

	p = t_map(fd, 16 * T_PAGE, node, &rc);
	ASSERT_NE(NULL, p);
	pi = t_info(fd, rc.handle, 3);
	EXPECT_EQ(HMMK_TIER_NONE, pi.tier);
	for (uint64_t i = 0; i < 16 * T_PAGE; i++)
		sum += (unsigned char)p[i];
	EXPECT_EQ(0, sum);
	for (int pg = 0; pg < 16; pg++)
		EXPECT_EQ((int)node, t_node_of(p + pg * T_PAGE));
	pi = t_info(fd, rc.handle, 3);
	EXPECT_EQ(HMMK_TIER_CPU, pi.tier);
	EXPECT_EQ(node, pi.node);
	EXPECT_TRUE(pi.state & HMMK_PAGE_MAPPED);
	ASSERT_EQ(0, t_stats(fd, rc.handle, &s));
	EXPECT_EQ(16, s.zero_fills);
	EXPECT_LE(16, s.faults);
	munmap(p, 16 * T_PAGE);
}

TEST_F(hmmk, first_touch_zero_on_preferred_node)
{
	int nodes = t_nr_nodes();

	first_touch_on(_metadata, self->fd, 0);
	if (nodes >= 2)
		first_touch_on(_metadata, self->fd, 1);
	else
		TH_LOG("one node: node 1 not checked");
}

TEST_F(hmmk, write_read_round_trip)
{
	const uint64_t pages = 2048 + 3;	/* 4 blocks and a short one */
	struct hmmk_region_create rc;
	char *p, *q;

	p = t_map(self->fd, pages * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	t_fill(p, pages, 7);
	ASSERT_EQ(0, munmap(p, pages * T_PAGE));
	p = mmap(NULL, pages * T_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED,
		 self->fd, rc.mmap_offset);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(0, t_check(p, pages, 7));
	/* A second mapping of one page sees the same bytes. */
	q = mmap(NULL, T_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd,
		 rc.mmap_offset + 5 * T_PAGE);
	ASSERT_NE(MAP_FAILED, q);
	q[100] = 'x';
	EXPECT_EQ('x', p[5 * T_PAGE + 100]);
	munmap(q, T_PAGE);
	munmap(p, pages * T_PAGE);
}

TEST_F(hmmk, partial_munmap_keeps_rest)
{
	struct hmmk_region_create rc;
	char *p;

	p = t_map(self->fd, 4 * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	t_fill(p, 4, 3);
	ASSERT_EQ(0, munmap(p + T_PAGE, T_PAGE));
	for (uint64_t pg = 0; pg < 4; pg++) {
		if (pg == 1)
			continue;
		for (uint64_t o = 0; o < T_PAGE; o += 512)
			EXPECT_EQ((char)t_pat(pg, o, 3), p[pg * T_PAGE + o]);
	}
	munmap(p, T_PAGE);
	munmap(p + 2 * T_PAGE, 2 * T_PAGE);
}

/* The VmFlags line of /proc/self/smaps for the mapping at p, or "". */
static void vm_flags_of(void *p, char *out, size_t n)
{
	char line[256], start[32];
	FILE *f = fopen("/proc/self/smaps", "r");
	int in = 0;

	out[0] = 0;
	if (!f)
		return;
	snprintf(start, sizeof(start), "%lx-", (unsigned long)p);
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, start, strlen(start)))
			in = 1;
		else if (in && !strncmp(line, "VmFlags:", 8)) {
			snprintf(out, n, "%s", line + 8);
			out[strcspn(out, "\n")] = 0;
			break;
		}
	}
	fclose(f);
}

/* Regions stay out of core dumps (VM_DONTDUMP: "dd"), and out of fork. */
TEST_F(hmmk, mapping_is_dontdump)
{
	struct hmmk_region_create rc;
	char flags[256];
	char *p;

	p = t_map(self->fd, 4 * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	vm_flags_of(p, flags, sizeof(flags));
	TH_LOG("VmFlags:%s", flags);
	EXPECT_NE(NULL, strstr(flags, " dd"));
	EXPECT_NE(NULL, strstr(flags, " dc"));
	munmap(p, 4 * T_PAGE);
}

TEST_F(hmmk, fork_does_not_copy)
{
	struct hmmk_region_create rc;
	int status;
	pid_t pid;
	char *p;

	p = t_map(self->fd, 4 * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	p[0] = 42;
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* The region is not in the child: touching it faults. */
		*(volatile char *)p = 1;
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status));
	EXPECT_EQ(SIGSEGV, WTERMSIG(status));

	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* Nor can the child map or create regions on this space. */
		void *q = mmap(NULL, T_PAGE, PROT_READ | PROT_WRITE,
			       MAP_SHARED, self->fd, rc.mmap_offset);
		struct hmmk_region_create rc2;

		if (q != MAP_FAILED || errno != EPERM)
			_exit(2);
		if (t_region(self->fd, T_PAGE, HMMK_NODE_ANY, &rc2) != -EPERM)
			_exit(3);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_EQ(42, p[0]);
	munmap(p, 4 * T_PAGE);
}

TEST_F(hmmk, unknown_ioctl_enotty)
{
	char buf[256] = { 0 };

	EXPECT_EQ(-ENOTTY, t_ioctl(self->fd, _IO(HMMK_IOC_MAGIC, 0x7f), buf));
	EXPECT_EQ(-ENOTTY, t_ioctl(self->fd, _IOWR(HMMK_IOC_MAGIC, 0x01,
						   char[8]), buf));
	EXPECT_EQ(-ENOTTY, t_ioctl(self->fd, _IO('x', 1), buf));
	EXPECT_EQ(-ENOTTY, t_ioctl(self->fd, 0, buf));
}

TEST_F(hmmk, unknown_flags_einval)
{
	struct hmmk_region_create rc;
	struct hmmk_simdev_config sc;
	struct hmmk_range r;

	memset(&rc, 0, sizeof(rc));
	rc.size = T_PAGE;
	rc.flags = HMMK_REGION_F_ALL + 1;	/* not defined */
	EXPECT_EQ(-EINVAL, t_ioctl(self->fd, HMMK_IOC_REGION_CREATE, &rc));
	rc.flags = 0;
	rc.reserved[2] = 1;
	EXPECT_EQ(-EINVAL, t_ioctl(self->fd, HMMK_IOC_REGION_CREATE, &rc));
	rc.reserved[2] = 0;
	rc.reserved0 = 1;
	EXPECT_EQ(-EINVAL, t_ioctl(self->fd, HMMK_IOC_REGION_CREATE, &rc));
	EXPECT_EQ(-EINVAL, t_region(self->fd, 0, HMMK_NODE_ANY, &rc));
	EXPECT_EQ(-EINVAL, t_region(self->fd, 100, HMMK_NODE_ANY, &rc));
	EXPECT_EQ(-EINVAL, t_region(self->fd, 1ULL << 50, HMMK_NODE_ANY, &rc));
	EXPECT_EQ(-EINVAL, t_region(self->fd, T_PAGE, 4096, &rc));

	ASSERT_EQ(0, t_region(self->fd, 4 * T_PAGE, HMMK_NODE_ANY, &rc));
	EXPECT_EQ(-EINVAL, t_range(self->fd, HMMK_IOC_MIGRATE, rc.handle, 0,
				   T_PAGE, 0, 1, NULL));
	EXPECT_EQ(-EINVAL, t_range(self->fd, HMMK_IOC_DEV_ACCESS, rc.handle,
				   0, T_PAGE, 0, 0x100, NULL));
	EXPECT_EQ(-EINVAL, t_range(self->fd, HMMK_IOC_SAMPLE, rc.handle, 0,
				   T_PAGE, 0, 1, NULL));
	/* Ranges: unaligned, empty, past the end, wrapping. */
	EXPECT_EQ(-EINVAL, t_range(self->fd, HMMK_IOC_SAMPLE, rc.handle, 1,
				   T_PAGE, 0, 0, NULL));
	EXPECT_EQ(-EINVAL, t_range(self->fd, HMMK_IOC_SAMPLE, rc.handle, 0,
				   0, 0, 0, NULL));
	EXPECT_EQ(-EINVAL, t_range(self->fd, HMMK_IOC_SAMPLE, rc.handle,
				   T_PAGE, 4 * T_PAGE, 0, 0, NULL));
	EXPECT_EQ(-EINVAL, t_range(self->fd, HMMK_IOC_SAMPLE, rc.handle,
				   T_PAGE, -T_PAGE, 0, 0, NULL));
	EXPECT_EQ(-ENOENT, t_range(self->fd, HMMK_IOC_SAMPLE, rc.handle + 99,
				   0, T_PAGE, 0, 0, NULL));
	memset(&r, 0, sizeof(r));
	r.handle = rc.handle;
	r.length = T_PAGE;
	r.reserved[1] = 5;
	EXPECT_EQ(-EINVAL, t_ioctl(self->fd, HMMK_IOC_SAMPLE, &r));
	memset(&sc, 0, sizeof(sc));
	sc.reserved0 = 1;
	EXPECT_EQ(-EINVAL, t_ioctl(self->fd, HMMK_IOC_SIMDEV_CONFIG, &sc));
	EXPECT_EQ(-EFAULT, t_ioctl(self->fd, HMMK_IOC_REGION_CREATE, NULL));
	EXPECT_EQ(-EFAULT, t_ioctl(self->fd, HMMK_IOC_STATS, (void *)16));
	/* Daemon commands on a space that is not the daemon. */
	EXPECT_EQ(-EPERM, t_ioctl(self->fd, HMMK_IOC_DAEMON_FETCH, &r));
}

TEST_F(hmmk, region_destroy_keeps_mapping)
{
	struct hmmk_region_create rc;
	struct hmmk_region_destroy rd;
	char *p, *q;

	p = t_map(self->fd, 8 * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	t_fill(p, 8, 9);
	memset(&rd, 0, sizeof(rd));
	rd.handle = rc.handle;
	ASSERT_EQ(0, t_ioctl(self->fd, HMMK_IOC_REGION_DESTROY, &rd));
	EXPECT_EQ(-ENOENT, t_ioctl(self->fd, HMMK_IOC_REGION_DESTROY, &rd));
	EXPECT_EQ(0, t_check(p, 8, 9));
	q = mmap(NULL, T_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, self->fd,
		 rc.mmap_offset);
	EXPECT_EQ(MAP_FAILED, q);
	munmap(p, 8 * T_PAGE);
}

TEST_F(hmmk, unload_with_live_regions)
{
	struct hmmk_region_create rc;
	char *p;
	long ret;

	p = t_map(self->fd, 8 * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	t_fill(p, 8, 11);
	ret = syscall(SYS_delete_module, "hmmk", O_NONBLOCK);
	ASSERT_EQ(-1, ret);
	EXPECT_TRUE(errno == EWOULDBLOCK || errno == EBUSY);
	EXPECT_EQ(0, t_check(p, 8, 11));
	munmap(p, 8 * T_PAGE);
}

TEST_F(hmmk, many_regions_and_close)
{
	struct hmmk_region_create rc;
	int fd2 = t_open();
	char *p[32];

	ASSERT_LE(0, fd2);
	for (int i = 0; i < 32; i++) {
		p[i] = t_map(fd2, (i + 1) * T_PAGE, HMMK_NODE_ANY, &rc);
		ASSERT_NE(NULL, p[i]);
		p[i][i * T_PAGE] = (char)i;
	}
	/* Closing the fd leaves the mappings working until munmap. */
	close(fd2);
	for (int i = 0; i < 32; i++) {
		EXPECT_EQ((char)i, p[i][i * T_PAGE]);
		munmap(p[i], (i + 1) * T_PAGE);
	}
}

TEST_F(hmmk, debugfs_summary_lists_regions)
{
	struct hmmk_region_create rc;
	char want[64], line[512];
	int found = 0;
	FILE *f;
	char *p;

	p = t_map(self->fd, 4 * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	p[0] = 1;
	f = fopen("/sys/kernel/debug/hmmk/summary", "r");
	if (!f)
		SKIP(return, "no debugfs");
	snprintf(want, sizeof(want), " region %llu pages 4 ",
		 (unsigned long long)rc.handle);
	while (fgets(line, sizeof(line), f))
		found += strstr(line, want) && strstr(line, " zero 1 ");
	fclose(f);
	EXPECT_EQ(1, found);
	munmap(p, 4 * T_PAGE);
}

TEST_HARNESS_MAIN
