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

#include "backend.h"
#include "budget.h"
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
	int crc_state;		/* CRC_* (crcthread.c), under h->lock */
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

/* Per-tier accounting, the tier's one ledger (budget.h); h->lock. */
struct hmm_tier {
	uint64_t cap, used, peak, pinned, pending_free;
	uint64_t admitted, admitted_peak;	/* owners' (budget.h) */
	struct hmm_admit *waiters;	/* owners' admissions waiting */
	uint64_t next_ticket;		/* their order */
	uint64_t owner_waits;		/* owners' admissions that waited */
	uint32_t active;	/* copies in flight over this link */
	double busy_since;	/* when active went 0 -> 1 */
	struct hmm_list lru;	/* resident chunks, least recent first */
	struct hmm_tier_stats st;
};

/*
 * The context.  Allocated by hmm_ctx_new (hmm_open), freed by
 * hmm_ctx_free (hmm_close).  Owns the tensors (h->tensors), the
 * regions, the store (used only by the I/O thread), the device backend
 * and the trace file.  With another backend than the engine's, the
 * engine's store, I/O thread and chunks stay idle and the backend's
 * state is be_priv.
 */
struct hmm {
	const struct hmm_backend *be;	/* what hmm.h calls (backend.h) */
	void *be_priv;			/* that backend's, owned by it */
	pthread_mutex_t lock;
	pthread_cond_t cond;		/* state changed (see above) */
	struct hmm_config cfg;		/* strings not kept */
	uint32_t chunk_bytes;
	int host_dirfd;			/* cfg.host_dir opened (O_PATH), owned;
					   -1 = memfds (tensor.c) */

	struct hmm_tier tier[HMM_TIERS];
	struct hmm_stats st;		/* non-tier counters */

	struct hmm_tensor **tensors;	/* the live ones, in id order
					   (hmm_tensor_by_id) */
	struct hmm_saved *saved;	/* tensors found in the store and not
					   opened yet (persist.c) */
	uint32_t nsaved;
	uint32_t ntensors, tensors_cap;
	uint32_t next_id;		/* above every id the store named */
	uint64_t live_chunks;
	int async_err;			/* first async error since wait */
	char async_detail[256];
	int async_by_tensor;		/* a chunk's goes to its tensor's
					   (hmm_engine_async_by_tensor) */
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
	int io_no_room;			/* the head write found no room in
					   the store: hold extent I/O until
					   a completion frees some */

	/* the checksum thread (crcthread.c): chunks' crc32c */
	pthread_t crc_thread;
	pthread_cond_t crc_cond;	/* crcq not empty, or stop */
	struct hmm_list crcq;		/* reads to check; those a map
					   waits on at the head */
	struct hmm_list crcw;		/* writes to sum */
	unsigned crc_pending;		/* on crcq or being done */
	int crc_stop, crc_started;

	/* the device (dev.h) */
	const struct hmm_dev_ops *dev;
	void *dev_priv;
	uint64_t dev_gran;		/* device allocation unit */

	/* pages of dropped host chunks kept for the next read (recycle.c) */
	struct hmm_spare {
		char *map, *base;	/* the range; base 2 MiB-aligned */
		uint64_t map_len;
		unsigned cap, n;	/* slots; slots [0, n) hold pages */
		int failed;		/* the range could not be made */
		uint64_t parked, reused;	/* chunks, since open */
	} spare;

	/* reclaimers (budget.h), registered at hmm_ctx_new */
	const struct hmm_reclaimer *reclaimers[HMM_RECLAIMERS];
	unsigned nreclaimers;
	unsigned in_reclaim;		/* hmm_budget_room is asking them */

	struct hmm_sched sched;
	struct hmm_list wantq;		/* chunks whose prefetch waits */
	int in_retry;			/* walking wantq */

	/* regions (region_int.h), under h->lock */
	struct hmm_list regions;

