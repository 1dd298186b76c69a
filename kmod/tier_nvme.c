// SPDX-License-Identifier: GPL-2.0
/*
 * hmmk: the NVMe tier.  Pages are handed to the daemon by EVICT and come
 * back by FILL when the CPU (or the simdev) touches them; the requests go
 * through the channel in daemon.c.  A fault that may be retried waits for
 * its FILL with the block and fault locks dropped.
 */
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/sched.h>

#include "hmmk.h"

/* Fills page with page i's bytes from the daemon.  blk->lock held. */
int hmmk_nvme_fill(struct hmmk_block *blk, unsigned int i, struct page *page)
{
	struct hmmk_req *req = hmmk_req_new(blk, i, HMMK_OP_FILL, page);
	int ret;

	if (!req)
		return -ENOMEM;
	ret = hmmk_req_submit(req);
	if (!ret)
		ret = hmmk_req_wait(req, hmmk_deadline());
	hmmk_req_put(req);
	return ret;
}

/*
 * The fault path for an evicted page when the fault may be retried: start
 * the block's FILL (or join the one in flight), drop the block lock and
 * the fault lock, sleep killably until the deadline, and let the first
 * waiter back install the page (or flag the failure) for everyone.
 * Called with blk->lock held; returns with it and the fault lock dropped
 * (VM_FAULT_RETRY), or with only the block lock dropped on an error:
 * VM_FAULT_OOM when no page was to be had (the caller evicts or fails),
 * VM_FAULT_SIGBUS when no daemon is attached.
 */
vm_fault_t hmmk_nvme_fill_async(struct vm_fault *vmf, struct hmmk_block *blk,
				unsigned int i)
{
	struct hmmk_region *region = blk->region;
	struct hmmk_req *req = blk->filling;
	unsigned int idx;
	struct page *page;
	long left = 0;
	int ret;

	if (!req) {
		page = hmmk_page_alloc(region->space, region->node, false,
				       false);
		req = page ? hmmk_req_new(blk, i, HMMK_OP_FILL, page) : NULL;
		if (page)
			put_page(page);		/* the request holds it */
		if (!req) {
			mutex_unlock(&blk->lock);
			return VM_FAULT_OOM;
		}
		req->deadline = hmmk_deadline();
		if (hmmk_req_submit(req)) {
			hmmk_req_put(req);
			mutex_unlock(&blk->lock);
			atomic64_inc(&region->c.sigbus);
			return VM_FAULT_SIGBUS;
		}
		blk->filling = req;	/* owns the first reference */
	}
	kref_get(&req->ref);		/* this waiter's */
	kref_get(&region->ref);		/* the VMA may go while we sleep */
	mutex_unlock(&blk->lock);
	hmmk_release_fault_lock(vmf);

	if (time_before(jiffies, req->deadline))
		left = wait_for_completion_killable_timeout(&req->done,
						req->deadline - jiffies);

	mutex_lock(&blk->lock);
	if (blk->filling == req) {
		blk->filling = NULL;
		idx = req->index % HMMK_BLOCK_PAGES;
		ret = hmmk_req_end(req, left);
		if (hmmk_tier(blk, idx) == HMMK_TIER_NVME) {
			if (!ret) {
				get_page(req->page);
				hmmk_block_set(blk, idx, HMMK_TIER_CPU,
					       req->page);
				atomic64_inc(&region->c.fills);
			} else if (ret == -EIO) {
				blk->state[idx] |= HMMK_S_FILLFAIL;
			}
		}
		hmmk_req_put(req);	/* the block's reference */
	}
	mutex_unlock(&blk->lock);
	hmmk_req_put(req);
	hmmk_region_put(region);
	return VM_FAULT_RETRY;
}

/*
 * Hands pages [lo, hi) of the block to the daemon and frees them once it
 * has them, counting in the done and skipped of arg, the hmmk_range.
 * blk->lock held, so faults on the block wait meanwhile.
 */
static int hmmk_evict_block(struct hmmk_block *blk, unsigned int lo,
			    unsigned int hi, void *arg)
{
	unsigned long deadline = hmmk_deadline();
	struct hmmk_range *rng = arg;
	struct hmmk_req **reqs;
	unsigned int i;
	int ret = 0, r;

	reqs = kcalloc(HMMK_BLOCK_PAGES, sizeof(*reqs), GFP_KERNEL);
	if (!reqs)
		return -ENOMEM;
	hmmk_block_unmap(blk, lo, hi - lo);
	for (i = lo; i < hi && !ret; i++) {
		struct page *page = blk->pages[i];

		if (hmmk_tier(blk, i) != HMMK_TIER_CPU ||
		    page_count(page) != 1) {
			rng->skipped++;
			continue;
		}
		reqs[i] = hmmk_req_new(blk, i, HMMK_OP_EVICT, page);
		if (!reqs[i]) {
			ret = -ENOMEM;
			break;
		}
		ret = hmmk_req_submit(reqs[i]);
		if (ret) {		/* the daemon went away: not queued */
			hmmk_req_put(reqs[i]);
			reqs[i] = NULL;
			rng->skipped++;
		}
	}
	for (i = lo; i < hi; i++) {
		if (!reqs[i])
			continue;
		r = ret ? hmmk_req_end(reqs[i], 0) :
			  hmmk_req_wait(reqs[i], deadline);
		if (!r) {
			put_page(blk->pages[i]);
			hmmk_block_set(blk, i, HMMK_TIER_NVME, NULL);
			atomic64_inc(&blk->region->c.evictions);
			rng->done++;
		} else {
			rng->skipped++;
			if (r == -EINTR)
				ret = r;
		}
		hmmk_req_put(reqs[i]);
	}
	kfree(reqs);
	return ret;
}

