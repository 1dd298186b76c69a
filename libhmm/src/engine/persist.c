// SPDX-License-Identifier: MIT
/*
 * persist.c — named tensors that outlive the context.
 *
 * hmm_flush writes every chunk to the store and then a description of
 * every tensor (id, name, dtype, shape, chunk size, which chunks have an
 * extent) as the store's metadata blob, in the same durable flush, so a
 * checkpoint is a flush of the table and not a copy.  hmm_open with
 * HMM_CONFIG_STORE_KEEP reads the blob back; hmm_tensor_open(name) then
 * gives the tensor its old id (its extents' keys) and reads it on demand.
 * Tensors saved and not opened are kept in the next blob.  Names need
 * not be unique: every tensor is saved, and hmm_tensor_open of a name
 * several share opens them in turn, in the order they were made (id
 * order: h->saved is sorted by id at load and kept so), so none is
 * hidden behind another.
 *
 * Blob (native endian; a reader on another architecture refuses it):
 *   "HMMT" u32 version=1 u32 count, then count records of
 *   u32 id, dtype, ndim, nchunks, chunk_bytes; char name[64]; u32 pad;
 *   i64 shape[8]; u8 stored[ceil(nchunks/8)], padded to 8 bytes.
 * h->saved is under h->lock; allocated by hmm_persist_load, freed by
 * hmm_persist_fini.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunk.h"
#include "err.h"

#define PERSIST_MAGIC	0x544d4d48u	/* "HMMT" */
#define PERSIST_MAX	(1u << 20)	/* the store's default meta room */

struct rec_head {
	uint32_t id, dtype, ndim, nchunks, chunk_bytes;
	char name[64];
	int64_t shape[HMM_MAX_DIMS];
};

struct hmm_saved {
	struct rec_head r;
	uint8_t *stored;	/* malloc, ceil(nchunks / 8) */
};

/* Bytes of the bitmap of nchunks chunks: in 64 bits, since nchunks + 7
 * wraps in 32 for a count near 2^32 (a record could then claim four
 * billion chunks with a bitmap of none). */
static size_t bitmap_bytes(uint32_t nchunks)
{
	return ((uint64_t)nchunks + 7) / 8;
}

static size_t rec_bytes(uint32_t nchunks)
{
	return HMM_ROUND_UP(sizeof(struct rec_head) + bitmap_bytes(nchunks), 8);
}

static int saved_by_id(const void *a, const void *b)
{
	uint32_t x = ((const struct hmm_saved *)a)->r.id;
	uint32_t y = ((const struct hmm_saved *)b)->r.id;

	return (x > y) - (x < y);
}

/*
 * The blob is the store's (crc-checked, but written by anyone who can
 * write the file): a count, an id or a bitmap it names is checked
 * against its own bytes before anything is allocated by it.  Errors
 * name the store, the record and its offset in the blob.
 */
