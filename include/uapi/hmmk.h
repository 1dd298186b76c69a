/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * hmmk: the one interface between hmmk.ko and userspace.
 *
 * This is the only copy: the module, libhmm, hmmd and the tests include this
 * file.  Rules: only __u8..__u64, natural alignment, explicit reserved fields
 * that callers must zero and the kernel checks, "(in)" fields written by
 * userspace, "(out)" fields written by the kernel.  A new operation is a new
 * ioctl number, never a new version of an old struct.
 *
 * Model: open("/dev/hmmk") gives a *space* bound to the opener's mm.
 * REGION_CREATE makes a managed region and returns its mmap offset;
 * mmap(MAP_SHARED, PROT_READ | PROT_WRITE) at that offset maps it.  Pages
 * live on a tier (a CPU NUMA node, the simulated device, or NVMe through the
 * daemon) and move on faults and on the operations below.
 *
 * Access: /dev/hmmk is 0660 (group hmm by kmod/60-hmmk.rules); each open
 * is a space of its own that no other opener can reach.  Region pages are
 * charged to the opener's memory cgroup.
 *
 * Threading: every ioctl may be called from any thread of the opener's
 * process; the module serialises per 2 MiB block.  Daemon ioctls are made
 * on a separate open file that called DAEMON_ATTACH.
 */
#ifndef _UAPI_HMMK_H
#define _UAPI_HMMK_H

#include <linux/types.h>
#include <linux/ioctl.h>

#define HMMK_DEVICE		"/dev/hmmk"
#define HMMK_API_VERSION	1
#define HMMK_PAGE_SIZE		4096ULL
#define HMMK_BLOCK_SIZE		(2ULL << 20)	/* unit of locking, eviction */

/*
 * Features, reported by GET_FEATURES.  Userspace checks a bit before it
 * uses the operations it names.
 *
 * HMMK_F_REGIONS: REGION_CREATE / REGION_DESTROY and mmap of regions, with
 *	zero-fill on first touch on the preferred node.
 * HMMK_F_MIGRATE: MIGRATE moves resident pages between CPU NUMA nodes.
 * HMMK_F_SNAPSHOT: SNAPSHOT returns per-page tier, state and node.
 * HMMK_F_DAEMON: the EVICT / FILL channel to a userspace daemon
 *	(DAEMON_ATTACH, poll, DAEMON_FETCH, DAEMON_COMPLETE) and EVICT.
 * HMMK_F_SIMDEV: the simulated device tier (DEV_ACCESS, SIMDEV_CONFIG).
 * HMMK_F_STATS: STATS per region and SAMPLE (access sampling by hinting
 *	faults).
 * HMMK_F_DAEMON_INFO: DAEMON_INFO says whether a daemon is attached and
 *	which process it is, so that a client of that daemon (libhmm in
 *	shared mode) lets the module back its regions only when its own
 *	daemon serves the module.
 * HMMK_F_CPU_LIMIT: REGION_CREATE takes HMMK_REGION_F_CPU_LIMIT.
 * HMMK_F_FORGET: the daemon gets a FORGET request when a region that
 *	evicted pages to it is freed, so that it can drop them.
 * HMMK_F_SPACE_LIMIT: SPACE_LIMIT caps the CPU pages of all the space's
 *	regions together, as HMMK_REGION_F_CPU_LIMIT does for one.
 * HMMK_F_LOAD_ID: DAEMON_INFO's load_id names this load of the module.
 *	Region handles are unique within a load, never reused, but start
 *	again after a reload, and a region freed with no daemon attached
 *	sends no FORGET: a daemon that keeps pages across loads (a store
 *	file) drops those of another load_id when it attaches, so that a
 *	new region with an old handle gets an error, never old bytes.
 */
#define HMMK_F_REGIONS		(1ULL << 0)
#define HMMK_F_MIGRATE		(1ULL << 1)
#define HMMK_F_SNAPSHOT		(1ULL << 2)
#define HMMK_F_DAEMON		(1ULL << 3)
#define HMMK_F_SIMDEV		(1ULL << 4)
#define HMMK_F_STATS		(1ULL << 5)
#define HMMK_F_DAEMON_INFO	(1ULL << 6)
#define HMMK_F_CPU_LIMIT	(1ULL << 7)
#define HMMK_F_FORGET		(1ULL << 8)
#define HMMK_F_SPACE_LIMIT	(1ULL << 9)
#define HMMK_F_LOAD_ID		(1ULL << 10)
#define HMMK_F_ALL		((1ULL << 11) - 1)

