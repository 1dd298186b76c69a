// SPDX-License-Identifier: GPL-2.0
/*
 * hmmk: a simulated device: a capacity-limited pool of pages the
 * CPU cannot map, driven by DEV_ACCESS, which plays the GPU touching a
 * range.  It follows nvidia-uvm's policies in small:
 *  - a touched page migrates in (its CPU mappings revoked, bytes copied);
 *  - when the pool is full the coldest 2 MiB block (least recent
 *    DEV_ACCESS) goes back to its CPU node as a whole;
 *  - once prefetch_pct of a block is on the device, the rest follows;
 *  - a page moved more than thrash_limit times in a window is throttled
 *    (the move waits), past twice that it is pinned on the CPU for pin_ms
 *    and device accesses to it are served remotely.
 * A CPU fault on a device page brings it back (hmmk_simdev_to_cpu).
 */
#include <linux/mm.h>
#include <linux/highmem.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/module.h>
#include <linux/uaccess.h>

#include "hmmk.h"

static unsigned long hmmk_simdev_pages = 4096;
module_param_named(simdev_pages, hmmk_simdev_pages, ulong, 0444);
MODULE_PARM_DESC(simdev_pages, "initial capacity of the simulated device");

/*
 * The device.  lock (spinlock) protects capacity, used, clock, the LRU
 * list of blocks holding device pages (coldest first) and each block's
 * nr_dev / dev_node / dev_stamp.  Policy knobs are read unlocked.
 */
static struct {
	spinlock_t lock;
	u64 capacity, used, clock;
	struct list_head lru;
	u32 prefetch_pct, thrash_limit, pin_ms;
} sd = {
	.lock = __SPIN_LOCK_UNLOCKED(sd.lock),
	.lru = LIST_HEAD_INIT(sd.lru),
	.prefetch_pct = 51,
	.thrash_limit = 4,
	.pin_ms = 200,
};

int hmmk_simdev_init(void)
{
	sd.capacity = hmmk_simdev_pages;
	return 0;
}

void hmmk_simdev_exit(void)
{
	WARN_ON_ONCE(sd.used || !list_empty(&sd.lru));
}

u64 hmmk_simdev_used(void)
{
	return READ_ONCE(sd.used);
}

/* The region's block is being freed: forget its device pages. */
void hmmk_simdev_block_gone(struct hmmk_block *blk)
{
	spin_lock(&sd.lock);
	sd.used -= blk->nr_dev;
	blk->nr_dev = 0;
	list_del_init(&blk->dev_node);
	spin_unlock(&sd.lock);
}

/* Counts one move of page i; window of one second per block. */
static void hmmk_count_move(struct hmmk_block *blk, unsigned int i)
{
	if (time_after(jiffies, blk->window + HZ)) {
		memset(blk->moves, 0, sizeof(blk->moves));
		blk->window = jiffies;
	}
	if (blk->moves[i] < U8_MAX)
		blk->moves[i]++;
}

/* Device page i back to a CPU node.  blk->lock held.  0 or -ENOMEM. */
int hmmk_simdev_to_cpu(struct hmmk_block *blk, unsigned int i)
{
	struct hmmk_region *region = blk->region;
	struct page *page = hmmk_page_alloc(region->space, region->node,
					    false, false);

	if (!page)
		return -ENOMEM;
	copy_highpage(page, blk->pages[i]);
	put_page(blk->pages[i]);
	hmmk_block_set(blk, i, HMMK_TIER_CPU, page);
	hmmk_count_move(blk, i);
	atomic64_inc(&region->c.dev_out);

	spin_lock(&sd.lock);
	sd.used--;
	if (!--blk->nr_dev)
		list_del_init(&blk->dev_node);
	spin_unlock(&sd.lock);
	return 0;
}

/*
 * Every device page of a victim block back to the CPU.  Its lock held.
 * Returns the pages moved (fewer when the CPU nodes are out of memory).
 */
