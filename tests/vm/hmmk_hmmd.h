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

#define HMMD		"/bin/hmmd"
#define HMMD_SOCK	"/tmp/hmmd.sock"
#define HMMD_NOTIFY	"/tmp/hmmd.notify"

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

#endif /* HMMK_HMMD_H */
