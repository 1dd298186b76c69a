// SPDX-License-Identifier: MIT
/*
 * fuzz_store — libFuzzer target for hostile store images: files whose
 * crcs are valid but whose fields lie.  Built by `make fuzz` with
 * -fsanitize=fuzzer,address,undefined and linked with libhmm's sources;
 * run by `make check` for 20 s over tests/fuzz/corpus/fuzz_store/.
 *
 * Once per process it makes two small stores with the public API, a
 * plain one and one striped over two files, each flushed twice (a
 * generation with tensors w, x, two named d, z; then w's chunk 1
 * rewritten, x freed, y added), and keeps their images.  Each input
 * then:
 *   1. copies an image (the first byte picks plain or striped), applies
 *      the input's mutations (below), recomputes the crc32c of each
 *      superblock and of the table each names (unless the input says
 *      to leave one stale), and writes the files;
 *   2. hmm_open's it (KEEP), hmm_tensor_open's every saved name until
 *      -ENOENT and reads each tensor's chunks through hmm_map;
 *   3. when the input asks: rewrites a chunk, adds a tensor of up to 64
 *      chunks, hmm_flush'es and closes; reopens and reads all again;
 *      then zeroes the newest superblock of every file and reopens:
 *      the previous flush must come back as step 2 saw it.
 * Properties, beyond "no crash, no sanitizer report, no hang, no
 * allocation of more than -malloc_limit_mb":
 *   - a failure is a negative errno with a detail; hmm_open's names a
 *     store file;
 *   - a chunk that reads is all zeros or the bytes of a chunk that was
 *     saved (any tensor, any generation: a table whose entries were
 *     swapped with their crcs is a store the format cannot tell from a
 *     real one, and a crc32c the fuzzer learns to match may name a
 *     never-written block; but it is never other bytes, since the
 *     extents' own crcs are not recomputed);
 *   - after a good flush, reopening gives every tensor step 2 opened,
 *     same shape, every chunk that read the same bytes (the rewritten
 *     one the new bytes), and the added tensor whole; a failed flush
 *     leaves a store that opens or fails with a detail;
 *   - the flush is copy-on-write: with its superblock gone, the
 *     generation step 2 read opens and reads the same.
 * A saved tensor larger than 64Ki chunks whose record is whole (its
 * bitmap present) is not opened: the engine then allocates its chunk
 * table by design (hmm.h: up to the machine's memory); one whose
 * record is cut is opened, and must be refused.
 *
 * An input: a flags byte (bit 0 striped; bits 1-4 leave stale the crc
 * of superblock 0, 1, the table superblock 0 names, 1 names; bit 5 do
 * step 3; bit 6 skip the copy-on-write check; bit 7 write both chunks
 * of the rewritten tensor), a byte for step 3 (chunks of the added
 * tensor, 0..63), then records, the first byte of each an operation:
 * overwrite bytes of a region, set a field (superblock, table entry,
 * tensor-table header or record, or any 8 aligned bytes) to a value
 * chosen among edges of its kind, copy bytes between regions, flip a
 * bit, or resize a file.  Regions: each file's two superblocks, the
 * entries and the meta blob of the table each names, the start of the
 * data area, and the whole file.  Missing bytes read as zeros.
 * FUZZ_STORE_TRACE=1 prints what each input did on stderr.
 *
 * The stores are $HMM_TEST_DIR (else /tmp)/fuzz_store.PID.{0,1}, made
 * for each input and removed at its end, and however the run ends
 * (fz_janitor.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "err.h"
#include "fz_in.h"
#include "fz_janitor.h"
#include "fz_must.h"
#include "hmm.h"
#include "table.h"

#define CHUNK		4096u	/* config.chunk_bytes */
#define NMEM		2	/* files of the striped store */
#define NKNOWN		128	/* chunk images ever saved */
#define NOPEN		32	/* tensors step 2 opens, at most */
#define PER_NAME	4	/* of one name */
#define NCHECK		17	/* chunks read per tensor: 16 first, last */
#define BIG_CHUNKS	65536u	/* a whole record past this: not opened */
#define NEW_NAME	"fuzz_new"
#define MAX_FILE	(64u << 20)	/* resize no further */

/* The tensor table's record (persist.c: struct rec_head), checked
 * against the images at start: id, dtype, ndim, nchunks, chunk_bytes,
 * name[64], a pad, shape[8], then the bitmap of stored chunks. */
#define REC_NAME	20
#define REC_SHAPE	88
#define REC_HEAD	152