static unsigned int hmmk_simdev_evict_block(struct hmmk_block *blk)
{
	unsigned int i, moved = 0;

	for (i = 0; i < HMMK_BLOCK_PAGES && blk->nr_dev; i++) {
		if (hmmk_tier(blk, i) != HMMK_TIER_DEV)
			continue;
		if (hmmk_simdev_to_cpu(blk, i))
			break;
		atomic64_inc(&blk->region->c.dev_evictions);
		moved++;
	}
	return moved;
}

/*
 * Reserves one device page for cur (its lock held), evicting cold blocks
 * while the pool is full.  A victim's lock is only try-locked, under
 * sd.lock, so the lock order holds and a region being freed (which locks
 * each block before forgetting it) is never touched.  0 or -ENOSPC.
 */
static int hmmk_simdev_reserve(struct hmmk_block *cur)
{
	struct hmmk_block *victim;
	unsigned int moved;

	spin_lock(&sd.lock);
	while (sd.used >= sd.capacity) {
		bool found = false;

		list_for_each_entry(victim, &sd.lru, dev_node) {
			if (victim != cur && mutex_trylock(&victim->lock)) {
				found = true;
				break;
			}
		}
		if (!found) {
			spin_unlock(&sd.lock);
			return -ENOSPC;
		}
		spin_unlock(&sd.lock);
		moved = hmmk_simdev_evict_block(victim);
		mutex_unlock(&victim->lock);
		if (!moved)
			return -ENOSPC;	/* no CPU memory to evict into */
		spin_lock(&sd.lock);
	}
	sd.used++;
	spin_unlock(&sd.lock);
	return 0;
}

static void hmmk_simdev_unreserve(void)
{
	spin_lock(&sd.lock);
	sd.used--;
	spin_unlock(&sd.lock);
}

/* Page i of the block to the device.  blk->lock held; 0 or -errno. */
static int hmmk_simdev_to_dev(struct hmmk_block *blk, unsigned int i)
{
	struct hmmk_region *region = blk->region;
	struct page *page;
	int ret;

	if (hmmk_tier(blk, i) == HMMK_TIER_NVME) {
		ret = hmmk_make_cpu_resident(blk, i);
		if (ret)
			return ret;
	}
	if (hmmk_tier(blk, i) == HMMK_TIER_CPU) {
		hmmk_block_unmap(blk, i, 1);
		if (page_count(blk->pages[i]) != 1)
			return -EBUSY;	/* pinned by someone: stays */
	}
	ret = hmmk_simdev_reserve(blk);
	if (ret)
		return ret;
	page = hmmk_page_alloc(region->space, numa_mem_id(), false,
			       !blk->pages[i]);
	if (!page) {
		hmmk_simdev_unreserve();
		return -ENOMEM;
	}
	if (blk->pages[i]) {
		copy_highpage(page, blk->pages[i]);
		put_page(blk->pages[i]);
		hmmk_count_move(blk, i);
	}
	hmmk_block_set(blk, i, HMMK_TIER_DEV, page);
	atomic64_inc(&region->c.dev_in);

	spin_lock(&sd.lock);
	blk->nr_dev++;
	spin_unlock(&sd.lock);
	return 0;
}

/*
 * The thrash rule for a page about to move to the device: true when it is
 * pinned on the CPU (the access is served remotely, nothing moves).
 */
static bool hmmk_thrash_check(struct hmmk_block *blk, unsigned int i)
{
	struct hmmk_region *region = blk->region;
	u32 limit = READ_ONCE(sd.thrash_limit);

	if (blk->state[i] & HMMK_S_PINNED) {
		if (time_before(jiffies, blk->pin_until))
			return true;
		blk->state[i] &= ~HMMK_S_PINNED;
		blk->moves[i] = 0;
	}
	if (!limit || hmmk_tier(blk, i) != HMMK_TIER_CPU ||
	    time_after(jiffies, blk->window + HZ))
		return false;
	if (blk->moves[i] >= 2 * limit) {
		blk->state[i] |= HMMK_S_PINNED;
		blk->pin_until = jiffies + msecs_to_jiffies(sd.pin_ms);
		atomic64_inc(&region->c.pins);
		return true;
	}
	if (blk->moves[i] >= limit) {
		atomic64_inc(&region->c.throttles);
		usleep_range(200, 400);
	}
	return false;
}

