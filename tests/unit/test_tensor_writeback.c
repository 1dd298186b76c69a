// SPDX-License-Identifier: MIT
/*
 * test_tensor_writeback — hmm_writeback writes a range's dirty host
 * chunks to the store and keeps them resident and clean: after it and
 * hmm_wait the store's bytes_in grew by exactly those chunks, residency
 * still shows them at the host, a second writeback writes nothing, an
 * evict afterwards writes nothing (a clean drop) and a map that needs
 * the room drops them without I/O; the bytes read back from the store
 * are exact.  A chunk mapped at the host is skipped (written at the
 * next writeback after its unmap), never-written and clean chunks are
 * skipped, a range writes the chunks it touches; a bad range is -EINVAL
 * naming the tensor and writes nothing; no store tier is -ENODEV.
 *
 * The first store operation fails (-EIO): embedded, hmm_fault_set arms
 * it just before; in shared mode hmmd starts with HMM_FAULT=eio@1, so
 * its first store operation is this test's first write-back (as in
 * test_tensor_fault).  The error comes back from hmm_wait (in shared
 * mode hmmd answers WRITEBACK once the writes are done, so it may come
 * from hmm_writeback itself), names the tensor, and loses no byte: the
 * chunk stays dirty in memory and the next writeback writes it.
 */
#include "t.h"

#include "fault_inject.h"
#include "hmm.h"
#include "hmm_mode.h"

#define CHUNK	(64 << 10)
#define NCH	4
#define TB	(NCH * CHUNK)
#define BUDGET	(16 * CHUNK)

static struct hmm *h;

static uint64_t written(void)	/* bytes the store took, so far */
{
	struct hmm_stats st;

	if (hmm_stats(h, &st))
		t_fail_all("hmm_stats: %s", hmm_last_error());
	return st.tier[HMM_TIER_STORE].bytes_in;
}

static uint64_t host_bytes(struct hmm_tensor *t)
{
	uint64_t b[HMM_TIERS];

	if (hmm_tensor_residency(t, b))
		t_fail_all("residency: %s", hmm_last_error());
	return b[HMM_TIER_HOST];
}

/* t's bytes equal want[0..TB): 0, 1 when they differ, or the map's error */
static int same(struct hmm_tensor *t, const uint8_t *want)
{
	void *p;
	int r = hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p);

	if (r)
		return r;
	r = memcmp(p, want, TB) != 0;
	hmm_unmap(t, p);
	return r;
}

/* writeback [off, +len) of t and wait: the error of either */
static int wb(struct hmm_tensor *t, uint64_t off, uint64_t len)
{
	int r = hmm_writeback(t, off, len);

	return r ? r : hmm_wait(h, t);
}

/* The first store operation fails; nothing is lost. */
static void check_fault(struct hmm_tensor *a, uint8_t *want)
{
	uint64_t w0;
	int r;

	t_fill(want, TB, 1);
	t_eq(hmm_test_fill(a, TB, 1), 0, "alpha filled (4 dirty chunks)");
	if (!hmm_test_shared())
		t_eq(hmm_fault_set("eio@1"), 0, "inject eio on the next "
		     "store op");
	r = hmm_writeback(a, 0, HMM_ALL);
	if (!hmm_test_shared())
		t_eq(r, 0, "hmm_writeback returns at once");
	if (r == 0)
		r = hmm_wait(h, a);
	t_eq(r, -EIO, "the failed write comes back%s: %s",
	     hmm_test_shared() ? " (from writeback or wait)" :
	     " from hmm_wait", hmm_strerror(r));
	t_ok(strstr(hmm_last_error(), "alpha") != NULL, "detail names the "
	     "tensor: %s", hmm_last_error());
	if (!hmm_test_shared())
		hmm_fault_set(NULL);
	t_eq(host_bytes(a), TB, "every chunk still at the host");
	t_eq(same(a, want), 0, "alpha's bytes intact in memory");
	w0 = written();
	t_eq(wb(a, 0, HMM_ALL), 0, "writeback again once the fault is "
	     "gone");
	t_eq(written() - w0, CHUNK, "the failed chunk (and only it) was "
	     "written now");
	t_eq(hmm_evict(a, 0, HMM_ALL, HMM_TIER_HOST), 0, "evict");
	t_eq(hmm_wait(h, a), 0, "wait");
	t_eq(written() - w0, CHUNK, "the evict wrote nothing: all clean");
	t_eq(same(a, want), 0, "alpha exact from the store");
}

