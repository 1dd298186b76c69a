/* SPDX-License-Identifier: MIT */
/* store_t.h — helpers shared by the store's unit tests (header-only). */
#ifndef HMM_TESTS_STORE_T_H
#define HMM_TESTS_STORE_T_H

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"
#include "err.h"
#include "fault_inject.h"
#include "pool.h"
#include "store.h"

/* Open (or die) a store at dir/name with size bytes. */
static inline struct hmm_store *st_open(const char *path, uint64_t size,
					uint32_t flags, uint32_t qd)
{
	struct hmm_store_config c = { .path = path, .size = size,
				      .flags = flags, .queue_depth = qd,
				      .pool_bytes = 16 << 20, .numa_node = -1 };
	struct hmm_store *s = NULL;
	int r = hmm_store_open(&c, &s);

	if (r)
		t_fail_all("open %s: %d %s", path, r, hmm_last_error());
	return s;
}

/* One synchronous request; returns its result (or the submit error). */
static inline int st_io(struct hmm_store *s, uint32_t op, uint64_t key,
			uint64_t off, void *buf, uint32_t len)
{
	struct hmm_io io = { .op = op, .key = key, .off = off, .buf = buf,
			     .len = len };
	struct hmm_io *p = &io;
	int r = hmm_store_submit(s, &p, 1);

	if (r < 0)
		return r;
	return hmm_store_wait(s, &io);
}

/* Write len bytes of t_fill(seed) at key (b: a buffer of the store's
 * pool, at least len bytes); st_io's result. */
static inline int st_put(struct hmm_store *s, void *b, uint64_t key,
			 uint32_t len, uint64_t seed)
{
	t_fill(b, len, seed);
	return st_io(s, HMM_IO_WRITE, key, 0, b, len);
}

/* 1 when key's extent is len bytes long and reads back (into b) as
 * t_fill(seed), else 0. */
static inline int st_same(struct hmm_store *s, void *b, uint64_t key,
			  uint32_t len, uint64_t seed)
{
	uint8_t *want;
	int ok;

	if (hmm_store_extent_len(s, key) != len)
		return 0;
	memset(b, 0, len);
	if (st_io(s, HMM_IO_READ, key, 0, b, len) || !(want = malloc(len)))
		return 0;
	t_fill(want, len, seed);
	ok = !memcmp(b, want, len);
	free(want);
	return ok;
}

static inline char *st_path(const char *name)
{
	static char p[8][4096 + 256];
	static int k;
	char *out = p[k++ & 7];

	snprintf(out, sizeof(p[0]), "%.4000s/%.200s", t_tmpdir(), name);
	return out;
}

/*
 * A crash test's kill: fork child(path, fd), which flushes round after
 * round and writes each finished round's number to fd; after it has
 * reported 2 + iter % 4 rounds, sleep a random 0-3 ms (from *seed) and
 * SIGKILL it.  *last is the last round it reported.  1 when the kill
 * ended it, 0 (with a diagnostic) when it had exited first.
 */
static inline int st_kill_child(void (*child)(const char *, int),
				const char *path, uint64_t *seed, int iter,
				uint64_t *last)
{
	struct timespec ts = { 0, (long)(t_rand(seed) % 3000000) };
	int pfd[2], status;
	uint64_t r;
	pid_t pid;

	*last = 0;
	if (pipe(pfd))
		t_fail_all("pipe");
	pid = fork();
	if (pid < 0)
		t_fail_all("fork");
	if (pid == 0) {
		child(path, pfd[1]);
		_exit(1);	/* it flushes until killed */
	}
	close(pfd[1]);
	while (*last < (uint64_t)(2 + iter % 4) &&
	       read(pfd[0], &r, sizeof(r)) == sizeof(r))
		*last = r;
	nanosleep(&ts, NULL);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	while (read(pfd[0], &r, sizeof(r)) == sizeof(r))
		*last = r;	/* reports that made it before the kill */
	close(pfd[0]);
	if (!WIFSIGNALED(status)) {
		t_diag("child exited %d before the kill", WEXITSTATUS(status));
		return 0;
	}
	return 1;
}

#endif