	/*
	 * DLPack exports alive (dlpack.c).  Own lock: an export's deleter
	 * may run on any thread, during or after hmm_close, which must not
	 * free the context under it.  hmm_close sets dl_closed; whichever of
	 * it and the deleters finds dl_closed with dl_live 0 tears the
	 * context down, exactly once, and nothing touches h after that.
	 */
	pthread_mutex_t dl_lock;
	uint64_t dl_live;
	int dl_closed;

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
/* Keep the first asynchronous error for hmm_wait (h->lock held). */
void hmm_async_error(struct hmm *h, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Take it (h->lock held): 0, or the error with its detail made this
 * thread's, and forgotten. */
int hmm_async_take(struct hmm *h);

/* ---- dlpack.c --------------------------------------------------------- */
/* hmm_close's half of the deferral: 1 = no export alive, close h now;
 * 0 = the last export's deleter will. */
int hmm_dlpack_close(struct hmm *h);

/* ---- iothread.c -------------------------------------------------------- */
int hmm_iot_start(struct hmm *h, const struct hmm_config *cfg);
void hmm_iot_stop(struct hmm *h);
void hmm_iot_queue(struct hmm *h, struct hmm_ioreq *r);	/* h->lock held */
/* Queue r and wait for it (h->lock held; dropped while waiting). */
int hmm_iot_sync(struct hmm *h, struct hmm_ioreq *r);

/* ---- crcthread.c ------------------------------------------------------- */
int hmm_crc_start(struct hmm *h);
void hmm_crc_stop(struct hmm *h);
void hmm_crc_queue(struct hmm *h, struct hmm_ioreq *r);	/* h->lock held */
void hmm_crc_hurry(struct hmm *h, struct hmm_ioreq *r);	/* h->lock held */

/* ---- policy.c ---------------------------------------------------------- */
extern const struct hmm_reclaimer hmm_policy_reclaimer;
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
int hmm_persist_load(struct hmm *h, const char *path);
int hmm_persist_save(struct hmm *h);	/* h->lock held */
void hmm_persist_fini(struct hmm *h);

/* ---- tensor.c ---------------------------------------------------------- */
/* A tensor name, in both modes (new and open, api.c): 1..63 bytes, no
 * control byte (< 0x20, 0x7f: names show in stats, traces and logs, as
 * hmmd's wire check says too); -EINVAL with a detail from fn. */
int hmm_tensor_name_check(const char *fn, const char *name);
/* Check a new tensor's name, dtype and shape; *bytes = its size. */
int hmm_tensor_check(struct hmm *h, const char *name, uint32_t dtype,
		     unsigned ndim, const int64_t *shape, uint64_t *bytes);
/* Create a tensor of bytes (checked); id < 0 = a new id; stored = per-chunk
 * bitmap or NULL. */
int hmm_tensor_create(struct hmm *h, const char *name, uint32_t dtype,
		      unsigned ndim, const int64_t *shape, uint64_t bytes,
		      int64_t id, const uint8_t *stored,
		      struct hmm_tensor **out);
void hmm_tensor_destroy(struct hmm_tensor *t, int forget);
int hmm_tensor_shell(struct hmm *h, const char *name, uint32_t dtype,
		     unsigned ndim, const int64_t *shape, uint64_t bytes,
		     void *priv, struct hmm_tensor **out);
void hmm_tensor_shell_free(struct hmm_tensor *t);
/* The live tensor of id, or NULL (h->lock held). */
struct hmm_tensor *hmm_tensor_by_id(const struct hmm *h, uint32_t id);
/* Tensor ids are below this: the store's table refuses more (persist.c) */
#define HMM_TENSOR_IDS	0x80000000u
/* What h can ever hold per tier: the store's data area, the host and
 * device budgets (0 for a tier it lacks). */
void hmm_capacity(struct hmm *h, uint64_t cap[HMM_TIERS]);
/* Whether a new (fresh) tensor or region of bytes, with a table of table
 * bytes allocated at creation (tab names it), fits cap[] (whose: "this
 * context", or "hmmd" whose capacities they are) and the machine's
 * memory; 0 or -ENOMEM with the detail naming what. */
int hmm_fits(const char *what, const char *whose, uint64_t bytes,
	     const uint64_t cap[HMM_TIERS], int fresh, const char *tab,
	     uint64_t table);
/* Whose capacities h's are, for hmm_fits: hmmd's engine is "hmmd". */
const char *hmm_whose(const struct hmm *h);

/* ---- the embedded engine's ops (backend.h; tensor.c, map.c, persist.c,
 * stats.c) ---------------------------------------------------------------- */
int hmm_engine_tensor_new(struct hmm *h, const char *name, uint32_t dtype,
			  unsigned ndim, const int64_t *shape,
			  struct hmm_tensor **out);
int hmm_engine_tensor_open(struct hmm *h, const char *name,
			   struct hmm_tensor **out);
int hmm_engine_tensor_free(struct hmm_tensor *t);
int hmm_engine_residency(struct hmm_tensor *t, uint64_t bytes[]);
int hmm_engine_host_fd(struct hmm_tensor *t, int *fd, uint64_t *off);
int hmm_engine_map(struct hmm_tensor *t, uint64_t off, uint64_t len,
		   int tier, unsigned access, void **ptr);
int hmm_engine_unmap(struct hmm_tensor *t, void *ptr);
int hmm_engine_prefetch(struct hmm_tensor *t, uint64_t off, uint64_t len,
			int tier);
int hmm_engine_evict(struct hmm_tensor *t, uint64_t off, uint64_t len,
		     int tier);
int hmm_engine_writeback(struct hmm_tensor *t, uint64_t off, uint64_t len);
int hmm_engine_wait(struct hmm *h, struct hmm_tensor *t);
int hmm_engine_flush(struct hmm *h);
int hmm_engine_stats(struct hmm *h, struct hmm_stats *st);
/* This context's own counters of tier i (h->lock held). */
void hmm_stats_tier(struct hmm *h, int i, struct hmm_tier_stats *ts);

/* ---- region*.c --------------------------------------------------------- */
void hmm_region_fini(struct hmm *h);
/* Evicts region blocks for room on the host (region_evict.c). */
extern const struct hmm_reclaimer hmm_region_reclaimer;
/* The embedded engine's region_back: evicted blocks go to the store. */
int hmm_region_store_back(struct hmm *h, struct hmm_region *r);
/* The embedded engine's region_whole: on the uvm device a region is
 * managed memory hmm prefetches (region_uvm.c); -ENODEV elsewhere. */
int hmm_region_uvm_whole(struct hmm *h, struct hmm_region *r);
/* Set st's region counters to this context's (takes h->lock). */
void hmm_region_stats(struct hmm *h, struct hmm_stats *st);

#endif /* HMM_CTX_H */