/* Whether region, or its space, is at its CPU page limit. */
bool hmmk_over_limit(struct hmmk_region *region)
{
	struct hmmk_space *space = region->space;
	u64 slimit = READ_ONCE(space->cpu_limit);

	return (region->cpu_limit &&
		atomic64_read(&region->nr_cpu) >= region->cpu_limit) ||
	       (slimit && atomic64_read(&space->nr_cpu) >= slimit);
}

/*
 * Whether room is made for region: it and its space are under their CPU
 * limits and, for a fault that got no page (memcg), a page at least went and
 * the space's memcg is out of its headroom.
 */
static bool hmmk_room_made(struct hmmk_region *region, bool memcg, u64 done)
{
	if (hmmk_over_limit(region))
		return false;
	return !memcg || (done && !hmmk_memcg_full(region->space->memcg));
}

/*
 * Evict pages of victim to the daemon, a batch at a time from its clock
 * hand, until room is made for region (counting in rng->done), for at
 * most one pass over victim.  0, or -EINTR (a fatal signal).
 */
static int hmmk_evict_from(struct hmmk_region *region,
			   struct hmmk_region *victim, bool memcg,
			   struct hmmk_range *rng)
{
	u64 scanned = 0;
	int ret = 0;

	while (!ret && !hmmk_room_made(region, memcg, rng->done) &&
	       scanned < victim->nr_pages && hmmk_daemon_attached()) {
		u64 first = (u64)atomic64_fetch_add(HMMK_ROOM_BATCH,
						    &victim->hand) %
			    victim->nr_pages;
		u64 nr = min_t(u64, HMMK_ROOM_BATCH,
			       victim->nr_pages - first);

		ret = hmmk_region_walk(victim, first, nr, hmmk_evict_block,
				       rng);
		scanned += nr;
	}
	return ret;
}

/**
 * hmmk_nvme_make_room() - evict pages of a space to the daemon
 * @region: the region that needs room
 * @memcg: a fault that got no page: also one batch at least, and until
 *         the space's memcg is out of its headroom; else only until
 *         @region and its space are under their CPU limits
 *
 * Evicts from @region first, then from the space's other regions with
 * pages on the CPU, until room is made or nothing more goes.  Best
 * effort: without a daemon nothing goes.
 *
 * Context: a fault, mmap_lock held for read, no block lock held; takes
 * space->lock only to pick a victim, and each block's lock in turn.
 * Return: the pages evicted.
 */
u64 hmmk_nvme_make_room(struct hmmk_region *region, bool memcg)
{
	struct hmmk_space *space = region->space;
	struct hmmk_range rng = { 0 };
	struct hmmk_region *victim, *r;
	u64 last = 0;

	if (hmmk_evict_from(region, region, memcg, &rng))
		return rng.done;
	while (!hmmk_room_made(region, memcg, rng.done) &&
	       hmmk_daemon_attached()) {
		victim = NULL;
		mutex_lock(&space->lock);	/* the next one after last */
		list_for_each_entry(r, &space->regions, node_link) {
			if (r != region && r->handle > last &&
			    atomic64_read(&r->nr_cpu)) {
				victim = r;
				kref_get(&victim->ref);
				break;
			}
		}
		mutex_unlock(&space->lock);
		if (!victim)
			break;
		last = victim->handle;
		r = victim;
		if (hmmk_evict_from(region, victim, memcg, &rng)) {
			hmmk_region_put(r);
			break;
		}
		hmmk_region_put(r);
	}
	return rng.done;
}

long hmmk_evict_ioctl(struct hmmk_space *space, void __user *arg)
{
	struct hmmk_range r;

	if (copy_from_user(&r, arg, sizeof(r)))
		return -EFAULT;
	if (r.node || r.flags || !hmmk_zero(r.reserved, sizeof(r.reserved)))
		return -EINVAL;
	if (!hmmk_daemon_attached())
		return -ENODEV;
	return hmmk_range_ioctl(space, arg, &r, hmmk_evict_block);
}
