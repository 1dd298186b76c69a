// SPDX-License-Identifier: MIT
/*
 * map.c — hmm_map/hmm_unmap, hmm_prefetch/hmm_evict, hmm_wait, hmm_flush:
 * the public calls that drive the chunk state machine (chunk.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chunk.h"
#include "client.h"
#include "err.h"

static const char *const tier_names[] = { "device", "host", "store" };

/*
 * Shared mode: what hmmd did for one call, as this process saw it: the
 * call's whole time in the trace (config.trace_path / HMM_TRACE), on
 * lane tid; chunk indices in config.chunk_bytes units.  Returns r.
 */
static int remote_traced(struct hmm_tensor *t, const char *cat,
			 const char *what, uint64_t off, uint64_t len,
			 int tid, double t0, int r)
{
	struct hmm *h = t->h;

	hmm_trace_event(h, cat, what, t->name, off / h->cfg.chunk_bytes, len,
			t0, hmm_now(), tid);
	return r;
}

/* Validate a range call; resolves HMM_ALL.  Changes nothing. */
static int range_check(const char *fn, struct hmm_tensor *t, uint64_t off,
		       uint64_t *len, int tier, int mappable)
{
	struct hmm *h;

	if (!t)
		return hmm_err(-EINVAL, "%s: no tensor", fn);
	h = t->h;
	if (tier != HMM_TIER_HOST && tier != HMM_TIER_DEVICE &&
	    (mappable || tier != HMM_TIER_STORE))
		return hmm_err(-EINVAL, "%s: tensor %s: tier %d is not %s",
			       fn, t->name, tier, mappable ?
			       "device or host" : "a tier");
	if (tier == HMM_TIER_DEVICE && !h->dev)
		return hmm_err(-EINVAL, "%s: tensor %s: the device tier has no "
			       "backend (config.device is \"none\")", fn,
			       t->name);
	if (off >= t->bytes)
		return hmm_err(-EINVAL, "%s: tensor %s: offset %llu past the "
			       "end (%llu bytes)", fn, t->name,
			       (unsigned long long)off,
			       (unsigned long long)t->bytes);
	if (*len == HMM_ALL)
		*len = t->bytes - off;
	if (!*len || *len > t->bytes - off)
		return hmm_err(-EINVAL, "%s: tensor %s: range [%llu, +%llu) "
			       "outside [0, %llu)", fn, t->name,
			       (unsigned long long)off,
			       (unsigned long long)*len,
			       (unsigned long long)t->bytes);
	return 0;
}

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

/* Step every chunk of [off, +len) until all are ready; h->lock held. */
static int map_wait(struct hmm *h, struct hmm_tensor *t, uint64_t off,
		    uint64_t len, int tier, unsigned access)
{
	uint32_t first = off / h->chunk_bytes;
	uint32_t last = (off + len - 1) / h->chunk_bytes;
	double t0 = hmm_now(), starved_at = 0;
	int waited = 0;

	for (;;) {
		int all = 1, starved = 0;
		uint32_t i;

		for (i = first; i <= last; i++) {
			int r = hmm_chunk_step(h, &t->chunks[i], tier,
					       chunk_access(h, t, i, off, len,
							    access),
					       HMM_STEP_MAP, HMM_NO_LIMIT);

			if (r < 0)
				return r;
			if (r != HMM_READY)
				all = 0;
			if (r == HMM_STARVED)
				starved = 1;
		}
		if (all)
			break;
		waited = 1;
		if (starved) {
			double now = hmm_now();

			if (!starved_at)
				starved_at = now;
			if (now - starved_at > h->cfg.wait_ms / 1000.0)
				return hmm_err(-ENOMEM, "tensor %s: %s tier "
				    "full for %u ms (budget %llu, used %llu, "
				    "pinned %llu bytes incl. this map's%s%s%s)",
				    t->name, tier_names[tier], h->cfg.wait_ms,
				    (unsigned long long)h->tier[tier].cap,
				    (unsigned long long)h->tier[tier].used,
				    (unsigned long long)h->tier[tier].pinned,
				    h->store ? "" : "; no store tier to "
				    "evict dirty chunks to", h->async_err ?
				    "; a copy down failed: " : "",
				    h->async_err ? h->async_detail : "");
			hmm_cond_wait_until(h, starved_at +
					    h->cfg.wait_ms / 1000.0 + 0.001);
		} else {
			starved_at = 0;
			pthread_cond_wait(&h->cond, &h->lock);
		}
	}
	if (waited) {
		double t1 = hmm_now();

		h->tier[tier].st.stall_s += t1 - t0;
		hmm_trace_event(h, "stall", tier == HMM_TIER_HOST ?
				"map wait host" : "map wait device", t->name,
				first, (uint64_t)(last - first + 1) *
				h->chunk_bytes, t0, t1, 0);
	}
	return 0;
}

