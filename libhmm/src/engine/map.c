// SPDX-License-Identifier: MIT
/*
 * map.c — the embedded engine's map/unmap, prefetch/evict/writeback,
 * wait and flush (backend.h; api.c has checked the arguments): the calls that
 * drive the chunk state machine (chunk.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chunk.h"
#include "err.h"
#include "region_int.h"

static const char *const tier_names[] = { "device", "host", "store" };

static void map_unpin(struct hmm *h, struct hmm_tensor *t, uint32_t first,
		      uint32_t last, int tier)
{
	uint32_t i;
	int freed = 0;

	for (i = first; i <= last; i++) {
		struct hmm_chunk *c = &t->chunks[i];

		if (--c->pins[tier] == 0) {
			h->tier[tier].pinned -= hmm_chunk_cost(c, tier);
			freed = 1;
		}
	}
	if (freed)
		hmm_policy_unpinned(h);
	pthread_cond_broadcast(&h->cond);
}

/*
 * access for chunk i of a map of [off, +len): DISCARD skips the read-in
 * only where the range covers the chunk whole (up to the tensor's end);
 * a partial chunk is read in first, so its other bytes stay.
 */
static unsigned chunk_access(struct hmm *h, struct hmm_tensor *t, uint32_t i,
			     uint64_t off, uint64_t len, unsigned access)
{
	uint64_t c0 = (uint64_t)i * h->chunk_bytes;
	uint64_t c1 = c0 + h->chunk_bytes < t->bytes ? c0 + h->chunk_bytes :
		      t->bytes;

	if ((access & HMM_DISCARD) && (off > c0 || off + len < c1))
		return (access & ~HMM_DISCARD) | HMM_READ;
	return access;
}

static void map_pin(struct hmm *h, struct hmm_tensor *t, uint64_t off,
		    uint64_t len, int tier, unsigned access0)
{
	uint32_t i, first = off / h->chunk_bytes;
	uint32_t last = (off + len - 1) / h->chunk_bytes;

	for (i = first; i <= last; i++) {
		struct hmm_chunk *c = &t->chunks[i];
		unsigned access = chunk_access(h, t, i, off, len, access0);

		if (c->pins[tier]++ == 0)
			h->tier[tier].pinned += hmm_chunk_cost(c, tier);
		if (!c->busy)
			c->err = 0;	/* a stale failure is not ours */
		if ((access & HMM_DISCARD) && !c->zero &&
		    !(c->valid & TB(tier)))
			h->st.discard_skips++;	/* a read-in saved */
		if (c->prefetched && (c->valid & TB(tier)))
			h->st.prefetch_hits++;
		c->prefetched = 0;
		if ((c->valid & TB(tier)) && (c->res & TB(tier)))
			h->tier[tier].st.hits++;
		else
			h->tier[tier].st.misses++;
		hmm_policy_touch(h, c, tier);
		hmm_policy_access(h, c, tier);
	}
}

struct map_range {
	struct hmm_tensor *t;
	uint64_t off, len;
	int tier;
	unsigned access;
	uint64_t need;		/* its chunks' bytes at tier */
};

/*
 * One step of every chunk of a map (an admission's step, budget.h).
 * While any chunk has a copy in flight the map is HMM_AGAIN, even when
 * others starve: the copy ends, and often frees the room they wait for
 * (a device map stages chunk after chunk through the host), so wait_ms
 * counts only once nothing of the map moves.  Starved first, a device
 * map through a small host budget failed whenever a copy outlasted
 * wait_ms, with no tier full of pinned chunks.
 */
