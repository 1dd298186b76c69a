// SPDX-License-Identifier: GPL-2.0
/*
 * hmmk: a 2 MiB block: its lock, the per-4 KiB page pointer and
 * state, page allocation on a node, and revocation of CPU mappings.
 */
#include <linux/mm.h>
#include <linux/gfp.h>
#include <linux/highmem.h>
#include <linux/sched/mm.h>

#include "hmmk.h"

/*
 * A fresh page on node for a region of space, zeroed when zero, charged to
 * the space's memcg (__GFP_ACCOUNT under set_active_memcg, as the task
 * allocating may be another space's or in another cgroup).  strict: only
 * that node (MIGRATE); otherwise the node is preferred and any node will
 * do.  Never invokes the OOM killer: NULL when the memcg is at its
 * headroom (hmmk_memcg_full) or the machine has no page after reclaim
 * (__GFP_NORETRY, then __GFP_RETRY_MAYFAIL), and the caller evicts or
 * fails.
 */
struct page *hmmk_page_alloc(struct hmmk_space *space, int node, bool strict,
			     bool zero)
{
	gfp_t gfp = GFP_HIGHUSER | __GFP_ACCOUNT | __GFP_NOWARN;
	struct mem_cgroup *old;
	struct page *page;

	if (hmmk_memcg_full(space->memcg))
		return NULL;
	old = set_active_memcg(space->memcg);
	if (zero)
		gfp |= __GFP_ZERO;
	page = alloc_pages_node(node, gfp | __GFP_THISNODE | __GFP_NORETRY, 0);
	if (!page && !strict)
		page = alloc_pages(gfp | __GFP_RETRY_MAYFAIL, 0);
	set_active_memcg(old);
	return page;
}

/* Interruptible only by a fatal signal; 0 or -EINTR. */
int hmmk_block_lock(struct hmmk_block *blk)
{
	return mutex_lock_killable(&blk->lock) ? -EINTR : 0;
}

/* Sets page i's tier and page, counting CPU pages.  blk->lock held. */
void hmmk_block_set(struct hmmk_block *blk, unsigned int i, u8 tier,
		    struct page *page)
{
	struct hmmk_region *region = blk->region;
	u8 old = hmmk_tier(blk, i);

	if (old == HMMK_TIER_CPU && tier != HMMK_TIER_CPU) {
		atomic64_dec(&region->nr_cpu);
		atomic64_dec(&region->space->nr_cpu);
	} else if (old != HMMK_TIER_CPU && tier == HMMK_TIER_CPU) {
		atomic64_inc(&region->nr_cpu);
		atomic64_inc(&region->space->nr_cpu);
	}
	blk->pages[i] = page;
	blk->state[i] = (blk->state[i] & ~HMMK_S_TIER) | tier;
	if (tier != HMMK_TIER_CPU)
		blk->state[i] &= ~(HMMK_S_SAMPLED | HMMK_S_ACCESSED);
	blk->state[i] &= ~HMMK_S_FILLFAIL;
}

/*
 * Removes every CPU mapping of pages [first, first + nr) of the block, in
 * every VMA of the space.  blk->lock held, so no fault can map them again
 * until it is dropped.  Takes i_mmap_rwsem and page table locks.
 */
void hmmk_block_unmap(struct hmmk_block *blk, unsigned int first,
		      unsigned int nr)
{
	struct hmmk_region *region = blk->region;
	u64 pg = region->pgoff + (u64)blk->index * HMMK_BLOCK_PAGES + first;

	unmap_mapping_range(&region->space->mapping, (loff_t)pg << PAGE_SHIFT,
			    (loff_t)nr << PAGE_SHIFT, 1);
}

/* Frees every page the block holds.  No mapping is left; blk->lock held. */
void hmmk_block_free_pages(struct hmmk_block *blk)
{
	unsigned int i;

	for (i = 0; i < HMMK_BLOCK_PAGES; i++) {
		if (hmmk_tier(blk, i) == HMMK_TIER_CPU) {
			atomic64_dec(&blk->region->nr_cpu);
			atomic64_dec(&blk->region->space->nr_cpu);
		}
		if (blk->pages[i])
			put_page(blk->pages[i]);
		blk->pages[i] = NULL;
		blk->state[i] = HMMK_TIER_NONE;
	}
}
