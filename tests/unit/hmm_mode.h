/* SPDX-License-Identifier: MIT */
/*
 * hmm_mode.h — run a libhmm test in either mode.  With HMM_TEST_MODE=
 * shared, hmm_test_mode(&cfg) starts $HMM_BUILD/bin/hmmd (build/bin/hmmd)
 * once per process on a socket and store in t_tmpdir(), with cfg's chunk
 * size, host budget and wait_ms as its global ones (the client's host
 * quota is then the whole budget), and sets cfg.daemon to it;
 * the daemon gets SIGTERM at exit.  Otherwise it changes nothing.
 * hmm_test_skip(what, why) prints a TAP skip line for a check that cannot
 * hold in this mode.  Include after t.h.  Single-threaded setup only.
 */
#ifndef HMM_MODE_H
#define HMM_MODE_H

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hmm.h"

static pid_t hmm_mode_pid_;
static char hmm_mode_addr_[256];

static inline int hmm_test_shared(void)
{
	const char *m = getenv("HMM_TEST_MODE");

	return m && !strcmp(m, "shared");
}

static inline void hmm_test_skip(const char *what, const char *why)
{
	t_ok(1, "%s # SKIP %s", what, why);
}

static void hmm_mode_stop_(void)
{
	int st;

	if (hmm_mode_pid_ > 0) {
		kill(hmm_mode_pid_, SIGTERM);
		waitpid(hmm_mode_pid_, &st, 0);
		hmm_mode_pid_ = 0;
	}
}

static inline void hmm_mode_start_(const struct hmm_config *cfg)
{
	const char *b = getenv("HMM_BUILD");
	char bin[4096], sock[200], store[4200], logf[4200];
	char chunk[32], budget[32], wait[32];
	struct timespec d = { 0, 20000000 };
	struct stat st;
	int i, fd;

	snprintf(bin, sizeof(bin), "%s/bin/hmmd", b ? b : "build");
	if (access(bin, X_OK))
		t_skip_all("shared mode: %s not built", bin);
	if (strlen(t_tmpdir()) >= 90)
		t_skip_all("shared mode: %s too long for a socket", t_tmpdir());
	snprintf(sock, sizeof(sock), "%s/hmmd.sock", t_tmpdir());
	snprintf(store, sizeof(store), "%s/hmmd.store", t_tmpdir());
	snprintf(logf, sizeof(logf), "%s/hmmd.log", t_tmpdir());
	snprintf(chunk, sizeof(chunk), "%u",
		 cfg->chunk_bytes ? cfg->chunk_bytes : 2u << 20);
	snprintf(budget, sizeof(budget), "%llu",
		 (unsigned long long)cfg->host_budget);
	snprintf(wait, sizeof(wait), "%u", cfg->wait_ms ? cfg->wait_ms : 10000);
	signal(SIGPIPE, SIG_IGN);
	hmm_mode_pid_ = fork();
	if (hmm_mode_pid_ == 0) {
		fd = open(logf, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0)
			dup2(fd, 2);
		execl(bin, bin, "--socket", sock, "--store", store,
		      "--store-size", "256M", "--host-budget", budget,
		      "--chunk", chunk, "--wait-ms", wait, "--module", "none",
		      NULL);
		_exit(127);
	}
	atexit(hmm_mode_stop_);
	for (i = 0; i < 500; i++, nanosleep(&d, NULL))
		if (stat(sock, &st) == 0)
			break;
	if (i == 500)
		t_fail_all("shared mode: hmmd did not start (log %s)", logf);
	snprintf(hmm_mode_addr_, sizeof(hmm_mode_addr_), "unix:%s", sock);
	t_diag("shared mode: hmmd pid %d on %s", (int)hmm_mode_pid_, sock);
}

/* Set cfg up for the mode in HMM_TEST_MODE (see above). */
static inline void hmm_test_mode(struct hmm_config *cfg)
{
	if (!hmm_test_shared())
		return;
	if (!hmm_mode_pid_)
		hmm_mode_start_(cfg);
	cfg->daemon = hmm_mode_addr_;
}

#endif /* HMM_MODE_H */
