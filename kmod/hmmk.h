/* SPDX-License-Identifier: GPL-2.0 */
/*
 * hmmk: hmmk.ko's internal objects and the functions between files.
 *
 * Object tree:
 *   hmmk_space   one per open of /dev/hmmk, bound to the opener's mm
 *     hmmk_region  one per REGION_CREATE, mapped by VMAs of that mm
 *       hmmk_block   one per 2 MiB of the region, with its own mutex
 *         pages[]      the page backing each 4 KiB, on the tier state[] says
 *
 * Lock order (outer first):
 *   mmap_lock (fault path; released while a fault waits for a FILL)
 *   hmmk_region.blocks[i].lock   (at most one block at a time, except a
 *                                 simdev victim, which is only try-locked)
 *   space->mapping.i_mmap_rwsem  (unmap_mapping_range)
 *   page table locks             (vm_insert_page)
 *   hmmk_simdev.lock, hmmk_daemon.lock (spinlocks, innermost, never held
 *                                        while sleeping)
 *   space->lock protects the region list only and is never held while a
 *   block lock is taken.
 */
#ifndef HMMK_H
#define HMMK_H

#include <linux/types.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/wait.h>
#include <linux/memcontrol.h>
#include <linux/sizes.h>

#include "../include/uapi/hmmk.h"
#include "compat.h"

struct hmmk_req;

#define HMMK_BLOCK_PAGES	(HMMK_BLOCK_SIZE >> PAGE_SHIFT)
#define HMMK_MAX_REGION		(16ULL << 30)	/* bytes per region */
#define HMMK_MAX_REGIONS	1024		/* per space */

/* state[] low bits: the tier (HMMK_TIER_*); high bits: module flags. */
#define HMMK_S_TIER		0x03
#define HMMK_S_FILLFAIL		0x04	/* the last FILL failed: SIGBUS */
#define HMMK_S_SAMPLED		0x10	/* unmapped by SAMPLE, not yet hit */
#define HMMK_S_ACCESSED		0x20	/* hit after SAMPLE */
#define HMMK_S_PINNED		0x40	/* thrash pin on the CPU */

/*
 * struct hmmk_block — 2 MiB of a region.  Allocated with the region's block
 * array, freed with it.  lock protects pages[], state[], moves[] and the
 * pin/access fields; it is held across page allocation, copies and a wait
 * for the daemon (so concurrent faults on one page make one FILL).
 */
struct hmmk_block {
	struct mutex lock;
	struct page *pages[HMMK_BLOCK_PAGES];	/* CPU or simdev page */
	u8 state[HMMK_BLOCK_PAGES];
	u8 moves[HMMK_BLOCK_PAGES];	/* CPU<->dev moves this window */
	unsigned long window;		/* jiffies the window began */
	unsigned long pin_until;	/* jiffies; thrash pin end */
	u64 dev_stamp;			/* last DEV_ACCESS (LRU clock) */
	u32 nr_dev;			/* pages on the simdev */
	struct list_head dev_node;	/* on hmmk_simdev.blocks if nr_dev */
	struct hmmk_region *region;	/* back pointer, never changes */
	u32 index;			/* block number in the region */
	struct hmmk_req *filling;	/* the FILL faults wait on unlocked */
};

/* Per-region counters; see struct hmmk_stats for their meaning. */
struct hmmk_counters {
	atomic64_t faults, zero_fills, fills, evictions, migrations;
	atomic64_t migrated_bytes, dev_in, dev_out, dev_evictions;
	atomic64_t prefetches, throttles, pins, sampled, sample_hits, sigbus;
};

/*
 * struct hmmk_region — a managed range.  Allocated by REGION_CREATE; the
 * space's list holds one reference and every VMA mapping it one more;
 * freed (with its pages) at the last kref_put.
 */
struct hmmk_region {
	struct kref ref;
	struct hmmk_space *space;	/* owner; outlives the region */
	u64 handle;			/* never reused in this load */
	u64 pgoff;			/* mmap offset in pages */
	u64 nr_pages;
	u32 nr_blocks;
	int node;			/* preferred CPU node */
	u64 cpu_limit;			/* pages on CPU nodes at most; 0: none */
	atomic64_t nr_cpu;		/* pages on CPU nodes now */
	atomic64_t hand;		/* clock hand (page) for making room */
	struct list_head node_link;	/* space->regions, under space->lock */
	struct hmmk_counters c;
	struct hmmk_block *blocks;	/* kvcalloc'd [nr_blocks] */
};