/* The superblock's fields (table.c: hmm_sb_encode), checked at start. */
static const struct field { uint16_t off, width; } sb_fields[] = {
	{ 16, 8 }, { 24, 8 }, { 32, 8 }, { 40, 8 }, { 48, 8 }, { 56, 8 },
	{ 64, 8 }, { 72, 4 }, { 76, 4 }, { 80, 4 }, { 84, 4 }, { 88, 8 },
	{ 96, 4 }, { 100, 4 }, { 104, 8 }, { 112, 8 }, { 120, 2 },
	{ 122, 2 },
};
#define SB_GEN		16	/* fields read here */
#define SB_DOFF		32
#define SB_SLOT		84
#define SB_TOFF		48
#define SB_NEXT		88
#define SB_MLEN		96
#define SB_TCRC		100
#define SB_CRC		(HMM_SB_USED - 4)
static const struct field ent_fields[] = {	/* hmm_table_encode */
	{ 0, 8 }, { 8, 8 }, { 16, 4 }, { 20, 4 },
};
static const struct field rec_fields[] = {
	{ 0, 4 }, { 4, 4 }, { 8, 4 }, { 12, 4 }, { 16, 4 }, { REC_NAME, 1 },
	{ REC_SHAPE, 8 }, { REC_SHAPE + 8, 8 }, { REC_HEAD, 1 },
};

/* ---- the input (fz_in.h) ------------------------------------------------ */

