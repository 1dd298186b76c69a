// SPDX-License-Identifier: GPL-2.0
/*
 * hmmk: what the module tells: per-region counters (STATS),
 * per-page tier and state (SNAPSHOT), access sampling by hinting faults
 * (SAMPLE unmaps resident pages; the next CPU touch refaults and counts,
 * since the A-bit helpers are not exported on 6.1), and a debugfs summary
 * at /sys/kernel/debug/hmmk/summary.
 */
#include <linux/debugfs.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "hmmk.h"

#define HMMK_SNAP_BATCH	512	/* entries copied out per block lock */

long hmmk_stats_ioctl(struct hmmk_space *space, void __user *arg)
{
	struct hmmk_region *region;
	struct hmmk_counters *c;
	struct hmmk_stats s;

	if (copy_from_user(&s, arg, sizeof(s)))
		return -EFAULT;
	if (!hmmk_zero(s.reserved0, sizeof(s.reserved0)))
		return -EINVAL;
	region = hmmk_region_get(space, s.handle);
	if (!region)
		return -ENOENT;
	c = &region->c;
	memset(&s, 0, sizeof(s));
	s.handle = region->handle;
	s.faults = atomic64_read(&c->faults);
	s.zero_fills = atomic64_read(&c->zero_fills);
	s.fills = atomic64_read(&c->fills);
	s.evictions = atomic64_read(&c->evictions);
	s.migrations = atomic64_read(&c->migrations);
	s.migrated_bytes = atomic64_read(&c->migrated_bytes);
	s.dev_in = atomic64_read(&c->dev_in);
	s.dev_out = atomic64_read(&c->dev_out);
	s.dev_evictions = atomic64_read(&c->dev_evictions);
	s.prefetches = atomic64_read(&c->prefetches);
	s.throttles = atomic64_read(&c->throttles);
	s.pins = atomic64_read(&c->pins);
	s.sampled = atomic64_read(&c->sampled);
	s.sample_hits = atomic64_read(&c->sample_hits);
	s.sigbus = atomic64_read(&c->sigbus);
	hmmk_region_put(region);
	return copy_to_user(arg, &s, sizeof(s)) ? -EFAULT : 0;
}

static void hmmk_page_info(struct hmmk_block *blk, unsigned int i,
			   struct hmmk_page_info *pi)
{
	u8 st = blk->state[i];

	pi->tier = st & HMMK_S_TIER;
	pi->state = 0;
	pi->node = 0xffff;
	if (pi->tier == HMMK_TIER_CPU) {
		pi->node = page_to_nid(blk->pages[i]);
		if (!(st & HMMK_S_SAMPLED))
			pi->state |= HMMK_PAGE_MAPPED;
	}
	if (st & HMMK_S_SAMPLED)
		pi->state |= HMMK_PAGE_SAMPLED;
	if (st & HMMK_S_ACCESSED)
		pi->state |= HMMK_PAGE_ACCESSED;
	if (st & HMMK_S_PINNED)
		pi->state |= HMMK_PAGE_PINNED;
}

/* Fills buf (arg) with pages [lo, hi) of the block; blk->lock held. */
static int hmmk_snapshot_block(struct hmmk_block *blk, unsigned int lo,
			       unsigned int hi, void *arg)
{
	struct hmmk_page_info *buf = arg;
	unsigned int i;

	for (i = lo; i < hi; i++)
		hmmk_page_info(blk, i, &buf[i - lo]);
	return 0;
}

/*
 * Copies out one block's entries per hmmk_region_walk, after the block's
 * lock is dropped: the entries may lie in a region of this space, and a
 * fault there takes mmap_lock and a block lock.
 */
