// SPDX-License-Identifier: MIT
/*
 * chunk.c — the chunk state machine (see chunk.h): bring a chunk to a
 * tier, evict it from one, and the completions of the copies that do so.
 * Every function here runs with h->lock held; completions take it.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>

#include "chunk.h"
#include "dev.h"
#include "err.h"

static void *chunk_host(struct hmm_chunk *c)
{
	return c->t->host + hmm_chunk_off(c);
}

static uint64_t chunk_dev(struct hmm_chunk *c)
{
	return c->t->dev + hmm_chunk_off(c);
}

static const char *const io_names[] = {
	"", "store read", "store write", "host to device", "device to host",
};

/* ---- resident memory --------------------------------------------------- */

void hmm_chunk_forget(struct hmm *h, struct hmm_chunk *c, int tier,
		      const char *what)
{
	c->res &= ~TB(tier);
	c->valid &= ~TB(tier);
	hmm_list_del(&c->lru[tier]);
	hmm_budget_give(h, tier, hmm_chunk_cost(c, tier));
	h->tier[tier].st.evictions++;
	hmm_trace_event(h, "evict", what, c->t->name, c->idx, c->alloc,
			hmm_now(), hmm_now(), 3);
	pthread_cond_broadcast(&h->cond);
}

/* Release c's memory at tier; on the host its pages may be parked in a
 * spare slot instead (recycle.c), still counted as used. */
void hmm_chunk_drop(struct hmm *h, struct hmm_chunk *c, int tier)
{
	int spared = 0;

	if (tier == HMM_TIER_HOST && c->t->host_fd >= 0)	/* tensor.c */
		fallocate(c->t->host_fd, FALLOC_FL_PUNCH_HOLE |
			  FALLOC_FL_KEEP_SIZE, hmm_chunk_off(c), c->alloc);
	else if (tier == HMM_TIER_HOST && !(spared = hmm_spare_put(h, c)))
		madvise(chunk_host(c), c->alloc, MADV_DONTNEED);
	else if (tier != HMM_TIER_HOST)	/* the host's copy, if any, counts */
		(h->dev->discard ? h->dev->discard : h->dev->depopulate)
			(h->dev_priv, chunk_dev(c), c->alloc);
	hmm_chunk_forget(h, c, tier, spared ? "spare host" :
			 tier == HMM_TIER_HOST ? "drop host" : "drop device");
	if (spared)	/* the slot holds what c held */
		hmm_budget_take(h, HMM_TIER_HOST,
				hmm_chunk_cost(c, HMM_TIER_HOST));
}

/* Make c resident at tier; fill: a copy will overwrite all of it. */
static int chunk_res(struct hmm *h, struct hmm_chunk *c, int tier,
		     uint64_t limit, int fill)
{
	int r;

	if (c->res & TB(tier))
		return HMM_READY;
	if (tier == HMM_TIER_HOST && fill && hmm_spare_get(h, c))
		goto taken;	/* the slot's bytes, counted already */
	if (tier == HMM_TIER_HOST && fill)
		hmm_recycle_victim(h, c, limit);
	r = hmm_budget_room(h, tier, hmm_chunk_cost(c, tier), limit);
	if (r != HMM_READY)
		return r;
	if (tier == HMM_TIER_DEVICE) {
		/* fill: an H2D copy, queued behind it on the device's stream,
		 * overwrites it all.  Not for a DISCARD map, whose pointer
		 * the caller may write at once: a device's blank populate may
		 * still be in flight, and a write racing it may be lost. */
		r = (fill && h->dev->populate_blank ? h->dev->populate_blank :
		     h->dev->populate)(h->dev_priv, chunk_dev(c), c->alloc);
		if (r < 0)
			return hmm_err(r, "tensor %s chunk %u: device "
				       "memory: %s", c->t->name, c->idx,
				       hmm_last_error());
	}
	hmm_budget_take(h, tier, hmm_chunk_cost(c, tier));
taken:
	c->res |= TB(tier);
	c->valid &= ~TB(tier);
	hmm_list_add_tail(&h->tier[tier].lru, &c->lru[tier]);
	return HMM_READY;
}

