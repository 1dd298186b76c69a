// SPDX-License-Identifier: GPL-2.0
/*
 * hmmk: a region's lifetime and the VMAs that map it.
 *
 * mmap accepts MAP_SHARED, readable and writable mappings of a range inside
 * one region, made by the space's own mm.  The VMA gets VM_MIXEDMAP (pages
 * are inserted with vm_insert_page), VM_DONTEXPAND (no mremap growth) and
 * VM_DONTCOPY (fork does not copy it).
 */
#include <linux/slab.h>
#include <linux/mm.h>

#include "hmmk.h"

/* Returns a region with one reference (the caller's), or ERR_PTR. */
struct hmmk_region *hmmk_region_alloc(struct hmmk_space *space, u64 size,
				      int node)
{
	struct hmmk_region *region;
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
	region->blocks = kvcalloc(region->nr_blocks, sizeof(*region->blocks),
				  GFP_KERNEL_ACCOUNT);
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

	hmmk_vm_flags_set(vma, VM_MIXEDMAP | VM_DONTEXPAND | VM_DONTCOPY);
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