static int map_step(struct hmm *h, void *arg)
{
	struct map_range *m = arg;
	uint32_t i = m->off / h->chunk_bytes;
	uint32_t last = (m->off + m->len - 1) / h->chunk_bytes;
	uintptr_t e = (uintptr_t)h->copy_err_chunk;
	int again = 0, starved = 0;

	/* the failed copy whose detail is kept (the store's path, offset
	   and why), when it is one of this map's: its error first, so that
	   the map of several failed chunks names the store's reason (the
	   slot holds the latest failure, often not the first chunk's) */
	if (e >= (uintptr_t)&m->t->chunks[i] &&
	    e <= (uintptr_t)&m->t->chunks[last] &&
	    h->copy_err_chunk->err && !h->copy_err_chunk->busy)
		return hmm_chunk_step(h, h->copy_err_chunk, m->tier,
				      HMM_READ, HMM_STEP_MAP, HMM_NO_LIMIT);
	for (; i <= last; i++) {
		int r = hmm_chunk_step(h, &m->t->chunks[i], m->tier,
				       chunk_access(h, m->t, i, m->off, m->len,
						    m->access),
				       HMM_STEP_MAP, HMM_NO_LIMIT);

		if (r < 0)
			return r;
		if (r == HMM_STARVED)
			starved = 1;
		else if (r != HMM_READY)
			again = 1;
	}
	return again ? HMM_AGAIN : starved ? HMM_STARVED : HMM_READY;
}

/* Step every chunk of [off, +len) until all are ready, through the
 * admission (budget.h: -ENOMEM once starved for wait_ms); h->lock held. */
static int map_wait(struct hmm *h, struct map_range *m)
{
	struct hmm_tensor *t = m->t;
	int tier = m->tier;
	uint32_t first = m->off / h->chunk_bytes;
	uint32_t last = (m->off + m->len - 1) / h->chunk_bytes;
	struct hmm_admit a = {
		.tier = tier, .wait_s = h->cfg.wait_ms / 1000.0,
		.step = map_step, .arg = m,
	};
	double t0 = hmm_now();
	int r = hmm_budget_admit(h, &a);

	/* a map that waited, and then failed, stalled all the same */
	if (a.waited_s > 0) {
		h->tier[tier].st.stall_s += a.waited_s;
		hmm_trace_event(h, "stall", tier == HMM_TIER_HOST ?
				"map wait host" : "map wait device", t->name,
				first, (uint64_t)(last - first + 1) *
				h->chunk_bytes, t0, t0 + a.waited_s, 0);
	}
	if (a.starved)
		return hmm_err(-ENOMEM, "tensor %s: %s tier full for %u ms: "
			       "the map needs %llu bytes (budget %llu, used "
			       "%llu, pinned %llu bytes incl. this map's"
			       "%s%s%s)", t->name, tier_names[tier],
			       h->cfg.wait_ms, (unsigned long long)m->need,
			       (unsigned long long)h->tier[tier].cap,
			       (unsigned long long)h->tier[tier].used,
			       (unsigned long long)h->tier[tier].pinned,
			       h->store ? "" : "; no store tier to evict "
			       "dirty chunks to", h->async_err ?
			       "; a copy down failed: " : "",
			       h->async_err ? h->async_detail : "");
	return r < 0 ? r : 0;
}

/*
 * A host map next to userfaultfd regions: its pins may not take the two
 * blocks the regions keep (hmm_region_keep), or a region fault could
 * wait for ever, or two blocks of one access evict each other for ever.
 * An admission's step (budget.h) run before the map pins anything:
 * -ENOMEM at once when the map alone is too large, HMM_STARVED while
 * others' pins are in the way (the map waits for their unmaps, then
 * fails after wait_ms as for a tier full of pinned chunks).
 */
static int keep_step(struct hmm *h, void *arg)
{
	struct map_range *m = arg;
	const struct hmm_tier *T = &h->tier[HMM_TIER_HOST];
	uint32_t i = m->off / h->chunk_bytes;
	uint32_t last = (m->off + m->len - 1) / h->chunk_bytes;
	uint64_t keep = hmm_region_keep(h), more = 0;

	if (!keep)
		return HMM_READY;
	if (m->need + keep > T->cap)
		return hmm_err(-ENOMEM, "hmm_map: tensor %s: %llu bytes do not "
			       "fit the host budget (%llu) less the %llu "
			       "bytes the context's regions keep free of "
			       "pins (two blocks)", m->t->name,
			       (unsigned long long)m->need,
			       (unsigned long long)T->cap,
			       (unsigned long long)keep);
	for (; i <= last; i++)		/* what the map would pin anew */
		if (!m->t->chunks[i].pins[m->tier])
			more += hmm_chunk_cost(&m->t->chunks[i], m->tier);
	return T->pinned + more + keep <= T->cap ? HMM_READY : HMM_STARVED;
}

