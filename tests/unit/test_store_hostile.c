// SPDX-License-Identifier: MIT
/*
 * test_store_hostile — store files whose crcs are valid but whose fields
 * lie (what a crafted file, or one rewritten after bit rot, looks like):
 * each is refused with an error naming the store, the structure and the
 * field, or falls back to the previous flush, and never drives an
 * allocation or a write by the lie.  The reproducers of what
 * tests/fuzz/fuzz_store found, and of what writing it turned up:
 *   - a superblock whose table_cap wraps the table areas' end (table
 *     bytes read and allocated by it, from a file far shorter);
 *   - a superblock whose max_extents or meta_cap promise a table larger
 *     than its area: a flush wrote past it, over the live table, and
 *     the previous flush was lost;
 *   - a superblock at generation 2^64 - 1: the next flush's (0) lost to
 *     it at the next open;
 *   - a table entry out of range: the detail names its offset and field;
 *   - a tensor table (the meta blob, persist.c) whose count no blob can
 *     hold (an allocation of count records), two records of one id (one
 *     tensor's extents written by another), a record of 2^32 - 1 chunks
 *     whose bitmap size wrapped to 0 bytes, and a foreign blob: refused
 *     with -EUCLEAN (-EINVAL: foreign) naming the store path, and nothing
 *     leaked (the ASan build);
 *   - a record whose id is near 2^31 (ids are the store keys' high half,
 *     never reused): the open took a slot per id below it, 16 GiB.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "crc32c.h"
#include "hmm.h"
#include "store_t.h"
#include "table.h"

/* Superblock fields (table.h, table.c: hmm_sb_encode) */
#define SB_GEN		16
#define SB_TOFF0	48
#define SB_TOFF1	56
#define SB_TCAP		64
#define SB_MAXEXT	76
#define SB_SLOT		84
#define SB_NEXT		88
#define SB_MLEN		96
#define SB_TCRC		100
#define SB_CRC		124

#define CHUNK		4096u

struct file {
	uint8_t *b;
	size_t n;
};

static void file_read(const char *path, struct file *f)
{
	struct stat st;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &st))
		t_fail_all("open %s", path);
	f->n = st.st_size;
	f->b = malloc(f->n);
	if (!f->b || pread(fd, f->b, f->n, 0) != (ssize_t)f->n)
		t_fail_all("read %s", path);
	close(fd);
}

static void file_write(const char *path, struct file *f)
{
	int fd = open(path, O_WRONLY);

	if (fd < 0 || pwrite(fd, f->b, f->n, 0) != (ssize_t)f->n || fsync(fd))
		t_fail_all("write %s", path);
	close(fd);
	free(f->b);
}

