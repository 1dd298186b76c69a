/* SPDX-License-Identifier: MIT */
/*
 * store_int.h — the store's private state, shared by store.c (open,
 * close, table, flush) and store_io.c (the request engine).
 */
#ifndef HMM_STORE_INT_H
#define HMM_STORE_INT_H

#include <pthread.h>

#include "extent.h"
#include "store.h"
#include "table.h"
#include "uring.h"
#include "xmap.h"

/* hmm_io.s_state while the store holds a request */
#define ST_QUEUED	0x51554555u	/* in the backlog, no SQE yet */
#define ST_RING		0x52494e47u	/* an SQE is in the ring */
#define ST_DONE		0x444f4e45u	/* completed; result is valid */

/* the pinned pool a store makes when hmm_store_config.pool_bytes is 0 */
#define STORE_DEF_POOL	(64ul << 20)

/* internal ops: absolute file offsets, used by flush */
#define OP_ABS_WRITE	16

/*
 * What stripe.c asks of one member it opens (store_open); a plain store
 * has none (all 0).
 */
struct store_role {
	int member;		/* 1: a member of a striped store */
	uint16_t index, count;	/* its place in the set, the set's size */
	uint64_t set_uuid;	/* recorded at format; checked at load */
	int any_uuid;		/* load: accept any set uuid (member 0) */
	uint64_t at_gen;	/* load this generation, not the newest, and
				 * invalidate a newer superblock; 0: newest */
	struct hmm_pool *pool;	/* the set's pool (not owned); NULL: own */
};

/*
 * Allocated by hmm_store_open, freed by hmm_store_close.  Everything
 * but st is touched only by the thread driving the ring (u.owner);
 * stat_lock protects st, which any thread may snapshot.
 */
struct hmm_store {
	char *path;
	int fd;
	int direct;		/* O_DIRECT in use */
	int tmpfs;
	uint32_t flags;		/* HMM_STORE_* */
	struct hmm_stripe *stripe;	/* set: this is a striped store's
					 * front (stripe.c); nothing below
					 * is used then */
	struct store_role role;
	int created, formatted;	/* by this open: the file; a new store */
	struct hmm_sb sb;	/* the live (last durable) superblock */
	uint64_t blocks;	/* data area, in blocks */

	struct hmm_uring u;
	int ring_up;		/* u initialised */
	int sync_io;		/* no io_uring: pread/pwrite in pump() */
	struct hmm_io *sync_head, *sync_tail;	/* done, not yet reaped;
						 * raw result in ->result */
	struct hmm_pool *pool;	/* owned */
	int bufs_registered;

	struct hmm_ext ext;	/* data blocks */
	struct hmm_xmap map;	/* key -> extent, flushed or not */
	void *meta;		/* malloc'd, meta_len bytes */
	uint32_t meta_len;

	struct hmm_io *bl_head, *bl_tail;	/* backlog, FIFO */
	unsigned in_ring;	/* SQEs the kernel holds */
	unsigned inflight;	/* submitted, not completed (with backlog) */
	unsigned pending_writes;	/* extent writes not completed */
	uint64_t ncompleted;	/* requests completed, ever */

	pthread_mutex_t stat_lock;
	struct hmm_store_stats st;
	char note[384];
};

/* store.c: open one store (role NULL: plain); flush in two steps, so
 * that a striped store releases no member's quarantine before every
 * member's superblock is durable: commit writes the table and the
 * superblock of generation + 1 into *nsb's slot, settle makes it live
 * and frees the places the previous generation held. */
int store_open(const struct hmm_store_config *cfg,
	       const struct store_role *role, struct hmm_store **out);
int store_flush_commit(struct hmm_store *s, struct hmm_sb *nsb);
void store_flush_settle(struct hmm_store *s, const struct hmm_sb *nsb);

/* store_io.c */
/* Queue io (validated, RAW offsets counted from raw_base) without
 * submitting it; store_kick submits the backlog.  The caller claimed. */
int store_claim(struct hmm_store *s);
int store_queue(struct hmm_store *s, struct hmm_io *io, uint64_t raw_base);
int store_kick(struct hmm_store *s);
int store_queue_abs_write(struct hmm_store *s, struct hmm_io *io);
int store_drain(struct hmm_store *s);
void store_release_place(struct hmm_store *s, const struct hmm_xent *e);

#endif /* HMM_STORE_INT_H */