static int persist_parse(struct hmm *h, const char *path, const uint8_t *b,
			 size_t len)
{
	uint32_t hdr[3], i, maxid = 0;
	size_t off = sizeof(hdr);

	if (len < sizeof(hdr))
		return 0;	/* an empty store */
	memcpy(hdr, b, sizeof(hdr));
	if (hdr[0] != PERSIST_MAGIC || hdr[1] != 1)
		return hmm_err(-EINVAL, "store %s: metadata is not libhmm's "
			       "tensor table (magic %#x version %u)", path,
			       hdr[0], hdr[1]);
	if (hdr[2] > (len - sizeof(hdr)) / rec_bytes(0))
		return hmm_err(-EUCLEAN, "store %s: tensor table: count %u "
			       "(offset 8) is more than its %zu bytes hold",
			       path, hdr[2], len);
	h->saved = calloc(hdr[2] ? hdr[2] : 1, sizeof(*h->saved));
	if (!h->saved)
		return hmm_err(-ENOMEM, "store %s: no memory for %u saved "
			       "tensors", path, hdr[2]);
	for (i = 0; i < hdr[2]; i++) {
		struct hmm_saved *s = &h->saved[i];

		if (off + sizeof(s->r) > len)
			return hmm_err(-EUCLEAN, "store %s: tensor table cut "
				       "at record %u (offset %zu)", path, i,
				       off);
		memcpy(&s->r, b + off, sizeof(s->r));
		if (rec_bytes(s->r.nchunks) > len - off ||
		    s->r.ndim > HMM_MAX_DIMS || s->r.id >= HMM_TENSOR_IDS)
			return hmm_err(-EUCLEAN, "store %s: tensor table "
				       "record %u (offset %zu) is corrupt: id "
				       "%u, ndim %u, nchunks %u in %zu bytes",
				       path, i, off,
				       s->r.id, s->r.ndim, s->r.nchunks,
				       len - off);
		s->r.name[63] = 0;
		s->stored = malloc(bitmap_bytes(s->r.nchunks) + 1);
		if (!s->stored)
			return hmm_err(-ENOMEM, "store %s: no memory", path);
		memcpy(s->stored, b + off + sizeof(s->r),
		       bitmap_bytes(s->r.nchunks));
		off += rec_bytes(s->r.nchunks);
		h->nsaved++;
		if (s->r.id + 1 > maxid)
			maxid = s->r.id + 1;
	}
	/* opened in the order they were made (ids are never reused) */
	qsort(h->saved, h->nsaved, sizeof(*h->saved), saved_by_id);
	/* an id is a tensor's extent keys: two records of one id would
	 * read and write the same extents */
	for (i = 1; i < h->nsaved; i++)
		if (h->saved[i].r.id == h->saved[i - 1].r.id)
			return hmm_err(-EUCLEAN, "store %s: tensor table: "
				       "tensors '%s' and '%s' have the same id "
				       "%u", path,
				       h->saved[i - 1].r.name,
				       h->saved[i].r.name, h->saved[i].r.id);
	h->next_id = maxid;	/* new tensors take ids above every saved one */
	return 0;
}

int hmm_persist_load(struct hmm *h, const char *path)
{
	struct hmm_ioreq q;
	uint8_t *b = malloc(PERSIST_MAX);
	int r;

	if (!b)
		return hmm_err(-ENOMEM, "store %s: no memory for the tensor "
			       "table", path);
	memset(&q, 0, sizeof(q));
	q.io.op = HMM_IOREQ_META_GET;
	q.io.buf = b;
	q.io.len = PERSIST_MAX;
	pthread_mutex_lock(&h->lock);
	r = hmm_iot_sync(h, &q);
	pthread_mutex_unlock(&h->lock);
	if (r > PERSIST_MAX)
		r = hmm_err(-EFBIG, "store %s: tensor table of %d bytes", path,
			    r);
	if (r >= 0)
		r = persist_parse(h, path, b, r);
	free(b);
	return r;
}

static void rec_put(uint8_t *b, size_t *off, const struct rec_head *r,
		    const uint8_t *stored)
{
	memcpy(b + *off, r, sizeof(*r));
	memcpy(b + *off + sizeof(*r), stored, bitmap_bytes(r->nchunks));
	*off += rec_bytes(r->nchunks);
}

/* Write the table of every tensor as the store's metadata (lock held). */
int hmm_persist_save(struct hmm *h)
{
	uint32_t i, j, n;
	size_t len = 12, off = 12;
	struct hmm_ioreq q;
	uint8_t *b;
	int r;

	for (i = 0; i < h->ntensors; i++)
		len += rec_bytes(h->tensors[i]->nchunks);
	for (i = 0; i < h->nsaved; i++)
		len += rec_bytes(h->saved[i].r.nchunks);
	n = h->ntensors + h->nsaved;
	b = calloc(1, len);
	if (!b)
		return hmm_err(-ENOMEM, "hmm_flush: no memory for the tensor "
			       "table (%zu bytes)", len);
	memcpy(b, (uint32_t[]){ PERSIST_MAGIC, 1, n }, 12);
	for (i = 0; i < h->ntensors; i++) {
		struct hmm_tensor *t = h->tensors[i];
		struct rec_head rh;
		uint8_t *st;

		memset(&rh, 0, sizeof(rh));
		rh.id = t->id;
		rh.dtype = t->dtype;
		rh.ndim = t->ndim;
		rh.nchunks = t->nchunks;
		rh.chunk_bytes = h->chunk_bytes;
		memcpy(rh.name, t->name, sizeof(rh.name));
		memcpy(rh.shape, t->shape, sizeof(rh.shape));
		st = calloc(1, bitmap_bytes(t->nchunks));
		if (!st) {
			free(b);
			return hmm_err(-ENOMEM, "hmm_flush: no memory");
		}
		for (j = 0; j < t->nchunks; j++)
			if (!t->chunks[j].zero)
				st[j / 8] |= 1u << (j % 8);
		rec_put(b, &off, &rh, st);
		free(st);
	}
	for (i = 0; i < h->nsaved; i++)
		rec_put(b, &off, &h->saved[i].r, h->saved[i].stored);
	memset(&q, 0, sizeof(q));
	q.io.op = HMM_IOREQ_META_SET;
	q.io.buf = b;
	q.io.len = len;
	r = hmm_iot_sync(h, &q);
	free(b);
	if (r < 0)
		return hmm_err(r, "hmm_flush: tensor table (%zu bytes): %s",
			       len, hmm_last_error());
	return 0;
}

