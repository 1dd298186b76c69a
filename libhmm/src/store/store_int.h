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

/* internal ops: absolute file offsets, used by flush */
#define OP_ABS_WRITE	16

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

/* store_io.c */
int store_queue_abs_write(struct hmm_store *s, struct hmm_io *io);
int store_drain(struct hmm_store *s);
void store_release_place(struct hmm_store *s, const struct hmm_xent *e);

#endif /* HMM_STORE_INT_H */
