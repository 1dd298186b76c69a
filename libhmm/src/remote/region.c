// SPDX-License-Identifier: MIT
/*
 * region.c — shared mode's block backend for userfaultfd regions
 * (engine/region_int.h): evicted blocks go to a tensor in hmmd as large
 * as the region (r->back).  A write is a map(WRITE) of the block's range
 * + memcpy + unmap, a read UFFDIO_COPYs straight from a map(READ) of it
 * (hmmd's shared memory: no bounce copy).  Those are round trips, so
 * they run without h->lock: evictions chosen under the lock wait on
 * r->todo until the thread that needs the room (or advise, or free)
 * writes them (write_now).  hmmd gone: that region evicts no more, and
 * its faults that need hmmd or room get SIGBUS.  In shared mode the host
 * budget (config.host_budget) counts this process's resident region
 * bytes; hmmd counts the tensor in this client's quota.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "region_int.h"
#include "remote.h"

static void remote_write(struct hmm_region *r, struct region_wb *wb)
{
	wb->next = r->todo;	/* hmm_region_drain writes it */
	r->todo = wb;
}

/* The write itself: a round trip to hmmd and a copy (no lock held). */
static int remote_write_now(struct region_wb *wb)
{
	struct hmm_region *r = wb->r;
	void *dst;
	int err;

	err = hmm_remote_map(r->back, (uint64_t)wb->block * RBLOCK, RBLOCK,
			     HMM_TIER_HOST, HMM_WRITE, &dst);
	if (err)
		return err;
	memcpy(dst, wb->staging, RBLOCK);
	return hmm_remote_unmap(r->back, dst);
}

static int remote_read(struct hmm_region *r, uint32_t b, void **src)
{
	return hmm_remote_map(r->back, (uint64_t)b * RBLOCK, RBLOCK,
			      HMM_TIER_HOST, HMM_READ, src);
}

static void remote_read_end(struct hmm_region *r, void *src)
{
	hmm_remote_unmap(r->back, src);
}

static void remote_fini(struct hmm_region *r)
{
	hmm_remote_tensor_free(r->back);	/* frees it even on error */
	r->back = NULL;
}

/* A failed write: hmmd is gone. */
static const struct region_ops remote_ops = {
	.name = "hmmd", .gone_on_error = 1, .write = remote_write,
	.write_now = remote_write_now, .read = remote_read,
	.read_end = remote_read_end, .fini = remote_fini,
};

int hmm_remote_region_back(struct hmm *h, struct hmm_region *r)
{
	struct hmm_remote_tensor *t;
	char name[48];
	int64_t n = r->bytes;
	int err;

	snprintf(name, sizeof(name), "hmm-region.%d.%u", (int)getpid(),
		 r->id);
	err = hmm_remote_tensor_new(hmm_remote_client(h), name, HMM_DTYPE_U8,
				    1, &n, 0, &t);
	if (err)
		return err;
	r->back = t;
	r->ops = &remote_ops;
	return 0;
}