int hmm_map(struct hmm_tensor *t, uint64_t off, uint64_t len, int tier,
	    unsigned access, void **ptr)
{
	struct hmm_mapping *m;
	uint32_t first, last, i;
	struct hmm *h;
	uint64_t need = 0;
	int r;

	r = range_check("hmm_map", t, off, &len, tier, 1);
	if (r < 0)
		return r;
	if (!access || (access & ~(HMM_READ | HMM_WRITE | HMM_DISCARD)))
		return hmm_err(-EINVAL, "hmm_map: tensor %s: access %#x: not "
			       "READ, WRITE, DISCARD", t->name, access);
	if (!ptr)
		return hmm_err(-EINVAL, "hmm_map: tensor %s: ptr is NULL",
			       t->name);
	if (t->remote) {	/* shared mode: shared memory from hmmd */
		double t0 = hmm_now();	/* before the call (see evict) */

		if (tier == HMM_TIER_DEVICE)	/* staged: shared_dev.c */
			r = hmm_shared_dev_map(t, off, len, access, ptr);
		else
			r = remote_traced(t, "stall", "map wait hmmd", off,
					  len, 0, t0, hmm_remote_map(t->remote,
					  off, len, tier, access, ptr));
		/* over this client's quota = over its budget: hmm.h's
		   -ENOMEM (hmm_last_error() keeps hmmd's detail) */
		return r == -EDQUOT ? -ENOMEM : r;
	}
	h = t->h;
	if (access & HMM_DISCARD)
		access |= HMM_WRITE;
	first = off / h->chunk_bytes;
	last = (off + len - 1) / h->chunk_bytes;
	for (i = first; i <= last; i++)
		need += hmm_chunk_cost(&t->chunks[i], tier);
	if (need > h->tier[tier].cap)
		return hmm_err(-ENOMEM, "hmm_map: tensor %s: %llu bytes do not "
			       "fit the %s budget (%llu)", t->name,
			       (unsigned long long)need, tier_names[tier],
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
	map_pin(h, t, off, len, tier, access);
	r = map_wait(h, t, off, len, tier, access);
	if (r < 0) {
		map_unpin(h, t, first, last, tier);
		pthread_mutex_unlock(&h->lock);
		free(m);
		return r;
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
}

int hmm_unmap(struct hmm_tensor *t, void *ptr)
{
	struct hmm_mapping *m = NULL;
	struct hmm_list *p;
	struct hmm *h;
	uint32_t i, first, last;

	if (!t)
		return hmm_err(-EINVAL, "hmm_unmap: no tensor");
	if (t->remote) {
		int r = hmm_shared_dev_unmap(t, ptr);

		return r != -ENOENT ? r : hmm_remote_unmap(t->remote, ptr);
	}
	h = t->h;
	pthread_mutex_lock(&h->lock);
	for (p = t->maps.prev; p != &t->maps; p = p->prev) {
		struct hmm_mapping *x = hmm_container_of(p, struct hmm_mapping,
							 link);

		if (x->ptr == ptr) {
			m = x;
			break;
		}
	}
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

int hmm_prefetch(struct hmm_tensor *t, uint64_t off, uint64_t len, int tier)
{
	uint32_t i, first, last;
	struct hmm *h;
	int r;

	r = range_check("hmm_prefetch", t, off, &len, tier, 1);
	if (r < 0)
		return r;
	if (t->remote)	/* at the device: what its map will copy from */
		return hmm_client_prefetch(t->remote->c, t->remote->t.id, off,
					   len, HMM_TIER_HOST);
	h = t->h;
	first = off / h->chunk_bytes;
	last = (off + len - 1) / h->chunk_bytes;
	pthread_mutex_lock(&h->lock);
	for (i = first; i <= last; i++) {
		struct hmm_chunk *c = &t->chunks[i];

		if (c->want || ((c->valid & TB(tier)) && (c->res & TB(tier))))
			continue;
		h->st.prefetches++;
		c->prefetched = 1;
		hmm_chunk_want(h, c, tier);
	}
	pthread_mutex_unlock(&h->lock);
	return 0;
}

int hmm_evict(struct hmm_tensor *t, uint64_t off, uint64_t len, int tier)
{
	uint32_t i, first, last;
	struct hmm *h;
	int r;

	r = range_check("hmm_evict", t, off, &len, tier, 1);
	if (r < 0)
		return r;
	if (t->remote && tier == HMM_TIER_DEVICE)
		return 0;	/* nothing stays at the device (shared_dev.c) */
	if (t->remote) {	/* answered once hmmd has done it */
		double t0 = hmm_now();	/* before the call: argument order
					   is unspecified */

		return remote_traced(t, "evict", "evict in hmmd", off, len, 3,
				     t0, hmm_client_evict(t->remote->c,
				     t->remote->t.id, off, len, tier));
	}
	h = t->h;
	if (tier == HMM_TIER_HOST && !h->store)
		return hmm_err(-EINVAL, "hmm_evict: tensor %s: no store tier "
			       "to evict the host copy to", t->name);
	first = off / h->chunk_bytes;
	last = (off + len - 1) / h->chunk_bytes;
	pthread_mutex_lock(&h->lock);
	for (i = first; i <= last; i++) {
		struct hmm_chunk *c = &t->chunks[i];

		if (hmm_chunk_evictable(h, c, tier))
			hmm_chunk_evict(h, c, tier);
	}
	pthread_mutex_unlock(&h->lock);
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
		if (h->tensors[i] && h->tensors[i]->inflight)
			return 0;
	return 1;
}

static int take_async_error(struct hmm *h)
{
	int r = h->async_err;

	if (r)
		hmm_err(r, "%s", h->async_detail);
	h->async_err = 0;
	return r;
}

int hmm_wait(struct hmm *h, struct hmm_tensor *t)
{
	int r;

	if (!h)
		return hmm_err(-EINVAL, "hmm_wait: no context");
	if (h->remote) {	/* shared mode: hmmd's WAIT (client.c) */
		double t0 = hmm_now();

		r = hmm_remote_wait(h->remote, t ? t->remote : NULL);
		hmm_trace_event(h, "stall", "wait hmmd", t ? t->name : "", 0,
				0, t0, hmm_now(), 0);
		return r;
	}
	pthread_mutex_lock(&h->lock);
	while (t ? !tensor_quiet(t) : !all_quiet(h))
		pthread_cond_wait(&h->cond, &h->lock);
	r = take_async_error(h);
	pthread_mutex_unlock(&h->lock);
	return r;
}

/* One pass over every chunk: start write-backs; 1 while any is pending. */
static int flush_pass(struct hmm *h, int *err)
{
	int pending = 0;
	uint32_t i, j;

	for (i = 0; i < h->ntensors; i++) {
		struct hmm_tensor *t = h->tensors[i];

		for (j = 0; t && j < t->nchunks; j++) {
			struct hmm_chunk *c = &t->chunks[j];
			int r;

			if (c->nowb == 1)	/* its write failed */
				continue;
			r = hmm_chunk_writeback(h, c);
			if (r < 0 && !*err)
				*err = r;
			if (r == HMM_AGAIN || r == HMM_STARVED)
				pending = 1;
		}
	}
	return pending;
}

/* A flush tries again the chunks whose write-back failed before. */
static void flush_retry_failed(struct hmm *h)
{
	uint32_t i, j;

	for (i = 0; i < h->ntensors; i++)
		for (j = 0; h->tensors[i] && j < h->tensors[i]->nchunks; j++)
			if (h->tensors[i]->chunks[j].nowb == 1)
				h->tensors[i]->chunks[j].nowb = 0;
}

int hmm_flush(struct hmm *h)
{
	struct hmm_ioreq req;
	double t0 = hmm_now();
	int err = 0, r;

	if (!h)
		return hmm_err(-EINVAL, "hmm_flush: no context");
	if (h->remote) {
		r = hmm_client_flush(h->remote);
		hmm_trace_event(h, "io", "flush in hmmd", "", 0, 0, t0,
				hmm_now(), 1);
		return r;
	}
	if (!h->store)
		return hmm_err(-ENODEV, "hmm_flush: no store tier "
			       "(config.store_path is NULL)");
	pthread_mutex_lock(&h->lock);
	flush_retry_failed(h);
	while (flush_pass(h, &err) && !err)
		pthread_cond_wait(&h->cond, &h->lock);
	while (!all_quiet(h))
		pthread_cond_wait(&h->cond, &h->lock);
	if (!err)
		err = take_async_error(h);
	if (!err)
		err = hmm_persist_save(h);
	if (!err) {
		memset(&req, 0, sizeof(req));
		req.io.op = HMM_IOREQ_FLUSH;
		r = hmm_iot_sync(h, &req);
		if (r < 0)
			err = take_async_error(h);
	}
	hmm_trace_event(h, "io", "flush", "", 0, 0, t0, hmm_now(), 1);
	pthread_mutex_unlock(&h->lock);
	if (err && !*hmm_last_error())
		hmm_err(err, "hmm_flush: %s", hmm_strerror(err));
	return err;
}
