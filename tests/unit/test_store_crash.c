// SPDX-License-Identifier: MIT
/*
 * test_store_crash — a child writes and flushes, writes more without
 * flushing, and is killed with SIGKILL; the reopened store presents
 * every flushed extent byte-exact and nothing unflushed.  Then children
 * that flush in a loop are killed at random moments (during flushes
 * too): the store always opens at the last reported flush or the one
 * after it, with every extent of that flush intact.
 */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "store_t.h"

#define NKEYS 8

static uint32_t len_of(uint64_t round, int k)
{
	return 4096u * (1 + (round + k) % 16);
}

/* Part A: one flush, then unflushed overwrites, new keys, a free. */
static void child_a(const char *path, int fd)
{
	struct hmm_store *s = st_open(path, 16 << 20, HMM_STORE_CREATE, 8);
	void *b = hmm_pool_alloc(hmm_store_pool(s), 16 * 4096);
	int bad = 0;

	for (int k = 0; k < NKEYS; k++)
		bad |= st_put(s, b, k, len_of(0, k), 1000 + k);
	bad |= hmm_store_meta_set(s, "flushed", 8);
	bad |= hmm_store_flush(s);
	for (int k = 0; k < 4; k++)
		bad |= st_put(s, b, k, len_of(1, k), 2000 + k);
	for (int k = 100; k < 104; k++)
		bad |= st_put(s, b, k, 8192, 3000 + k);
	bad |= hmm_store_extent_free(s, 7);
	bad |= hmm_store_meta_set(s, "unflushed", 10);
	if (write(fd, &bad, sizeof(bad)) != sizeof(bad))
		_exit(1);
	pause();
	_exit(0);
}

static void part_a(void)
{
	const char *path = st_path("crash-a.store");
	int pfd[2], bad = -1, ok = 1;
	struct hmm_store *s;
	struct hmm_store_stats st;
	char meta[16] = { 0 };
	pid_t pid;
	void *b;

	if (pipe(pfd))
		t_fail_all("pipe");
	pid = fork();
	if (pid == 0)
		child_a(path, pfd[1]);
	if (read(pfd[0], &bad, sizeof(bad)) != sizeof(bad))
		bad = -1;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(pfd[0]);
	close(pfd[1]);
	t_eq(bad, 0, "child wrote, flushed, wrote more, then was killed");

	s = st_open(path, 0, 0, 8);
	b = hmm_pool_alloc(hmm_store_pool(s), 16 * 4096);
	hmm_store_stats(s, &st);
	t_eq(st.extents, NKEYS, "reopen: exactly the flushed extents");
	t_eq(st.generation, 2, "reopen: generation of the flush");
	for (int k = 0; k < NKEYS; k++)
		ok &= st_same(s, b, k, len_of(0, k), 1000 + k);
	t_ok(ok, "every flushed extent byte-exact (overwritten ones too)");
	ok = 1;
	for (int k = 100; k < 104; k++)
		ok &= hmm_store_extent_len(s, k) == -ENOENT;
	t_ok(ok, "unflushed new extents are not presented");
	t_eq(hmm_store_meta_get(s, meta, sizeof(meta)), 8, "meta of the flush");
	t_ok(!strcmp(meta, "flushed"), "meta bytes of the flush");
	hmm_store_close(s);
}

/* Part B: flush in a loop, report each round; killed at random. */
static void child_b(const char *path, int fd)
{
	struct hmm_store *s = st_open(path, 0, 0, 8);
	void *b = hmm_pool_alloc(hmm_store_pool(s), 16 * 4096);

	for (uint64_t r = 1;; r++) {
		for (int k = 0; k < NKEYS; k++)
			if (st_put(s, b, k, len_of(r, k), r * 100 + k))
				_exit(1);
		if (hmm_store_meta_set(s, &r, sizeof(r)) || hmm_store_flush(s))
			_exit(1);
		if (write(fd, &r, sizeof(r)) != sizeof(r))
			_exit(1);
	}
}

static int part_b_once(const char *path, uint64_t seed, int iter)
{
	uint64_t last, m = 0, want;
	struct hmm_store *s;
	int ok = 1;
	void *b;

	if (!st_kill_child(child_b, path, &seed, iter, &last))
		return 0;
	s = st_open(path, 0, 0, 8);
	b = hmm_pool_alloc(hmm_store_pool(s), 16 * 4096);
	if (hmm_store_meta_get(s, &m, sizeof(m)) != sizeof(m))
		ok = 0;
	want = m;
	if (m != last && m != last + 1) {
		t_diag("reopen at round %llu, last reported %llu",
		       (unsigned long long)m, (unsigned long long)last);
		ok = 0;
	}
	for (int k = 0; k < NKEYS && ok; k++)
		if (!st_same(s, b, k, len_of(want, k), want * 100 + k)) {
			t_diag("round %llu key %d differs: %s",
			       (unsigned long long)want, k, hmm_last_error());
			ok = 0;
		}
	hmm_store_close(s);
	return ok;
}

static void part_b(void)
{
	const char *path = st_path("crash-b.store");
	uint64_t seed = (uint64_t)time(NULL);
	int good = 0;
	struct hmm_store *s = st_open(path, 8 << 20, HMM_STORE_CREATE, 8);
	uint64_t zero = 0;

	hmm_store_meta_set(s, &zero, sizeof(zero));
	for (int k = 0; k < NKEYS; k++) {
		void *b = hmm_pool_alloc(hmm_store_pool(s), 16 * 4096);

		st_put(s, b, k, len_of(0, k), k);
	}
	hmm_store_flush(s);
	hmm_store_close(s);
	for (int i = 0; i < 8; i++)
		good += part_b_once(path, seed + i, i);
	t_eq(good, 8, "8 random kills: always the last flush or the next, byte-exact");
}

int main(void)
{
	part_a();
	part_b();
	return t_done();
}
