/* SPDX-License-Identifier: MIT */
/*
 * hmmd_t.h — a real hmmd for a test: the one fork, exec and wait for its
 * socket that tests/unit/hmm_mode.h (shared mode), test_hmm_remote,
 * test_hmmd_engine and test_hmmd_proto share.  Include after t.h.
 * Single-threaded setup only.
 */
#ifndef HMMD_T_H
#define HMMD_T_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/*
 * Run bin with argv (argv[0] first, NULL-terminated), its stderr into
 * log (appended; truncated first with trunc), NOTIFY_SOCKET set to
 * notify or unset.  Returns the pid; a failed fork fails the test.
 */
static inline pid_t t_hmmd_spawn(const char *bin, char *const argv[],
				 const char *log, int trunc,
				 const char *notify)
{
	pid_t pid = fork();
	int fd;

	if (pid < 0)
		t_fail_all("fork: %s", strerror(errno));
	if (pid == 0) {
		fd = open(log, O_WRONLY | O_CREAT |
			  (trunc ? O_TRUNC : O_APPEND), 0644);
		if (fd >= 0)
			dup2(fd, 2);
		if (notify)
			setenv("NOTIFY_SOCKET", notify, 1);
		else
			unsetenv("NOTIFY_SOCKET");
		execv(bin, argv);
		_exit(127);
	}
	return pid;
}

/* Wait up to secs for hmmd pid to listen on sock; if it does not, kill
 * it and fail the test, naming its log. */
static inline void t_hmmd_wait_listen(pid_t pid, const char *sock, int secs,
				      const char *log)
{
	struct timespec d = { 0, 20000000 };
	struct stat st;

	for (int i = 0; i < secs * 50; i++, nanosleep(&d, NULL))
		if (stat(sock, &st) == 0)
			return;
	kill(pid, SIGKILL);
	t_fail_all("hmmd did not listen on %s within %d s (log %s)", sock,
		   secs, log);
}

#endif /* HMMD_T_H */