/* Valid pages of the block (the last block of a region may be short). */
static unsigned int hmmk_block_len(struct hmmk_block *blk)
{
	u64 first = (u64)blk->index * HMMK_BLOCK_PAGES;

	return min_t(u64, HMMK_BLOCK_PAGES, blk->region->nr_pages - first);
}

/* Once prefetch_pct of the block is on the device, move the rest. */
static void hmmk_prefetch_block(struct hmmk_block *blk)
{
	u32 pct = READ_ONCE(sd.prefetch_pct);
	unsigned int i, len = hmmk_block_len(blk);

	if (!pct || blk->nr_dev * 100 < pct * len || blk->nr_dev == len)
		return;
	for (i = 0; i < len; i++) {
		if (hmmk_tier(blk, i) == HMMK_TIER_DEV ||
		    hmmk_tier(blk, i) == HMMK_TIER_NVME ||
		    blk->state[i] & HMMK_S_PINNED)
			continue;
		if (hmmk_simdev_to_dev(blk, i))
			break;
		atomic64_inc(&blk->region->c.prefetches);
	}
}

/* DEV_ACCESS on pages [lo, hi); blk->lock held.  arg: the hmmk_range. */
static int hmmk_dev_access_block(struct hmmk_block *blk, unsigned int lo,
				 unsigned int hi, void *arg)
{
	struct hmmk_range *r = arg;
	unsigned int i;
	int ret = 0;

	for (i = lo; i < hi; i++) {
		if (hmmk_tier(blk, i) == HMMK_TIER_DEV ||
		    hmmk_thrash_check(blk, i)) {
			r->done++;
			continue;
		}
		ret = hmmk_simdev_to_dev(blk, i);
		if (ret == -EBUSY || ret == -ENOSPC) {
			r->skipped++;
			ret = 0;
			continue;
		}
		if (ret)
			return ret;
		r->done++;
	}
	hmmk_prefetch_block(blk);

	spin_lock(&sd.lock);
	blk->dev_stamp = ++sd.clock;
	if (blk->nr_dev)
		list_move_tail(&blk->dev_node, &sd.lru);	/* warmest */
	spin_unlock(&sd.lock);
	return 0;
}

long hmmk_dev_access_ioctl(struct hmmk_space *space, void __user *arg)
{
	struct hmmk_range r;

	if (copy_from_user(&r, arg, sizeof(r)))
		return -EFAULT;
	if (r.node || r.flags & ~HMMK_ACCESS_F_ALL ||
	    !hmmk_zero(r.reserved, sizeof(r.reserved)))
		return -EINVAL;
	return hmmk_range_ioctl(space, arg, &r, hmmk_dev_access_block);
}

/* Module-wide knobs: only for whoever may be the daemon. */
long hmmk_simdev_config_ioctl(void __user *arg)
{
	struct hmmk_simdev_config c;

	if (!hmmk_privileged())
		return -EPERM;
	if (copy_from_user(&c, arg, sizeof(c)))
		return -EFAULT;
	if (c.reserved0 || !hmmk_zero(c.reserved, sizeof(c.reserved)))
		return -EINVAL;
	if (c.capacity_pages > (totalram_pages() / 2))
		return -EINVAL;

	spin_lock(&sd.lock);
	if (c.capacity_pages)
		sd.capacity = c.capacity_pages;
	if (c.prefetch_pct <= 100)
		WRITE_ONCE(sd.prefetch_pct, c.prefetch_pct);
	WRITE_ONCE(sd.thrash_limit, min_t(u32, c.thrash_limit, 100));
	if (c.pin_ms)
		WRITE_ONCE(sd.pin_ms, min_t(u32, c.pin_ms, 10000));
	c.used_pages = sd.used;
	spin_unlock(&sd.lock);
	return copy_to_user(arg, &c, sizeof(c)) ? -EFAULT : 0;
}