/*
 * struct hmmk_space — one open of /dev/hmmk.  Allocated in open, freed in
 * release (after every VMA is gone: each holds the file).  mapping is the
 * address_space the space's VMAs link into, so unmap_mapping_range reaches
 * exactly this space's mappings.  memcg is the opener mm's memory cgroup
 * at open (referenced until free): every page of the space's regions, a
 * page waiting for its FILL included, is charged to it, whichever task
 * allocates the page.
 */
struct hmmk_space {
	struct address_space mapping;
	struct mm_struct *mm;		/* mmgrab'd opener mm */
	struct mem_cgroup *memcg;	/* NULL without memcg */
	u64 id;
	struct mutex lock;		/* regions, next_pgoff, nr_regions */
	struct list_head regions;
	u64 next_pgoff;
	u32 nr_regions;
	bool daemon;			/* DAEMON_ATTACH made this the daemon */
	struct list_head all_link;	/* hmmk_spaces, under hmmk_spaces_lock */
	u64 cpu_limit;			/* SPACE_LIMIT; READ_ONCE, 0: none */
	atomic64_t nr_cpu;		/* its regions' pages on CPU nodes */
};

extern struct list_head hmmk_spaces;
extern struct mutex hmmk_spaces_lock;
extern unsigned int hmmk_fill_timeout_ms;

/* space.c: region list of a space.  Callers hold no block lock. */
struct hmmk_space *hmmk_space_new(struct file *filp);
void hmmk_space_free(struct hmmk_space *space);
long hmmk_region_create_ioctl(struct hmmk_space *space, void __user *arg);
long hmmk_region_destroy_ioctl(struct hmmk_space *space, void __user *arg);
long hmmk_space_limit_ioctl(struct hmmk_space *space, void __user *arg);
struct hmmk_region *hmmk_region_get(struct hmmk_space *space, u64 handle);
struct hmmk_region *hmmk_region_find_pgoff(struct hmmk_space *space,
					   u64 pgoff, u64 nr);

/*
 * Work on pages [lo, hi) of one block, called with blk->lock held (see
 * hmmk_region_walk); 0 to go on to the next block, -errno to stop.
 */
typedef int (*hmmk_block_fn)(struct hmmk_block *blk, unsigned int lo,
			     unsigned int hi, void *arg);

/* region.c: region lifetime, its VMAs, and walks over its blocks. */
struct hmmk_region *hmmk_region_alloc(struct hmmk_space *space, u64 size,
				      int node);
void hmmk_region_put(struct hmmk_region *region);
int hmmk_region_mmap(struct hmmk_space *space, struct vm_area_struct *vma);
int hmmk_range_check(struct hmmk_region *region, u64 start, u64 length);
int hmmk_region_walk(struct hmmk_region *region, u64 first, u64 nr,
		     hmmk_block_fn fn, void *arg);
long hmmk_range_ioctl(struct hmmk_space *space, void __user *arg,
		      struct hmmk_range *r, hmmk_block_fn fn);
extern const struct vm_operations_struct hmmk_vm_ops;

/* block.c: page state helpers; all called with blk->lock held. */
static inline u8 hmmk_tier(struct hmmk_block *blk, unsigned int i)
{
	return blk->state[i] & HMMK_S_TIER;
}

void hmmk_block_set(struct hmmk_block *blk, unsigned int i, u8 tier,
		    struct page *page);
void hmmk_block_unmap(struct hmmk_block *blk, unsigned int first,
		      unsigned int nr);
struct page *hmmk_page_alloc(struct hmmk_space *space, int node, bool strict,
			     bool zero);

/*
 * Whether memcg, or a cgroup above it, is within its headroom of
 * memory.max (or of memory.high, when lower): module pages stop there, so
 * that the cgroup's other charges (the page tables that map a region, a
 * read()'s buffer) still find room rather than the memcg OOM killer, and
 * its tasks are not throttled over memory.high by pages that cannot be
 * reclaimed.  Headroom: 1/32 of the limit, at least 1 MiB.  Unlocked
 * reads: concurrent faults may pass it together, and the charge itself
 * then fails at memory.max.
 */
#ifdef CONFIG_MEMCG
static inline bool hmmk_memcg_full(struct mem_cgroup *memcg)
{
	unsigned long lim, room;

	for (; memcg; memcg = parent_mem_cgroup(memcg)) {
		lim = min(READ_ONCE(memcg->memory.max),
			  READ_ONCE(memcg->memory.high));
		if (lim == PAGE_COUNTER_MAX)
			continue;
		room = max(lim >> 5, (unsigned long)(SZ_1M >> PAGE_SHIFT));
		if (page_counter_read(&memcg->memory) + room >= lim)
			return true;
	}
	return false;
}
#else
static inline bool hmmk_memcg_full(struct mem_cgroup *memcg)
{
	return false;
}
#endif
int hmmk_block_lock(struct hmmk_block *blk);
void hmmk_block_free_pages(struct hmmk_block *blk);