long hmmk_snapshot_ioctl(struct hmmk_space *space, void __user *arg)
{
	struct hmmk_page_info *buf;
	struct hmmk_region *region;
	struct hmmk_snapshot sn;
	u64 pg, end, n;
	long ret = 0;

	if (copy_from_user(&sn, arg, sizeof(sn)))
		return -EFAULT;
	if (!hmmk_zero(sn.reserved, sizeof(sn.reserved)))
		return -EINVAL;
	region = hmmk_region_get(space, sn.handle);
	if (!region)
		return -ENOENT;
	if (sn.first_page >= region->nr_pages || !sn.nr_pages) {
		ret = -EINVAL;
		goto out_put;
	}
	buf = kmalloc_array(HMMK_SNAP_BATCH, sizeof(*buf), GFP_KERNEL);
	if (!buf) {
		ret = -ENOMEM;
		goto out_put;
	}

	pg = sn.first_page;
	end = pg + min(sn.nr_pages, region->nr_pages - pg);
	sn.filled = 0;
	while (pg < end) {
		n = min_t(u64, HMMK_BLOCK_PAGES - pg % HMMK_BLOCK_PAGES,
			  end - pg);
		ret = hmmk_region_walk(region, pg, n, hmmk_snapshot_block, buf);
		if (ret)
			break;
		if (copy_to_user(u64_to_user_ptr(sn.entries) +
				 sn.filled * sizeof(*buf), buf,
				 n * sizeof(*buf))) {
			ret = -EFAULT;
			break;
		}
		sn.filled += n;
		pg += n;
	}
	kfree(buf);
	if (!ret && copy_to_user(arg, &sn, sizeof(sn)))
		ret = -EFAULT;
out_put:
	hmmk_region_put(region);
	return ret;
}

/*
 * Unmaps pages [lo, hi) of the block and marks the resident ones SAMPLED,
 * counting them in the done and skipped of arg, the hmmk_range, and in the
 * region's sampled counter.  blk->lock held.
 */
static int hmmk_sample_block(struct hmmk_block *blk, unsigned int lo,
			     unsigned int hi, void *arg)
{
	struct hmmk_range *r = arg;
	unsigned int i, done = 0;

	hmmk_block_unmap(blk, lo, hi - lo);
	for (i = lo; i < hi; i++) {
		blk->state[i] &= ~HMMK_S_ACCESSED;
		if (hmmk_tier(blk, i) != HMMK_TIER_CPU) {
			r->skipped++;
			continue;
		}
		blk->state[i] |= HMMK_S_SAMPLED;
		done++;
	}
	r->done += done;
	atomic64_add(done, &blk->region->c.sampled);
	return 0;
}

long hmmk_sample_ioctl(struct hmmk_space *space, void __user *arg)
{
	struct hmmk_range r;

	if (copy_from_user(&r, arg, sizeof(r)))
		return -EFAULT;
	if (r.node || r.flags || !hmmk_zero(r.reserved, sizeof(r.reserved)))
		return -EINVAL;
	return hmmk_range_ioctl(space, arg, &r, hmmk_sample_block);
}

static struct dentry *hmmk_debugfs;

/* One line per region: counters.  Runs in the reader's context. */
static int hmmk_summary_show(struct seq_file *m, void *v)
{
	struct hmmk_space *space;
	struct hmmk_region *region;

	seq_printf(m, "simdev_used_pages %llu\n", hmmk_simdev_used());
	mutex_lock(&hmmk_spaces_lock);
	list_for_each_entry(space, &hmmk_spaces, all_link) {
		seq_printf(m, "space %llu%s\n", space->id,
			   space->daemon ? " daemon" : "");
		mutex_lock(&space->lock);
		list_for_each_entry(region, &space->regions, node_link) {
			struct hmmk_counters *c = &region->c;

			seq_printf(m,
				   " region %llu pages %llu node %d faults %lld zero %lld fills %lld evict %lld migr %lld dev_in %lld dev_out %lld dev_evict %lld prefetch %lld sigbus %lld cpu %lld limit %llu\n",
				   region->handle, region->nr_pages,
				   region->node, atomic64_read(&c->faults),
				   atomic64_read(&c->zero_fills),
				   atomic64_read(&c->fills),
				   atomic64_read(&c->evictions),
				   atomic64_read(&c->migrations),
				   atomic64_read(&c->dev_in),
				   atomic64_read(&c->dev_out),
				   atomic64_read(&c->dev_evictions),
				   atomic64_read(&c->prefetches),
				   atomic64_read(&c->sigbus),
				   atomic64_read(&region->nr_cpu),
				   region->cpu_limit);
		}
		mutex_unlock(&space->lock);
	}
	mutex_unlock(&hmmk_spaces_lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(hmmk_summary);

void hmmk_debugfs_init(void)
{
	hmmk_debugfs = debugfs_create_dir("hmmk", NULL);
	debugfs_create_file("summary", 0444, hmmk_debugfs, NULL,
			    &hmmk_summary_fops);
}

void hmmk_debugfs_exit(void)
{
	debugfs_remove_recursive(hmmk_debugfs);
}