static uint64_t get_le(const uint8_t *p, unsigned width)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < width; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void put_le(uint8_t *p, unsigned width, uint64_t v)
{
	for (unsigned i = 0; i < width; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- the stores ---------------------------------------------------------- */

struct image {
	uint8_t *b;
	size_t n;
};

/* A part of a file that mutations aim at. */
#define R_SB	0
#define R_ENT	1
#define R_BLOB	2
#define R_RAW	3
struct region {
	int kind, mem;
	uint64_t off, len;
	uint32_t nrec, rec[16];	/* R_BLOB: records' offsets in it */
};

struct store {
	struct image img[NMEM];		/* as made */
	int nmem;
	struct region reg[NMEM * 8];
	int nreg;
};

static struct store stores[2];		/* plain, striped */
static struct image work[NMEM];		/* this input's */
static char paths[NMEM][4096];
static char stripe_path[2 * 4096 + 2];
static int tracing;

/* Every chunk image ever saved, zero past its tensor's end. */
static uint8_t known[NKNOWN][CHUNK];
static int nknown;
static uint8_t zeros[CHUNK];

static void trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void trace(const char *fmt, ...)
{
	va_list ap;

	if (!tracing)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "fuzz_store: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
}

static void files_remove(void)
{
	for (int m = 0; m < NMEM; m++)
		unlink(paths[m]);
}

static void fz_finding(void)
{
	files_remove();
}

/* r from call failed as hmm.h says a call fails. */
#define failed(r, call)							\
	must((r) < 0 && (r) > -4096 && hmm_last_error()[0],		\
	     "%s returned %d", call, r)

static int names_a_file(const char *s, int nmem)
{
	for (int m = 0; m < nmem; m++)
		if (strstr(s, paths[m]))
			return 1;
	return 0;
}

/* ---- the saved tensors --------------------------------------------------- */

/* What the fixture makes: name, dtype, shape (1-D) */
static const struct tdesc {
	const char *name;
	uint32_t dtype;
	int64_t n;
} tds[] = {
	{ "w", HMM_DTYPE_F32, 2560 },	/* 3 chunks, the last half full */
	{ "x", HMM_DTYPE_F64, 768 },	/* 2 chunks, 1.5 */
	{ "d", HMM_DTYPE_F32, 1024 },	/* 1 chunk */
	{ "d", HMM_DTYPE_F32, 2048 },	/* another d: 2 chunks */
	{ "z", HMM_DTYPE_F32, 4096 },	/* 4 chunks, only chunk 1 written */
	{ "y", HMM_DTYPE_F32, 1536 },	/* made in the second generation */
};
static const char *const names[] = { "w", "x", "d", "z", "y", NEW_NAME };
#define NNAMES	(sizeof(names) / sizeof(names[0]))

/* Chunk images: the pattern of seed, len bytes of it and zero past,
 * remembered as a known image.  Called only at start. */
static const uint8_t *pattern(uint64_t seed, uint32_t len)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	uint8_t *k;

	must(nknown < NKNOWN, "too many known chunks");
	k = known[nknown++];
	memset(k, 0, CHUNK);
	for (uint32_t i = 0; i < len; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		k[i] = (uint8_t)s | 1;	/* never a zero chunk */
	}
	return k;
}

/* Map chunk i of t for writing and fill it from p: hmm_map's result. */
static int write_chunk(struct hmm_tensor *t, uint32_t i, const uint8_t *p)
{
	uint64_t off = (uint64_t)i * CHUNK, bytes = hmm_tensor_bytes(t);
	uint64_t len = bytes - off < CHUNK ? bytes - off : CHUNK;
	void *ptr;
	int r;

	hmm_err(0, "%s", "");
	r = hmm_map(t, off, len, HMM_TIER_HOST, HMM_WRITE | HMM_DISCARD, &ptr);
	if (r) {
		failed(r, "hmm_map for writing");
		return r;
	}
	memcpy(ptr, p, len);
	must(hmm_unmap(t, ptr) == 0, "unmap");
	return 0;
}

static int allowed(const uint8_t *b, uint64_t len)
{
	if (!memcmp(b, zeros, len))
		return 1;
	for (int i = 0; i < nknown; i++)
		if (!memcmp(b, known[i], len))
			return 1;
	return 0;
}

static void cfg_of(struct hmm_config *c, int striped, uint32_t flags)
{
	hmm_config_default(c);
	c->store_path = striped ? stripe_path : paths[0];
	c->chunk_bytes = CHUNK;
	c->host_budget = 1u << 20;
	c->wait_ms = 1000;
	c->pool_bytes = 256u << 10;
	c->flags = flags | HMM_CONFIG_STORE_BUFFERED;
}

static void read_file(const char *path, struct image *im)
{
	struct stat st;
	int fd = open(path, O_RDONLY);

	must(fd >= 0 && fstat(fd, &st) == 0, "open %s", path);
	im->n = st.st_size;
	im->b = malloc(im->n);
	must(im->b && pread(fd, im->b, im->n, 0) == (ssize_t)im->n,
	     "read %s", path);
	close(fd);
}

/* Slot i of w holds a superblock whose crc checks out. */
static int slot_valid(const struct image *w, int i)
{
	const uint8_t *p = w->b + i * HMM_SB_BYTES;

	return w->n >= (i + 1) * (uint64_t)HMM_SB_BYTES &&
	       !memcmp(p, HMM_SB_MAGIC, 8) &&
	       get_le(p + SB_CRC, 4) == hmm_crc32c(0, p, SB_CRC);
}

/* The regions of member m's image (as made: its fields are sane). */
static void regions(struct store *s, int m)
{
	struct image *im = &s->img[m];

	for (int i = 0; i < 2; i++) {
		const uint8_t *p = im->b + i * HMM_SB_BYTES;
		struct region *r = &s->reg[s->nreg++];
		uint64_t t, n, ml;

		*r = (struct region){ R_SB, m, (uint64_t)i * HMM_SB_BYTES,
				      HMM_SB_USED };
		if (!slot_valid(im, i))
			continue;
		t = get_le(p + SB_TOFF + 8 * get_le(p + SB_SLOT, 4), 8);
		n = get_le(p + SB_NEXT, 8);
		ml = get_le(p + SB_MLEN, 4);
		if (n)
			s->reg[s->nreg++] = (struct region){
				R_ENT, m, t, n * HMM_TENT_BYTES };
		if (ml) {
			r = &s->reg[s->nreg++];
			*r = (struct region){ R_BLOB, m,
					      t + n * HMM_TENT_BYTES, ml };
			for (uint64_t o = 12; o + REC_HEAD <= r->len &&
			     r->nrec < 16;) {
				uint64_t nc = get_le(im->b + r->off + o + 12, 4);

				r->rec[r->nrec++] = (uint32_t)o;
				o += (REC_HEAD + (nc + 7) / 8 + 7) / 8 * 8;
			}
		}
		if (i == 0)
			s->reg[s->nreg++] = (struct region){
				R_RAW, m, get_le(p + SB_DOFF, 8), 64u << 10 };
	}
	s->reg[s->nreg++] = (struct region){ R_RAW, m, 0, im->n };
	for (int i = 0; i < s->nreg; i++)
		if (s->reg[i].mem == m)
			trace("region %d: kind %d, file %d, %llu+%llu, %u "
			      "records", i, s->reg[i].kind, m,
			      (unsigned long long)s->reg[i].off,
			      (unsigned long long)s->reg[i].len, s->reg[i].nrec);
}

/* The format's constants here against table.c's own encoder. */
static void check_layout(void)
{
	struct hmm_sb sb = { 0 };
	struct hmm_xent e = { .key = 0x1122334455667788ull, .blk = 0x99,
			      .len = 0xaabbccdd, .crc = 0x12345678 };
	uint8_t slot[HMM_SB_BYTES], tab[HMM_TENT_BYTES];
	uint64_t *f64[] = { &sb.generation, &sb.store_bytes, &sb.data_off,
			    &sb.data_bytes, &sb.table_off[0], &sb.table_off[1],
			    &sb.table_cap };

	for (unsigned i = 0; i < 7; i++)
		*f64[i] = 0x0101010101010101ull * (i + 1);
	sb.block_size = 8;
	sb.max_extents = 9;
	sb.meta_cap = 10;
	sb.slot = 11;
	sb.nextents = 12;
	sb.meta_len = 13;
	sb.table_crc = 14;
	sb.uuid = 15;
	sb.set_uuid = 16;
	sb.set_index = 17;
	sb.set_count = 18;
	hmm_sb_encode(&sb, slot);
	for (unsigned i = 0; i < 7; i++)
		must(get_le(slot + sb_fields[i].off, 8) == *f64[i],
		     "superblock field %u moved", i);
	for (unsigned i = 7; i < sizeof(sb_fields) / sizeof(sb_fields[0]); i++)
		must(get_le(slot + sb_fields[i].off, sb_fields[i].width) ==
		     i + 1, "superblock field %u moved", i);
	must(get_le(slot + SB_CRC, 4) == hmm_crc32c(0, slot, SB_CRC),
	     "superblock crc moved");
	hmm_table_encode(tab, &e, 1, NULL, 0);
	must(get_le(tab, 8) == e.key && get_le(tab + 8, 8) == e.blk &&
	     get_le(tab + 16, 4) == e.len && get_le(tab + 20, 4) == e.crc,
	     "table entry moved");
}

/* The record layout here against what persist.c wrote: every blob's
 * first record is w's (both flushes wrote it first). */
static void check_records(const struct store *s)
{
	for (int i = 0; i < s->nreg; i++) {
		const struct region *r = &s->reg[i];
		const uint8_t *p = s->img[r->mem].b + r->off + 12;

		if (r->kind != R_BLOB)
			continue;
		must(r->nrec == 5 && !strcmp((const char *)p + REC_NAME, "w") &&
		     get_le(p + 8, 4) == 1 && get_le(p + 12, 4) == 3 &&
		     get_le(p + REC_SHAPE, 8) == (uint64_t)tds[0].n,
		     "the tensor table's record moved");
	}
}

/* Tensor k of tds[] in h, chunks written from patterns 100 k + i (z:
 * chunk 1 only). */
static struct hmm_tensor *fixture_tensor(struct hmm *h, unsigned k)
{
	struct hmm_tensor *t;
	uint64_t bytes;

	must(hmm_tensor_new(h, tds[k].name, tds[k].dtype, 1, &tds[k].n,
			    &t) == 0, "fixture: new %s", tds[k].name);
	bytes = hmm_tensor_bytes(t);
	for (uint32_t i = 0; i * (uint64_t)CHUNK < bytes; i++) {
		uint64_t left = bytes - (uint64_t)i * CHUNK;

		if (k == 4 && i != 1)
			continue;
		must(write_chunk(t, i, pattern(100 * k + i, left < CHUNK ?
					       left : CHUNK)) == 0,
		     "fixture: write %s", tds[k].name);
	}
	return t;
}

/* Make the store (striped or not) with its two generations; keep it. */
static void fixture(int striped)
{
	struct store *s = &stores[striped];
	struct hmm_tensor *t;
	struct hmm_config c;
	struct hmm *h;

	files_remove();
	cfg_of(&c, striped, 0);
	c.store_size = hmm_store_required(64 * CHUNK, CHUNK);
	must(hmm_open(&c, &h) == 0, "fixture: open");
	for (unsigned k = 0; k < 5; k++)
		fixture_tensor(h, k);
	must(hmm_flush(h) == 0, "fixture: flush 1");
	hmm_close(h);

	cfg_of(&c, striped, HMM_CONFIG_STORE_KEEP);
	must(hmm_open(&c, &h) == 0, "fixture: reopen");
	must(hmm_tensor_open(h, "w", &t) == 0, "fixture: open w");
	must(write_chunk(t, 1, pattern(1001, CHUNK)) == 0, "fixture: w");
	must(hmm_tensor_open(h, "x", &t) == 0, "fixture: open x");
	must(hmm_tensor_free(t) == 0, "fixture: free x");
	fixture_tensor(h, 5);
	must(hmm_flush(h) == 0, "fixture: flush 2");
	hmm_close(h);

	s->nmem = striped ? NMEM : 1;
	for (int m = 0; m < s->nmem; m++) {
		read_file(paths[m], &s->img[m]);
		regions(s, m);
	}
	files_remove();
	check_records(s);
}

/* ---- one input: mutate, fix crcs, write ------------------------------------ */

static uint64_t special(struct in *in, uint64_t orig, uint64_t other,
			uint64_t fsize)
{
	uint8_t k = u8(in);

	switch (k % 26) {
	case 0: return 0;
	case 1: return 1;
	case 2: return orig + 1;
	case 3: return orig - 1;
	case 4: return orig * 2;
	case 5: return orig / 2;
	case 6: return other;
	case 7: return fsize;
	case 8: return fsize - HMM_SB_BYTES;
	case 9: return fsize + HMM_SB_BYTES;
	case 10: return 4095;
	case 11: return 4096;
	case 12: return 8192;
	case 13: return 0x7fffffff;
	case 14: return 0x80000000u;
	case 15: return 0xffffffffu;
	case 16: return 0x100000000ull;
	case 17: return 1ull << 63;
	case 18: return UINT64_MAX;
	case 19: return UINT64_MAX - 4095;
	case 20: return (uint64_t)0 - 8192;
	case 21: return orig + 4096;
	case 22: return orig ^ (1ull << (u8(in) % 64));
	case 23: return orig - 4096;
	case 24: return (uint64_t)u8(in) << (u8(in) % 57);
	}
	return un(in, 8);
}

static struct region *pick_region(struct in *in, struct store *s)
{
	return &s->reg[u8(in) % s->nreg];
}

/* The file offset and width of a field the input picks in region r. */
static uint64_t pick_field(struct in *in, const struct region *r,
			   unsigned *width, uint64_t *other_off)
{
	uint8_t f = u8(in);
	const struct field *fd;
	uint64_t at;

	switch (r->kind) {
	case R_SB:
		fd = &sb_fields[f % (sizeof(sb_fields) / sizeof(*fd))];
		*width = fd->width;
		*other_off = (r->off ^ HMM_SB_BYTES) + fd->off;
		return r->off + fd->off;
	case R_ENT: {
		uint64_t n = r->len / HMM_TENT_BYTES, i = u8(in) % n;

		fd = &ent_fields[f % 4];
		*width = fd->width;
		*other_off = r->off + (i + 1) % n * HMM_TENT_BYTES + fd->off;
		return r->off + i * HMM_TENT_BYTES + fd->off;
	}
	case R_BLOB:
		if (!r->nrec || f % 4 == 0) {	/* header: magic, version, count */
			*width = 4;
			at = r->off + 4 * (u8(in) % 3);
			*other_off = at;
			return at;
		}
		fd = &rec_fields[u8(in) % (sizeof(rec_fields) / sizeof(*fd))];
		*width = fd->width;
		at = r->off + r->rec[f % r->nrec];
		*other_off = r->off + r->rec[(f + 1) % r->nrec] + fd->off;
		return at + fd->off;
	}
	at = r->len > 8 ? un(in, 4) % (r->len - 7) / 8 * 8 : 0;
	*width = 8;
	*other_off = r->off + (at ^ 8);
	return r->off + at;
}

static void resize(struct image *w, uint64_t n)
{
	if (n > MAX_FILE)
		n = MAX_FILE;
	if (n > w->n) {
		uint8_t *b = realloc(w->b, n);

		must(b, "out of memory");
		memset(b + w->n, 0, n - w->n);
		w->b = b;
	}
	w->n = n;
}

/* Store v's low width bytes at off of w, as far as the file goes. */
static void poke(struct image *w, uint64_t off, unsigned width, uint64_t v)
{
	uint8_t le[8];

	put_le(le, 8, v);
	for (unsigned i = 0; i < width && off + i < w->n; i++)
		w->b[off + i] = le[i];
}

static uint64_t peek(const struct image *w, uint64_t off, unsigned width)
{
	uint8_t le[8] = { 0 };

	for (unsigned i = 0; i < width && off + i < w->n; i++)
		le[i] = w->b[off + i];
	return get_le(le, width);
}

static void mutate(struct in *in, struct store *s)
{
	while (in->n) {
		uint8_t op = u8(in);
		struct region *r = pick_region(in, s), *r2;
		struct image *w = &work[r->mem];
		uint64_t off, off2, v, len;
		unsigned width;

		switch (op % 8) {
		case 0: case 1: case 2:		/* overwrite bytes */
			len = 1 + (op >> 3) % 16;
			off = r->off + (r->len > 65536 ? un(in, 4) : un(in, 2)) %
			      r->len;
			for (uint64_t i = 0; i < len; i++)
				poke(w, off + i, 1, u8(in));
			trace("overwrite %llu bytes at %llu of file %d",
			      (unsigned long long)len, (unsigned long long)off,
			      r->mem);
			break;
		case 3: case 4:			/* set a field */
			off = pick_field(in, r, &width, &off2);
			v = special(in, peek(w, off, width), peek(w, off2, width),
				    w->n);
			poke(w, off, width, v);
			trace("set %u bytes at %llu of file %d (region kind %d) "
			      "to %#llx", width, (unsigned long long)off, r->mem,
			      r->kind, (unsigned long long)v);
			break;
		case 5:				/* copy */
			r2 = pick_region(in, s);
			off = r->off + un(in, 2) % r->len;
			off2 = r2->off + un(in, 2) % r2->len;
			len = 1 + u8(in) % 128;
			for (uint64_t i = 0; i < len; i++)
				poke(&work[r2->mem], off2 + i, 1,
				     peek(w, off + i, 1));
			trace("copy %llu bytes from %llu of file %d to %llu of "
			      "file %d", (unsigned long long)len,
			      (unsigned long long)off, r->mem,
			      (unsigned long long)off2, r2->mem);
			break;
		case 6:				/* flip a bit */
			off = r->off + un(in, 2) % r->len;
			poke(w, off, 1, peek(w, off, 1) ^ (1u << (op >> 5)));
			trace("flip bit %u at %llu of file %d", op >> 5,
			      (unsigned long long)off, r->mem);
			break;
		default:			/* resize */
			v = u8(in);
			len = v < 128 ? w->n + (v - 64) * 4096ull :
			      v < 192 ? (v - 128) * 4096ull : un(in, 3);
			resize(w, len);
			trace("resize file %d to %llu", r->mem,
			      (unsigned long long)w->n);
			break;
		}
	}
}

/*
 * Recompute the crc32c of the table each superblock names and then of
 * the superblock, as a writer of such a file would (bit set in stale:
 * leave that one).  Slot i names table_off[slot] with nextents entries
 * and meta_len bytes of blob (table.h).
 */
static void fix_crcs(struct image *w, unsigned stale)
{
	for (int i = 0; i < 2; i++) {
		uint8_t *p = w->b + i * HMM_SB_BYTES;
		uint64_t toff, n, bytes;
		uint32_t slot;

		if (w->n < (i + 1) * (uint64_t)HMM_SB_BYTES ||
		    memcmp(p, HMM_SB_MAGIC, 8))
			continue;
		slot = (uint32_t)get_le(p + SB_SLOT, 4);
		n = get_le(p + SB_NEXT, 8);
		if (slot <= 1 && !(stale & (4u << i)) &&
		    n <= w->n / HMM_TENT_BYTES) {
			toff = get_le(p + SB_TOFF + 8 * slot, 8);
			bytes = hmm_table_bytes(n, (uint32_t)get_le(p + SB_MLEN, 4));
			if (toff <= w->n && bytes <= w->n - toff)
				put_le(p + SB_TCRC, 4,
				       hmm_crc32c(0, w->b + toff, bytes));
		}
		if (!(stale & (1u << i)))
			put_le(p + SB_CRC, 4, hmm_crc32c(0, p, SB_CRC));
	}
}

static void write_file(const char *path, const struct image *w)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	must(fd >= 0, "create %s", path);
	for (uint64_t o = 0; o < w->n; o += 4096) {
		uint64_t len = w->n - o < 4096 ? w->n - o : 4096;

		if (memcmp(w->b + o, zeros, len))
			must(pwrite(fd, w->b + o, len, o) == (ssize_t)len,
			     "write %s", path);
	}
	must(ftruncate(fd, w->n) == 0, "truncate %s", path);
	close(fd);
}

