// SPDX-License-Identifier: MIT
/*
 * region_store.c — the embedded engine's block backend for regions
 * (region_int.h): evicted blocks are extents of the context's store,
 * written and read by the I/O thread; a read lands in the region's
 * bounce buffer (r->back), which the fault thread UFFDIO_COPYs from.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "region_int.h"

static uint64_t block_key(struct hmm_region *r, uint32_t b)
{
	return (uint64_t)(0x80000000u | r->id) << 32 | b;
}

static void store_write(struct hmm_region *r, struct region_wb *wb)
{
	wb->req.io.op = HMM_IO_WRITE;
	wb->req.io.len = RBLOCK;
	wb->req.io.key = block_key(r, wb->block);
	wb->req.io.buf = wb->staging;
	hmm_iot_queue(r->h, &wb->req);
}

static int store_read(struct hmm_region *r, uint32_t b, void **src)
{
	struct hmm_ioreq q;
	int err;

	memset(&q, 0, sizeof(q));
	q.io.op = HMM_IO_READ;
	q.io.len = RBLOCK;
	q.io.key = block_key(r, b);
	q.io.buf = r->back;
	pthread_mutex_lock(&r->h->lock);
	err = hmm_iot_sync(r->h, &q);
	pthread_mutex_unlock(&r->h->lock);
	*src = r->back;
	return err;
}

static void store_read_end(struct hmm_region *r, void *src)
{
}

static void store_fini(struct hmm_region *r)
{
	struct hmm *h = r->h;
	uint32_t b;

	pthread_mutex_lock(&h->lock);
	for (b = 0; b < r->nblocks && !h->io_stop; b++) {
		uint8_t st = r->state[b] & ~RB_STARVED;	/* bytes kept */
		struct hmm_ioreq q;

		if (st != RB_STORED && st != RB_BROKEN)
			continue;
		memset(&q, 0, sizeof(q));
		q.io.op = HMM_IOREQ_FREE;
		q.io.key = block_key(r, b);
		hmm_iot_sync(h, &q);
	}
	pthread_mutex_unlock(&h->lock);
	free(r->back);
	r->back = NULL;
}

/* A write the store refuses for want of extents (-ENOSPC) ends the
 * region's evictions; others (an I/O error) are tried again later. */
static int store_gone(int err)
{
	return err == -ENOSPC;
}

/* Writes go to the I/O thread, never deferred (no write_now). */
static const struct region_ops store_ops = {
	.name = "store", .gone = store_gone, .write = store_write,
	.write_now = NULL, .read = store_read, .read_end = store_read_end,
	.fini = store_fini,
};

/* A region is held to a new tensor's bound (hmm_fits): no larger than
 * everything this context can ever hold, its block table allocated only
 * once it fits. */
int hmm_region_store_back(struct hmm *h, struct hmm_region *r)
{
	uint64_t cap[HMM_TIERS];
	int err;

	if (!h->store)
		return hmm_err(-ENODEV, "hmm_region_new: no store tier to "
			       "evict to (config.store_path)");
	hmm_capacity(h, cap);
	err = hmm_region_fits(r, hmm_whose(h), cap);
	if (err)
		return err;
	if (posix_memalign(&r->back, HMM_PAGE, RBLOCK))
		return hmm_err(-ENOMEM, "region: no bounce buffer");
	r->ops = &store_ops;
	return 0;
}