/* ---- copies ------------------------------------------------------------ */


/* Busy time of a link (store, device): the union of its copies' spans. */
static void io_busy(struct hmm *h, int tier, int d, double now)
{
	struct hmm_tier *T = &h->tier[tier];

	if (d > 0 && T->active++ == 0)
		T->busy_since = now;
	if (d < 0 && --T->active == 0)
		T->st.io_s += now - T->busy_since;
}

/*
 * A copy down failed, nobody waiting for it: the error for the next
 * hmm_wait/hmm_flush, the context's, or with async_by_tensor (hmmd)
 * its tensor's first, so that hmmd gives it to the tensor's client
 * alone (hmm_tensor_async_take).  h->lock held.
 */
static void chunk_async_error(struct hmm *h, struct hmm_chunk *c, int err,
			      const char *what)
{
	struct hmm_tensor *t = c->t;
	const char *why = *hmm_last_error() ? hmm_last_error() :
			  strerror(-err);

	if (!h->async_by_tensor) {
		hmm_async_error(h, err, "tensor %s chunk %u: %s failed: %s",
				t->name, c->idx, what, why);
		return;
	}
	if (t->async_err)
		return;
	t->async_err = err;
	snprintf(t->async_detail, sizeof(t->async_detail),
		 "tensor %s chunk %u: %s failed: %s", t->name, c->idx, what,
		 why);
}

void hmm_engine_async_by_tensor(struct hmm *h)
{
	pthread_mutex_lock(&h->lock);
	h->async_by_tensor = 1;
	pthread_mutex_unlock(&h->lock);
}

int hmm_tensor_async_take(struct hmm_tensor *t, int peek)
{
	struct hmm *h = t->h;
	int r;

	pthread_mutex_lock(&h->lock);
	r = t->async_err;
	if (r)
		hmm_err(r, "%s", t->async_detail);
	if (!peek)
		t->async_err = 0;
	pthread_mutex_unlock(&h->lock);
	return r;
}

/* The end of any copy, h->lock held. */
static void chunk_copy_end(struct hmm *h, struct hmm_chunk *c, int err)
{
	int io = c->busy;
	int to = (io == CH_IO_READ || io == CH_IO_D2H) ? HMM_TIER_HOST :
		 io == CH_IO_H2D ? HMM_TIER_DEVICE : HMM_TIER_STORE;
	int from = io == CH_IO_READ ? HMM_TIER_STORE :
		   io == CH_IO_D2H ? HMM_TIER_DEVICE : HMM_TIER_HOST;
	int evict = io == CH_IO_WRITE ? HMM_TIER_HOST : HMM_TIER_DEVICE;
	double t1 = hmm_now();

	c->busy = CH_IO_NONE;
	c->t->inflight--;
	if (c->evicting) {
		h->tier[evict].pending_free -= hmm_chunk_cost(c, evict);
		c->evicting = 0;
	} else {
		evict = -1;
	}
	if (err) {
		h->st.io_errors++;
		if (io == CH_IO_WRITE || evict >= 0) {
			/* a copy down nobody maps for: the bytes stay where
			   they are valid; hmm_wait and hmm_flush report it */
			if (io == CH_IO_WRITE || ++c->dfail > 1)
				c->nowb = 1;
			chunk_async_error(h, c, err, io_names[io]);
			evict = -1;
		} else {
			c->err = err;	/* for the map waiting on it */
			h->copy_err_chunk = c;	/* the copier's detail */
			snprintf(h->copy_detail, sizeof(h->copy_detail), "%s",
				 hmm_last_error());
			/* a prefetch's (not a failed map's, which said
			   so): no map pins it to be told, so the next
			   hmm_wait / hmm_flush is (libhmm(3)) */
			if (c->prefetched && !c->pins[HMM_TIER_HOST] &&
			    !c->pins[HMM_TIER_DEVICE])
				chunk_async_error(h, c, err, io_names[io]);
		}
	} else if (c->copy_gen != c->gen) {
		/* written while the copy ran: its bytes are stale */
		if (io == CH_IO_WRITE)
			c->stored = 1;
		evict = -1;
	} else {
		c->valid |= TB(to);
		if (io == CH_IO_D2H)
			c->dfail = 0;
		if (io == CH_IO_WRITE) {
			c->nowb = 0;
			c->stored = 1;
		}
		h->tier[to].st.bytes_in += c->alloc;
		h->tier[from].st.bytes_out += c->alloc;
		h->tier[to].st.io_ops++;
		h->tier[from].st.io_ops++;
	}
	io_busy(h, io == CH_IO_READ || io == CH_IO_WRITE ? HMM_TIER_STORE :
		HMM_TIER_DEVICE, -1, t1);
	hmm_trace_event(h, "io", io_names[io], c->t->name, c->idx, c->alloc,
			c->t0, t1,
			io == CH_IO_READ || io == CH_IO_WRITE ? 1 : 2);
	if (evict >= 0 && !err && (c->res & TB(evict)) &&
	    !c->pins[evict] && (c->zero || (c->valid & ~TB(evict))))
		hmm_chunk_drop(h, c, evict);
	hmm_chunk_want_retry(h);
	pthread_cond_broadcast(&h->cond);
}

