// SPDX-License-Identifier: MIT
/* pool.c — the pinned buffer pool (see pool.h). */
#include <errno.h>
#include <numa.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "err.h"
#include "extent.h"
#include "node.h"
#include "pool.h"

#define PG	4096ul
#define HUGE	(2ul << 20)

/*
 * Allocated by hmm_pool_new, freed by hmm_pool_delete.  lock protects
 * ext, runs[] and used; the rest is fixed after creation.
 */
struct hmm_pool {
	pthread_mutex_t lock;
	struct hmm_ext ext;	/* in pages */
	uint32_t *runs;		/* pages of the buffer starting at page i, or 0 */
	size_t used;		/* bytes */
	size_t size;		/* capacity, bytes */
	void *base;		/* start of the usable area */
	void *map;		/* what to munmap */
	size_t map_len;
	int huge, locked, node;
};

static size_t round_up(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

/* Map len bytes: hugetlb, else a 2 MiB-aligned THP-advised mapping. */
static int pool_map(struct hmm_pool *p, size_t len, unsigned flags)
{
	const int prot = PROT_READ | PROT_WRITE;
	const int mf = MAP_PRIVATE | MAP_ANONYMOUS;	/* reserved: no SIGBUS */
	uint8_t *m, *a;

	if (!(flags & HMM_POOL_NOHUGE)) {
		p->map_len = round_up(len, HUGE);
		m = mmap(NULL, p->map_len, prot, mf | MAP_HUGETLB, -1, 0);
		if (m != MAP_FAILED) {
			p->map = p->base = m;
			p->huge = HMM_POOL_PAGES_HUGETLB;
			return 0;
		}
	}
	p->map_len = round_up(len, HUGE) + HUGE;
	m = mmap(NULL, p->map_len, prot, mf, -1, 0);
	if (m == MAP_FAILED)
		return hmm_err(-ENOMEM, "pool: cannot map %zu bytes", len);
	a = (uint8_t *)round_up((uintptr_t)m, HUGE);
	p->map = m;
	p->base = a;
	if (!(flags & HMM_POOL_NOHUGE) &&
	    madvise(a, round_up(len, HUGE), MADV_HUGEPAGE) == 0)
		p->huge = HMM_POOL_PAGES_THP;
	return 0;
}

int hmm_pool_new(size_t bytes, int numa_node, unsigned flags,
		 struct hmm_pool **out)
{
	struct hmm_pool *p;
	size_t len = round_up(bytes, PG);
	int err;

	if (!bytes || bytes > (size_t)1 << 46 || !out)
		return hmm_err(-EINVAL, "pool: bad size %zu", bytes);
	err = hmm_node_check(numa_node, "pool: numa_node");
	if (err)
		return err;
	p = calloc(1, sizeof(*p));
	if (!p)
		return hmm_err(-ENOMEM, "pool: out of memory");
	p->size = len;
	p->node = numa_node;
	p->runs = calloc(len / PG, sizeof(*p->runs));
	err = p->runs ? hmm_ext_init(&p->ext, len / PG) : -ENOMEM;
	if (err) {
		err = hmm_err(err, "pool: out of memory for %zu bytes", len);
		goto out_free;
	}
	err = pool_map(p, len, flags);
	if (err)
		goto out_fini;
	if (numa_node >= 0)
		numa_tonode_memory(p->base, len, numa_node);
	if (!(flags & HMM_POOL_NOLOCK) && mlock(p->base, len) == 0)
		p->locked = 1;
	else if (madvise(p->base, len, MADV_POPULATE_WRITE) != 0)
		memset(p->base, 0, len);	/* fault it in all the same */
	pthread_mutex_init(&p->lock, NULL);
	*out = p;
	return 0;

out_fini:
	hmm_ext_fini(&p->ext);
out_free:
	free(p->runs);
	free(p);
	return err;
}

void hmm_pool_delete(struct hmm_pool *p)
{
	if (!p)
		return;
	munmap(p->map, p->map_len);
	hmm_ext_fini(&p->ext);
	pthread_mutex_destroy(&p->lock);
	free(p->runs);
	free(p);
}

void *hmm_pool_alloc(struct hmm_pool *p, size_t bytes)
{
	size_t pages = round_up(bytes, PG) / PG;
	uint64_t off;
	int err;

	if (!bytes || pages > UINT32_MAX) {
		hmm_err(-EINVAL, "pool: bad buffer size %zu", bytes);
		return NULL;
	}
	pthread_mutex_lock(&p->lock);
	err = hmm_ext_alloc(&p->ext, pages, &off);
	if (!err) {
		p->runs[off] = (uint32_t)pages;
		p->used += pages * PG;
	}
	pthread_mutex_unlock(&p->lock);
	if (err) {
		hmm_err(-ENOMEM, "pool: no free run of %zu bytes (%zu of %zu used)",
			bytes, hmm_pool_used(p), p->size);
		return NULL;
	}
	return (uint8_t *)p->base + off * PG;
}

int hmm_pool_free(struct hmm_pool *p, void *buf)
{
	uintptr_t d = (uintptr_t)buf - (uintptr_t)p->base;
	size_t pg = d / PG;
	int err = -EINVAL;

	if (!buf || (uintptr_t)buf < (uintptr_t)p->base || d >= p->size ||
	    d % PG)
		return hmm_err(-EINVAL, "pool: %p is not a pool buffer", buf);
	pthread_mutex_lock(&p->lock);
	if (p->runs[pg] && !hmm_ext_free(&p->ext, pg, p->runs[pg])) {
		p->used -= (size_t)p->runs[pg] * PG;
		p->runs[pg] = 0;
		err = 0;
	}
	pthread_mutex_unlock(&p->lock);
	if (err)
		return hmm_err(err, "pool: %p is not a live buffer", buf);
	return 0;
}

size_t hmm_pool_used(struct hmm_pool *p)
{
	size_t u;

	pthread_mutex_lock(&p->lock);
	u = p->used;
	pthread_mutex_unlock(&p->lock);
	return u;
}

size_t hmm_pool_largest(struct hmm_pool *p)
{
	size_t l;

	pthread_mutex_lock(&p->lock);
	l = hmm_ext_largest(&p->ext) * PG;
	pthread_mutex_unlock(&p->lock);
	return l;
}

size_t hmm_pool_size(struct hmm_pool *p) { return p->size; }
void *hmm_pool_base(struct hmm_pool *p) { return p->base; }
int hmm_pool_huge(struct hmm_pool *p) { return p->huge; }
int hmm_pool_locked(struct hmm_pool *p) { return p->locked; }
int hmm_pool_node(struct hmm_pool *p) { return p->node; }

int hmm_pool_contains(struct hmm_pool *p, const void *buf, size_t len)
{
	uintptr_t b = (uintptr_t)p->base, x = (uintptr_t)buf;

	return x >= b && x - b <= p->size && len <= p->size - (x - b);
}