/*
 * The largest nchunks and id of the records whose bitmap the blob
 * holds, over the blobs the superblocks name.  The engine builds a
 * tensor as large as its record says (hmm.h), and keeps its tensors in
 * an array indexed by id (ctx.h: h->tensors, sized by the largest saved
 * id at open): such records are legal, and what they allocate is the
 * design's, so past BIG_CHUNKS no tensor is opened and past BIG_ID the
 * store is not opened at all (noted in the report, not fixed here).
 */
#define BIG_ID	(1u << 20)
static void scan_blobs(const struct image *w, uint64_t *nchunks, uint64_t *id)
{
	*nchunks = *id = 0;
	for (int i = 0; i < 2 && w->n >= 2 * HMM_SB_BYTES; i++) {
		const uint8_t *p = w->b + i * HMM_SB_BYTES;
		uint64_t toff, n, ml, o;
		uint32_t slot = (uint32_t)get_le(p + SB_SLOT, 4);

		if (memcmp(p, HMM_SB_MAGIC, 8) || slot > 1)
			continue;
		toff = get_le(p + SB_TOFF + 8 * slot, 8);
		n = get_le(p + SB_NEXT, 8);
		ml = get_le(p + SB_MLEN, 4);
		if (n > w->n / HMM_TENT_BYTES || toff > w->n ||
		    n * HMM_TENT_BYTES + ml > w->n - toff)
			continue;
		p = w->b + toff + n * HMM_TENT_BYTES;
		for (o = 12; o + REC_HEAD <= ml;) {
			uint64_t nc = get_le(p + o + 12, 4);
			uint64_t rb = (REC_HEAD + (nc + 7) / 8 + 7) / 8 * 8;

			if (rb > ml - o)
				break;
			if (nc > *nchunks)
				*nchunks = nc;
			if (get_le(p + o, 4) > *id)
				*id = get_le(p + o, 4);
			o += rb;
		}
	}
}

