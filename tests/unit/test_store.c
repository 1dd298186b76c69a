// SPDX-License-Identifier: MIT
/* test_store — round trip through the store: extent and RAW I/O, replace,
 * free, iterate, meta, flush and reopen, stats counted exactly, and bad
 * arguments rejected with -EINVAL/-ENOENT and a detail naming the path. */
#include <liburing.h>

#include "store_t.h"

#define N 24

static int ndone;

static void on_done(struct hmm_io *io)
{
	ndone++;
	*(int *)io->priv = io->result;
}

static uint32_t len_of(int i)
{
	return (uint32_t)(4096 * (1 + (i * 7) % 33));
}

static int each_cb(void *arg, uint64_t key, uint32_t len)
{
	uint64_t *prev = arg;

	if (key <= prev[0] && prev[1])
		prev[2] = 1;	/* out of order */
	prev[0] = key;
	prev[1]++;
	prev[3] += len;
	return 0;
}

static void round_trip(const char *path)
{
	struct hmm_store *s = st_open(path, 64 << 20, HMM_STORE_CREATE, 4);
	struct hmm_pool *pool = hmm_store_pool(s);
	struct hmm_io io[N], *p[N];
	struct hmm_store_stats st;
	uint8_t *wb[N], *rb, *keep[N];
	int res[N], bad = 0;
	uint64_t wbytes = 0, it[4] = { 0 };

	hmm_store_stats(s, &st);
	t_eq(st.direct, 1, "O_DIRECT on a real file system");
	t_eq(st.registered_buffers, 1, "pool registered");
	t_eq(st.extents, 0, "new store is empty");
	t_eq(st.generation, 1, "generation 1 after format");
	t_ok(st.capacity_bytes > 60 << 20 && st.capacity_bytes < 64 << 20,
	     "capacity %llu", (unsigned long long)st.capacity_bytes);
	t_diag("note: '%s' ring flags %#x", hmm_store_note(s), st.ring_flags);

	for (int i = 0; i < N; i++) {
		wb[i] = hmm_pool_alloc(pool, len_of(i));
		if (!wb[i])
			t_fail_all("pool alloc: %s", hmm_last_error());
		t_fill(wb[i], len_of(i), 100 + i);
		io[i] = (struct hmm_io){ .op = HMM_IO_WRITE, .key = 1000 - i,
					 .len = len_of(i), .buf = wb[i],
					 .done = on_done, .priv = &res[i] };
		p[i] = &io[i];
		wbytes += len_of(i);
		res[i] = 1;
	}
	/* more than the queue depth (4): the backlog carries the rest */
	t_eq(hmm_store_submit(s, p, N), N, "submit %d writes in one batch", N);
	t_ok(hmm_store_inflight(s) > 0, "requests in flight");
	while (hmm_store_inflight(s))
		if (hmm_store_poll(s, 1, -1) < 0)
			break;
	t_eq(ndone, N, "every done() called");
	for (int i = 0; i < N; i++)
		bad += res[i] != 0;
	t_eq(bad, 0, "every write succeeded");

	rb = hmm_pool_alloc(pool, 33 * 4096);
	bad = 0;
	for (int i = 0; i < N; i++) {
		memset(rb, 0xee, len_of(i));
		if (st_io(s, HMM_IO_READ, 1000 - i, 0, rb, len_of(i)) ||
		    memcmp(rb, wb[i], len_of(i)))
			bad++;
	}
	t_eq(bad, 0, "every extent reads back byte-exact");
	t_eq(hmm_store_extent_len(s, 1000 - 5), len_of(5), "extent_len");
	t_eq(hmm_store_extent_len(s, 5), -ENOENT, "extent_len of a stranger");

	hmm_store_stats(s, &st);
	t_eq(st.extents, N, "stats: extents");
	t_eq(st.write_bytes, wbytes, "stats: write bytes exact");
	t_eq(st.write_ops, N, "stats: write ops");
	t_eq(st.read_bytes, wbytes, "stats: read bytes exact");
	t_eq(st.used_bytes, wbytes, "stats: used bytes (4 KiB blocks)");
	t_eq(st.errors + st.crc_errors, 0, "stats: no errors");

	/* replace extent 1000 with other bytes and length */
	hmm_pool_free(pool, wb[0]);
	wb[0] = hmm_pool_alloc(pool, len_of(1));
	t_fill(wb[0], len_of(1), 555);
	t_eq(st_io(s, HMM_IO_WRITE, 1000, 0, wb[0], len_of(1)), 0,
	     "rewrite an extent with another length");
	t_eq(st_io(s, HMM_IO_READ, 1000, 0, rb, len_of(1)), 0, "read it");
	t_ok(!memcmp(rb, wb[0], len_of(1)), "rewritten bytes read back");
	t_eq(hmm_store_extent_len(s, 1000), len_of(1), "new length");
	/* the pool dies with the store: keep copies for after the reopen */
	for (int i = 0; i < N; i++) {
		keep[i] = malloc(33 * 4096);
		memcpy(keep[i], wb[i], i ? len_of(i) : len_of(1));
	}

	t_eq(hmm_store_extent_free(s, 1000 - 3), 0, "free an extent");
	t_eq(hmm_store_extent_free(s, 1000 - 3), -ENOENT, "free it again");
	t_eq(st_io(s, HMM_IO_READ, 1000 - 3, 0, rb, len_of(3)), -ENOENT,
	     "read of a freed extent");
	t_eq(hmm_store_extent_each(s, each_cb, it), 0, "each");
	t_eq(it[1], N - 1, "each visits every live extent");
	t_eq(it[2], 0, "each in key order");

	t_eq(hmm_store_meta_set(s, "names:w,b", 9), 0, "meta set");

	/* RAW I/O at the end of the data area, from an unregistered buffer */
	{
		void *ub;
		uint64_t end = st.capacity_bytes - 8192;

		if (posix_memalign(&ub, 4096, 8192))
			t_fail_all("memalign");
		t_fill(ub, 8192, 9);
		t_eq(st_io(s, HMM_IO_WRITE_RAW, 0, end, ub, 8192), 0,
		     "raw write, unregistered buffer");
		memset(rb, 0, 8192);
		t_eq(st_io(s, HMM_IO_READ_RAW, 0, end, rb, 8192), 0, "raw read");
		t_ok(!memcmp(rb, ub, 8192), "raw bytes read back");
		free(ub);
	}

	t_eq(hmm_store_flush(s), 0, "flush");
	hmm_store_stats(s, &st);
	t_eq(st.generation, 2, "flush bumps the generation");
	t_eq(st.flushes, 1, "stats: flushes");
	hmm_store_close(s);

	s = st_open(path, 128 << 20, 0, 0);
	t_ok(strstr(hmm_store_note(s), "size 134217728 ignored") != NULL,
	     "reopen with another size: kept, and said: %s", hmm_store_note(s));
	pool = hmm_store_pool(s);
	rb = hmm_pool_alloc(pool, 33 * 4096);
	hmm_store_stats(s, &st);
	t_eq(st.extents, N - 1, "reopen: extents");
	t_eq(st.generation, 2, "reopen: generation");
	bad = 0;
	for (int i = 0; i < N; i++) {
		uint32_t l = i == 0 ? len_of(1) : len_of(i);
		int r;

		if (i == 3)
			continue;
		r = st_io(s, HMM_IO_READ, 1000 - i, 0, rb, l);
		if (r || memcmp(rb, keep[i], l)) {
			t_diag("extent %d: %d %s", 1000 - i, r, hmm_last_error());
			bad++;
		}
	}
	t_eq(bad, 0, "reopen: every extent byte-exact");
	t_eq(hmm_store_extent_len(s, 1000 - 3), -ENOENT, "reopen: freed stays freed");
	{
		char m[32] = { 0 };

		t_eq(hmm_store_meta_get(s, m, sizeof(m)), 9, "reopen: meta length");
		t_ok(!strcmp(m, "names:w,b"), "reopen: meta bytes");
	}
	for (int i = 0; i < N; i++)
		free(keep[i]);
	hmm_store_close(s);
}

