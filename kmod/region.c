// SPDX-License-Identifier: GPL-2.0
/*
 * hmmk: a region's lifetime and the VMAs that map it.
 *
 * mmap accepts MAP_SHARED, readable and writable mappings of a range inside
 * one region, made by the space's own mm.  The VMA gets VM_MIXEDMAP (pages
 * are inserted with vm_insert_page), VM_DONTEXPAND (no mremap growth),
 * VM_DONTCOPY (fork does not copy it) and VM_DONTDUMP (no core dump holds
 * it: it may be larger than RAM, and faulting it in for a dump would
 * FILL every evicted page).
 */
#include <linux/slab.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/uaccess.h>

#include "hmmk.h"

/* Returns a region with one reference (the caller's), or ERR_PTR. */
struct hmmk_region *hmmk_region_alloc(struct hmmk_space *space, u64 size,
				      int node)
{
	struct hmmk_region *region;
	struct mem_cgroup *old;
	u32 i;

	region = kzalloc(sizeof(*region), GFP_KERNEL);
	if (!region)
		return ERR_PTR(-ENOMEM);
	kref_init(&region->ref);
	region->space = space;
	region->node = node;
	region->nr_pages = size >> PAGE_SHIFT;
	region->nr_blocks = DIV_ROUND_UP(region->nr_pages, HMMK_BLOCK_PAGES);
	INIT_LIST_HEAD(&region->node_link);
	old = set_active_memcg(space->memcg);	/* the opener's, too */
	region->blocks = kvcalloc(region->nr_blocks, sizeof(*region->blocks),
				  GFP_KERNEL_ACCOUNT);
	set_active_memcg(old);
	if (!region->blocks) {
		kfree(region);
		return ERR_PTR(-ENOMEM);
	}
	for (i = 0; i < region->nr_blocks; i++) {
		mutex_init(&region->blocks[i].lock);
		INIT_LIST_HEAD(&region->blocks[i].dev_node);
		region->blocks[i].region = region;
		region->blocks[i].index = i;
	}
	return region;
}

static void hmmk_region_release(struct kref *ref)
{
	struct hmmk_region *region = container_of(ref, struct hmmk_region, ref);
	u32 i;

	if (atomic64_read(&region->c.evictions))
		hmmk_req_forget(region);	/* the daemon holds pages */
	for (i = 0; i < region->nr_blocks; i++) {
		struct hmmk_block *blk = &region->blocks[i];

		mutex_lock(&blk->lock);
		hmmk_simdev_block_gone(blk);
		hmmk_block_free_pages(blk);
		mutex_unlock(&blk->lock);
		mutex_destroy(&blk->lock);
	}
	kvfree(region->blocks);
	kfree(region);
}

/* May sleep (frees pages under block locks). */
void hmmk_region_put(struct hmmk_region *region)
{
	kref_put(&region->ref, hmmk_region_release);
}

/* Checks a byte range of a region: page aligned, non-empty, inside. */
int hmmk_range_check(struct hmmk_region *region, u64 start, u64 length)
{
	u64 size = region->nr_pages << PAGE_SHIFT;

	if (!length || !PAGE_ALIGNED(start) || !PAGE_ALIGNED(length))
		return -EINVAL;
	if (start >= size || length > size - start)
		return -EINVAL;
	return 0;
}

/**
 * hmmk_region_walk() - call @fn on each block of a page range in turn
 * @region: the region; the caller holds a reference
 * @first: first page of the range
 * @nr: pages in the range, non-zero; @first + @nr <= region->nr_pages
 * @fn: called once per block the range touches, on pages [lo, hi) of it
 * @arg: passed to @fn
 *
 * Takes each block's lock (killable) around its @fn call, one block at a
 * time in ascending order, and reschedules between blocks.
 *
 * Context: process context; sleeps.  The caller holds no block lock; @fn
 * runs with blk->lock held and no other block lock.
 * Return: 0, -EINTR when a fatal signal ended a lock wait, or the first
 * error @fn returned; the walk stops at either.
 */
int hmmk_region_walk(struct hmmk_region *region, u64 first, u64 nr,
		     hmmk_block_fn fn, void *arg)
{
	u64 pg = first, end = first + nr;
	int ret = 0;

	while (pg < end) {
		struct hmmk_block *blk = &region->blocks[pg / HMMK_BLOCK_PAGES];
		unsigned int lo = pg % HMMK_BLOCK_PAGES;
		unsigned int hi = min_t(u64, HMMK_BLOCK_PAGES, lo + end - pg);

		ret = hmmk_block_lock(blk);
		if (ret)
			break;
		ret = fn(blk, lo, hi, arg);
		mutex_unlock(&blk->lock);
		if (ret)
			break;
		pg += hi - lo;
		cond_resched();
	}
	return ret;
}

/**
 * hmmk_range_ioctl() - the body of the ioctls that take a struct hmmk_range
 * @space: the caller's space
 * @arg: the user's struct hmmk_range, where @r is copied back
 * @r: the request, copied in and validated by the caller
 * @fn: the per-block work, given @r as its arg; it counts pages in
 *      r->done and r->skipped
 *
 * Looks up r->handle, checks [r->start, r->start + r->length), zeroes the
 * counts, walks the range with hmmk_region_walk() and copies @r back, with
 * the counts so far, also when the walk stopped early.
 *
 * Context: process context; sleeps.  The caller holds no block lock.
 * Return: 0, -ENOENT (no such region), -EINVAL (bad range), -EFAULT, or
 * the walk's error.
 */
long hmmk_range_ioctl(struct hmmk_space *space, void __user *arg,
		      struct hmmk_range *r, hmmk_block_fn fn)
{
	struct hmmk_region *region;
	long ret;

	region = hmmk_region_get(space, r->handle);
	if (!region)
		return -ENOENT;
	ret = hmmk_range_check(region, r->start, r->length);
	if (ret)
		goto out_put;

	r->done = 0;
	r->skipped = 0;
	ret = hmmk_region_walk(region, r->start >> PAGE_SHIFT,
			       r->length >> PAGE_SHIFT, fn, r);
	if (copy_to_user(arg, r, sizeof(*r)) && !ret)
		ret = -EFAULT;
out_put:
	hmmk_region_put(region);
	return ret;
}

/* A VMA was split or copied within the mm: it holds one more reference. */
static void hmmk_vm_open(struct vm_area_struct *vma)
{
	struct hmmk_region *region = vma->vm_private_data;

	kref_get(&region->ref);
}

static void hmmk_vm_close(struct vm_area_struct *vma)
{
	hmmk_region_put(vma->vm_private_data);
}

int hmmk_region_mmap(struct hmmk_space *space, struct vm_area_struct *vma)
{
	struct hmmk_region *region;

	if (space->daemon || vma->vm_mm != space->mm)
		return -EPERM;
	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if ((vma->vm_flags & (VM_READ | VM_WRITE)) != (VM_READ | VM_WRITE))
		return -EACCES;

	region = hmmk_region_find_pgoff(space, vma->vm_pgoff, vma_pages(vma));
	if (!region)
		return -EINVAL;

	hmmk_vm_flags_set(vma, VM_MIXEDMAP | VM_DONTEXPAND | VM_DONTCOPY |
			  VM_DONTDUMP);
	hmmk_vm_flags_clear(vma, VM_MAYEXEC);
	vma->vm_private_data = region;	/* the find reference */
	vma->vm_ops = &hmmk_vm_ops;
	return 0;
}

const struct vm_operations_struct hmmk_vm_ops = {
	.open	= hmmk_vm_open,
	.close	= hmmk_vm_close,
	.fault	= hmmk_fault,
};
