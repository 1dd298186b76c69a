// SPDX-License-Identifier: MIT
/*
 * region_uvm.c — regions on the "uvm" device: hmm_region_new gives a
 * plain pointer that a kernel may touch on the GPU and the host alike.
 *
 * The embedded engine serves a region whole (backend.h region_whole)
 * when its device is uvm: the region is the device's managed range
 * (dev_uvm.c's reserve: cuMemAllocManaged, preferred on the host,
 * accessed by the GPU), so an access anywhere works without hmm (a GPU
 * access to a block not brought reads it over the link; the driver
 * migrates nothing itself).  hmm_region_advise moves it, per 64 KiB
 * block: WILLNEED prefetches the blocks to the GPU, each admitted into
 * config.device_budget first (hmm_budget_admit: tensor chunks are
 * evicted for it; -ENOMEM once starved for wait_ms), COLD prefetches
 * them back to the host and gives their bytes back.  Blocks at the GPU
 * leave it only by COLD or hmm_region_free: no reclaimer takes them, and
 * the schedule policy does not see region accesses (regions have no
 * maps), so the prefetch ahead is the caller's WILLNEED.  The host side
 * is the driver's pageable memory: config.host_budget does not count it
 * and no block goes to the store.  region_evictions (h->st) counts the
 * blocks moved back to the host (COLD, and at the free).  Locking: the block bits and the counter under
 * h->lock; any thread (no two on one region's free).
 */
#include <errno.h>
#include <stdlib.h>

#include "budget.h"
#include "ctx.h"
#include "dev.h"
#include "err.h"
#include "region_int.h"

/* Allocated by hmm_region_uvm_whole, freed by uvm_region_free. */
struct uvm_region {
	uint8_t *at_gpu;	/* per block: 1 admitted, 2 at the GPU */
};

static const struct region_whole_ops uvm_region_ops;

/* WILLNEED on blocks [first, last]: admit each block not at the GPU
 * (at_gpu 1: admitted), then prefetch each run of admitted blocks (2: at
 * the GPU; a failed prefetch gives its blocks back).  h->lock held
 * (dropped while an admission waits). */
static int uvm_region_in(struct hmm *h, struct hmm_region *r,
			 uint32_t first, uint32_t last)
{
	struct uvm_region *u = r->whole_priv;
	uint32_t b, end, i;
	int err = 0, e;

	for (b = first; b <= last && !err; b++) {
		struct hmm_admit a = {
			.tier = HMM_TIER_DEVICE, .bytes = RBLOCK,
			.wait_s = h->cfg.wait_ms / 1e3,
		};

		if (u->at_gpu[b])
			continue;
		err = hmm_budget_admit(h, &a);
		if (!err)
			u->at_gpu[b] = 1;
	}
	for (b = first; b <= last; b = end) {
		for (end = b; end <= last && u->at_gpu[end] == 1; end++)
			;
		if (end == b) {
			end = b + 1;
			continue;
		}
		e = h->dev->populate(h->dev_priv,
				     (uintptr_t)region_block_addr(r, b),
				     (uint64_t)(end - b) * RBLOCK);
		for (i = b; i < end; i++) {
			u->at_gpu[i] = e ? 0 : 2;
			if (e)
				hmm_budget_give(h, HMM_TIER_DEVICE, RBLOCK);
		}
		err = err ? err : e;
	}
	return err;
}

/* COLD on blocks [first, last]: back to the host.  h->lock held. */
static void uvm_region_out(struct hmm *h, struct hmm_region *r,
			   uint32_t first, uint32_t last)
{
	struct uvm_region *u = r->whole_priv;
	uint32_t b;

	for (b = first; b <= last; b++) {
		if (!u->at_gpu[b])
			continue;
		h->dev->depopulate(h->dev_priv,
				   (uintptr_t)region_block_addr(r, b), RBLOCK);
		u->at_gpu[b] = 0;
		h->st.region_evictions++;
		hmm_budget_give(h, HMM_TIER_DEVICE, RBLOCK);
	}
	pthread_cond_broadcast(&h->cond);
}

static int uvm_region_advise(struct hmm_region *r, uint64_t off,
			     uint64_t len, int advice)
{
	struct hmm *h = r->h;
	uint32_t first = off / RBLOCK, last = (off + len - 1) / RBLOCK;
	int err = 0;

	if (advice != HMM_ADVISE_WILLNEED && advice != HMM_ADVISE_COLD)
		return hmm_err(-EINVAL, "hmm_region_advise: advice %d", advice);
	pthread_mutex_lock(&h->lock);
	if (advice == HMM_ADVISE_WILLNEED)
		err = uvm_region_in(h, r, first, last);
	else
		uvm_region_out(h, r, first, last);
	pthread_mutex_unlock(&h->lock);
	if (err)
		return hmm_err(err, "region %u at the GPU: %s", r->id,
			       hmm_last_error());
	return 0;
}

/* Nothing to add: the engine's own counters (h->st) have the moves. */
static void uvm_region_stats(struct hmm_region *r, uint64_t *faults,
			     uint64_t *evictions)
{
}

static void uvm_region_free(struct hmm_region *r)
{
	struct uvm_region *u = r->whole_priv;
	struct hmm *h = r->h;

	pthread_mutex_lock(&h->lock);
	uvm_region_out(h, r, 0, r->nblocks - 1);
	h->dev->release(h->dev_priv, (uintptr_t)r->base, r->bytes);
	pthread_mutex_unlock(&h->lock);
	free(u->at_gpu);
	free(u);
}

static const struct region_whole_ops uvm_region_ops = {
	.advise = uvm_region_advise, .stats = uvm_region_stats,
	.free = uvm_region_free,
};

int hmm_region_uvm_whole(struct hmm *h, struct hmm_region *r)
{
	struct uvm_region *u;
	uint64_t addr;
	int err;

	if (h->dev != &hmm_dev_uvm)
		return -ENODEV;	/* a userfaultfd region, as always */
	u = calloc(1, sizeof(*u));
	r->nblocks = r->bytes / RBLOCK;
	if (u)
		u->at_gpu = calloc(r->nblocks, 1);
	if (!u || !u->at_gpu) {
		free(u);
		return hmm_err(-ENOMEM, "hmm_region_new: no memory");
	}
	pthread_mutex_lock(&h->lock);
	err = h->dev->reserve(h->dev_priv, r->bytes, &addr);
	if (!err) {
		r->base = (char *)(uintptr_t)addr;
		r->whole = &uvm_region_ops;
		r->whole_priv = u;
		hmm_list_add_tail(&h->regions, &r->link);
	}
	pthread_mutex_unlock(&h->lock);
	if (err) {
		free(u->at_gpu);
		free(u);
		return hmm_err(err, "hmm_region_new: %s", hmm_last_error());
	}
	return 0;
}