/* Written, kept, clean: no write at the evict, exact from the store. */
static void check_keep(struct hmm_tensor *a, uint8_t *want)
{
	uint64_t w0, b[HMM_TIERS];

	t_fill(want, TB, 2);
	t_eq(hmm_test_fill(a, TB, 2), 0, "alpha rewritten (dirty)");
	w0 = written();
	t_eq(wb(a, 0, HMM_ALL), 0, "writeback and wait: 0");
	t_eq(written() - w0, TB, "the store took the 4 chunks");
	t_eq(hmm_tensor_residency(a, b), 0, "residency");
	t_ok(b[HMM_TIER_HOST] == TB && b[HMM_TIER_STORE] == TB,
	     "still at the host (%llu bytes) and in the store (%llu)",
	     (unsigned long long)b[HMM_TIER_HOST],
	     (unsigned long long)b[HMM_TIER_STORE]);
	t_eq(same(a, want), 0, "bytes as written, read at the host");
	t_eq(written() - w0, TB, "that map read nothing back, wrote "
	     "nothing");
	t_eq(wb(a, 0, HMM_ALL), 0, "a second writeback");
	t_eq(written() - w0, TB, "writes nothing (clean)");
	t_eq(hmm_evict(a, 0, HMM_ALL, HMM_TIER_HOST), 0, "evict");
	t_eq(hmm_wait(h, a), 0, "wait");
	t_eq(written() - w0, TB, "the evict wrote nothing (clean drop)");
	t_eq(host_bytes(a), 0, "alpha left the host");
	t_eq(same(a, want), 0, "alpha read back exact from the store");
}

/* A map that needs the room drops the clean chunks without a write. */
static void check_lru(struct hmm_tensor *a, uint8_t *want)
{
	struct hmm_tensor *g;
	int64_t n = BUDGET;
	uint64_t w0;
	void *p;

	t_fill(want, TB, 3);
	t_eq(hmm_test_fill(a, TB, 3), 0, "alpha rewritten");
	t_eq(wb(a, 0, HMM_ALL), 0, "written back");
	if (hmm_tensor_new(h, "gamma", HMM_DTYPE_U8, 1, &n, &g))
		t_fail_all("gamma: %s", hmm_last_error());
	w0 = written();
	if (!t_eq(hmm_map(g, 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD, &p), 0,
		  "gamma, the whole budget, mapped"))
		t_fail_all("map gamma: %s", hmm_last_error());
	memset(p, 7, BUDGET);
	t_eq(host_bytes(a), 0, "alpha's chunks dropped for it");
	t_eq(written() - w0, 0, "without a write: they were clean");
	hmm_unmap(g, p);
	t_eq(hmm_tensor_free(g), 0, "gamma freed");
	t_eq(same(a, want), 0, "alpha exact from the store");
}

/* A mapped chunk is skipped; a range writes the chunks it touches. */
static void check_pinned(struct hmm_tensor *a, uint8_t *want)
{
	uint64_t w0;
	uint8_t *p;
	void *vp;

	t_fill(want, TB, 4);
	t_eq(hmm_test_fill(a, TB, 4), 0, "alpha rewritten");
	t_eq(hmm_map(a, CHUNK, CHUNK, HMM_TIER_HOST, HMM_WRITE, &vp), 0,
	     "chunk 1 mapped for writing");
	p = vp;
	w0 = written();
	t_eq(wb(a, 0, HMM_ALL), 0, "writeback with chunk 1 mapped");
	t_eq(written() - w0, 3 * CHUNK, "3 chunks written, the mapped one "
	     "skipped");
	memset(p + 100, 0x5a, 1000);	/* still being written */
	memset(want + CHUNK + 100, 0x5a, 1000);
	t_eq(hmm_unmap(a, p), 0, "chunk 1 unmapped");
	t_eq(wb(a, CHUNK + 5, 10), 0, "writeback of 10 bytes inside chunk 1");
	t_eq(written() - w0, TB, "wrote chunk 1 whole, the rest clean");
	t_eq(hmm_test_fill(a, TB, 5), 0, "alpha rewritten");
	t_fill(want, TB, 5);
	w0 = written();
	t_eq(wb(a, CHUNK - 1, CHUNK + 2), 0, "writeback of [CHUNK - 1, +CHUNK "
	     "+ 2)");
	t_eq(written() - w0, 3 * CHUNK, "chunks 0, 1 and 2 written");
	t_eq(wb(a, 3 * CHUNK, HMM_ALL), 0, "writeback of the last chunk");
	t_eq(written() - w0, TB, "the fourth");
	t_eq(hmm_evict(a, 0, HMM_ALL, HMM_TIER_HOST), 0, "evict");
	t_eq(hmm_wait(h, a), 0, "wait");
	t_eq(written() - w0, TB, "nothing more written");
	t_eq(same(a, want), 0, "alpha exact from the store (chunk 1's late "
	     "bytes too)");
}