static void bad_args(const char *path)
{
	struct hmm_store *s = st_open(path, 16 << 20, HMM_STORE_CREATE, 0);
	uint8_t *b = hmm_pool_alloc(hmm_store_pool(s), 16384);
	struct hmm_io ok = { .op = HMM_IO_WRITE, .key = 1, .len = 4096, .buf = b };
	struct hmm_io bad = { .op = HMM_IO_WRITE, .key = 2, .len = 4096,
			      .buf = b + 1 };
	struct hmm_io *two[2] = { &ok, &bad };
	struct hmm_store_config c = { .path = path, .queue_depth = 9999 };
	struct hmm_store *s2;

	t_eq(st_io(s, HMM_IO_WRITE, 1, 0, b + 512, 4096), -EINVAL,
	     "misaligned buffer");
	t_ok(strstr(hmm_last_error(), path) != NULL, "detail names the path: %s",
	     hmm_last_error());
	t_eq(st_io(s, HMM_IO_WRITE, 1, 0, b, 4000), -EINVAL, "misaligned length");
	t_eq(st_io(s, HMM_IO_WRITE, 1, 0, b, 0), -EINVAL, "zero length");
	t_eq(st_io(s, HMM_IO_WRITE, 1, 0, NULL, 4096), -EINVAL, "NULL buffer");
	t_eq(st_io(s, 99, 1, 0, b, 4096), -EINVAL, "unknown op");
	t_eq(st_io(s, HMM_IO_READ_RAW, 0, 100, b, 4096), -EINVAL,
	     "misaligned raw offset");
	t_eq(st_io(s, HMM_IO_READ_RAW, 0, 1ull << 40, b, 4096), -EINVAL,
	     "raw offset past the end");
	t_eq(st_io(s, HMM_IO_READ, 77, 0, b, 4096), -ENOENT, "read unknown key");
	t_eq(hmm_store_extent_len(s, 1), -ENOENT, "nothing was written");
	t_eq(hmm_store_submit(s, two, 2), 1, "batch stops at the bad one");
	t_eq(hmm_store_wait(s, &ok), 0, "the good one completes");
	t_eq(st_io(s, HMM_IO_READ, 1, 0, b, 8192), -EINVAL,
	     "read with the wrong length");
	t_eq(hmm_store_submit(s, NULL, 1), -EINVAL, "NULL request array");
	t_eq(hmm_store_open(&c, &s2), -EINVAL, "queue depth 9999 refused");
	c.queue_depth = 0;
	c.block_size = 5000;
	t_eq(hmm_store_open(&c, &s2), -EINVAL, "block size 5000 refused");
	c.block_size = 0;
	c.path = NULL;
	t_eq(hmm_store_open(&c, &s2), -EINVAL, "no path");
	t_eq(hmm_store_meta_set(s, b, 2u << 20), -ENOSPC, "meta too big");
	hmm_store_close(s);
}