/* Wait until the map may pin next to the regions (h->lock held). */
static int map_keep(struct hmm *h, struct map_range *m)
{
	struct hmm_admit a = {
		.tier = HMM_TIER_HOST, .wait_s = h->cfg.wait_ms / 1000.0,
		.step = keep_step, .arg = m,
	};
	int r = hmm_budget_admit(h, &a);

	if (a.starved)
		return hmm_err(-ENOMEM, "tensor %s: pinned chunks left the "
			       "regions less than %llu bytes of the host "
			       "budget for %u ms (budget %llu, pinned %llu "
			       "bytes)", m->t->name,
			       (unsigned long long)hmm_region_keep(h),
			       h->cfg.wait_ms,
			       (unsigned long long)h->tier[HMM_TIER_HOST].cap,
			       (unsigned long long)
			       h->tier[HMM_TIER_HOST].pinned);
	h->tier[HMM_TIER_HOST].st.stall_s += a.waited_s;
	return r;
}

/* A map's access as the engine keeps it: DISCARD writes. */
static unsigned map_access(unsigned access)
{
	return access & HMM_DISCARD ? access | HMM_WRITE : access;
}

int hmm_engine_map(struct hmm_tensor *t, uint64_t off, uint64_t len,
		   int tier, unsigned access, void **ptr)
{
	struct hmm_mapping *m;
	uint32_t first, last, i;
	struct hmm *h;
	struct map_range mr = { t, off, len, tier, 0, 0 };
	int r;

	h = t->h;
	access = map_access(access);
	mr.access = access;
	first = off / h->chunk_bytes;
	last = (off + len - 1) / h->chunk_bytes;
	for (i = first; i <= last; i++)
		mr.need += hmm_chunk_cost(&t->chunks[i], tier);
	if (mr.need > h->tier[tier].cap)
		return hmm_err(-ENOMEM, "hmm_map: tensor %s: %llu bytes do not "
			       "fit the %s budget (%llu)", t->name,
			       (unsigned long long)mr.need, tier_names[tier],
			       (unsigned long long)h->tier[tier].cap);
	m = calloc(1, sizeof(*m));
	if (!m)
		return hmm_err(-ENOMEM, "hmm_map: tensor %s: no memory",
			       t->name);
	m->off = off;
	m->len = len;
	m->tier = tier;
	m->access = access;
	m->ptr = tier == HMM_TIER_HOST ? (void *)(t->host + off) :
		 (void *)(uintptr_t)(t->dev + off);

	pthread_mutex_lock(&h->lock);
	r = tier == HMM_TIER_HOST ? map_keep(h, &mr) : 0;
	if (r < 0)
		goto out_unlock;
	map_pin(h, t, off, len, tier, access);
	r = map_wait(h, &mr);
	if (r < 0) {
		map_unpin(h, t, first, last, tier);
		goto out_unlock;
	}
	if (access & HMM_WRITE)
		for (i = first; i <= last; i++) {
			hmm_chunk_written(h, &t->chunks[i], tier);
			t->chunks[i].wpins++;
		}
	hmm_list_add_tail(&t->maps, &m->link);
	pthread_mutex_unlock(&h->lock);
	*ptr = m->ptr;
	return 0;

out_unlock:
	pthread_mutex_unlock(&h->lock);
	free(m);
	return r;
}