static uint64_t get(const uint8_t *p, unsigned w)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < w; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void put(uint8_t *p, unsigned w, uint64_t v)
{
	for (unsigned i = 0; i < w; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint8_t *slot(struct file *f, int i)
{
	return f->b + i * HMM_SB_BYTES;
}

/* The slot of the newer superblock (both valid here). */
static int newest(struct file *f)
{
	return get(slot(f, 1) + SB_GEN, 8) > get(slot(f, 0) + SB_GEN, 8);
}

/* The meta blob superblock i names. */
static uint8_t *blob(struct file *f, int i)
{
	uint8_t *p = slot(f, i);
	uint64_t t = get(p + SB_TOFF0 + 8 * get(p + SB_SLOT, 4), 8);

	return f->b + t + get(p + SB_NEXT, 8) * HMM_TENT_BYTES;
}

/* What a writer of such a file does: the crc of the table superblock i
 * names, then of the superblock. */
static void recrc(struct file *f, int i)
{
	uint8_t *p = slot(f, i);
	uint64_t t = get(p + SB_TOFF0 + 8 * get(p + SB_SLOT, 4), 8);

	put(p + SB_TCRC, 4, hmm_crc32c(0, f->b + t,
				       hmm_table_bytes(get(p + SB_NEXT, 8),
						       (uint32_t)get(p + SB_MLEN, 4))));
	put(p + SB_CRC, 4, hmm_crc32c(0, p, SB_CRC));
}

static int try_open(const char *path, struct hmm_store **s)
{
	struct hmm_store_config c = { .path = path, .pool_bytes = 1 << 20,
				      .numa_node = -1 };

	*s = NULL;
	return hmm_store_open(&c, s);
}

/* A store at path: gen 2 holds keys 1-2, gen 3 key 3 too (slot 0). */
static void three_gens(const char *path, const struct hmm_store_config *cfg)
{
	struct hmm_store *s;
	uint8_t *b;

	unlink(path);
	if (hmm_store_open(cfg, &s))
		t_fail_all("open %s: %s", path, hmm_last_error());
	b = hmm_pool_alloc(hmm_store_pool(s), CHUNK);
	st_put(s, b, 1, CHUNK, 1);
	st_put(s, b, 2, CHUNK, 2);
	hmm_store_flush(s);
	st_put(s, b, 3, CHUNK, 3);
	if (hmm_store_flush(s))
		t_fail_all("flush %s: %s", path, hmm_last_error());
	hmm_store_close(s);
}

/* Opens at generation gen (the newest refused), the note naming why. */
static void falls_back(const char *path, uint64_t gen, const char *field,
		       const char *what)
{
	struct hmm_store_stats st;
	struct hmm_store *s;
	int r = try_open(path, &s);

	t_eq(r, 0, "%s: opens (%s)", what, r ? hmm_last_error() : "");
	if (r)
		return;
	hmm_store_stats(s, &st);
	t_eq(st.generation, gen, "%s: at the previous flush", what);
	t_ok(strstr(hmm_store_note(s), field) != NULL, "%s: note: %s", what,
	     hmm_store_note(s));
	hmm_store_close(s);
}

static const struct hmm_store_config *small_cfg(const char *path)
{
	static struct hmm_store_config c;

	c = (struct hmm_store_config){ .path = path, .size = 8 << 20,
				       .flags = HMM_STORE_CREATE,
				       .pool_bytes = 1 << 20, .numa_node = -1 };
	return &c;
}

/* table_cap of 2^64 - 4096: table_off[1] = 8192 + table_cap wraps to
 * 4096, the areas' end to 0, and the table "fits" any nextents. */
static void table_cap_wraps(void)
{
	const char *path = st_path("wrap.store");
	struct file f;
	uint8_t *p;

	three_gens(path, small_cfg(path));
	file_read(path, &f);
	p = slot(&f, 0);
	put(p + SB_TCAP, 8, (uint64_t)0 - 4096);
	put(p + SB_TOFF1, 8, 4096);
	put(p + SB_MAXEXT, 4, 0x80000);
	put(p + SB_NEXT, 8, 0x80000);	/* 12 MiB of table, 8 MiB file */
	put(p + SB_CRC, 4, hmm_crc32c(0, p, SB_CRC));
	file_write(path, &f);
	falls_back(path, 2, "table_cap", "table_cap wrapping the areas' end");
}

/*
 * max_extents promising more entries than the table area holds: a
 * store of 8 extents and a 4 KiB blob (8 KiB table areas) whose newest
 * superblock says 400.  The loader took it; 200 extents and a 4 KiB
 * blob then made a 12 KiB table that the flush wrote past its area
 * (area 1 here: over the first extent of the data area; from area 0,
 * over the live table), and extent 1, in both flushes, was gone.
 */
static void max_extents_lies(void)
{
	const char *path = st_path("maxext.store");
	struct hmm_store_config c = *small_cfg(path);
	struct hmm_store_stats st;
	struct hmm_store *s;
	static uint8_t meta[4096];
	struct file f;
	uint64_t gen;
	uint8_t *b;
	int i, r;

	c.max_extents = 8;
	c.meta_bytes = sizeof(meta);
	three_gens(path, &c);
	file_read(path, &f);
	i = newest(&f);
	put(slot(&f, i) + SB_MAXEXT, 4, 400);
	recrc(&f, i);
	file_write(path, &f);

	r = try_open(path, &s);
	t_eq(r, 0, "max_extents past the table area: opens (%s)",
	     r ? hmm_last_error() : "");
	if (r)
		return;
	hmm_store_stats(s, &st);
	gen = st.generation;
	t_eq(gen, 2, "at the previous flush");
	t_ok(strstr(hmm_store_note(s), "max_extents") != NULL, "note: %s",
	     hmm_store_note(s));
	b = hmm_pool_alloc(hmm_store_pool(s), CHUNK);
	for (uint64_t k = 100; k < 300; k++)
		if (st_put(s, b, k, CHUNK, k))
			break;
	memset(meta, 'm', sizeof(meta));
	hmm_store_meta_set(s, meta, sizeof(meta));
	r = hmm_store_flush(s);
	t_ok(r == 0 || r == -ENOSPC, "and a flush: %d %s", r,
	     r ? hmm_last_error() : "");
	hmm_store_close(s);

	/* the flush's superblock gone: the generation it started from */
	file_read(path, &f);
	memset(slot(&f, newest(&f)), 0, HMM_SB_BYTES);
	file_write(path, &f);
	r = try_open(path, &s);
	t_eq(r, 0, "the flush before it is intact (%s)",
	     r ? hmm_last_error() : "");
	if (r)
		return;
	hmm_store_stats(s, &st);
	t_eq(st.generation, gen, "at generation %llu",
	     (unsigned long long)gen);
	b = hmm_pool_alloc(hmm_store_pool(s), CHUNK);
	t_ok(st_same(s, b, 1, CHUNK, 1) && st_same(s, b, 2, CHUNK, 2),
	     "its extents intact");
	hmm_store_close(s);
}

/* generation 2^64 - 1: the next flush would be generation 0, older. */
static void generation_max(void)
{
	const char *path = st_path("genmax.store");
	struct hmm_store_stats st;
	struct hmm_store *s;
	struct file f;
	uint8_t *b;
	int i, r;

	three_gens(path, small_cfg(path));
	file_read(path, &f);
	i = newest(&f);
	put(slot(&f, i) + SB_GEN, 8, UINT64_MAX);
	recrc(&f, i);
	file_write(path, &f);

	r = try_open(path, &s);
	t_eq(r, 0, "generation 2^64 - 1: opens (%s)", r ? hmm_last_error() : "");
	if (r)
		return;
	b = hmm_pool_alloc(hmm_store_pool(s), CHUNK);
	t_eq(st_put(s, b, 77, CHUNK, 77), 0, "a write");
	t_eq(hmm_store_flush(s), 0, "a flush");
	hmm_store_close(s);
	r = try_open(path, &s);
	t_eq(r, 0, "reopens");
	if (r)
		return;
	hmm_store_stats(s, &st);
	t_ok(st_same(s, b = hmm_pool_alloc(hmm_store_pool(s), CHUNK), 77,
		     CHUNK, 77), "with what that flush wrote (generation %llu)",
	     (unsigned long long)st.generation);
	hmm_store_close(s);
}

/* An entry past the data area: the detail names it, its offset, the
 * field; and two lying superblocks name their fields. */
static void named(void)
{
	const char *path = st_path("named.store");
	struct hmm_store *s;
	struct file f;
	uint8_t *p;
	uint64_t t;
	char want[64];
	int i;

	three_gens(path, small_cfg(path));
	file_read(path, &f);
	i = newest(&f);
	p = slot(&f, i);
	t = get(p + SB_TOFF0 + 8 * get(p + SB_SLOT, 4), 8);
	put(f.b + t + HMM_TENT_BYTES + 8, 8, 1ull << 40);	/* entry 1's blk */
	recrc(&f, i);
	file_write(path, &f);
	t_eq(try_open(path, &s), -EUCLEAN,
	     "an entry past the data area: -EUCLEAN");
	snprintf(want, sizeof(want), "offset %llu",
		 (unsigned long long)(t + HMM_TENT_BYTES));
	t_ok(strstr(hmm_last_error(), path) && strstr(hmm_last_error(), want) &&
	     strstr(hmm_last_error(), "entry 1") &&
	     strstr(hmm_last_error(), "blk"), "detail: %s", hmm_last_error());

	file_read(path, &f);
	put(slot(&f, 0) + SB_MLEN, 4, 1u << 31);
	put(slot(&f, 0) + SB_CRC, 4, hmm_crc32c(0, slot(&f, 0), SB_CRC));
	put(slot(&f, 1) + SB_SLOT, 4, 0);
	put(slot(&f, 1) + SB_CRC, 4, hmm_crc32c(0, slot(&f, 1), SB_CRC));
	file_write(path, &f);
	t_eq(try_open(path, &s), -EUCLEAN, "both superblocks lying: -EUCLEAN");
	t_ok(strstr(hmm_last_error(), path) &&
	     strstr(hmm_last_error(), "damaged") &&
	     strstr(hmm_last_error(), "meta_len") &&
	     strstr(hmm_last_error(), "slot"), "detail: %s", hmm_last_error());
}

/* ---- the tensor table --------------------------------------------------- */

/* The record layout (persist.c: struct rec_head) */
#define REC_ID		0
#define REC_NDIM	8
#define REC_NCHUNKS	12
#define REC_SHAPE	88
#define REC_HEAD	152

static void cfg_of(struct hmm_config *c, const char *path, uint32_t flags)
{
	hmm_config_default(c);
	c->store_path = path;
	c->store_size = hmm_store_required(64 * CHUNK, CHUNK);
	c->chunk_bytes = CHUNK;
	c->host_budget = 1 << 20;
	c->pool_bytes = 256 << 10;
	c->flags = flags | HMM_CONFIG_STORE_BUFFERED;
}

/* A flushed context's store: tensors a (3 chunks) and b (1), written. */
static void saved(const char *path)
{
	static const int64_t na = 3 * CHUNK / 4, nb = CHUNK / 4;
	struct hmm_tensor *t;
	struct hmm_config c;
	struct hmm *h;
	void *p;

	unlink(path);
	cfg_of(&c, path, 0);
	if (hmm_open(&c, &h))
		t_fail_all("hmm_open %s: %s", path, hmm_last_error());
	if (hmm_tensor_new(h, "a", HMM_DTYPE_F32, 1, &na, &t) ||
	    hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD, &p))
		t_fail_all("tensor a: %s", hmm_last_error());
	t_fill(p, 3 * CHUNK, 5);
	hmm_unmap(t, p);
	if (hmm_tensor_new(h, "b", HMM_DTYPE_F32, 1, &nb, &t) ||
	    hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD, &p))
		t_fail_all("tensor b: %s", hmm_last_error());
	t_fill(p, CHUNK, 6);
	hmm_unmap(t, p);
	if (hmm_flush(h))
		t_fail_all("hmm_flush %s: %s", path, hmm_last_error());
	hmm_close(h);
}