/* ---- one input: open and read --------------------------------------------- */

/* What a pass saw of one tensor it opened. */
struct seen {
	const char *name;
	int k;				/* its k-th open of that name */
	struct hmm_tensor *t;
	uint32_t dtype;
	unsigned ndim;
	int64_t shape[HMM_MAX_DIMS];
	uint64_t bytes;
	uint32_t nck;			/* chunks checked */
	uint32_t idx[NCHECK];
	int ok[NCHECK];
	uint8_t data[NCHECK][CHUNK];
};

struct pass {
	int open;			/* hmm_open's result */
	int n;
	struct seen s[NOPEN];
};

static struct pass p1, p3;

/* Read t's chunks (the first 16 and the last) into sn. */
static void read_tensor(struct hmm_tensor *t, struct seen *sn)
{
	uint64_t nch = (sn->bytes + CHUNK - 1) / CHUNK;

	sn->nck = 0;
	for (uint64_t i = 0; i < nch && sn->nck < NCHECK; i++) {
		uint64_t off, len;
		void *ptr;
		int r;

		if (i == 16)
			i = nch - 1;
		off = i * CHUNK;
		len = sn->bytes - off < CHUNK ? sn->bytes - off : CHUNK;
		sn->idx[sn->nck] = (uint32_t)i;
		hmm_err(0, "%s", "");
		r = hmm_map(t, off, len, HMM_TIER_HOST, HMM_READ, &ptr);
		sn->ok[sn->nck] = r == 0;
		if (r) {
			failed(r, "hmm_map");
			trace("  %s chunk %llu: %d %s", sn->name,
			      (unsigned long long)i, r, hmm_last_error());
		} else {
			memcpy(sn->data[sn->nck], ptr, len);
			must(hmm_unmap(t, ptr) == 0, "unmap");
			must(allowed(sn->data[sn->nck], len), "tensor %s (%d) "
			     "chunk %llu: bytes that were never saved",
			     sn->name, sn->k, (unsigned long long)i);
		}
		sn->nck++;
	}
}