/* Bad ranges: -EINVAL naming the tensor, nothing written. */
static void check_bad(struct hmm_tensor *a, uint8_t *want)
{
	struct hmm_tensor *z;
	int64_t n = TB;
	uint64_t w0;

	t_fill(want, TB, 6);
	t_eq(hmm_test_fill(a, TB, 6), 0, "alpha rewritten (dirty)");
	w0 = written();
	t_eq(hmm_writeback(a, TB, 1), -EINVAL, "offset at the end: -EINVAL");
	t_ok(strstr(hmm_last_error(), "alpha") &&
	     strstr(hmm_last_error(), "hmm_writeback") &&
	     strstr(hmm_last_error(), "past the end"), "detail: %s",
	     hmm_last_error());
	t_eq(hmm_writeback(a, 100, TB), -EINVAL, "range past the end");
	t_ok(strstr(hmm_last_error(), "alpha") &&
	     strstr(hmm_last_error(), "outside"), "detail: %s",
	     hmm_last_error());
	t_eq(hmm_writeback(a, 0, 0), -EINVAL, "len 0: -EINVAL");
	t_eq(hmm_writeback(NULL, 0, 1), -EINVAL, "no tensor: -EINVAL");
	t_ok(strstr(hmm_last_error(), "no tensor") != NULL, "detail: %s",
	     hmm_last_error());
	t_eq(hmm_wait(h, a), 0, "nothing failed");
	t_eq(written() - w0, 0, "nothing written");
	t_eq(host_bytes(a), TB, "alpha still at the host");
	t_eq(same(a, want), 0, "its bytes as they were");
	if (hmm_tensor_new(h, "zero", HMM_DTYPE_U8, 1, &n, &z))
		t_fail_all("zero: %s", hmm_last_error());
	t_eq(wb(z, 0, HMM_ALL), 0, "writeback of a never-written tensor");
	t_eq(written() - w0, 0, "writes nothing");
	hmm_tensor_free(z);
}

/* A context without a store: -ENODEV. */
static void check_nostore(void)
{
	struct hmm_config cfg;
	struct hmm_tensor *t;
	struct hmm *h2;
	int64_t n = TB;

	if (hmm_test_shared()) {
		hmm_test_skip("no store tier: -ENODEV", "shared mode: hmmd "
			      "always has a store");
		return;
	}
	hmm_config_default(&cfg);
	cfg.host_budget = BUDGET;
	cfg.chunk_bytes = CHUNK;
	if (hmm_open(&cfg, &h2))
		t_fail_all("hmm_open without a store: %s", hmm_last_error());
	if (hmm_tensor_new(h2, "nostore", HMM_DTYPE_U8, 1, &n, &t))
		t_fail_all("tensor: %s", hmm_last_error());
	t_eq(hmm_writeback(t, 0, HMM_ALL), -ENODEV, "no store tier: "
	     "-ENODEV");
	t_ok(strstr(hmm_last_error(), "nostore") &&
	     strstr(hmm_last_error(), "no store"), "detail: %s",
	     hmm_last_error());
	hmm_tensor_free(t);
	hmm_close(h2);
}

int main(void)
{
	static uint8_t want[TB];
	struct hmm_config cfg;
	struct hmm_tensor *a;
	int64_t n = TB;
	char path[4200];

	hmm_test_config(&cfg, path, sizeof(path), 32 << 20, BUDGET, CHUNK);
	if (hmm_test_shared()) {
		setenv("HMM_FAULT", "eio@1", 1);	/* for hmmd */
		hmm_test_mode(&cfg);
		unsetenv("HMM_FAULT");
	}
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	if (hmm_tensor_new(h, "alpha", HMM_DTYPE_U8, 1, &n, &a))
		t_fail_all("tensor: %s", hmm_last_error());
	check_fault(a, want);
	check_keep(a, want);
	check_lru(a, want);
	check_pinned(a, want);
	check_bad(a, want);
	check_nostore();
	hmm_tensor_free(a);
	hmm_close(h);
	return t_done();
}