int hmm_engine_tensor_open(struct hmm *h, const char *name,
			   struct hmm_tensor **out)
{
	struct hmm_saved s;
	uint64_t bytes;
	uint32_t i;
	int r;

	pthread_mutex_lock(&h->lock);
	for (i = 0; i < h->nsaved; i++)
		if (!strcmp(h->saved[i].r.name, name))
			break;
	if (i == h->nsaved) {
		pthread_mutex_unlock(&h->lock);
		return hmm_err(-ENOENT, "hmm_tensor_open: no tensor '%s' in "
			       "the store (opened with HMM_CONFIG_STORE_KEEP?)",
			       name);
	}
	s = h->saved[i];
	if (s.r.chunk_bytes != h->chunk_bytes) {
		pthread_mutex_unlock(&h->lock);
		return hmm_err(-EINVAL, "tensor %s: saved with %u-byte chunks, "
			       "config.chunk_bytes is %u", name,
			       s.r.chunk_bytes, h->chunk_bytes);
	}
	if (hmm_tensor_check(h, s.r.name, s.r.dtype, s.r.ndim, s.r.shape,
			     &bytes) < 0 ||
	    (bytes + h->chunk_bytes - 1) / h->chunk_bytes != s.r.nchunks) {
		pthread_mutex_unlock(&h->lock);
		return hmm_err(-EUCLEAN, "tensor %s: saved record does not "
			       "match its shape", name);
	}
	/* out of h->saved, keeping the order (the next of that name) */
	memmove(&h->saved[i], &h->saved[i + 1],
		(h->nsaved - i - 1) * sizeof(*h->saved));
	h->nsaved--;
	pthread_mutex_unlock(&h->lock);
	r = hmm_tensor_create(h, s.r.name, s.r.dtype, s.r.ndim, s.r.shape,
			      bytes, s.r.id, s.stored, out);
	if (r < 0) {	/* put it back in its place (others may have gone) */
		pthread_mutex_lock(&h->lock);
		for (i = 0; i < h->nsaved && h->saved[i].r.id < s.r.id; i++)
			;
		memmove(&h->saved[i + 1], &h->saved[i],
			(h->nsaved - i) * sizeof(*h->saved));
		h->saved[i] = s;
		h->nsaved++;
		pthread_mutex_unlock(&h->lock);
		return r;
	}
	free(s.stored);
	return 0;
}

void hmm_persist_fini(struct hmm *h)
{
	uint32_t i;

	for (i = 0; i < h->nsaved; i++)
		free(h->saved[i].stored);
	free(h->saved);
	h->saved = NULL;
	h->nsaved = 0;
}

int hmm_persist_saved_name(struct hmm *h, uint32_t i, char *name,
			   size_t cap)
{
	int r = -ENOENT;

	pthread_mutex_lock(&h->lock);
	if (i < h->nsaved) {
		snprintf(name, cap, "%.*s", (int)sizeof(h->saved[i].r.name),
			 h->saved[i].r.name);
		r = 0;
	}
	pthread_mutex_unlock(&h->lock);
	return r;
}