/* hmm_open the store, open every name until -ENOENT, read. */
static struct hmm *pass(struct pass *ps, int striped, int nmem, int big)
{
	struct hmm_config c;
	struct hmm *h = NULL;

	memset(ps, 0, sizeof(*ps));
	cfg_of(&c, striped, HMM_CONFIG_STORE_KEEP);
	hmm_err(0, "%s", "");
	ps->open = hmm_open(&c, &h);
	trace("open: %d %s", ps->open, ps->open ? hmm_last_error() : "");
	if (ps->open) {
		failed(ps->open, "hmm_open");
		must(names_a_file(hmm_last_error(), nmem),
		     "hmm_open's detail names no store file");
		return NULL;
	}
	for (unsigned j = 0; j < NNAMES && !big; j++) {
		for (int k = 0;; k++) {
			struct hmm_tensor *t;
			struct seen *sn;
			int r;

			hmm_err(0, "%s", "");
			r = k < PER_NAME && ps->n < NOPEN ?
			    hmm_tensor_open(h, names[j], &t) : -ENOENT;
			if (r) {
				if (k < PER_NAME && ps->n < NOPEN)
					failed(r, "hmm_tensor_open");
				trace("  tensor_open %s (%d): %d %s", names[j],
				      k, r, hmm_last_error());
				break;
			}
			sn = &ps->s[ps->n++];
			sn->name = names[j];
			sn->k = k;
			sn->t = t;
			sn->dtype = hmm_tensor_dtype(t);
			sn->ndim = hmm_tensor_ndim(t);
			memcpy(sn->shape, hmm_tensor_shape(t),
			       sn->ndim * sizeof(int64_t));
			sn->bytes = hmm_tensor_bytes(t);
			trace("  tensor_open %s (%d): %llu bytes", names[j], k,
			      (unsigned long long)sn->bytes);
			read_tensor(t, sn);
		}
	}
	return h;
}