struct hmmk_features {
	__u64 features;		/* (out) HMMK_F_* the module supports */
	__u32 api_version;	/* (out) HMMK_API_VERSION */
	__u32 page_size;	/* (out) the kernel's PAGE_SIZE */
	__u32 block_size;	/* (out) HMMK_BLOCK_SIZE */
	__u32 nr_nodes;		/* (out) nr_node_ids */
	__u64 reserved[4];	/* (out) zero */
};

/*
 * REGION_CREATE flags.
 *
 * HMMK_REGION_F_CPU_LIMIT: at most cpu_limit pages of the region stay on
 *	CPU nodes: a CPU fault that finds the region at its limit first
 *	evicts pages of it to the daemon, in clock order, HMMK_ROOM_BATCH at
 *	a time, so that a region larger than a host budget works within it.
 *	Best effort: with no daemon attached nothing can go, and the region
 *	grows past its limit.
 */
#define HMMK_REGION_F_CPU_LIMIT	(1ULL << 0)
#define HMMK_REGION_F_ALL	HMMK_REGION_F_CPU_LIMIT
#define HMMK_ROOM_BATCH		64	/* pages evicted to make room */
#define HMMK_NODE_ANY		0xffffffffU

struct hmmk_region_create {
	__u64 size;		/* (in) bytes, a multiple of the page size */
	__u64 flags;		/* (in) HMMK_REGION_F_*; another bit: -EINVAL */
	/* (in) CPU node for first touch, or HMMK_NODE_ANY (caller's node) */
	__u32 preferred_node;
	__u32 reserved0;	/* (in) 0 */
	__u64 handle;		/* (out) names the region in other ioctls */
	__u64 mmap_offset;	/* (out) the offset to pass to mmap() */
	/* (in) with HMMK_REGION_F_CPU_LIMIT: pages, > 0; else 0 */
	__u64 cpu_limit;
	__u64 reserved[3];	/* (in) 0 */
};

struct hmmk_region_destroy {
	__u64 handle;		/* (in) from REGION_CREATE */
	__u64 reserved[3];	/* (in) 0 */
};

/*
 * One range operation: MIGRATE, EVICT, DEV_ACCESS, SAMPLE.  start and
 * length are byte offsets into the region, page aligned, length > 0.
 */
#define HMMK_ACCESS_WRITE	(1U << 0)	/* DEV_ACCESS: device writes */
#define HMMK_ACCESS_F_ALL	HMMK_ACCESS_WRITE

struct hmmk_range {
	__u64 handle;		/* (in) region */
	__u64 start;		/* (in) byte offset in the region */
	__u64 length;		/* (in) bytes */
	__u32 node;		/* (in) MIGRATE: target CPU node; else 0 */
	__u32 flags;		/* (in) DEV_ACCESS: HMMK_ACCESS_*; else 0 */
	__u64 done;		/* (out) pages moved / evicted / accessed */
	/* (out) pages left where they were (busy, not resident, pinned) */
	__u64 skipped;
	__u64 reserved[2];	/* (in) 0 */
};

/* SNAPSHOT: one struct hmmk_page_info per page, written to entries. */
#define HMMK_TIER_NONE		0	/* never touched: reads as zero */
#define HMMK_TIER_CPU		1	/* on a CPU node (node says which) */
#define HMMK_TIER_DEV		2	/* on the simulated device */
#define HMMK_TIER_NVME		3	/* held by the daemon */

#define HMMK_PAGE_MAPPED	(1U << 0)	/* may be mapped in the CPU */
#define HMMK_PAGE_SAMPLED	(1U << 1)	/* unmapped to sample access */
#define HMMK_PAGE_ACCESSED	(1U << 2)	/* touched since SAMPLE */
#define HMMK_PAGE_PINNED	(1U << 3)	/* thrash-pinned on the CPU */

