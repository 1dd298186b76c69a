/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tests/vm/hmmk_hmmd.h — run the real hmmd (/bin/hmmd, static) in the VM
 * as the module's daemon, for hmmk_bridge.c and hmmk_region.c.  Include
 * after hmmk_t.h.
 */
#ifndef HMMK_HMMD_H
#define HMMK_HMMD_H

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "../prom.h"

#define HMMD		"/bin/hmmd"
#define HMMD_SOCK	"/tmp/hmmd.sock"
#define HMMD_NOTIFY	"/tmp/hmmd.notify"
#define HMMD_METRICS_PORT 9464	/* hmmd --metrics HMMD_METRICS */
#define HMMD_METRICS	"127.0.0.1:9464"

/*
 * Start hmmd with "--socket HMMD_SOCK" and the NULL-terminated extra
 * arguments (at most 16), and wait for its READY=1 on $NOTIFY_SOCKET:
 * it attaches to the module before it says ready.  delay (ms, 0 = none)
 * holds every FILL that long.  Returns the pid or -errno.
 */
static inline pid_t hmmd_startv(int delay, const char *const *extra)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *argv[20] = { HMMD, "--socket", HMMD_SOCK };
	char buf[256], d[16];
	pid_t pid;
	int fd, i, st;

	for (i = 0; extra[i] && i < 16; i++)
		argv[3 + i] = extra[i];
	unlink(HMMD_NOTIFY);
	unlink(HMMD_SOCK);
	strcpy(sa.sun_path, HMMD_NOTIFY);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (!pid) {
		setenv("NOTIFY_SOCKET", HMMD_NOTIFY, 1);
		snprintf(d, sizeof(d), "%d", delay);
		if (delay)
			setenv("HMMD_BRIDGE_FILL_DELAY_MS", d, 1);
		execv(HMMD, (char *const *)argv);
		_exit(127);
	}
	for (i = 0; i < 1200; i++) {	/* 120 s: TCG is slow */
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, 100) == 1) {
			n = recv(fd, buf, sizeof(buf) - 1, 0);
			if (n > 0) {
				buf[n] = 0;
				if (strstr(buf, "READY=1")) {
					close(fd);
					return pid;
				}
			}
		}
		if (waitpid(pid, &st, WNOHANG) == pid) {
			close(fd);
			return -ECHILD;		/* it exited */
		}
	}
	close(fd);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -ETIMEDOUT;
}

/* SIGTERM; the exit status, or -1 if it did not exit normally. */
static inline int hmmd_term(pid_t pid)
{
	int st;

	kill(pid, SIGTERM);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static inline double hmmd_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * The kill -9 test of both suites: touch pages 0..pages-1 of p in order
 * (page pg holds t_pat(pg, 0, seed)) while a child SIGKILLs hmmd once
 * two of them were served.  hmmd must hold every FILL (hmmd_start with
 * a delay), so the kill lands while a fault waits on it.  Reaps hmmd.
 * Returns the first page that got SIGBUS (pages if none); *bad counts
 * the pages that came back wrong or were served after a SIGBUS, or is
 * -1 when the killer could not do its job.
 */
static inline uint64_t hmmd_kill_during_faults(pid_t hmmd, char *p,
					       uint64_t pages, int seed,
					       int *bad)
{
	uint64_t pg, first_bus = pages;
	volatile int *done;
	pid_t killer;
	int st, v;

	*bad = -1;
	done = mmap(NULL, T_PAGE, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (done == MAP_FAILED)
		return pages;
	*done = 0;
	killer = fork();
	if (killer < 0)
		return pages;
	if (!killer) {
		/* two faults served: the third is being held right now */
		for (int i = 0; i < 60000; i++) {
			if (__atomic_load_n(done, __ATOMIC_ACQUIRE) >= 2) {
				usleep(20000);
				kill(hmmd, SIGKILL);
				_exit(0);
			}
			usleep(1000);
		}
		_exit(1);
	}
	*bad = 0;
	for (pg = 0; pg < pages; pg++) {
		v = t_touch(p + pg * T_PAGE);
		if (v < 0) {
			if (first_bus == pages)
				first_bus = pg;
			continue;
		}
		/* served pages are exact; none is served after a SIGBUS */
		*bad += v != t_pat(pg, 0, seed) || first_bus != pages;
		__atomic_store_n(done, (int)pg + 1, __ATOMIC_RELEASE);
	}
	if (waitpid(killer, &st, 0) != killer || !WIFEXITED(st) ||
	    WEXITSTATUS(st))
		*bad = -1;
	waitpid(hmmd, NULL, 0);
	munmap((void *)done, T_PAGE);
	return first_bus;
}

/* The value of series name in the running hmmd's metrics, or -1. */
static inline long long hmmd_metric(const char *name)
{
	static char text[1 << 16];

	return (long long)prom_value(prom_fetch(HMMD_METRICS_PORT, text,
						sizeof(text)), name);
}

#endif /* HMMK_HMMD_H */