/* The same tensor: name, order, type and shape. */
static const struct seen *find(const struct pass *ps, const struct seen *sn)
{
	for (int i = 0; i < ps->n; i++)
		if (ps->s[i].name == sn->name && ps->s[i].k == sn->k)
			return &ps->s[i];
	return NULL;
}

/*
 * After a good flush (or, with its superblock gone, the generation
 * before it): every tensor a saw opens in b alike, and every chunk that
 * read in a reads the same in b, but the one step 3 rewrote (wrote: its
 * bytes), whose new bytes b must read when rewritten.
 */
static void same(const struct pass *a, const struct pass *b,
		 const struct seen *wt, const uint8_t *wb[2], const char *what)
{
	for (int i = 0; i < a->n; i++) {
		const struct seen *x = &a->s[i], *y = find(b, x);

		must(y, "%s: tensor %s (%d) is gone", what, x->name, x->k);
		must(x->dtype == y->dtype && x->ndim == y->ndim &&
		     x->bytes == y->bytes && !memcmp(x->shape, y->shape,
						     x->ndim * 8),
		     "%s: tensor %s (%d) changed shape", what, x->name, x->k);
		for (uint32_t c = 0; c < x->nck; c++) {
			uint64_t len = x->bytes - (uint64_t)x->idx[c] * CHUNK;
			const uint8_t *want = x->data[c];

			if (len > CHUNK)
				len = CHUNK;
			if (wt == x && x->idx[c] < 2 && wb[x->idx[c]])
				want = wb[x->idx[c]];
			else if (!x->ok[c])
				continue;
			must(y->ok[c] && !memcmp(y->data[c], want, len),
			     "%s: tensor %s (%d) chunk %u: %s", what, x->name,
			     x->k, x->idx[c], y->ok[c] ? "other bytes" :
			     "read fails");
		}
	}
	for (int i = 0; i < b->n; i++)
		must(find(a, &b->s[i]) || b->s[i].name == names[NNAMES - 1],
		     "%s: tensor %s (%d) appeared", what, b->s[i].name,
		     b->s[i].k);
}

/* Zero the newest superblock of each file whose crc checks out: the
 * flush's. */
static void drop_newest(int nmem)
{
	for (int m = 0; m < nmem; m++) {
		struct image w = { 0 };
		int ok[2], i;

		read_file(paths[m], &w);
		for (i = 0; i < 2; i++)
			ok[i] = slot_valid(&w, i);
		must(ok[0] || ok[1], "file %d: no superblock after a flush", m);
		i = !ok[0] || (ok[1] && get_le(w.b + HMM_SB_BYTES + SB_GEN, 8) >
			       get_le(w.b + SB_GEN, 8));
		memset(w.b + i * HMM_SB_BYTES, 0, HMM_SB_BYTES);
		write_file(paths[m], &w);
		free(w.b);
	}
}