/* hmm_open (KEEP) of path is refused with err, the detail naming the
 * store and saying what. */
static void refused(const char *path, int err, const char *says,
		    const char *what)
{
	struct hmm_config c;
	struct hmm *h = NULL;
	int r;

	cfg_of(&c, path, HMM_CONFIG_STORE_KEEP);
	r = hmm_open(&c, &h);
	t_eq(r, err, "%s: hmm_open refuses it", what);
	if (!r) {
		hmm_close(h);
		return;
	}
	t_ok(strstr(hmm_last_error(), path) && strstr(hmm_last_error(), says),
	     "%s: detail: %s", what, hmm_last_error());
}

/* Set a u32 at off of the live blob (the newest superblock's), re-crc. */
static void blob_put(const char *path, size_t off, uint32_t v)
{
	struct file f;
	int i;

	file_read(path, &f);
	i = newest(&f);
	memcpy(blob(&f, i) + off, &v, 4);	/* native endian */
	recrc(&f, i);
	file_write(path, &f);
}

static void tensor_table(void)
{
	const char *path = st_path("blob.store");
	const size_t rec1 = 12 + (REC_HEAD + 1 + 7) / 8 * 8;
	struct file f;
	uint8_t *b;
	int i;

	saved(path);
	blob_put(path, 8, UINT32_MAX);
	refused(path, -EUCLEAN, "count", "a count of 2^32 - 1 records");

	saved(path);
	file_read(path, &f);
	i = newest(&f);
	b = blob(&f, i);
	memcpy(b + rec1 + REC_ID, b + 12 + REC_ID, 4);
	recrc(&f, i);
	file_write(path, &f);
	refused(path, -EUCLEAN, "same id", "two records of one id");

	/* b (the last record): 2^32 - 1 chunks of 4 KiB, its shape saying
	 * as much; its bitmap's size wrapped to none, so it "fit" */
	saved(path);
	blob_put(path, rec1 + REC_NCHUNKS, UINT32_MAX);
	file_read(path, &f);
	i = newest(&f);
	put(blob(&f, i) + rec1 + REC_SHAPE, 8,
	    (uint64_t)UINT32_MAX * CHUNK / 4);
	recrc(&f, i);
	file_write(path, &f);
	refused(path, -EUCLEAN, "nchunks 4294967295", "a record of 2^32 - 1 "
		"chunks");

	/* after the records were allocated: nothing of them leaks */
	saved(path);
	blob_put(path, rec1 + REC_NDIM, HMM_MAX_DIMS + 1);
	refused(path, -EUCLEAN, "record 1 (offset 172) is corrupt", "a record of "
		"9 dimensions");

	saved(path);
	blob_put(path, 0, 0x12345678);
	refused(path, -EINVAL, "is not libhmm's tensor table", "a foreign "
		"blob");
}

