// SPDX-License-Identifier: GPL-2.0
/*
 * hmmk: the CPU fault handler of region VMAs.
 *
 * Under the block lock the page is made resident on a CPU node (zero-fill
 * on first touch on the preferred node, back from the simdev, or FILL from
 * the daemon) and inserted with vm_insert_page.  Runs in the faulting
 * task's context with mmap_lock held for read; may sleep.  A fault that
 * waits for the daemon drops both locks and returns VM_FAULT_RETRY.
 */
#include <linux/mm.h>

#include "hmmk.h"

/*
 * Makes page i of the block resident on a CPU node.  blk->lock held.
 * Returns 0, -ENOMEM, -EINTR (fatal signal) or -EIO (the daemon failed).
 */
int hmmk_make_cpu_resident(struct hmmk_block *blk, unsigned int i)
{
	struct hmmk_region *region = blk->region;
	struct page *page;
	int ret;

	switch (hmmk_tier(blk, i)) {
	case HMMK_TIER_CPU:
		return 0;
	case HMMK_TIER_NONE:
		page = hmmk_page_alloc(region->space, region->node, false,
				       true);
		if (!page)
			return -ENOMEM;
		hmmk_block_set(blk, i, HMMK_TIER_CPU, page);
		atomic64_inc(&region->c.zero_fills);
		return 0;
	case HMMK_TIER_DEV:
		return hmmk_simdev_to_cpu(blk, i);
	case HMMK_TIER_NVME:
		if (blk->state[i] & HMMK_S_FILLFAIL) {
			blk->state[i] &= ~HMMK_S_FILLFAIL;
			return -EIO;	/* reported once, to the retry */
		}
		page = hmmk_page_alloc(region->space, region->node, false,
				       false);
		if (!page)
			return -ENOMEM;
		ret = hmmk_nvme_fill(blk, i, page);
		if (ret) {
			put_page(page);
			return ret;
		}
		hmmk_block_set(blk, i, HMMK_TIER_CPU, page);
		atomic64_inc(&region->c.fills);
		return 0;
	}
	return -EIO;
}

/*
 * A FILL is waited for with the fault lock dropped (VM_FAULT_RETRY) when
 * the fault allows it and does not forbid sleeping; the retry then finds
 * the page resident, or the failure flagged.
 */
static bool hmmk_may_wait(struct vm_fault *vmf, struct hmmk_block *blk,
			  unsigned int i)
{
	if (blk->state[i] & HMMK_S_FILLFAIL)
		return false;
	return fault_flag_allow_retry_first(vmf->flags) &&
	       !(vmf->flags & FAULT_FLAG_RETRY_NOWAIT);
}

/*
 * Makes page i resident, maps it at the fault address and drops the block
 * lock.  0, or -errno as hmmk_make_cpu_resident and vm_insert_page give.
 */
static int hmmk_map_page(struct vm_fault *vmf, struct hmmk_block *blk,
			 unsigned int i)
{
	int ret = hmmk_make_cpu_resident(blk, i);

	if (!ret) {
		if (blk->state[i] & HMMK_S_SAMPLED) {
			blk->state[i] &= ~HMMK_S_SAMPLED;
			blk->state[i] |= HMMK_S_ACCESSED;
			atomic64_inc(&blk->region->c.sample_hits);
		}
		ret = vm_insert_page(vmf->vma, vmf->address, blk->pages[i]);
		if (ret == -EBUSY)	/* another thread mapped it first */
			ret = 0;
	}
	mutex_unlock(&blk->lock);
	return ret;
}

/*
 * A page the opener's memcg (or the machine) cannot give: with a daemon
 * attached, pages of the space go to it (a batch at least, and until the
 * memcg is out of its headroom) and the fault tries once more; else, or
 * if that fails too, the fault gets SIGBUS.  Never VM_FAULT_OOM: no OOM
 * killer was asked (hmmk_page_alloc), so the #PF handler would retry the
 * fault forever.
 */
vm_fault_t hmmk_fault(struct vm_fault *vmf)
{
	struct hmmk_region *region = vmf->vma->vm_private_data;
	struct hmmk_block *blk;
	bool retried = false;
	vm_fault_t vf;
	unsigned int i;
	u64 idx;
	int ret;

	if (vmf->pgoff < region->pgoff ||
	    vmf->pgoff - region->pgoff >= region->nr_pages)
		return VM_FAULT_SIGBUS;
	idx = vmf->pgoff - region->pgoff;
	blk = &region->blocks[idx / HMMK_BLOCK_PAGES];
	i = idx % HMMK_BLOCK_PAGES;
	atomic64_inc(&region->c.faults);

again:
	if (hmmk_over_limit(region))
		hmmk_nvme_make_room(region, false);	/* no block lock held */
	if (hmmk_block_lock(blk))
		return VM_FAULT_NOPAGE;	/* dying: the access is not retried */
	if (hmmk_tier(blk, i) == HMMK_TIER_NVME && hmmk_may_wait(vmf, blk, i)) {
		vf = hmmk_nvme_fill_async(vmf, blk, i);	/* unlocked */
		if (vf != VM_FAULT_OOM)
			return vf;
		ret = -ENOMEM;
	} else {
		ret = hmmk_map_page(vmf, blk, i);	/* unlocked */
	}
	if (ret == -ENOMEM && !retried &&
	    hmmk_nvme_make_room(region, true)) {
		retried = true;
		goto again;
	}

	if (!ret || ret == -EINTR)
		return VM_FAULT_NOPAGE;
	atomic64_inc(&region->c.sigbus);
	return VM_FAULT_SIGBUS;
}
