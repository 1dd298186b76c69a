/* SPDX-License-Identifier: MIT */
/*
 * extent.h — a first-fit allocator of ranges of units, with quarantine.
 *
 * The store manages its data area in blocks with one of these; the
 * pinned pool manages its pages with another.  Free space is a sorted
 * array of disjoint, coalesced ranges; an allocation takes the first
 * range that fits (lowest offset).  Space freed with hmm_ext_defer() is
 * quarantined, counted as used, until hmm_ext_release() frees all of it
 * at once: the store defers space its last flushed table still names,
 * and releases it when the next flush is durable (copy-on-write).
 *
 * Ownership: the caller embeds struct hmm_ext; hmm_ext_init allocates
 * the arrays, hmm_ext_fini frees them.  Threading: none inside; the
 * owner serialises (the store: its one I/O thread; the pool: its lock).
 */
#ifndef HMM_EXTENT_H
#define HMM_EXTENT_H

#include <stddef.h>
#include <stdint.h>

struct hmm_ext_range {
	uint64_t off, len;
};

struct hmm_ext {
	uint64_t size;			/* units managed: [0, size) */
	uint64_t free_units;		/* sum of free[].len */
	uint64_t quar_units;		/* sum of quar[].len */
	struct hmm_ext_range *free;	/* sorted by off, coalesced */
	size_t nfree, free_cap;
	struct hmm_ext_range *quar;	/* deferred frees, any order */
	size_t nquar, quar_cap;
};

/* All of [0, size) free.  0 or -ENOMEM. */
int hmm_ext_init(struct hmm_ext *a, uint64_t size);
void hmm_ext_fini(struct hmm_ext *a);

/* Take len units (first fit): 0 and *off, -ENOSPC when no free range is
 * long enough, -EINVAL when len is 0. */
int hmm_ext_alloc(struct hmm_ext *a, uint64_t len, uint64_t *off);

/* Give [off, off+len) back now.  -EINVAL when it is out of range or
 * overlaps free space (a double free): nothing changes then.  -ENOMEM
 * when the free array cannot grow (the range stays allocated). */
int hmm_ext_free(struct hmm_ext *a, uint64_t off, uint64_t len);

/* Take the specific range [off, off+len), which must be wholly free
 * (-EEXIST otherwise, -EINVAL out of range).  For rebuilding from a table. */
int hmm_ext_reserve(struct hmm_ext *a, uint64_t off, uint64_t len);

/* Quarantine [off, off+len): used until hmm_ext_release().  0 or -ENOMEM
 * (then the range stays allocated for good: a leak, never a reuse). */
int hmm_ext_defer(struct hmm_ext *a, uint64_t off, uint64_t len);

/* Free everything quarantined. */
void hmm_ext_release(struct hmm_ext *a);

/* Units allocated or quarantined; the longest free range. */
uint64_t hmm_ext_used(const struct hmm_ext *a);
uint64_t hmm_ext_largest(const struct hmm_ext *a);

#endif /* HMM_EXTENT_H */