/*
 * The mapping of t at ptr that an unmap ends (h->lock held).  Two maps
 * of one tier at one offset share a pointer.  With len (hmmd, which
 * knows which of its maps it ends) the one of that length and access;
 * else the one that pins least: the shortest, a read before a write,
 * the newest of equals.  So until the caller's other unmap, the pins
 * left cover whichever of them it meant (ending the newest dropped a
 * longer map's pins, and bytes written through it after an eviction
 * were lost; ending a write map first left later writes unseen).
 */
static struct hmm_mapping *map_find(struct hmm_tensor *t, void *ptr,
				    uint64_t len, unsigned access)
{
	struct hmm_mapping *m = NULL;
	struct hmm_list *p;

	for (p = t->maps.prev; p != &t->maps; p = p->prev) {
		struct hmm_mapping *x = hmm_container_of(p, struct hmm_mapping,
							 link);

		if (x->ptr != ptr)
			continue;
		if (len) {
			if (x->len == len && x->access == access)
				return x;
		} else if (!m || x->len < m->len ||
			   (x->len == m->len && (m->access & HMM_WRITE) &&
			    !(x->access & HMM_WRITE))) {
			m = x;
		}
	}
	return m;
}

int hmm_engine_unmap(struct hmm_tensor *t, void *ptr)
{
	return hmm_engine_unmap_exact(t, ptr, 0, 0);
}

int hmm_engine_unmap_exact(struct hmm_tensor *t, void *ptr, uint64_t len,
			   unsigned access)
{
	struct hmm_mapping *m;
	struct hmm *h;
	uint32_t i, first, last;

	h = t->h;
	access = map_access(access);	/* as hmm_engine_map recorded it */
	pthread_mutex_lock(&h->lock);
	m = map_find(t, ptr, len, access);
	if (!m) {
		pthread_mutex_unlock(&h->lock);
		return hmm_err(-EINVAL, "hmm_unmap: tensor %s: %p is not "
			       "mapped (unmapped twice?)", t->name, ptr);
	}
	hmm_list_del(&m->link);
	first = m->off / h->chunk_bytes;
	last = (m->off + m->len - 1) / h->chunk_bytes;
	/* bytes written through the mapping after a flush are dirty again */
	if (m->access & HMM_WRITE)
		for (i = first; i <= last; i++) {
			hmm_chunk_written(h, &t->chunks[i], m->tier);
			t->chunks[i].wpins--;
		}
	map_unpin(h, t, first, last, m->tier);
	pthread_mutex_unlock(&h->lock);
	free(m);
	return 0;
}

/* fn on every chunk of [off, off + len) of t, with h->lock held. */
static void for_range(struct hmm_tensor *t, uint64_t off, uint64_t len,
		      int tier, void (*fn)(struct hmm *h, struct hmm_chunk *c,
					   int tier))
{
	struct hmm *h = t->h;
	uint32_t i, last = (off + len - 1) / h->chunk_bytes;

	pthread_mutex_lock(&h->lock);
	for (i = off / h->chunk_bytes; i <= last; i++)
		fn(h, &t->chunks[i], tier);
	pthread_mutex_unlock(&h->lock);
}

static void prefetch_one(struct hmm *h, struct hmm_chunk *c, int tier)
{
	if (c->want || ((c->valid & TB(tier)) && (c->res & TB(tier))))
		return;
	h->st.prefetches++;
	c->prefetched = 1;
	hmm_chunk_want(h, c, tier);
}

int hmm_engine_prefetch(struct hmm_tensor *t, uint64_t off, uint64_t len,
			int tier)
{
	for_range(t, off, len, tier, prefetch_one);
	return 0;
}

static void evict_one(struct hmm *h, struct hmm_chunk *c, int tier)
{
	if (hmm_chunk_evictable(h, c, tier))
		hmm_chunk_evict(h, c, tier);
}

int hmm_engine_evict(struct hmm_tensor *t, uint64_t off, uint64_t len,
		     int tier)
{
	if (tier == HMM_TIER_HOST && !t->h->store)
		return hmm_err(-EINVAL, "hmm_evict: tensor %s: no store tier "
			       "to evict the host copy to", t->name);
	for_range(t, off, len, tier, evict_one);
	return 0;
}