/* Step 3's chunk images, made at start: the rewrite's, the new tensor's. */
static const uint8_t *rewrite_img[2], *new_img[64];

/* The added tensor reads back whole. */
static void new_whole(const struct pass *ps, unsigned nnew)
{
	const struct seen *sn = NULL;

	for (int i = 0; i < ps->n; i++)
		if (ps->s[i].name == names[NNAMES - 1] && ps->s[i].k == 0)
			sn = &ps->s[i];
	must(sn && sn->bytes == nnew * (uint64_t)CHUNK - 12,
	     "after a flush: the added tensor is gone or changed");
	for (uint32_t c = 0; c < sn->nck; c++) {
		uint64_t len = sn->bytes - (uint64_t)sn->idx[c] * CHUNK;

		must(sn->ok[c] && !memcmp(sn->data[c], new_img[sn->idx[c]],
					  len < CHUNK ? len : CHUNK),
		     "after a flush: the added tensor's chunk %u %s",
		     sn->idx[c], sn->ok[c] ? "differs" : "fails");
	}
}

/*
 * Step 3 on h, opened by step 2: rewrite the first tensor's chunk 0 (and
 * 1), add a tensor of nnew chunks, flush, close; reopen and compare;
 * then the generation before.
 */
static void step3(struct hmm *h, int striped, int nmem, unsigned flags,
		  unsigned nnew)
{
	const uint8_t *wb[2] = { NULL, NULL };
	const struct seen *wt = p1.n ? &p1.s[0] : NULL;
	struct hmm_tensor *t;
	struct hmm *h2;
	int r, added = 0;

	for (unsigned i = 0; wt && i < (flags & 0x80 ? 2u : 1u); i++)
		if ((uint64_t)i * CHUNK < wt->bytes &&
		    write_chunk(p1.s[0].t, i, rewrite_img[i]) == 0)
			wb[i] = rewrite_img[i];
	if (nnew) {
		int64_t n = nnew * (CHUNK / 4) - 3;

		hmm_err(0, "%s", "");
		r = hmm_tensor_new(h, NEW_NAME, HMM_DTYPE_F32, 1, &n, &t);
		if (r)
			failed(r, "hmm_tensor_new");
		for (unsigned i = 0; !r && i < nnew; i++)
			r = write_chunk(t, i, new_img[i]);
		added = !r;
	}
	hmm_err(0, "%s", "");
	r = hmm_flush(h);
	trace("flush: %d %s", r, r ? hmm_last_error() : "");
	if (r)
		failed(r, "hmm_flush");
	hmm_close(h);

	h2 = pass(&p3, striped, nmem, 0);
	if (!r) {
		must(h2, "a store just flushed does not open");
		same(&p1, &p3, wt, wb, "after a flush");
		if (added)
			new_whole(&p3, nnew);
	}
	if (h2)
		hmm_close(h2);
	if (r || (flags & 0x40))
		return;
	drop_newest(nmem);
	h2 = pass(&p3, striped, nmem, 0);
	must(h2, "the generation before a flush does not open");
	same(&p1, &p3, NULL, (const uint8_t *[2]){ NULL, NULL },
	     "the generation before the flush");
	hmm_close(h2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	unsigned flags = u8(&in), nnew = u8(&in) % 64;
	int striped = flags & 1;
	struct store *s = &stores[striped];
	uint64_t nc, id;
	struct hmm *h;
	int big;

	for (int m = 0; m < s->nmem; m++) {
		resize(&work[m], 0);
		resize(&work[m], s->img[m].n);
		memcpy(work[m].b, s->img[m].b, s->img[m].n);
	}
	mutate(&in, s);
	for (int m = 0; m < s->nmem; m++) {
		fix_crcs(&work[m], flags >> 1 & 15);
		write_file(paths[m], &work[m]);
	}
	scan_blobs(&work[0], &nc, &id);
	if (id >= BIG_ID) {
		trace("a record's id is %llu: not opened",
		      (unsigned long long)id);
		files_remove();
		return 0;
	}
	big = nc > BIG_CHUNKS;
	h = pass(&p1, striped, s->nmem, big);
	if (h && (flags & 0x20) && !big)
		step3(h, striped, s->nmem, flags, nnew);
	else if (h)
		hmm_close(h);
	files_remove();
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("HMM_TEST_DIR");

	for (int m = 0; m < NMEM; m++)
		snprintf(paths[m], sizeof(paths[m]), "%s/fuzz_store.%d.%d",
			 dir && *dir ? dir : "/tmp", (int)getpid(), m);
	snprintf(stripe_path, sizeof(stripe_path), "%s,%s", paths[0],
		 paths[1]);
	tracing = getenv("FUZZ_STORE_TRACE") != NULL;
	atexit(files_remove);
	fz_janitor(files_remove);
	check_layout();
	fixture(0);
	fixture(1);
	for (int i = 0; i < 2; i++)
		rewrite_img[i] = pattern(7000 + i, CHUNK);
	for (int i = 0; i < 64; i++)
		new_img[i] = pattern(9000 + i, CHUNK);
	return 0;
}