/* fault.c: CPU faults.  hmmk_make_cpu_resident needs blk->lock. */
vm_fault_t hmmk_fault(struct vm_fault *vmf);
int hmmk_make_cpu_resident(struct hmmk_block *blk, unsigned int i);

/* tier_node.c: MIGRATE between CPU nodes. */
long hmmk_migrate_ioctl(struct hmmk_space *space, void __user *arg);

/* simdev.c: the simulated device tier. */
int hmmk_simdev_init(void);
void hmmk_simdev_exit(void);
long hmmk_dev_access_ioctl(struct hmmk_space *space, void __user *arg);
long hmmk_simdev_config_ioctl(void __user *arg);
int hmmk_simdev_to_cpu(struct hmmk_block *blk, unsigned int i);
void hmmk_simdev_block_gone(struct hmmk_block *blk);
u64 hmmk_simdev_used(void);

/*
 * Request states.  NEW: not queued (no list reference).  PENDING, INFLIGHT:
 * on hmmk_daemon.pending / .inflight, holding the list reference.  BUSY:
 * taken off the lists by COMPLETE (or a failed FETCH), which now owns the
 * list reference.  DONE: result is final.
 */
enum {
	HMMK_REQ_NEW,
	HMMK_REQ_PENDING,
	HMMK_REQ_INFLIGHT,
	HMMK_REQ_BUSY,
	HMMK_REQ_DONE,
};

/*
 * struct hmmk_req — one EVICT, FILL or FORGET (no page, no waiter).
 * Allocated by the waiter, which holds one reference; the daemon queues hold another while it is listed, and
 * FETCH / COMPLETE take their own while they copy.  Freed at the last put,
 * dropping its page reference.  state and link are under hmmk_daemon.lock.
 */
struct hmmk_req {
	struct kref ref;
	struct list_head link;
	struct completion done;
	int state;
	int result;
	u32 op;
	u64 id, space, region, index;
	unsigned long deadline;		/* jiffies; for waiters of a FILL */
	struct page *page;
};

/* daemon.c: the EVICT / FILL channel and the request lifecycle. */
bool hmmk_privileged(void);
long hmmk_daemon_attach(struct hmmk_space *space);
void hmmk_daemon_detach(struct hmmk_space *space);
void hmmk_daemon_init(void);
long hmmk_daemon_info(void __user *arg);
long hmmk_daemon_fetch(struct hmmk_space *space, void __user *arg);
long hmmk_daemon_complete(struct hmmk_space *space, void __user *arg);
__poll_t hmmk_daemon_poll(struct hmmk_space *space, struct file *filp,
			  struct poll_table_struct *wait);
bool hmmk_daemon_attached(void);
struct hmmk_req *hmmk_req_new(struct hmmk_block *blk, unsigned int i, u32 op,
			      struct page *page);
void hmmk_req_put(struct hmmk_req *req);
void hmmk_req_forget(struct hmmk_region *region);
int hmmk_req_submit(struct hmmk_req *req);
int hmmk_req_end(struct hmmk_req *req, long left);
int hmmk_req_wait(struct hmmk_req *req, unsigned long deadline);
unsigned long hmmk_deadline(void);

/* tier_nvme.c: the NVMe tier (FILL on faults, EVICT) over the channel. */
int hmmk_nvme_fill(struct hmmk_block *blk, unsigned int i, struct page *page);
vm_fault_t hmmk_nvme_fill_async(struct vm_fault *vmf, struct hmmk_block *blk,
				unsigned int i);
long hmmk_evict_ioctl(struct hmmk_space *space, void __user *arg);
bool hmmk_over_limit(struct hmmk_region *region);
u64 hmmk_nvme_make_room(struct hmmk_region *region, bool memcg);

/* telemetry.c: STATS, SNAPSHOT, SAMPLE, debugfs. */
long hmmk_stats_ioctl(struct hmmk_space *space, void __user *arg);
long hmmk_snapshot_ioctl(struct hmmk_space *space, void __user *arg);
long hmmk_sample_ioctl(struct hmmk_space *space, void __user *arg);
void hmmk_debugfs_init(void);
void hmmk_debugfs_exit(void);

/* Copy an ioctl struct in and check its reserved words are zero. */
static inline bool hmmk_zero(const void *p, size_t n)
{
	return !memchr_inv(p, 0, n);
}

#endif /* HMMK_H */
