// SPDX-License-Identifier: GPL-2.0
/*
 * hmmk: the CPU-node tiers: MIGRATE moves resident pages of a
 * range to one NUMA node (alloc on that node with __GFP_THISNODE, revoke the
 * CPU mappings, copy, swap the page in the block, free the old page).
 */
#include <linux/mm.h>
#include <linux/highmem.h>
#include <linux/nodemask.h>
#include <linux/uaccess.h>

#include "hmmk.h"

/* A page still referenced after unmapping is pinned (GUP): leave it. */
static bool hmmk_page_movable(struct page *page)
{
	return page_count(page) == 1 && !page_mapped(page);
}

/*
 * Moves pages [lo, hi) of the block to r->node (arg: the hmmk_range).
 * blk->lock held.  Adds to r->done and r->skipped; returns 0 or -ENOMEM
 * (node full).
 */
static int hmmk_migrate_block(struct hmmk_block *blk, unsigned int lo,
			      unsigned int hi, void *arg)
{
	struct hmmk_region *region = blk->region;
	unsigned int i, first = hi, last = lo;
	struct hmmk_range *r = arg;
	int node = r->node;
	struct page *new;

	for (i = lo; i < hi; i++) {
		if (hmmk_tier(blk, i) != HMMK_TIER_CPU) {
			r->skipped++;
			continue;
		}
		if (page_to_nid(blk->pages[i]) == node)
			continue;
		first = min(first, i);
		last = max(last, i + 1);
	}
	if (first >= last)
		return 0;

	hmmk_block_unmap(blk, first, last - first);
	for (i = first; i < last; i++) {
		struct page *old = blk->pages[i];

		if (hmmk_tier(blk, i) != HMMK_TIER_CPU ||
		    page_to_nid(old) == node)
			continue;
		if (!hmmk_page_movable(old)) {
			r->skipped++;
			continue;
		}
		new = hmmk_page_alloc(region->space, node, true, false);
		if (!new)
			return -ENOMEM;
		copy_highpage(new, old);
		blk->pages[i] = new;
		put_page(old);
		r->done++;
		atomic64_inc(&region->c.migrations);
		atomic64_add(PAGE_SIZE, &region->c.migrated_bytes);
	}
	return 0;
}

long hmmk_migrate_ioctl(struct hmmk_space *space, void __user *arg)
{
	struct hmmk_range r;

	if (copy_from_user(&r, arg, sizeof(r)))
		return -EFAULT;
	if (r.flags || !hmmk_zero(r.reserved, sizeof(r.reserved)))
		return -EINVAL;
	if (r.node >= nr_node_ids || !node_state(r.node, N_MEMORY))
		return -EINVAL;
	return hmmk_range_ioctl(space, arg, &r, hmmk_migrate_block);
}
