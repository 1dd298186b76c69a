/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tests/vm/hmmk_t.h — helpers shared by the hmmk kselftests (run inside the
 * qemu VM by tests/vm/run, built static with build/kselftest/ on the include
 * path).  Each helper returns 0 / -errno or a value; none exits.
 */
#ifndef HMMK_T_H
#define HMMK_T_H

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "uapi/hmmk.h"

#define T_PAGE		4096UL
#define T_BLOCK		(2UL << 20)
#define HMMK_TESTD	"/bin/hmmk_testd"

static inline int t_open(void)
{
	return open(HMMK_DEVICE, O_RDWR | O_CLOEXEC);
}

/* Writes s to the file at path (a sysfs or cgroup knob); 0 or -errno. */
static inline int t_write(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -errno;
	fputs(s, f);
	return fclose(f) ? -errno : 0;
}

static inline int t_ioctl(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) ? -errno : 0;
}

/* Creates a region; returns 0 and fills *rc, or -errno. */
static inline int t_region(int fd, uint64_t size, uint32_t node,
			   struct hmmk_region_create *rc)
{
	memset(rc, 0, sizeof(*rc));
	rc->size = size;
	rc->preferred_node = node;
	return t_ioctl(fd, HMMK_IOC_REGION_CREATE, rc);
}

/* Creates and maps a region; NULL on failure. */
static inline char *t_map(int fd, uint64_t size, uint32_t node,
			  struct hmmk_region_create *rc)
{
	void *p;

	if (t_region(fd, size, node, rc))
		return NULL;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 rc->mmap_offset);
	return p == MAP_FAILED ? NULL : p;
}

static inline int t_range(int fd, unsigned long cmd, uint64_t handle,
			  uint64_t start, uint64_t len, uint32_t node,
			  uint32_t flags, struct hmmk_range *out)
{
	struct hmmk_range r;
	int ret;

	memset(&r, 0, sizeof(r));
	r.handle = handle;
	r.start = start;
	r.length = len;
	r.node = node;
	r.flags = flags;
	ret = t_ioctl(fd, cmd, &r);
	if (out)
		*out = r;
	return ret;
}

/* Page info of page index pg, or tier 0xff on failure. */
static inline struct hmmk_page_info t_info(int fd, uint64_t handle,
					   uint64_t pg)
{
	struct hmmk_page_info pi = { .tier = 0xff };
	struct hmmk_snapshot sn;

	memset(&sn, 0, sizeof(sn));
	sn.handle = handle;
	sn.first_page = pg;
	sn.nr_pages = 1;
	sn.entries = (uintptr_t)&pi;
	if (t_ioctl(fd, HMMK_IOC_SNAPSHOT, &sn) || sn.filled != 1)
		pi.tier = 0xff;
	return pi;
}

static inline int t_stats(int fd, uint64_t handle, struct hmmk_stats *s)
{
	memset(s, 0, sizeof(*s));
	s->handle = handle;
	return t_ioctl(fd, HMMK_IOC_STATS, s);
}

/* The node move_pages(2) reports for the page at p, or -errno. */
static inline int t_node_of(void *p)
{
	void *pages[1] = { p };
	int status = -1;

	if (syscall(SYS_move_pages, 0, 1UL, pages, NULL, &status, 0))
		return -errno;
	return status;
}

static inline int t_nr_nodes(void)
{
	struct hmmk_features f;
	int fd = t_open(), ret;

	if (fd < 0)
		return -errno;
	ret = t_ioctl(fd, HMMK_IOC_GET_FEATURES, &f);
	close(fd);
	return ret ? ret : (int)f.nr_nodes;
}

static inline uint8_t t_pat(uint64_t pg, uint64_t off, uint32_t seed)
{
	return (uint8_t)((pg * 131 + off * 7 + seed) ^ (pg >> 8));
}

static inline void t_fill(char *p, uint64_t pages, uint32_t seed)
{
	for (uint64_t pg = 0; pg < pages; pg++)
		for (uint64_t o = 0; o < T_PAGE; o += 512)
			p[pg * T_PAGE + o] = (char)t_pat(pg, o, seed);
}

/* Number of sampled bytes that differ from t_fill's pattern. */
static inline uint64_t t_check(const char *p, uint64_t pages, uint32_t seed)
{
	uint64_t bad = 0;

	for (uint64_t pg = 0; pg < pages; pg++)
		for (uint64_t o = 0; o < T_PAGE; o += 512)
			bad += p[pg * T_PAGE + o] != (char)t_pat(pg, o, seed);
	return bad;
}

/*
 * SIGBUS as a value: after t_sigbus_catch(), t_touch(p) reads one byte
 * and returns it, or -1 if the read raised SIGBUS.  A SIGBUS outside
 * t_touch exits the process with 99.  Per thread.
 */
static __thread sigjmp_buf t_bus_jmp __attribute__((unused));
static __thread volatile int t_bus_armed __attribute__((unused));

static inline void t_on_sigbus(int sig)
{
	if (t_bus_armed)
		siglongjmp(t_bus_jmp, 1);
	_exit(99);
}

static inline void t_sigbus_catch(void)
{
	struct sigaction sa = { .sa_handler = t_on_sigbus };

	sigaction(SIGBUS, &sa, NULL);
}

static inline int t_touch(volatile char *p)
{
	int v;

	if (sigsetjmp(t_bus_jmp, 1)) {
		t_bus_armed = 0;
		return -1;
	}
	t_bus_armed = 1;
	v = (unsigned char)*p;
	t_bus_armed = 0;
	return v;
}

/*
 * Starts the test daemon with up to two extra arguments (NULL for none,
 * e.g. "--stall-fill") and waits until it is attached.  Returns its pid,
 * or -errno.
 */
static inline pid_t t_daemon_start(const char *a1, const char *a2)
{
	char ready[64];
	int pfd[2];
	pid_t pid;

	if (pipe(pfd))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (!pid) {
		char fdarg[16];

		close(pfd[0]);
		snprintf(fdarg, sizeof(fdarg), "%d", pfd[1]);
		execl(HMMK_TESTD, HMMK_TESTD, "--ready-fd", fdarg, a1, a2,
		      (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	if (read(pfd[0], ready, sizeof(ready)) <= 0) {
		close(pfd[0]);
		waitpid(pid, NULL, 0);
		return -EIO;
	}
	close(pfd[0]);
	return pid;
}

static inline void t_daemon_stop(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
}

#endif /* HMMK_T_H */
