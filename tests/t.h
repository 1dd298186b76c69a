/* SPDX-License-Identifier: MIT */
/*
 * t.h — the one test harness for hmm's userspace tests.
 *
 * Every test is a program with one main() that prints TAP and exits
 * 0 (all passed), 1 (something failed) or 77 (skipped).  Use:
 *
 *	int main(void)
 *	{
 *		t_ok(1 + 1 == 2, "arithmetic");
 *		t_eq(f(), -EINVAL, "f rejects nothing");
 *		return t_done();
 *	}
 *
 * t_skip_all() ends the program with 77 when a feature is absent.
 * Header-only; all helpers are static so each test links alone.
 * Threading: t_ok and friends may be called from any thread (a mutex
 * serialises the counter and the output).
 */
#ifndef HMM_TESTS_T_H
#define HMM_TESTS_T_H

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

static pthread_mutex_t t_lock_ = PTHREAD_MUTEX_INITIALIZER;
static int t_n_, t_failed_;

static inline int t_vok_(int cond, const char *file, int line,
			 const char *fmt, va_list ap)
{
	pthread_mutex_lock(&t_lock_);
	t_n_++;
	if (!cond)
		t_failed_++;
	printf("%sok %d - ", cond ? "" : "not ", t_n_);
	vprintf(fmt, ap);
	printf("\n");
	if (!cond)
		printf("#   failed at %s:%d\n", file, line);
	fflush(stdout);
	pthread_mutex_unlock(&t_lock_);
	return cond;
}

static inline int t_ok_(int cond, const char *file, int line,
			const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = t_vok_(cond, file, line, fmt, ap);
	va_end(ap);
	return r;
}

/* t_ok(cond, fmt, ...): one TAP line; returns cond so callers may stop. */
#define t_ok(cond, ...) t_ok_(!!(cond), __FILE__, __LINE__, __VA_ARGS__)

/* t_eq(a, b, fmt, ...): integers equal; prints both when they differ. */
#define t_eq(a, b, ...)                                                    \
	({                                                                 \
		long long t_a_ = (long long)(a), t_b_ = (long long)(b);    \
		int t_r_ = t_ok(t_a_ == t_b_, __VA_ARGS__);                \
		if (!t_r_)                                                 \
			t_diag("got %lld, want %lld", t_a_, t_b_);         \
		t_r_;                                                      \
	})

/* t_diag(fmt, ...): a "# " comment line. */
static inline void t_diag(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&t_lock_);
	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	pthread_mutex_unlock(&t_lock_);
}

/* t_skip_all(fmt, ...): the whole test does not apply here: exit 77. */
static inline void t_skip_all(const char *fmt, ...)
{
	va_list ap;

	printf("1..0 # SKIP ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(77);
}

/* t_fail_all(fmt, ...): setup could not proceed: report and exit 1. */
static inline void t_fail_all(const char *fmt, ...)
{
	va_list ap;

	printf("not ok %d - setup: ", ++t_n_);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\nBail out!\n");
	fflush(stdout);
	t_failed_ = 1;			/* HMM_TEST_KEEP: keep t_tmpdir() */
	exit(1);
}

/* t_done(): print the plan, return the exit status for main(). */
static inline int t_done(void)
{
	printf("1..%d\n", t_n_);
	if (t_n_ == 0) {
		printf("# no test ran\n");
		return 1;
	}
	return t_failed_ ? 1 : 0;
}

/*
 * t_tmpdir(): a fresh directory on a real (non-tmpfs) file system so
 * O_DIRECT works: $HMM_TEST_DIR if set, else build/tmp under the
 * current directory.  Removed at exit by the process that made it,
 * failed or not (stores are large and the disk is shared: runs must not
 * pile them up); with HMM_TEST_KEEP set, kept and named when a check
 * failed.  A test killed by a signal cannot remove it: tests/run gives
 * each test a folder of its own and removes that.
 */
static char t_tmpdir_[4096];
static pid_t t_tmpdir_pid_;

static inline void t_tmpdir_rm_(void)
{
	char cmd[4200];

	if (!t_tmpdir_[0] || getpid() != t_tmpdir_pid_)
		return;			/* a forked child's exit */
	if (t_failed_ && getenv("HMM_TEST_KEEP")) {
		printf("# kept %s\n", t_tmpdir_);
		return;
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", t_tmpdir_);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", t_tmpdir_);
}

static inline const char *t_tmpdir(void)
{
	char *dir = t_tmpdir_;
	const char *base = getenv("HMM_TEST_DIR");
	char tmpl[4096];

	if (dir[0])
		return dir;
	if (!base)
		base = "build/tmp";
	snprintf(tmpl, sizeof(tmpl), "mkdir -p '%s'", base);
	if (system(tmpl) != 0)
		t_fail_all("cannot create %s", base);
	snprintf(tmpl, sizeof(tmpl), "%s/t.XXXXXX", base);
	if (!mkdtemp(tmpl))
		t_fail_all("mkdtemp %s: %s", tmpl, strerror(errno));
	snprintf(dir, sizeof(t_tmpdir_), "%s", tmpl);
	t_tmpdir_pid_ = getpid();
	atexit(t_tmpdir_rm_);
	return dir;
}

/*
 * t_watchdog(secs, what): a hang fails instead of blocking.  Past secs
 * (0: off) the test prints "not ok - WHAT never ended (hung)", removes
 * its folder (an exit from the handler runs no atexit) and exits 1.
 * Only for a test that is stuck: the handler forks rm.
 */
static const char *t_watch_what_;

static inline void t_watch_fired_(int sig)
{
	char msg[512];
	int n = snprintf(msg, sizeof(msg), "not ok - %s never ended "
			 "(hung)\n", t_watch_what_);

	(void)sig;
	if (write(1, msg, n > 0 && n < (int)sizeof(msg) ? n : 0) < 0)
		_exit(1);
	t_tmpdir_rm_();
	_exit(1);
}

static inline void t_watchdog(unsigned secs, const char *what)
{
	t_watch_what_ = what;
	signal(SIGALRM, t_watch_fired_);
	alarm(secs);
}

/*
 * t_child(fn, arg, line, len): run fn(fd, arg) in a forked child, so
 * that a crash (a SIGBUS, say) fails a check instead of the test; what
 * it writes to fd, up to its first newline, lands in line.  Returns its
 * exit code, or 128 + the signal that ended it.
 */
static inline int t_child(int (*fn)(int fd, void *arg), void *arg,
			  char *line, size_t len)
{
	ssize_t k, got = 0;
	int fds[2], st;
	pid_t pid;

	if (pipe(fds))
		t_fail_all("pipe: %s", strerror(errno));
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		t_fail_all("fork: %s", strerror(errno));
	if (pid == 0) {
		close(fds[0]);
		_exit(fn(fds[1], arg));
	}
	close(fds[1]);
	memset(line, 0, len);
	while (got < (ssize_t)len - 1 &&
	       (k = read(fds[0], line + got, len - 1 - got)) > 0)
		got += k;
	close(fds[0]);
	waitpid(pid, &st, 0);
	line[strcspn(line, "\n")] = 0;
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

/* t_rand(): a small deterministic generator (splitmix64) for test data. */
static inline uint64_t t_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* t_fill(buf, len, seed): fill with a pattern derived from seed. */
static inline void t_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = (uint8_t *)buf;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t v = t_rand(&seed);

		memcpy(p + i, &v, 8);
	}
	for (; i < len; i++)
		p[i] = (uint8_t)t_rand(&seed);
}

#endif /* HMM_TESTS_T_H */