/* Whether t (a host map of n bytes) holds t_fill(seed), or zeros (seed 0). */
static int holds(struct hmm_tensor *t, size_t n, uint64_t seed)
{
	uint8_t *want = calloc(1, n);
	void *p;
	int same;

	if (!want || hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p))
		t_fail_all("map: %s", hmm_last_error());
	if (seed)
		t_fill(want, n, seed);
	same = !memcmp(p, want, n);
	hmm_unmap(t, p);
	free(want);
	return same;
}

/*
 * A record whose id is 2^31 - 16, the last ids the table takes: the open
 * used to allocate a slot per id below it (16 GiB) and the next new
 * tensor's slots (32 GiB); now the context holds its live tensors only,
 * the 15 ids left are given out, the next new tensor is -EOVERFLOW naming
 * it, and the flush of them all opens again.
 */
static void far_ids(void)
{
	const char *path = st_path("ids.store");
	const size_t rec1 = 12 + (REC_HEAD + 1 + 7) / 8 * 8;
	static const int64_t one = 1;
	struct hmm_tensor *t, *ts[16];
	struct hmm_config c;
	struct hmm *h;
	int i, n, r;

	saved(path);
	blob_put(path, rec1 + REC_ID, 0x7ffffff0u);
	blob_put(path, rec1 + REC_HEAD, 0);	/* b's chunk: never written */
	cfg_of(&c, path, HMM_CONFIG_STORE_KEEP);
	t_watchdog(60, "far_ids");
	if (hmm_open(&c, &h))
		t_fail_all("hmm_open %s: %s", path, hmm_last_error());
	t_ok(!hmm_tensor_open(h, "a", &t) && holds(t, 3 * CHUNK, 5),
	     "ids far apart: a reads back");
	t_ok(!hmm_tensor_open(h, "b", &t) && holds(t, CHUNK, 0),
	     "ids far apart: b (id 2^31 - 16) reads zeros");
	for (n = 0; n < 16; n++)
		if ((r = hmm_tensor_new(h, "n", HMM_DTYPE_I8, 1, &one, &ts[n])))
			break;
	t_eq(n, 15, "15 new tensors above id 2^31 - 16");
	t_ok(r == -EOVERFLOW && strstr(hmm_last_error(), "tensor n") &&
	     strstr(hmm_last_error(), "ids"), "the 16th: -EOVERFLOW (%d): %s",
	     r, hmm_last_error());
	t_eq(hmm_flush(h), 0, "ids far apart: flush");
	hmm_close(h);
	if (hmm_open(&c, &h))
		t_fail_all("reopen %s: %s", path, hmm_last_error());
	for (i = 0; i < 17 && !hmm_tensor_open(h, "n", &t); i++)
		;
	t_eq(i, 15, "reopened: the 15 new tensors are there");
	t_ok(!hmm_tensor_open(h, "a", &t) && holds(t, 3 * CHUNK, 5),
	     "reopened: a reads back");
	hmm_close(h);
	alarm(0);
}

int main(void)
{
	table_cap_wraps();
	max_extents_lies();
	generation_max();
	named();
	tensor_table();
	far_ids();
	return t_done();
}
