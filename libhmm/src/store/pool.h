/* SPDX-License-Identifier: MIT */
/*
 * pool.h — a pinned buffer pool: one mapping, carved into 4 KiB-aligned
 * buffers.
 *
 * hmm_pool_new maps the pool once: 2 MiB huge pages (MAP_HUGETLB) when
 * the system has them reserved, else a 2 MiB-aligned anonymous mapping
 * advised for transparent huge pages; bound to a NUMA node when asked
 * (libnuma); then mlock'd.  When mlock is refused (RLIMIT_MEMLOCK) the
 * pool is still made, populated but not locked, and says so
 * (hmm_pool_locked() == 0): callers show that in their stats.
 *
 * Accounting is exact: a buffer of n bytes takes n rounded up to 4096,
 * and hmm_pool_used() is the sum of those.  Capacity is the requested
 * size rounded up to 4096, whatever the mapping's own rounding.
 *
 * Ownership: hmm_pool_new allocates, hmm_pool_delete unmaps and frees
 * (buffers still allocated die with it).  The store owns one pool
 * (hmm_store_pool) and registers it with its ring; the tensor layer may
 * make its own for host-tier chunks.
 *
 * Threading: every function may be called from any thread; a mutex
 * inside protects the allocator and the counters.
 */
#ifndef HMM_POOL_H
#define HMM_POOL_H

#include <stddef.h>
#include <stdint.h>

struct hmm_pool;

/* hmm_pool_new flags */
#define HMM_POOL_NOHUGE	(1u << 0)	/* neither hugetlb nor THP */
#define HMM_POOL_NOLOCK	(1u << 1)	/* do not mlock */

/* hmm_pool_huge() values */
#define HMM_POOL_PAGES_4K	0
#define HMM_POOL_PAGES_THP	1	/* madvise(MADV_HUGEPAGE) */
#define HMM_POOL_PAGES_HUGETLB	2	/* MAP_HUGETLB, 2 MiB */

/* 0 and *out, or -EINVAL (bytes 0, bad node), -ENOMEM. */
int hmm_pool_new(size_t bytes, int numa_node, unsigned flags,
		 struct hmm_pool **out);
void hmm_pool_delete(struct hmm_pool *p);

/* A buffer of bytes (rounded up to 4096), 4096-aligned; NULL when the
 * pool has no free run that long (hmm_last_error says so) or bytes is 0. */
void *hmm_pool_alloc(struct hmm_pool *p, size_t bytes);

/* Give buf back: 0, or -EINVAL when buf is not a live buffer of p. */
int hmm_pool_free(struct hmm_pool *p, void *buf);

size_t hmm_pool_used(struct hmm_pool *p);	/* bytes allocated */
size_t hmm_pool_size(struct hmm_pool *p);	/* capacity in bytes */
size_t hmm_pool_largest(struct hmm_pool *p);	/* longest free run */
void *hmm_pool_base(struct hmm_pool *p);	/* start of the mapping */
int hmm_pool_huge(struct hmm_pool *p);		/* HMM_POOL_PAGES_* */
int hmm_pool_locked(struct hmm_pool *p);	/* 1 = mlock'd */
int hmm_pool_node(struct hmm_pool *p);		/* -1 = not bound */

/* 1 when [buf, buf+len) lies inside the pool's mapping. */
int hmm_pool_contains(struct hmm_pool *p, const void *buf, size_t len);

#endif /* HMM_POOL_H */