static void chunk_store_done(struct hmm_ioreq *r)
{
	struct hmm_chunk *c = hmm_container_of(r, struct hmm_chunk, req);
	struct hmm *h = r->h;

	pthread_mutex_lock(&h->lock);
	chunk_copy_end(h, c, r->io.result);
	pthread_mutex_unlock(&h->lock);
}

static void chunk_dev_done(void *arg, int err)
{
	struct hmm_chunk *c = arg;
	struct hmm *h = c->t->h;

	pthread_mutex_lock(&h->lock);
	chunk_copy_end(h, c, err);
	pthread_mutex_unlock(&h->lock);
}

static void chunk_copy_start(struct hmm *h, struct hmm_chunk *c, int io,
			     int evict)
{
	int r;

	c->busy = io;
	c->t->inflight++;
	c->t0 = hmm_now();
	c->copy_gen = c->gen;
	io_busy(h, io == CH_IO_READ || io == CH_IO_WRITE ? HMM_TIER_STORE :
		HMM_TIER_DEVICE, 1, c->t0);
	if (evict >= 0) {
		c->evicting = TB(evict);
		h->tier[evict].pending_free += hmm_chunk_cost(c, evict);
	}
	if (io == CH_IO_READ || io == CH_IO_WRITE) {
		memset(&c->req.io, 0, sizeof(c->req.io));
		c->req.io.op = io == CH_IO_READ ? HMM_IO_READ : HMM_IO_WRITE;
		c->req.io.len = c->alloc;
		c->req.io.key = hmm_chunk_key(c);
		c->req.io.buf = chunk_host(c);
		c->req.h = h;
		c->req.done = chunk_store_done;
		if (io == CH_IO_WRITE) {	/* summed first (crcthread.c) */
			hmm_crc_queue(h, &c->req);
			return;
		}
		c->req.io.flags = HMM_IOF_CRC_LATER;	/* checked there */
		hmm_iot_queue(h, &c->req);
		return;
	}
	r = h->dev->copy(h->dev_priv, io == CH_IO_H2D ? HMM_H2D : HMM_D2H,
			 chunk_dev(c), chunk_host(c), c->alloc,
			 chunk_dev_done, c);
	if (r < 0)
		chunk_copy_end(h, c, r);
}

/* ---- bring a chunk to a tier ------------------------------------------- */

static int chunk_host_step(struct hmm *h, struct hmm_chunk *c,
			   unsigned access, uint64_t limit)
{
	int r = chunk_res(h, c, HMM_TIER_HOST, limit,
			  !(access & HMM_DISCARD));

	if (r != HMM_READY)
		return r;
	if (c->valid & TB(HMM_TIER_HOST))
		return HMM_READY;
	if (access & HMM_DISCARD)
		return HMM_READY;
	if (c->zero) {
		memset(chunk_host(c), 0, c->alloc);
		c->valid |= TB(HMM_TIER_HOST);
		return HMM_READY;
	}
	if (c->valid & TB(HMM_TIER_DEVICE)) {
		chunk_copy_start(h, c, CH_IO_D2H, -1);
		return HMM_AGAIN;
	}
	if ((c->valid & TB(HMM_TIER_STORE)) && h->store) {
		chunk_copy_start(h, c, CH_IO_READ, -1);
		return HMM_AGAIN;
	}
	return hmm_err(-EIO, "tensor %s chunk %u: no valid copy in any tier",
		       c->t->name, c->idx);
}

