/* SPDX-License-Identifier: MIT */
/*
 * region_int.h — what the region files share: region.c (the API, the
 * regions' list), region_fault.c (userfaultfd and the fault thread),
 * region_evict.c (eviction and reclaim), region_store.c (the embedded
 * engine's block backend), and a backend's own (backend.h region_back,
 * region_whole).
 *
 * A userfaultfd region is cut in 64 KiB blocks, each ABSENT (never
 * touched: zeros), RESIDENT (mapped, counted in the host budget),
 * EVICTING (its pages moved aside, being written out), STORED, FILLING
 * (being copied in) or BROKEN (its bytes are lost: an access gets
 * SIGBUS, never wrong bytes).  An ABSENT or STORED block may also be
 * RB_STARVED: an access to it found no room for wait_ms and got SIGBUS
 * (UFFDIO_POISON); its bytes are kept, and the fault thread lifts the
 * poison once room returns (region_fault.c).
 *
 * Locking: block states, todo lists, the regions list, the clock hand,
 * quit and starving are under h->lock (nstarved and unstarve_at are the
 * fault thread's own); the fault thread drops it around UFFDIO_* and
 * the backend's reads.  Struct hmm_region
 * is allocated by hmm_region_create and freed by hmm_region_destroy_at
 * or hmm_close.
 */
#ifndef HMM_REGION_INT_H
#define HMM_REGION_INT_H

#include <errno.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <stdint.h>

#include "ctx.h"

/* UFFDIO_POISON (Linux 6.6), for headers older than the kernel. */
#ifndef UFFDIO_POISON
struct uffdio_poison {
	struct uffdio_range range;
	__u64 mode;
	__s64 updated;
};
#define _UFFDIO_POISON		(0x08)
#define UFFDIO_POISON		_IOWR(UFFDIO, _UFFDIO_POISON, \
				      struct uffdio_poison)
#endif
#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON	(1 << 14)
#endif

#define RBLOCK		(64u << 10)	/* a userfaultfd region's block */

#define RB_ABSENT	0
#define RB_RESIDENT	1
#define RB_EVICTING	2
#define RB_STORED	3
#define RB_FILLING	4	/* being copied in by the fault thread */
#define RB_BROKEN	5	/* contents lost: mapped to SIGBUS */
#define RB_STARVED	0x80	/* or'ed with ABSENT or STORED: poisoned
				   (SIGBUS) until room returns, bytes kept */

struct region_wb;

/*
 * Where evicted blocks go (set by the backend's region_back).
 * write: start writing wb (h->lock held); region_wb_done ends it, or
 * queue it on r->todo for write_now, which writes it without h->lock
 * (region_drain: a round trip, run by the thread that needs the room).
 * read: a source for UFFDIO_COPY of stored block b (no lock held),
 * released by read_end.  fini: forget every stored block (the region is
 * off the list; no lock held).  gone: whether a write or read that
 * failed with err means the backend is gone or full for good: the
 * region evicts no more (r->dead; a failed read breaks its block); any
 * other failure keeps the block (resident, or stored) and is tried
 * again later (region_short: quietly).
 */
struct region_ops {
	const char *name;	/* in error details: "store", "hmmd" */
	int (*gone)(int err);
	void (*write)(struct hmm_region *r, struct region_wb *wb);
	int (*write_now)(struct region_wb *wb);
	int (*read)(struct hmm_region *r, uint32_t b, void **src);
	void (*read_end)(struct hmm_region *r, void *src);
	void (*fini)(struct hmm_region *r);
};

/* A region served whole by someone else (backend.h region_whole). */
struct region_whole_ops {
	int (*advise)(struct hmm_region *r, uint64_t off, uint64_t len,
		      int advice);
	void (*stats)(struct hmm_region *r, uint64_t *faults,
		      uint64_t *evictions);
	void (*free)(struct hmm_region *r);	/* unmaps r->base */
};

