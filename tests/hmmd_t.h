/* SPDX-License-Identifier: MIT */
/*
 * hmmd_t.h — a real hmmd for a test: the one fork, exec and wait for its
 * socket that tests/unit/hmm_mode.h (shared mode), test_hmm_remote,
 * test_hmmd_engine and test_hmmd_proto share, the paths of a test's
 * hmmd and a free loopback port for its --metrics.  Include after t.h.
 * Single-threaded setup only.
 */
#ifndef HMMD_T_H
#define HMMD_T_H

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "hmm.h"

/*
 * Run bin with argv (argv[0] first, NULL-terminated), its stderr into
 * log (appended; truncated first with trunc), NOTIFY_SOCKET set to
 * notify or unset.  Returns the pid; a failed fork fails the test.
 */
static inline pid_t t_hmmd_spawn(const char *bin, char *const argv[],
				 const char *log, int trunc,
				 const char *notify)
{
	pid_t parent = getpid(), pid = fork();
	int fd;

	if (pid < 0)
		t_fail_all("fork: %s", strerror(errno));
	if (pid == 0) {
		/* a test that dies (a crash, an ASan abort: no atexit runs)
		   takes its hmmd with it, not left serving a removed store */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
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

/*
 * A test's hmmd: bin = $HMM_BUILD/bin/hmmd (build/ by default; the test
 * skips when it is not built), dir = the test's temporary folder (made
 * searchable by other uids: 0711), sock, store and log = dir/TAG.sock,
 * dir/TAG.store and dir/hmmd.log.  SIGPIPE is ignored (a client may
 * write to an hmmd the test killed).  T_HMMD_PATHS passes each array
 * with its size.
 */
static inline void t_hmmd_paths(char *bin, size_t bin_n, char *dir,
				size_t dir_n, char *sock, size_t sock_n,
				char *store, size_t store_n, char *log,
				size_t log_n, const char *tag)
{
	const char *b = getenv("HMM_BUILD");
	size_t sun_n = sizeof(((struct sockaddr_un *)0)->sun_path);

	if (snprintf(bin, bin_n, "%s/bin/hmmd", b ? b : "build") >= (int)bin_n)
		t_skip_all("$HMM_BUILD %s: too long", b);
	if (access(bin, X_OK))
		t_skip_all("%s not built", bin);
	signal(SIGPIPE, SIG_IGN);
	if (snprintf(dir, dir_n, "%s", t_tmpdir()) >= (int)dir_n ||
	    snprintf(sock, sock_n, "%s/%s.sock", dir, tag) >=
	    (int)(sock_n < sun_n ? sock_n : sun_n) ||
	    snprintf(store, store_n, "%s/%s.store", dir, tag) >= (int)store_n ||
	    snprintf(log, log_n, "%s/hmmd.log", dir) >= (int)log_n)
		t_skip_all("temporary dir %s: too long for a socket path",
			   t_tmpdir());
	chmod(dir, 0711);
}
#define T_HMMD_PATHS(bin, dir, sock, store, log, tag)			\
	t_hmmd_paths(bin, sizeof(bin), dir, sizeof(dir), sock,		\
		     sizeof(sock), store, sizeof(store), log, sizeof(log), tag)

/*
 * In a forked child: become uid and gid (groups dropped) in the socket's
 * folder, sock rewritten in place as its name there, so that the
 * folders above it need not let uid through: a clone made with mktemp
 * -d (0700) hides the test's folder from other uids, and a connect by
 * the full path fails with EACCES.  0 or -errno.
 */
static inline int t_hmmd_become(uid_t uid, gid_t gid, char *sock)
{
	char *slash = strrchr(sock, '/');

	if (slash) {
		*slash = 0;
		if (chdir(*sock ? sock : "/"))
			return -errno;
		memmove(sock, slash + 1, strlen(slash + 1) + 1);
	}
	if (setgroups(0, NULL) || setgid(gid) || setuid(uid))
		return -errno;
	return 0;
}

/*
 * *cfg for a shared-mode context on the hmmd at sock, with host_budget
 * and chunk_bytes chunk, as uid: 0 as the caller is, else (in a forked
 * child) become uid first (t_hmmd_become, sock rewritten).  0 or -errno.
 * t_hmmd_open opens it.
 */
static inline int t_hmmd_config(uid_t uid, char *sock, uint64_t host_budget,
				uint32_t chunk, struct hmm_config *cfg)
{
	static char addr[300];	/* config.daemon: kept until hmm_open */
	int err = uid ? t_hmmd_become(uid, uid, sock) : 0;

	if (err)
		return err;
	snprintf(addr, sizeof(addr), "unix:%s", sock);
	hmm_config_default(cfg);
	cfg->daemon = addr;
	cfg->host_budget = host_budget;
	cfg->chunk_bytes = chunk;
	return 0;
}

static inline int t_hmmd_open(uid_t uid, char *sock, uint64_t host_budget,
			      uint32_t chunk, struct hmm **h)
{
	struct hmm_config cfg;
	int err = t_hmmd_config(uid, sock, host_budget, chunk, &cfg);

	return err ? err : hmm_open(&cfg, h);
}

/* "127.0.0.1:PORT" of a loopback port free now, into buf. */
static inline void t_free_port(char *buf, size_t n)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		t_fail_all("no loopback port: %s", strerror(errno));
	snprintf(buf, n, "127.0.0.1:%u", ntohs(sa.sin_port));
	close(fd);
}

/* hmmd's log at path (this start's) holds want; else it is shown. */
static inline int t_hmmd_log_has(const char *path, const char *want)
{
	static char log[1 << 16];
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f) {
		n = fread(log, 1, sizeof(log) - 1, f);
		fclose(f);
	}
	log[n] = 0;
	if (!strstr(log, want))
		t_diag("hmmd's log: %s", log);
	return strstr(log, want) != NULL;
}

#endif /* HMMD_T_H */
