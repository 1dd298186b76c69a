/* SPDX-License-Identifier: MIT */
/*
 * ctx.h — the context (struct hmm) and what the engine's files share.
 *
 * Locking: one mutex per context, h->lock, protects every chunk's state,
 * the budgets, the policy's lists and record, the mappings and the I/O
 * queue.  h->cond is broadcast whenever a chunk's state changes (an I/O
 * completes, a pin is dropped, space is freed); threads waiting in
 * hmm_map/hmm_wait/hmm_flush sleep on it.  Callbacks from the I/O thread
 * and the device's copy thread take h->lock themselves; neither thread
 * holds h->lock while it calls the store or copies.
 */
#ifndef HMM_CTX_H
#define HMM_CTX_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "hmm.h"
#include "store.h"

/* ---- intrusive doubly linked lists ------------------------------------- */
struct hmm_list {
	struct hmm_list *prev, *next;
};

static inline void hmm_list_init(struct hmm_list *l)
{
	l->prev = l->next = l;
}

static inline int hmm_list_empty(const struct hmm_list *l)
{
	return l->next == l;
}

static inline void hmm_list_add_tail(struct hmm_list *l, struct hmm_list *n)
{
	n->prev = l->prev;
	n->next = l;
	l->prev->next = n;
	l->prev = n;
}

