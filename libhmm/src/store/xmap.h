/* SPDX-License-Identifier: MIT */
/*
 * xmap.h — the store's in-memory extent table: key -> place, length, crc.
 *
 * Open addressing with linear probing and backward-shift deletion, kept
 * at most half full.  hmm_xmap_reserve() grows ahead of time so that
 * the store's completion path (hmm_xmap_put) never allocates.
 *
 * Ownership: embedded by the store; init allocates, fini frees.
 * Threading: none inside; the store's I/O thread only.
 */
#ifndef HMM_XMAP_H
#define HMM_XMAP_H

#include <stddef.h>
#include <stdint.h>

struct hmm_xent {
	uint64_t key;
	uint64_t blk;		/* first block in the data area */
	uint32_t len;		/* bytes */
	uint32_t crc;		/* crc32c of the len bytes */
	uint8_t used;		/* slot holds an entry */
	uint8_t on_disk;	/* this placement is in the flushed table */
	uint8_t pad[6];
};

struct hmm_xmap {
	struct hmm_xent *v;
	size_t cap;		/* power of two */
	size_t n;
};

int hmm_xmap_init(struct hmm_xmap *m, size_t hint);	/* 0, -ENOMEM */
void hmm_xmap_fini(struct hmm_xmap *m);

/* Make room for n entries in all: 0 or -ENOMEM. */
int hmm_xmap_reserve(struct hmm_xmap *m, size_t n);

struct hmm_xent *hmm_xmap_get(struct hmm_xmap *m, uint64_t key);

/* Insert or replace e->key; *old gets the replaced entry (old->used = 0
 * when there was none).  -ENOMEM only when no reserve was made. */
int hmm_xmap_put(struct hmm_xmap *m, const struct hmm_xent *e,
		 struct hmm_xent *old);

/* Remove key into *old: 0 or -ENOENT. */
int hmm_xmap_del(struct hmm_xmap *m, uint64_t key, struct hmm_xent *old);

/* A malloc'd copy of all entries sorted by key (count in *n); the caller
 * frees it.  NULL with *n = 0 when empty; NULL with *n != 0: -ENOMEM. */
struct hmm_xent *hmm_xmap_sorted(struct hmm_xmap *m, size_t *n);

#endif /* HMM_XMAP_H */
