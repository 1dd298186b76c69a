// SPDX-License-Identifier: GPL-2.0
/*
 * hmmk: a space is one open of /dev/hmmk: the opener's mm, its
 * own address_space (so revocation reaches only its VMAs) and its list of
 * regions.  REGION_CREATE / REGION_DESTROY live here.
 */
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <linux/sched/mm.h>
#include <linux/nodemask.h>
#include <linux/topology.h>
#include <linux/pagemap.h>

#include "hmmk.h"

LIST_HEAD(hmmk_spaces);
DEFINE_MUTEX(hmmk_spaces_lock);		/* protects hmmk_spaces */
static atomic64_t hmmk_next_space = ATOMIC64_INIT(1);
static atomic64_t hmmk_next_region = ATOMIC64_INIT(1);

/* Called from open(); returns the space or ERR_PTR(-errno). */
struct hmmk_space *hmmk_space_new(struct file *filp)
{
	struct hmmk_space *space;

	if (!current->mm)
		return ERR_PTR(-EINVAL);
	space = kzalloc(sizeof(*space), GFP_KERNEL);
	if (!space)
		return ERR_PTR(-ENOMEM);
	address_space_init_once(&space->mapping);
	space->mapping.host = file_inode(filp);
	mapping_set_gfp_mask(&space->mapping, GFP_HIGHUSER);
	mmgrab(current->mm);
	space->mm = current->mm;
	space->memcg = get_mem_cgroup_from_mm(current->mm);
	space->id = atomic64_inc_return(&hmmk_next_space);
	mutex_init(&space->lock);
	INIT_LIST_HEAD(&space->regions);
	space->next_pgoff = 0;

	mutex_lock(&hmmk_spaces_lock);
	list_add_tail(&space->all_link, &hmmk_spaces);
	mutex_unlock(&hmmk_spaces_lock);
	return space;
}

/* Called from release(): every VMA is gone, so only the list refs remain. */
void hmmk_space_free(struct hmmk_space *space)
{
	struct hmmk_region *region, *tmp;
	LIST_HEAD(gone);

	mutex_lock(&hmmk_spaces_lock);
	list_del(&space->all_link);
	mutex_unlock(&hmmk_spaces_lock);

	mutex_lock(&space->lock);
	list_splice_init(&space->regions, &gone);
	space->nr_regions = 0;
	mutex_unlock(&space->lock);
	list_for_each_entry_safe(region, tmp, &gone, node_link) {
		list_del_init(&region->node_link);
		hmmk_region_put(region);
	}
	mem_cgroup_put(space->memcg);
	mmdrop(space->mm);
	kfree(space);
}

/* Returns a referenced region, or NULL.  Caller puts it. */
struct hmmk_region *hmmk_region_get(struct hmmk_space *space, u64 handle)
{
	struct hmmk_region *region;

	mutex_lock(&space->lock);
	list_for_each_entry(region, &space->regions, node_link) {
		if (region->handle == handle) {
			kref_get(&region->ref);
			mutex_unlock(&space->lock);
			return region;
		}
	}
	mutex_unlock(&space->lock);
	return NULL;
}

/* The region holding pages [pgoff, pgoff + nr) of the mmap space, or NULL. */
struct hmmk_region *hmmk_region_find_pgoff(struct hmmk_space *space,
					   u64 pgoff, u64 nr)
{
	struct hmmk_region *region;

	mutex_lock(&space->lock);
	list_for_each_entry(region, &space->regions, node_link) {
		if (pgoff >= region->pgoff &&
		    nr <= region->nr_pages &&
		    pgoff - region->pgoff <= region->nr_pages - nr) {
			kref_get(&region->ref);
			mutex_unlock(&space->lock);
			return region;
		}
	}
	mutex_unlock(&space->lock);
	return NULL;
}

static int hmmk_node_check(u32 node)
{
	if (node == HMMK_NODE_ANY)
		return numa_node_id();
	if (node >= nr_node_ids || !node_state(node, N_MEMORY))
		return -EINVAL;
	return node;
}

long hmmk_region_create_ioctl(struct hmmk_space *space, void __user *arg)
{
	struct hmmk_region_create rc;
	struct hmmk_region *region;
	int node;

	if (copy_from_user(&rc, arg, sizeof(rc)))
		return -EFAULT;
	if (rc.flags & ~HMMK_REGION_F_ALL || rc.reserved0 ||
	    !hmmk_zero(rc.reserved, sizeof(rc.reserved)))
		return -EINVAL;
	if (!rc.size || rc.size > HMMK_MAX_REGION || !PAGE_ALIGNED(rc.size))
		return -EINVAL;
	if (!(rc.flags & HMMK_REGION_F_CPU_LIMIT) != !rc.cpu_limit)
		return -EINVAL;		/* a limit needs the flag, and > 0 */
	node = hmmk_node_check(rc.preferred_node);
	if (node < 0)
		return node;

	region = hmmk_region_alloc(space, rc.size, node);
	if (IS_ERR(region))
		return PTR_ERR(region);
	region->handle = atomic64_inc_return(&hmmk_next_region);
	region->cpu_limit = rc.cpu_limit;

	mutex_lock(&space->lock);
	if (space->daemon) {		/* attached meanwhile */
		mutex_unlock(&space->lock);
		hmmk_region_put(region);
		return -EPERM;
	}
	if (space->nr_regions >= HMMK_MAX_REGIONS ||
	    space->next_pgoff + region->nr_pages > (U32_MAX >> 1)) {
		mutex_unlock(&space->lock);
		hmmk_region_put(region);
		return -ENOSPC;
	}
	region->pgoff = space->next_pgoff;
	space->next_pgoff += region->nr_pages;
	space->nr_regions++;
	list_add_tail(&region->node_link, &space->regions);
	mutex_unlock(&space->lock);

	rc.handle = region->handle;
	rc.mmap_offset = region->pgoff << PAGE_SHIFT;
	if (copy_to_user(arg, &rc, sizeof(rc)))
		return -EFAULT;	/* the region stays; the space frees it */
	return 0;
}

/* Drops the space's reference; mappings keep the region until munmap. */
long hmmk_region_destroy_ioctl(struct hmmk_space *space, void __user *arg)
{
	struct hmmk_region_destroy rd;
	struct hmmk_region *region;

	if (copy_from_user(&rd, arg, sizeof(rd)))
		return -EFAULT;
	if (!hmmk_zero(rd.reserved, sizeof(rd.reserved)))
		return -EINVAL;

	mutex_lock(&space->lock);
	list_for_each_entry(region, &space->regions, node_link) {
		if (region->handle == rd.handle) {
			list_del_init(&region->node_link);
			space->nr_regions--;
			mutex_unlock(&space->lock);
			hmmk_region_put(region);
			return 0;
		}
	}
	mutex_unlock(&space->lock);
	return -ENOENT;
}

/* SPACE_LIMIT: set the space's CPU page limit, report its pages. */
long hmmk_space_limit_ioctl(struct hmmk_space *space, void __user *arg)
{
	struct hmmk_space_limit sl;

	if (copy_from_user(&sl, arg, sizeof(sl)))
		return -EFAULT;
	if (!hmmk_zero(sl.reserved, sizeof(sl.reserved)))
		return -EINVAL;
	WRITE_ONCE(space->cpu_limit, sl.cpu_limit);
	sl.nr_cpu = atomic64_read(&space->nr_cpu);
	return copy_to_user(arg, &sl, sizeof(sl)) ? -EFAULT : 0;
}