static inline void hmm_list_del(struct hmm_list *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

#define hmm_container_of(p, type, member)                                  \
	((type *)((char *)(p) - __builtin_offsetof(type, member)))

#define HMM_PAGE		4096u
#define HMM_ROUND_UP(x, a)	(((x) + (a) - 1) / (a) * (a))

struct hmm_chunk;
struct hmm_tensor;
struct hmm_client;
struct hmm_remote_tensor;
struct hmm_dev_ops;
struct hmm_region;

/*
 * One store request.  Embedded in the chunk (one I/O per chunk at a time)
 * or on a waiting thread's stack.  Queued on h->ioq under h->lock,
 * submitted and completed by the I/O thread, which calls done() without
 * h->lock held.
 */
#define HMM_IOREQ_FREE	100	/* hmm_store_extent_free(io.key) */
#define HMM_IOREQ_FLUSH	101	/* hmm_store_flush */
#define HMM_IOREQ_META_SET 102	/* hmm_store_meta_set(io.buf, io.len) */
#define HMM_IOREQ_META_GET 103	/* hmm_store_meta_get(io.buf, io.len) */
struct hmm_ioreq {
	struct hmm_io io;	/* io.op: HMM_IO_* or HMM_IOREQ_* */
	struct hmm_list link;	/* on h->ioq while queued */
	struct hmm *h;
	void (*done)(struct hmm_ioreq *r);	/* I/O thread, no lock */
	int complete;		/* set under h->lock by waiters' done */
	double t0;		/* when queued (stats, trace) */
};

/* The schedule-aware policy's record (policy.c). */
struct hmm_sched_ent {
	uint32_t tensor_id, chunk;
	int tier;
};

struct hmm_sched {
	int state;		/* POL_IDLE / RECORD / FOLLOW (policy.c) */
	int in_step;
	int rerecord;		/* diverged: record the next step */
	struct hmm_sched_ent *seq;	/* the record (malloc) */
	uint32_t n, cap;
	uint32_t cursor;	/* next expected position */
	uint32_t misses;	/* this step's divergences */
};

/* Per-tier accounting; all under h->lock. */
struct hmm_tier {
	uint64_t cap, used, peak, pinned, pending_free;
	uint32_t active;	/* copies in flight over this link */
	double busy_since;	/* when active went 0 -> 1 */
	struct hmm_list lru;	/* resident chunks, least recent first */
	struct hmm_tier_stats st;
};

/*
 * The context.  Allocated by hmm_open, freed by hmm_close.  Owns the
 * tensors (h->tensors[id]), the regions, the store (used only by the I/O
 * thread), the device backend and the trace file.
 */
struct hmm {
	/*
	 * Shared mode (cfg.daemon set): the hmmd connection, owned; every
	 * public call on this context and its tensors forwards to it
	 * (shared.c) and the engine's fields below stay idle (no store,
	 * device, I/O thread or chunks).  NULL: the embedded engine.
	 */
	struct hmm_client *remote;
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* state changed (see above) */
	struct hmm_config cfg;		/* strings not kept */
	uint32_t chunk_bytes;
	int host_dirfd;			/* cfg.host_dir opened (O_PATH), owned;
					   -1 = memfds (tensor.c) */

	struct hmm_tier tier[HMM_TIERS];
	struct hmm_stats st;		/* non-tier counters */

	struct hmm_tensor **tensors;	/* by id; NULL once freed */
	struct hmm_saved *saved;	/* tensors found in the store and not
					   opened yet (persist.c) */
	uint32_t nsaved;
	uint32_t ntensors, tensors_cap;
	uint64_t live_tensors, live_chunks;
	int async_err;			/* first async error since wait */
	char async_detail[256];
	/* the latest failed copy a map waits for: its detail (the store's
	 * path, offset and why), given to that map (chunk.c) */
	struct hmm_chunk *copy_err_chunk;
	char copy_detail[256];

	/* the store and its thread (iothread.c) */
	struct hmm_store *store;
	pthread_t io_thread;
	pthread_cond_t io_cond;		/* queue not empty, or stop */
	struct hmm_list ioq;
	unsigned io_inflight;		/* queued + submitted */
	int io_stop, io_started;
	int io_efd;			/* eventfd: wakes the I/O thread out
					   of hmm_store_poll_wake */
	int io_sleeping;		/* it sleeps there: queue writes efd */
	int io_kicked;			/* efd written, not drained yet */

	/* the device (dev.h) */
	const struct hmm_dev_ops *dev;
	void *dev_priv;
	uint64_t dev_gran;		/* device allocation unit */

	struct hmm_sched sched;
	struct hmm_list wantq;		/* chunks whose prefetch waits */
	int in_retry;			/* walking wantq */

	/* regions (region.c); own lock, below h->lock in order */
	struct hmm_list regions;

	/* shared mode's device maps (shared_dev.c), h->lock */
	struct hmm_list sdev;

	/* trace (trace.c); own lock */
	FILE *trace;
	pthread_mutex_t trace_lock;
	int trace_first;
	double t_open;
};

/* ---- ctx.c ------------------------------------------------------------- */
double hmm_now(void);
/* Wait on h->cond (h->lock held) until woken, or hmm_now() reaches
 * until, or 50 ms have passed, whichever is first: callers loop. */
void hmm_cond_wait_until(struct hmm *h, double until);
void hmm_async_error(struct hmm *h, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- iothread.c -------------------------------------------------------- */
int hmm_iot_start(struct hmm *h, const struct hmm_config *cfg);
void hmm_iot_stop(struct hmm *h);
void hmm_iot_queue(struct hmm *h, struct hmm_ioreq *r);	/* h->lock held */
/* Queue r and wait for it (h->lock held; dropped while waiting). */
int hmm_iot_sync(struct hmm *h, struct hmm_ioreq *r);

/* ---- budget.c ---------------------------------------------------------- */
/* Results of the state steps (chunk.c, budget.c). */
#define HMM_READY	0	/* done */
#define HMM_AGAIN	1	/* an I/O or eviction in flight: wait */
#define HMM_STARVED	2	/* no space and nothing evictable */
int hmm_budget_room(struct hmm *h, int tier, uint64_t bytes,
		    uint64_t limit);
void hmm_budget_take(struct hmm *h, int tier, uint64_t bytes);
void hmm_budget_give(struct hmm *h, int tier, uint64_t bytes);

/* ---- policy.c ---------------------------------------------------------- */
#define HMM_NO_LIMIT	UINT64_MAX
void hmm_policy_touch(struct hmm *h, struct hmm_chunk *c, int tier);
struct hmm_chunk *hmm_policy_victim(struct hmm *h, int tier, uint64_t limit);
uint64_t hmm_policy_next_use(struct hmm *h, struct hmm_chunk *c);
void hmm_policy_access(struct hmm *h, struct hmm_chunk *c, int tier);
int hmm_policy_step_begin(struct hmm *h);
int hmm_policy_step_end(struct hmm *h);
/* Pins were dropped (h->lock held): room may be evictable now. */
void hmm_policy_unpinned(struct hmm *h);
void hmm_policy_forget(struct hmm *h, struct hmm_tensor *t);
void hmm_policy_fini(struct hmm *h);

/* ---- trace.c ----------------------------------------------------------- */
int hmm_trace_open(struct hmm *h, const char *path);
void hmm_trace_close(struct hmm *h);
/* A complete event [t0, t1] in seconds since hmm_open. */
void hmm_trace_event(struct hmm *h, const char *cat, const char *name,
		     const char *tensor, uint32_t chunk, uint64_t bytes,
		     double t0, double t1, int tid);

/* ---- persist.c --------------------------------------------------------- */
struct hmm_saved;
int hmm_persist_load(struct hmm *h);
int hmm_persist_save(struct hmm *h);	/* h->lock held */
void hmm_persist_fini(struct hmm *h);

/* ---- tensor.c ---------------------------------------------------------- */
/* Create a tensor; id < 0 = a new id; stored = per-chunk bitmap or NULL. */
int hmm_tensor_create(struct hmm *h, const char *name, uint32_t dtype,
		      unsigned ndim, const int64_t *shape, int64_t id,
		      const uint8_t *stored, struct hmm_tensor **out);

/* ---- shared.c: shared mode (hmm_config.daemon) -------------------------- */
/* hmm_tensor_open's remote half (persist.c calls it when h->remote is
 * set). */
int hmm_shared_tensor_open(struct hmm *h, const char *name,
			   struct hmm_tensor **out);
int hmm_shared_open(struct hmm *h, const struct hmm_config *cfg);
void hmm_shared_close(struct hmm *h);
/* shared_dev.c: the device tier in shared mode, staged through hmmd's
 * host tier (h->dev is this process's backend).  _map and _unmap are
 * hmm_map/hmm_unmap at the device; _unmap is -ENOENT when ptr is not a
 * device map of t.  _fini drops every device map (hmm_close, before the
 * tensors go); _residency adds t's device-mapped bytes to *bytes. */
int hmm_shared_dev_map(struct hmm_tensor *t, uint64_t off, uint64_t len,
		       unsigned access, void **ptr);
int hmm_shared_dev_unmap(struct hmm_tensor *t, void *ptr);
void hmm_shared_dev_fini(struct hmm *h);
void hmm_shared_dev_residency(struct hmm_tensor *t, uint64_t *bytes);
/* tensor.c: wrap a remote tensor in a struct hmm_tensor (takes rt). */
int hmm_tensor_wrap_remote(struct hmm *h, struct hmm_remote_tensor *rt,
			   struct hmm_tensor **out);

/* ---- region.c ---------------------------------------------------------- */
void hmm_region_fini(struct hmm *h);
/* Evict region blocks to make room on the host (h->lock held). */
int hmm_region_reclaim(struct hmm *h, uint64_t bytes);

#endif /* HMM_CTX_H */