static int chunk_dev_step(struct hmm *h, struct hmm_chunk *c,
			  unsigned access, int mode, uint64_t limit)
{
	int r = chunk_res(h, c, HMM_TIER_DEVICE, limit,
			  !(access & HMM_DISCARD));

	if (r != HMM_READY)
		return r;
	if (c->valid & TB(HMM_TIER_DEVICE))
		return HMM_READY;
	if (access & HMM_DISCARD)
		return HMM_READY;
	r = chunk_host_step(h, c, HMM_READ, limit);
	if (r != HMM_READY)
		return r;
	chunk_copy_start(h, c, CH_IO_H2D, -1);
	return HMM_AGAIN;
}

/*
 * Take one step toward c being resident and valid (or, for DISCARD,
 * resident) at tier.  Returns HMM_READY, HMM_AGAIN (a copy or an
 * eviction is in flight: wait on h->cond and call again), HMM_STARVED
 * (the tier is full and nothing can be evicted), or -errno (detail set).
 * mode HMM_STEP_PREFETCH only evicts chunks used after limit.
 */
int hmm_chunk_step(struct hmm *h, struct hmm_chunk *c, int tier,
		   unsigned access, int mode, uint64_t limit)
{
	if (c->busy) {
		if (mode == HMM_STEP_MAP)
			hmm_crc_hurry(h, &c->req);	/* read, unchecked */
		return HMM_AGAIN;
	}
	if (mode == HMM_STEP_PREFETCH && c->wpins)
		return HMM_STARVED;	/* being written: nothing to fetch */
	if (c->err) {
		int err = c->err, mine = h->copy_err_chunk == c &&
					 h->copy_detail[0];

		c->err = 0;
		if (mine)
			h->copy_err_chunk = NULL;
		return hmm_err(err, "tensor %s chunk %u (offset %llu): copy "
			       "failed: %s", c->t->name, c->idx,
			       (unsigned long long)hmm_chunk_off(c),
			       mine ? h->copy_detail : strerror(-err));
	}
	if (tier == HMM_TIER_HOST)
		return chunk_host_step(h, c, access, limit);
	return chunk_dev_step(h, c, access, mode, limit);
}

/* The range was written at tier: every other copy is stale. */
void hmm_chunk_written(struct hmm *h, struct hmm_chunk *c, int tier)
{
	int other = tier == HMM_TIER_HOST ? HMM_TIER_DEVICE : HMM_TIER_HOST;

	c->valid = TB(tier);
	c->zero = 0;
	c->nowb = c->dfail = 0;
	c->gen++;
	if ((c->res & TB(other)) && !c->pins[other] && !c->busy)
		hmm_chunk_drop(h, c, other);
}

/* ---- eviction ---------------------------------------------------------- */

int hmm_chunk_evictable(struct hmm *h, struct hmm_chunk *c, int tier)
{
	if (!(c->res & TB(tier)) || c->busy || c->pins[tier])
		return 0;
	if (c->zero || (c->valid & ~TB(tier)))
		return 1;
	if (tier == HMM_TIER_HOST)
		return h->store && !c->nowb;
	return !c->nowb;
}

/*
 * Bytes at tier of resident, unpinned chunks with a copy in flight that
 * is not their eviction from tier (that is pending_free): another
 * call's prefetch, evict or write-back.  No victims now, they can go
 * once their copies end: room to come (hmm_budget_room).
 */
uint64_t hmm_chunk_busy_bytes(struct hmm *h, int tier)
{
	struct hmm_list *l = &h->tier[tier].lru, *p;
	uint64_t n = 0;

	for (p = l->next; p != l; p = p->next) {
		struct hmm_chunk *c = hmm_container_of(p, struct hmm_chunk,
						       lru[tier]);

		if (c->busy && !c->pins[tier] && !(c->evicting & TB(tier)))
			n += hmm_chunk_cost(c, tier);
	}
	return n;
}

