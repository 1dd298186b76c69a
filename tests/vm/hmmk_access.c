// SPDX-License-Identifier: GPL-2.0
/*
 * tests/vm/hmmk_access.c — kselftests of who may use /dev/hmmk: the node
 * is 0660 (group hmm by the udev rule, root:root on devtmpfs); DAEMON_ATTACH
 * and SIMDEV_CONFIG need CAP_SYS_ADMIN, or the uid / gid set by the
 * daemon_uid / daemon_gid parameters; daemon commands work only in the
 * attacher's mm; another user either cannot open the device or gets a
 * space of its own that sees none of the first space's pages or handles.
 *
 * The unprivileged side runs in a forked child that drops to uid and gid
 * nobody (or only drops CAP_SYS_ADMIN) and writes what it saw into a
 * shared page; the parent asserts on it.
 */
#include <grp.h>
#include <sys/stat.h>
#include <linux/capability.h>

#include "hmmk_t.h"
#include "kselftest_harness.h"

#define NOBODY		65534
#define HMM_GID		4242	/* stands in for group hmm in the VM */
#define PAGES		16
#define PARAM		"/sys/module/hmmk/parameters/"

/* What the child saw: errnos (0 or -errno) and counts. */
struct seen {
	int open, attach, simdev, fetch, complete;
	int stats, snapshot, migrate, dev_access, destroy, mmap_other;
	int own_map, parent_region, parent_mmap;
	uint64_t own_offset, nonzero;
	int done;
};