struct hmm_region {
	struct hmm_list link;	/* on h->regions */
	struct hmm *h;
	uint32_t id;
	char *base;
	uint64_t bytes;
	const struct region_whole_ops *whole;	/* served whole: the
						   rest is idle */
	void *whole_priv;	/* the one who serves it whole */
	const struct region_ops *ops;
	uint32_t nblocks;
	uint8_t *state;		/* per block, RB_* */
	uint32_t hand;		/* clock hand for reclaim */
	uint32_t evicting;	/* blocks in RB_EVICTING */
	int dead;		/* -errno: the block backend is gone, or
				   the store is full: no more evictions */
	int quit;		/* -errno: the fault thread's waits end at
				   once (r->dead, or -ESHUTDOWN at free) */
	int starving;		/* a fault gave up for want of room, and no
				   block came in since: the next give up
				   after REGION_RETRY_S, not wait_ms */
	int poison;		/* UFFDIO_POISON works (set at start) */
	uint32_t nstarved;	/* RB_STARVED blocks (fault thread only) */
	double unstarve_at;	/* fault thread only: the next look for
				   room to lift their poison (hmm_now) */
	pthread_mutex_t fill_lock;	/* one fill at a time: the fault
					   thread's, WILLNEED's (the
					   backend's read buffer) */
	double retry_at;	/* a write failed for now (!ops->gone):
				   no eviction before then (hmm_now) */
	int again;		/* -errno of the last failed write that
				   will be tried again; 0 after a good one */
	int uffd, stopfd;
	int busfd;		/* empty memfd: mapped over BROKEN blocks */
	pthread_t thr;
	void *back;		/* the block backend's state */
	struct region_wb *todo;	/* writes waiting for write_now */
};

/* An eviction's write, freed by its completion. */
struct region_wb {
	struct hmm_ioreq req;
	struct hmm_region *r;
	uint32_t block;
	void *staging;
	struct region_wb *next;	/* on r->todo */
};

static inline char *region_block_addr(struct hmm_region *r, uint32_t b)
{
	return r->base + (uint64_t)b * RBLOCK;
}

/*
 * A failure that a later try may not meet: the backend is short of room
 * for a while (hmmd: this client's quota, or its budget, full for its
 * wait_ms; a call that timed out), not gone.  Such a write keeps its
 * block resident and dirty, such a read its block stored, and they are
 * tried again REGION_RETRY_S later at the earliest, without an error
 * for hmm_wait: nothing is lost.  The fault that waits on them does so
 * for this context's wait_ms at most (region_fault.c): then its access
 * gets SIGBUS, the block still kept.
 */
static inline int region_short(int err)
{
	return err == -EDQUOT || err == -ENOMEM || err == -EAGAIN ||
	       err == -EBUSY || err == -ETIMEDOUT || err == -EINTR;
}
#define REGION_RETRY_S	0.1

/*
 * region.c, h->lock held: the host bytes that pins must leave to the
 * context's userfaultfd regions: two blocks (one access may touch two)
 * while there is one, else 0.  map.c refuses a host map that would
 * pin into them, hmm_region_create a region that pins already leave
 * less: a fault for which nothing can be evicted waited for ever, and
 * with one block of room the two blocks of an access evicted each other.
 */
#define REGION_KEEP	(2 * RBLOCK)
uint64_t hmm_region_keep(struct hmm *h);

/*
 * region.c: hmm_fits (tensor.c) for r, a new region: r->bytes against
 * cap[], the capacities where its evicted blocks go (a backend's
 * region_back calls it first: the store's context, or hmmd), and its
 * block table against the machine's memory.  0 or -ENOMEM with the
 * detail naming the region, its size and what it exceeded.
 */
int hmm_region_fits(struct hmm_region *r, const char *whose,
		    const uint64_t cap[HMM_TIERS]);

/* region_fault.c: userfaultfd and the fault thread for r (r->base mapped,
 * r->ops set).  0 or -errno with the detail; _stop ends the thread,
 * promptly: a fault waiting for room gives up (r->quit). */
int hmm_region_uffd_start(struct hmm_region *r);
void hmm_region_uffd_stop(struct hmm_region *r);

/*
 * region_fault.c, h->lock held (dropped while waiting and copying):
 * bring block b of r in, as a fault does (WILLNEED).  0 when it is
 * resident, 1 when it is BROKEN or RB_STARVED (an access gets SIGBUS:
 * nothing to do), -ENOMEM when no room came for wait_ms (the block keeps
 * its bytes; the detail says why nothing could be evicted), r->quit, or
 * the backend's read error (the block is BROKEN then, the empty memfd
 * mapped over it).
 */
int hmm_region_bring(struct hmm *h, struct hmm_region *r, uint32_t b);

/* region_evict.c, h->lock held. */
int hmm_region_evict_block(struct hmm *h, struct hmm_region *r, uint32_t b);
void hmm_region_wb_done(struct hmm_ioreq *q);	/* no lock held */
int hmm_region_drain(struct hmm *h);
void hmm_region_wait(struct hmm *h);

#endif /* HMM_REGION_INT_H */