struct hmmk_page_info {
	__u8 tier;		/* HMMK_TIER_* */
	__u8 state;		/* HMMK_PAGE_* */
	__u16 node;		/* CPU node for HMMK_TIER_CPU, else 0xffff */
};

struct hmmk_snapshot {
	__u64 handle;		/* (in) region */
	__u64 first_page;	/* (in) page index in the region */
	__u64 nr_pages;		/* (in) entries available at entries */
	__u64 entries;		/* (in) user pointer to hmmk_page_info[] */
	__u64 filled;		/* (out) entries written */
	__u64 reserved[3];	/* (in) 0 */
};

/* STATS: counters of one region since REGION_CREATE. */
struct hmmk_stats {
	__u64 handle;		/* (in) region */
	__u64 reserved0[3];	/* (in) 0 */
	__u64 faults;		/* (out) CPU faults served */
	__u64 zero_fills;	/* (out) first-touch pages */
	__u64 fills;		/* (out) pages read back from the daemon */
	__u64 evictions;	/* (out) pages handed to the daemon */
	__u64 migrations;	/* (out) pages moved between CPU nodes */
	__u64 migrated_bytes;	/* (out) bytes of those */
	__u64 dev_in;		/* (out) pages moved to the device */
	__u64 dev_out;		/* (out) pages moved off the device */
	__u64 dev_evictions;	/* (out) pages evicted under oversubscription */
	__u64 prefetches;	/* (out) pages moved by the prefetch rule */
	__u64 throttles;	/* (out) thrash throttles */
	__u64 pins;		/* (out) thrash pins */
	__u64 sampled;		/* (out) pages unmapped by SAMPLE */
	__u64 sample_hits;	/* (out) sampled pages touched again */
	__u64 sigbus;		/* (out) faults failed with SIGBUS */
	__u64 reserved[9];	/* (out) zero */
};

/* SIMDEV_CONFIG: the simulated device (module-wide). */
struct hmmk_simdev_config {
	__u64 capacity_pages;	/* (in) device pages; 0 leaves it as is */
	/*
	 * (in) prefetch the rest of a block once this percent of it is on
	 * the device; 0 = off, over 100 leaves it as is
	 */
	__u32 prefetch_pct;
	/* (in) moves of one page in a 1 s window that are thrashing; 0 = off */
	__u32 thrash_limit;
	__u32 pin_ms;		/* (in) how long a thrashing page is pinned */
	__u32 reserved0;	/* (in) 0 */
	__u64 used_pages;	/* (out) device pages in use */
	__u64 reserved[2];	/* (in) 0 */
};

/*
 * Daemon channel.  The daemon opens /dev/hmmk, calls DAEMON_ATTACH, then
 * polls (POLLIN: requests pending) and takes requests with DAEMON_FETCH
 * (-EAGAIN when none).  For EVICT the kernel writes the page to buf before
 * FETCH returns; the daemon stores it and completes.  For FILL the daemon
 * reads the page into buf and completes with that buf.  A request belongs
 * to the daemon from FETCH until COMPLETE.  When the daemon's file closes,
 * every request it holds fails: the faults waiting on them get SIGBUS.
 * FORGET (nobody waits for it; buf is not used): region is gone and page
 * is its page count; the daemon may drop every page it holds of it, and
 * completes it like the others (its status is not looked at).
 * Region handles are unique only within one load of the module: a daemon
 * that keeps pages across loads keys them by DAEMON_INFO's load_id too
 * (HMMK_F_LOAD_ID).
 *
 * The daemon sees and answers every space's pages, so DAEMON_ATTACH (and
 * SIMDEV_CONFIG, module-wide) need CAP_SYS_ADMIN, or the uid, or a member
 * of the gid, named by the daemon_uid / daemon_gid module parameters:
 * -EPERM otherwise.  A space is bound to the opener's mm: DAEMON_ATTACH,
 * FETCH and COMPLETE from another mm (a fork, a passed file) are -EPERM.
 */
#define HMMK_OP_EVICT		1
#define HMMK_OP_FILL		2
#define HMMK_OP_FORGET		3