/* A short round trip: write, read back, flush, stats say what ran. */
static int quick(struct hmm_store *s, const char *what)
{
	uint8_t *b = hmm_pool_alloc(hmm_store_pool(s), 65536);
	uint8_t *c = hmm_pool_alloc(hmm_store_pool(s), 65536);
	int ok;

	t_fill(b, 65536, 77);
	ok = st_io(s, HMM_IO_WRITE, 1, 0, b, 65536) == 0 &&
	     st_io(s, HMM_IO_READ, 1, 0, c, 65536) == 0 &&
	     !memcmp(b, c, 65536) && hmm_store_flush(s) == 0;
	if (!ok)
		t_diag("%s: %s", what, hmm_last_error());
	hmm_pool_free(hmm_store_pool(s), b);
	hmm_pool_free(hmm_store_pool(s), c);
	return ok;
}

static void rings(const char *path)
{
	static const char *const skip[] = { "1", "2", "3" };
	struct hmm_store_stats st;
	struct hmm_store *s;

	for (int i = 0; i < 3; i++) {
		setenv("HMM_URING_FALLBACK", skip[i], 1);
		s = st_open(path, 8 << 20, HMM_STORE_CREATE | HMM_STORE_TRUNCATE, 4);
		hmm_store_stats(s, &st);
		t_ok(quick(s, skip[i]), "fallback ring %d (flags %#x) round-trips",
		     i + 1, st.ring_flags);
		t_ok(!(st.ring_flags & IORING_SETUP_DEFER_TASKRUN),
		     "without DEFER_TASKRUN");
		hmm_store_close(s);
	}
	setenv("HMM_URING_FALLBACK", "4", 1);	/* as if no io_uring */
	s = st_open(path, 8 << 20, HMM_STORE_CREATE | HMM_STORE_TRUNCATE, 4);
	hmm_store_stats(s, &st);
	t_ok(strstr(hmm_store_note(s), "synchronous") && !st.ring_flags &&
	     !st.registered_buffers, "no io_uring: synchronous, and said: %s",
	     hmm_store_note(s));
	t_ok(quick(s, "sync"), "synchronous I/O round-trips");
	hmm_fault_set("short@1,eio@3");
	{
		uint8_t *b = hmm_pool_alloc(hmm_store_pool(s), 65536);

		t_eq(st_io(s, HMM_IO_WRITE, 2, 0, b, 65536), 0,
		     "synchronous: a short write is completed");
		t_eq(st_io(s, HMM_IO_READ, 2, 0, b, 65536), 0, "read it");
		t_eq(st_io(s, HMM_IO_READ, 2, 0, b, 65536), -EIO,
		     "synchronous: an injected EIO");
		hmm_fault_set(NULL);
		hmm_store_stats(s, &st);
		t_eq(st.short_resubmits, 1, "one short resubmit");
	}
	hmm_store_close(s);
	unsetenv("HMM_URING_FALLBACK");
	s = st_open(path, 8 << 20, HMM_STORE_SQPOLL, 4);
	hmm_store_stats(s, &st);
	t_ok(st.sqpoll || strstr(hmm_store_note(s), "SQPOLL"),
	     "SQPOLL in use (%u) or said why not", st.sqpoll);
	t_ok(quick(s, "sqpoll"), "SQPOLL ring round-trips");
	hmm_store_close(s);
}

static void *drive(void *arg)
{
	return (void *)(intptr_t)quick(arg, "thread");
}

/* Opened on this thread, driven by another: the ring binds on first use. */
static void handoff(const char *path)
{
	struct hmm_store *s = st_open(path, 8 << 20, 0, 4);
	struct hmm_store_stats st;
	pthread_t th;
	void *ok = NULL;
	uint8_t *b = hmm_pool_alloc(hmm_store_pool(s), 4096);

	pthread_create(&th, NULL, drive, s);
	pthread_join(th, &ok);
	t_ok(ok != NULL, "a store opened here works from an I/O thread");
	hmm_store_stats(s, &st);
	if (st.ring_flags & IORING_SETUP_SINGLE_ISSUER) {
		t_eq(st_io(s, HMM_IO_READ, 1, 0, b, 4096), -EEXIST,
		     "then a second thread gets -EEXIST (single issuer)");
		t_ok(strstr(hmm_last_error(), "second thread") != NULL,
		     "detail: %s", hmm_last_error());
	}
	hmm_store_close(s);
}

int main(void)
{
	round_trip(st_path("rt.store"));
	bad_args(st_path("bad.store"));
	rings(st_path("rings.store"));
	handoff(st_path("rings.store"));
	return t_done();
}
