/* SPDX-License-Identifier: MIT */
/*
 * fz_janitor.h — remove a fuzz target's scratch files however its
 * process ends (header-only; fuzz_api, fuzz_store).
 *
 * libFuzzer calls exit() only when a run ends (-max_total_time, -runs):
 * atexit covers that, at once.  An interrupt (SIGINT, SIGTERM), a
 * timeout (SIGALRM), a crash, a sanitizer's report and -rss_limit_mb end
 * in its handlers with _Exit, past atexit, and those handlers are not
 * ours to wrap: one installed before libFuzzer's makes it install none
 * (no timeouts), and __sanitizer_set_death_callback has one slot,
 * libFuzzer's, which writes the crash- input.  So a janitor outlives the
 * process: a grandchild (no wait of ours meets it) that ignores the
 * signals a terminal or timeout(1) sends the whole group and blocks on a
 * pipe whose only writer is the fuzzer (close-on-exec).  The kernel
 * closes it at any exit, SIGKILL too, and the janitor calls rm() within
 * moments.  Only a SIGKILL of the janitor as well (kill -9 of the
 * process group) leaves the files behind.
 */
#ifndef HMM_FZ_JANITOR_H
#define HMM_FZ_JANITOR_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* Call rm() when this process ends (and, by the caller's atexit, at a
 * normal exit).  rm runs in the grandchild: paths it reads must be set
 * before this call. */
static void fz_janitor(void (*rm)(void))
{
	int fd[2], st;
	pid_t pid;
	char c;

	if (pipe2(fd, O_CLOEXEC))
		return;
	pid = fork();
	if (pid == 0) {
		if (fork() == 0) {
			signal(SIGINT, SIG_IGN);
			signal(SIGTERM, SIG_IGN);
			signal(SIGHUP, SIG_IGN);
			signal(SIGQUIT, SIG_IGN);
			close(fd[1]);
			close(STDIN_FILENO);	/* hold no one's pipe open */
			close(STDOUT_FILENO);
			close(STDERR_FILENO);
			while (read(fd[0], &c, 1) < 0 && errno == EINTR)
				;
			rm();
		}
		_exit(0);
	}
	close(fd[0]);
	if (pid > 0)
		waitpid(pid, &st, 0);
	/* fd[1] stays open, never written, for this process's life */
}

#endif /* HMM_FZ_JANITOR_H */