/*
 * Start moving c out of tier (it must be evictable): a clean copy is
 * dropped at once (HMM_READY); a dirty one is copied down first and
 * dropped when the copy completes (HMM_AGAIN).  HMM_STARVED or -errno
 * when a dirty device chunk finds no room on the host.
 */
int hmm_chunk_evict(struct hmm *h, struct hmm_chunk *c, int tier)
{
	int r;

	if (c->zero || (c->valid & ~TB(tier))) {
		hmm_chunk_drop(h, c, tier);
		return HMM_READY;
	}
	if (tier == HMM_TIER_HOST) {
		chunk_copy_start(h, c, CH_IO_WRITE, HMM_TIER_HOST);
		return HMM_AGAIN;
	}
	r = chunk_res(h, c, HMM_TIER_HOST, HMM_NO_LIMIT, 1);
	if (r != HMM_READY)
		return r;
	chunk_copy_start(h, c, CH_IO_D2H, HMM_TIER_DEVICE);
	return HMM_AGAIN;
}

/* Start a write-back of a dirty host chunk without dropping it (flush). */
int hmm_chunk_writeback(struct hmm *h, struct hmm_chunk *c)
{
	if (c->busy)
		return HMM_AGAIN;
	if (c->zero || (c->valid & TB(HMM_TIER_STORE)))
		return HMM_READY;
	if (!(c->valid & TB(HMM_TIER_HOST))) {
		int r = chunk_host_step(h, c, HMM_READ, HMM_NO_LIMIT);

		return r == HMM_READY ? HMM_AGAIN : r;
	}
	chunk_copy_start(h, c, CH_IO_WRITE, -1);
	return HMM_AGAIN;
}

/* ---- prefetches waiting for space or for a copy ------------------------ */

/*
 * Chunks whose prefetch could not start yet are kept on h->wantq and
 * retried whenever a copy completes.  A chunk leaves the queue when it
 * is ready, failed, or starved.  A new prefetch queues behind those
 * waiting, so room goes to prefetches in the order they were asked: one
 * that took room freed by a drop ahead of the queue left hk_offload's
 * pieces half read, their other chunks a whole I/O round behind pieces
 * needed later (test_tensor_backpressure prefetch_order).
 */
void hmm_chunk_want(struct hmm *h, struct hmm_chunk *c, int tier)
{
	int r;

	c->want |= TB(tier);
	if (!hmm_list_empty(&h->wantq)) {
		if (hmm_list_empty(&c->wlink))
			hmm_list_add_tail(&h->wantq, &c->wlink);
		hmm_chunk_want_retry(h);
		return;
	}
	r = hmm_chunk_step(h, c, tier, HMM_READ, HMM_STEP_PREFETCH,
			   hmm_policy_next_use(h, c));
	if (r == HMM_AGAIN) {
		if (hmm_list_empty(&c->wlink))
			hmm_list_add_tail(&h->wantq, &c->wlink);
		return;
	}
	c->want = 0;
	if (!hmm_list_empty(&c->wlink))
		hmm_list_del(&c->wlink);
}

void hmm_chunk_want_retry(struct hmm *h)
{
	struct hmm_list *p, *n;

	if (h->in_retry)
		return;
	h->in_retry = 1;
	for (p = h->wantq.next; p != &h->wantq; p = n) {
		struct hmm_chunk *c = hmm_container_of(p, struct hmm_chunk,
						       wlink);
		int tier = (c->want & TB(HMM_TIER_DEVICE)) ?
			   HMM_TIER_DEVICE : HMM_TIER_HOST;
		int r;

		n = p->next;
		if (c->busy)
			continue;
		r = hmm_chunk_step(h, c, tier, HMM_READ, HMM_STEP_PREFETCH,
				   hmm_policy_next_use(h, c));
		if (r == HMM_AGAIN)
			continue;	/* a copy or room is on its way */
		c->want = 0;
		hmm_list_del(&c->wlink);
	}
	h->in_retry = 0;
}
