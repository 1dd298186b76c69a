// SPDX-License-Identifier: MIT
/* test_pool — the pinned pool: alignment, exact accounting, exhaustion,
 * bad frees, reuse, and four threads allocating at once.  t: tsan */
#include "t.h"
#include "err.h"
#include "pool.h"

#define THREADS 4

static struct hmm_pool *shared;
static int overlaps;

static void *worker(void *arg)
{
	uint64_t seed = (uintptr_t)arg;
	uint8_t *bufs[16] = { 0 };
	size_t lens[16];

	for (int step = 0; step < 4000; step++) {
		int i = (int)(t_rand(&seed) % 16);

		if (bufs[i]) {
			for (size_t k = 0; k < lens[i]; k += 512)
				if (bufs[i][k] != (uint8_t)(uintptr_t)arg)
					__atomic_add_fetch(&overlaps, 1, __ATOMIC_RELAXED);
			hmm_pool_free(shared, bufs[i]);
			bufs[i] = NULL;
		} else {
			lens[i] = 4096 * (1 + t_rand(&seed) % 8);
			bufs[i] = hmm_pool_alloc(shared, lens[i]);
			if (bufs[i])
				memset(bufs[i], (uint8_t)(uintptr_t)arg, lens[i]);
		}
	}
	for (int i = 0; i < 16; i++)
		if (bufs[i])
			hmm_pool_free(shared, bufs[i]);
	return NULL;
}

int main(void)
{
	struct hmm_pool *p;
	void *a, *b, *c, *d;
	pthread_t th[THREADS];

	t_eq(hmm_pool_new(0, -1, 0, &p), -EINVAL, "size 0 refused");
	t_eq(hmm_pool_new(4096, 4096, 0, &p), -EINVAL, "NUMA node 4096 refused");
	t_eq(hmm_pool_new(10 * 4096 + 1, -1, 0, &p), 0, "new");
	t_eq(hmm_pool_size(p), 11 * 4096, "capacity rounded to 4 KiB only");
	t_diag("huge=%d locked=%d", hmm_pool_huge(p), hmm_pool_locked(p));
	a = hmm_pool_alloc(p, 1);
	b = hmm_pool_alloc(p, 8192);
	c = hmm_pool_alloc(p, 4097);
	t_ok(a && b && c, "three buffers");
	t_ok((uintptr_t)a % 4096 == 0 && (uintptr_t)b % 4096 == 0 &&
	     (uintptr_t)c % 4096 == 0, "4 KiB aligned");
	t_ok(hmm_pool_contains(p, c, 8192) && !hmm_pool_contains(p, &p, 1),
	     "contains");
	t_eq(hmm_pool_used(p), 5 * 4096, "used is exact: 4096+8192+8192");
	t_ok(hmm_pool_alloc(p, 0) == NULL, "zero bytes -> NULL");
	d = hmm_pool_alloc(p, 7 * 4096);
	t_ok(d == NULL, "7 pages do not fit in 6");
	t_ok(strstr(hmm_last_error(), "no free run") != NULL, "detail: %s",
	     hmm_last_error());
	d = hmm_pool_alloc(p, 6 * 4096);
	t_ok(d != NULL, "6 pages fit exactly");
	t_eq(hmm_pool_used(p), 11 * 4096, "full");
	t_ok(hmm_pool_alloc(p, 1) == NULL, "exhausted -> NULL");
	t_eq(hmm_pool_free(p, (char *)b + 4096), -EINVAL, "free of a middle page");
	t_eq(hmm_pool_free(p, &p), -EINVAL, "free of a stranger");
	t_eq(hmm_pool_free(p, b), 0, "free");
	t_eq(hmm_pool_free(p, b), -EINVAL, "double free");
	t_eq(hmm_pool_used(p), 9 * 4096, "used drops by 8192");
	t_ok(hmm_pool_alloc(p, 8192) == b, "the hole is reused");
	memset(a, 1, 4096);
	memset(d, 2, 6 * 4096);
	t_ok(((uint8_t *)a)[4095] == 1 && ((uint8_t *)d)[0] == 2,
	     "memory is usable");
	hmm_pool_delete(p);

	t_eq(hmm_pool_new(4 << 20, -1, HMM_POOL_NOHUGE | HMM_POOL_NOLOCK, &p), 0,
	     "new without huge pages or mlock");
	t_eq(hmm_pool_huge(p), HMM_POOL_PAGES_4K, "4 KiB pages");
	t_eq(hmm_pool_locked(p), 0, "not locked");
	hmm_pool_delete(p);

	t_eq(hmm_pool_new(4 << 20, 0, 0, &shared), 0, "new on node 0");
	t_eq(hmm_pool_node(shared), 0, "node 0");
	for (int i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1));
	for (int i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	t_eq(overlaps, 0, "threads never got overlapping buffers");
	t_eq(hmm_pool_used(shared), 0, "all returned: used 0");
	t_eq(hmm_pool_largest(shared), 4 << 20, "one free run again");
	hmm_pool_delete(shared);
	return t_done();
}