struct hmmk_daemon_req {
	__u64 buf;		/* (in) user pointer to HMMK_PAGE_SIZE bytes */
	__u64 reserved0;	/* (in) 0 */
	__u64 id;		/* (out) request id for COMPLETE */
	__u32 op;		/* (out) HMMK_OP_* */
	__u32 reserved1;	/* (out) 0 */
	__u64 space;		/* (out) id of the requesting space */
	__u64 region;		/* (out) region handle */
	__u64 page;		/* (out) page index in the region */
	__u64 reserved[2];	/* (out) 0 */
};

struct hmmk_daemon_cmpl {
	__u64 id;		/* (in) from FETCH */
	__u32 status;		/* (in) 0, or a positive errno */
	__u32 reserved0;	/* (in) 0 */
	__u64 buf;		/* (in) FILL: the page's bytes */
	__u64 reserved[2];	/* (in) 0 */
};

/*
 * SPACE_LIMIT: at most cpu_limit pages of all the space's regions stay on
 * CPU nodes; a fault at the limit first evicts pages to the daemon, from
 * the faulting region, then from the others (as HMMK_REGION_F_CPU_LIMIT,
 * best effort the same way).  0 removes the limit.  Any time.
 */
struct hmmk_space_limit {
	__u64 cpu_limit;	/* (in) pages; 0 = none */
	__u64 nr_cpu;		/* (out) the space's pages on CPU nodes now */
	__u64 reserved[2];	/* (in) 0 */
};

/* DAEMON_INFO: the attached daemon, now (it may go at any time). */
struct hmmk_daemon_info {
	__u32 attached;		/* (out) 1: a daemon is attached, else 0 */
	/* (out) its process (thread group) id in the caller's pid
	 * namespace; 0 when none is attached or it is not visible there */
	__u32 pid;
	__u64 pending;		/* (out) requests queued for it */
	__u64 inflight;		/* (out) requests it has fetched */
	/* (out) random, nonzero, fixed from insmod to rmmod (HMMK_F_LOAD_ID) */
	__u64 load_id;
	__u64 reserved[2];	/* (out) zero */
};

#define HMMK_IOC_MAGIC		0xB8	/* not in ioctl-number.rst */

#define HMMK_IOC_GET_FEATURES	_IOR(HMMK_IOC_MAGIC, 0x00, struct hmmk_features)
#define HMMK_IOC_REGION_CREATE	_IOWR(HMMK_IOC_MAGIC, 0x01, struct hmmk_region_create)
#define HMMK_IOC_REGION_DESTROY	_IOW(HMMK_IOC_MAGIC, 0x02, struct hmmk_region_destroy)
#define HMMK_IOC_MIGRATE	_IOWR(HMMK_IOC_MAGIC, 0x03, struct hmmk_range)
#define HMMK_IOC_SNAPSHOT	_IOWR(HMMK_IOC_MAGIC, 0x04, struct hmmk_snapshot)
#define HMMK_IOC_STATS		_IOWR(HMMK_IOC_MAGIC, 0x05, struct hmmk_stats)
#define HMMK_IOC_EVICT		_IOWR(HMMK_IOC_MAGIC, 0x06, struct hmmk_range)
#define HMMK_IOC_DEV_ACCESS	_IOWR(HMMK_IOC_MAGIC, 0x07, struct hmmk_range)
#define HMMK_IOC_SAMPLE		_IOWR(HMMK_IOC_MAGIC, 0x08, struct hmmk_range)
#define HMMK_IOC_SIMDEV_CONFIG	_IOWR(HMMK_IOC_MAGIC, 0x09, struct hmmk_simdev_config)
#define HMMK_IOC_SPACE_LIMIT	_IOWR(HMMK_IOC_MAGIC, 0x0a, struct hmmk_space_limit)
#define HMMK_IOC_DAEMON_ATTACH	_IO(HMMK_IOC_MAGIC, 0x10)
#define HMMK_IOC_DAEMON_FETCH	_IOWR(HMMK_IOC_MAGIC, 0x11, struct hmmk_daemon_req)
#define HMMK_IOC_DAEMON_COMPLETE _IOW(HMMK_IOC_MAGIC, 0x12, struct hmmk_daemon_cmpl)
#define HMMK_IOC_DAEMON_INFO	_IOR(HMMK_IOC_MAGIC, 0x13, struct hmmk_daemon_info)

#endif /* _UAPI_HMMK_H */