static struct seen *seen_map(void)
{
	void *p = mmap(NULL, sizeof(struct seen), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Become uid/gid nobody, with group as the one supplementary group (< 0: none). */
static int drop_to_nobody(int group)
{
	gid_t g = group;

	if (setgroups(group < 0 ? 0 : 1, &g) || setgid(NOBODY) ||
	    setuid(NOBODY))
		return -errno;
	return 0;
}

/* Stay uid 0 but lose CAP_SYS_ADMIN (effective, permitted, inheritable). */
static int drop_sys_admin(void)
{
	struct __user_cap_header_struct h = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -errno;
	d[0].effective &= ~(1U << CAP_SYS_ADMIN);
	d[0].permitted &= ~(1U << CAP_SYS_ADMIN);
	d[0].inheritable &= ~(1U << CAP_SYS_ADMIN);
	return syscall(SYS_capset, &h, d) ? -errno : 0;
}

static int wait_child(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* In a child: the daemon-role commands on fd, opened before dropping. */
static void try_daemon(int fd, struct seen *s)
{
	struct hmmk_simdev_config sc;
	struct hmmk_daemon_req r;
	struct hmmk_daemon_info di;

	memset(&sc, 0, sizeof(sc));
	sc.reserved0 = 1;	/* -EINVAL if allowed: changes nothing */
	memset(&r, 0, sizeof(r));
	s->attach = t_ioctl(fd, HMMK_IOC_DAEMON_ATTACH, NULL);
	s->simdev = t_ioctl(fd, HMMK_IOC_SIMDEV_CONFIG, &sc);
	s->fetch = t_ioctl(fd, HMMK_IOC_DAEMON_FETCH, &r);
	memset(&di, 0, sizeof(di));
	if (!t_ioctl(fd, HMMK_IOC_DAEMON_INFO, &di))
		s->done = di.attached ? 2 : 1;
}

/*
 * Opens the device as root, drops (to nobody in group, or only
 * CAP_SYS_ADMIN when group == -2) and tries the daemon commands.
 */
static int daemon_as(struct seen *s, int group)
{
	pid_t pid = fork();
	int fd, ret;

	if (pid < 0)
		return -errno;
	if (!pid) {
		fd = t_open();
		if (fd < 0)
			_exit(2);
		ret = group == -2 ? drop_sys_admin() : drop_to_nobody(group);
		if (ret)
			_exit(3);
		try_daemon(fd, s);
		_exit(0);
	}
	return wait_child(pid);
}

static int daemon_attached(void)
{
	struct hmmk_daemon_info di;
	int fd = t_open(), ret;

	if (fd < 0)
		return -errno;
	memset(&di, 0, sizeof(di));
	ret = t_ioctl(fd, HMMK_IOC_DAEMON_INFO, &di);
	close(fd);
	return ret ? ret : (int)di.attached;
}

FIXTURE(access) {
	struct seen *s;
};

FIXTURE_SETUP(access)
{
	self->s = seen_map();
	ASSERT_NE(NULL, self->s);
	if (access(HMMK_DEVICE, F_OK))
		SKIP(return, "no %s", HMMK_DEVICE);
}

FIXTURE_TEARDOWN(access)
{
	t_write(PARAM "daemon_uid", "-1\n");
	t_write(PARAM "daemon_gid", "-1\n");
	if (chown(HMMK_DEVICE, 0, 0))
		perror("# chown " HMMK_DEVICE);
	if (self->s)
		munmap(self->s, sizeof(*self->s));
}

TEST_F(access, device_node_is_0660)
{
	struct stat st;

	ASSERT_EQ(0, stat(HMMK_DEVICE, &st));
	EXPECT_TRUE(S_ISCHR(st.st_mode));
	EXPECT_EQ(0660, st.st_mode & 07777);
	EXPECT_EQ(0, st.st_uid);
}

TEST_F(access, attach_as_nobody_eperm)
{
	ASSERT_EQ(0, daemon_as(self->s, -1));
	EXPECT_EQ(-EPERM, self->s->attach);
	EXPECT_EQ(-EPERM, self->s->simdev);
	EXPECT_EQ(-EPERM, self->s->fetch);
	EXPECT_EQ(1, self->s->done);	/* DAEMON_INFO: nobody attached */
	EXPECT_EQ(0, daemon_attached());
}

TEST_F(access, attach_as_root_without_cap_sys_admin_eperm)
{
	ASSERT_EQ(0, daemon_as(self->s, -2));
	EXPECT_EQ(-EPERM, self->s->attach);
	EXPECT_EQ(-EPERM, self->s->simdev);
	EXPECT_EQ(1, self->s->done);
	EXPECT_EQ(0, daemon_attached());
}

TEST_F(access, daemon_uid_and_gid_parameters_allow_attach)
{
	ASSERT_EQ(0, t_write(PARAM "daemon_uid", "65534\n"));
	ASSERT_EQ(0, daemon_as(self->s, -1));
	EXPECT_EQ(0, self->s->attach);
	EXPECT_EQ(-EINVAL, self->s->simdev);	/* allowed, then checked */
	EXPECT_EQ(-EAGAIN, self->s->fetch);	/* the daemon, nothing queued */
	EXPECT_EQ(2, self->s->done);
	EXPECT_EQ(0, daemon_attached());	/* its exit detached it */

	ASSERT_EQ(0, t_write(PARAM "daemon_uid", "-1\n"));
	ASSERT_EQ(0, t_write(PARAM "daemon_gid", "4242\n"));
	memset(self->s, 0, sizeof(*self->s));
	ASSERT_EQ(0, daemon_as(self->s, HMM_GID));
	EXPECT_EQ(0, self->s->attach);
	EXPECT_EQ(2, self->s->done);
	memset(self->s, 0, sizeof(*self->s));
	ASSERT_EQ(0, daemon_as(self->s, -1));	/* not in that group */
	EXPECT_EQ(-EPERM, self->s->attach);

	ASSERT_EQ(0, t_write(PARAM "daemon_gid", "-1\n"));
	memset(self->s, 0, sizeof(*self->s));
	ASSERT_EQ(0, daemon_as(self->s, HMM_GID));
	EXPECT_EQ(-EPERM, self->s->attach);
}

/* A daemon's file works only in the attacher's mm, not in a fork. */
TEST_F(access, daemon_file_bound_to_attacher)
{
	struct hmmk_daemon_req r;
	struct hmmk_daemon_cmpl c;
	int fd = t_open(), st;
	pid_t pid;

	ASSERT_LE(0, fd);
	ASSERT_EQ(0, t_ioctl(fd, HMMK_IOC_DAEMON_ATTACH, NULL));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		memset(&r, 0, sizeof(r));
		memset(&c, 0, sizeof(c));
		self->s->fetch = t_ioctl(fd, HMMK_IOC_DAEMON_FETCH, &r);
		self->s->complete = t_ioctl(fd, HMMK_IOC_DAEMON_COMPLETE, &c);
		_exit(0);
	}
	st = wait_child(pid);
	memset(&r, 0, sizeof(r));
	EXPECT_EQ(-EAGAIN, t_ioctl(fd, HMMK_IOC_DAEMON_FETCH, &r));
	close(fd);
	ASSERT_EQ(0, st);
	EXPECT_EQ(-EPERM, self->s->fetch);
	EXPECT_EQ(-EPERM, self->s->complete);
}

TEST_F(access, other_user_cannot_open)
{
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (!pid) {
		if (drop_to_nobody(-1))
			_exit(3);
		self->s->open = open(HMMK_DEVICE, O_RDWR) < 0 ? -errno : 0;
		_exit(0);
	}
	ASSERT_EQ(0, wait_child(pid));
	EXPECT_EQ(-EACCES, self->s->open);
}

/* The child, nobody in group HMM_GID: what it can reach of the parent's. */
static void other_space(int pfd, const struct hmmk_region_create *prc,
			struct seen *s)
{
	struct hmmk_region_create rc;
	struct hmmk_region_destroy rd;
	struct hmmk_daemon_req r;
	struct hmmk_snapshot sn;
	struct hmmk_page_info pi[PAGES];
	struct hmmk_stats st;
	unsigned char *p;
	int fd;
	void *q;

	if (drop_to_nobody(HMM_GID))
		_exit(3);
	fd = t_open();
	s->open = fd < 0 ? -errno : 0;
	if (fd < 0)
		return;
	s->stats = t_stats(fd, prc->handle, &st);
	memset(&sn, 0, sizeof(sn));
	sn.handle = prc->handle;
	sn.nr_pages = PAGES;
	sn.entries = (uintptr_t)pi;
	s->snapshot = t_ioctl(fd, HMMK_IOC_SNAPSHOT, &sn);
	s->migrate = t_range(fd, HMMK_IOC_MIGRATE, prc->handle, 0, T_PAGE,
			     0, 0, NULL);
	s->dev_access = t_range(fd, HMMK_IOC_DEV_ACCESS, prc->handle, 0,
				T_PAGE, 0, 0, NULL);
	memset(&rd, 0, sizeof(rd));
	rd.handle = prc->handle;
	s->destroy = t_ioctl(fd, HMMK_IOC_REGION_DESTROY, &rd);
	q = mmap(NULL, PAGES * T_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 prc->mmap_offset);
	s->mmap_other = q == MAP_FAILED ? -errno : 0;
	memset(&r, 0, sizeof(r));
	s->fetch = t_ioctl(fd, HMMK_IOC_DAEMON_FETCH, &r);

	/* Its own region, at the same offset in its own space: zeros. */
	p = (unsigned char *)t_map(fd, PAGES * T_PAGE, HMMK_NODE_ANY, &rc);
	s->own_map = p ? 0 : -errno;
	if (p) {
		s->own_offset = rc.mmap_offset;
		for (uint64_t i = 0; i < PAGES * T_PAGE; i++)
			s->nonzero += p[i] != 0;
	}
	/* The parent's file, inherited: its space is not this mm's. */
	s->parent_region = t_region(pfd, T_PAGE, HMMK_NODE_ANY, &rc);
	q = mmap(NULL, PAGES * T_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, pfd,
		 prc->mmap_offset);
	s->parent_mmap = q == MAP_FAILED ? -errno : 0;
	s->done = 1;
}

TEST_F(access, other_user_gets_an_isolated_space)
{
	struct hmmk_region_create rc;
	struct seen *s = self->s;
	pid_t pid;
	int fd;
	char *p;

	fd = t_open();
	ASSERT_LE(0, fd);
	p = t_map(fd, PAGES * T_PAGE, HMMK_NODE_ANY, &rc);
	ASSERT_NE(NULL, p);
	memset(p, 0x5a, PAGES * T_PAGE);
	ASSERT_EQ(0, chown(HMMK_DEVICE, 0, HMM_GID));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		other_space(fd, &rc, s);
		_exit(0);
	}
	ASSERT_EQ(0, wait_child(pid));
	ASSERT_EQ(1, s->done);
	EXPECT_EQ(0, s->open);
	EXPECT_EQ(-ENOENT, s->stats);
	EXPECT_EQ(-ENOENT, s->snapshot);
	EXPECT_EQ(-ENOENT, s->migrate);
	EXPECT_EQ(-ENOENT, s->dev_access);
	EXPECT_EQ(-ENOENT, s->destroy);
	EXPECT_EQ(-EINVAL, s->mmap_other);
	EXPECT_EQ(-EPERM, s->fetch);
	EXPECT_EQ(0, s->own_map);
	EXPECT_EQ(rc.mmap_offset, s->own_offset);
	EXPECT_EQ(0, s->nonzero);
	EXPECT_EQ(-EPERM, s->parent_region);
	EXPECT_EQ(-EPERM, s->parent_mmap);
	/* The parent's bytes are untouched. */
	for (uint64_t i = 0; i < PAGES * T_PAGE; i += 512)
		ASSERT_EQ(0x5a, (unsigned char)p[i]);
	munmap(p, PAGES * T_PAGE);
	close(fd);
}

TEST_HARNESS_MAIN