/*
 * Write back, keep resident: a dirty host chunk nobody maps and no copy
 * holds starts its write to the store (hmm_chunk_writeback) and stays
 * at the host, clean once the write lands, so that the policy drops it
 * without I/O when the budget wants the room.  Clean, never-written,
 * pinned, busy and host-less chunks are left as they are.
 */
static void writeback_one(struct hmm *h, struct hmm_chunk *c, int tier)
{
	if (!(c->res & TB(HMM_TIER_HOST)) || !(c->valid & TB(HMM_TIER_HOST)) ||
	    c->busy || c->pins[HMM_TIER_HOST] || c->zero ||
	    (c->valid & TB(HMM_TIER_STORE)))
		return;
	hmm_chunk_writeback(h, c);
}

int hmm_engine_writeback(struct hmm_tensor *t, uint64_t off, uint64_t len)
{
	if (!t->h->store)
		return hmm_err(-ENODEV, "hmm_writeback: tensor %s: no store "
			       "tier (config.store_path is NULL)", t->name);
	for_range(t, off, len, HMM_TIER_HOST, writeback_one);
	return 0;
}

static int tensor_quiet(struct hmm_tensor *t)
{
	uint32_t i;

	if (t->inflight)
		return 0;
	for (i = 0; i < t->nchunks; i++)
		if (t->chunks[i].want)
			return 0;
	return 1;
}

static int all_quiet(struct hmm *h)
{
	uint32_t i;

	if (!hmm_list_empty(&h->wantq))
		return 0;
	for (i = 0; i < h->ntensors; i++)
		if (h->tensors[i]->inflight)
			return 0;
	return 1;
}

int hmm_engine_wait(struct hmm *h, struct hmm_tensor *t)
{
	int r;

	pthread_mutex_lock(&h->lock);
	while (t ? !tensor_quiet(t) : !all_quiet(h))
		pthread_cond_wait(&h->cond, &h->lock);
	r = hmm_async_take(h);
	pthread_mutex_unlock(&h->lock);
	return r;
}

/* One pass over every chunk: start write-backs; 1 while any is pending. */
/*
 * One pass of a flush over every chunk: an admission's step (budget.h).
 * HMM_AGAIN while copies are in flight (they end), HMM_STARVED while
 * the only chunks left cannot move (one only at the device, with the
 * host pinned full: it reaches the store through the host), HMM_READY
 * when all are written; or the first error.
 */
struct flush_state {
	int err;
	const struct hmm_tensor *st;	/* a starved chunk's tensor */
	uint32_t sj;			/* and index */
};

static int flush_step(struct hmm *h, void *arg)
{
	struct flush_state *f = arg;
	int again = 0, starved = 0;
	uint32_t i, j;

	for (i = 0; i < h->ntensors; i++) {
		struct hmm_tensor *t = h->tensors[i];

		for (j = 0; j < t->nchunks; j++) {
			struct hmm_chunk *c = &t->chunks[j];
			int r;

			if (c->nowb == 1)	/* its write failed */
				continue;
			r = hmm_chunk_writeback(h, c);
			if (r < 0 && !f->err)
				f->err = r;
			again |= r == HMM_AGAIN;
			if (r == HMM_STARVED && !starved) {
				starved = 1;
				f->st = t;
				f->sj = j;
			}
		}
	}
	return f->err ? f->err : again ? HMM_AGAIN :
	       starved ? HMM_STARVED : HMM_READY;
}

/* Write every dirty chunk (h->lock held): 0, or the first error; a
 * chunk starved of host room for wait_ms is -ENOMEM naming it. */
static int flush_chunks(struct hmm *h)
{
	struct flush_state f = { 0 };
	struct hmm_admit a = {
		.tier = HMM_TIER_HOST, .wait_s = h->cfg.wait_ms / 1000.0,
		.step = flush_step, .arg = &f,
	};
	const struct hmm_tier *T = &h->tier[HMM_TIER_HOST];
	int r = hmm_budget_admit(h, &a);

	if (a.starved)
		return hmm_err(-ENOMEM, "hmm_flush: tensor %s chunk %u is "
			       "only at the device and reaches the store "
			       "through the host, whose budget pinned maps "
			       "held full for %u ms (budget %llu, pinned %llu "
			       "bytes); nothing is lost: unmap and flush "
			       "again", f.st->name, f.sj, h->cfg.wait_ms,
			       (unsigned long long)T->cap,
			       (unsigned long long)T->pinned);
	return r;
}

/* A flush tries again the chunks whose write-back failed before. */
static void flush_retry_failed(struct hmm *h)
{
	uint32_t i, j;

	for (i = 0; i < h->ntensors; i++)
		for (j = 0; j < h->tensors[i]->nchunks; j++)
			if (h->tensors[i]->chunks[j].nowb == 1)
				h->tensors[i]->chunks[j].nowb = 0;
}

/*
 * The engine sees bytes written through a mapping only at its unmap:
 * a chunk that a flush wrote while it was mapped for writing stayed
 * valid in the store, and the next flush skipped it and saved the old
 * bytes.  So each chunk under a live write mapping is dirty again at
 * its tier, as the unmap would make it, and is written as it is.
 */
static void flush_dirty_mapped(struct hmm *h)
{
	uint32_t i, j, last;
	struct hmm_list *p;

	for (i = 0; i < h->ntensors; i++) {
		struct hmm_tensor *t = h->tensors[i];

		for (p = t->maps.next; p != &t->maps; p = p->next) {
			struct hmm_mapping *m;

			m = hmm_container_of(p, struct hmm_mapping, link);
			if (!(m->access & HMM_WRITE))
				continue;
			last = (m->off + m->len - 1) / h->chunk_bytes;
			for (j = m->off / h->chunk_bytes; j <= last; j++)
				hmm_chunk_written(h, &t->chunks[j], m->tier);
		}
	}
}

/*
 * With async_by_tensor (hmmd) a write's error is its tensor's, not this
 * flush's: a chunk whose write failed since flush_retry_failed still
 * keeps the table from being saved, named by count alone (the tensors'
 * owners get the names).  h->lock held.
 */
static int flush_failed_writes(struct hmm *h)
{
	uint32_t i, j, n = 0;

	for (i = 0; i < h->ntensors; i++)
		for (j = 0; j < h->tensors[i]->nchunks; j++)
			n += h->tensors[i]->chunks[j].nowb == 1;
	if (!n)
		return 0;
	return hmm_err(-EIO, "hmm_flush: the store write of %u chunk(s) "
		       "failed; nothing was committed (each tensor's error "
		       "goes to its next hmm_wait or hmm_flush)", n);
}

int hmm_engine_flush(struct hmm *h)
{
	struct hmm_ioreq req;
	double t0 = hmm_now();
	int err = 0, r;

	if (!h->store)
		return hmm_err(-ENODEV, "hmm_flush: no store tier "
			       "(config.store_path is NULL)");
	pthread_mutex_lock(&h->lock);
	flush_retry_failed(h);
	flush_dirty_mapped(h);
	err = flush_chunks(h);
	while (!all_quiet(h))
		pthread_cond_wait(&h->cond, &h->lock);
	if (!err)
		err = hmm_async_take(h);
	if (!err && h->async_by_tensor)
		err = flush_failed_writes(h);
	if (!err)
		err = hmm_persist_save(h);
	if (!err) {
		memset(&req, 0, sizeof(req));
		req.io.op = HMM_IOREQ_FLUSH;
		r = hmm_iot_sync(h, &req);
		if (r < 0)
			err = hmm_async_take(h);
	}
	hmm_trace_event(h, "io", "flush", "", 0, 0, t0, hmm_now(), 1);
	pthread_mutex_unlock(&h->lock);
	if (err && !*hmm_last_error())
		hmm_err(err, "hmm_flush: %s", hmm_strerror(err));
	return err;
}
