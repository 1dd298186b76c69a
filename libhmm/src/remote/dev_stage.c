// SPDX-License-Identifier: MIT
/*
 * dev_stage.c — the device tier in shared mode.  A GPU's memory belongs
 * to the process that opened it, so hmmd cannot hand it out: a client
 * opens its own device backend (config.device, config.device_budget)
 * and stages through hmmd's host tier.
 *
 * A device map is three things: a host map in hmmd of the same range
 * (pinned there while the device map lives, so hmmd's quota and budget
 * see it; ended by its handle alone, hmm_client_map_own, since a host
 * map of the same offset has its pointer, and an hmm_unmap of that
 * pointer once ended the staging map, whose writes were then lost),
 * device memory for the range's chunks from this process's device
 * budget, taken first (a DISCARD host map, ended after a refusal here,
 * left its whole chunks zeros in hmmd), and a host-to-device copy (none
 * for DISCARD).  The unmap copies device-to-host when the map could
 * write, unmaps in hmmd and frees the device memory; hmm_flush
 * (hmm_remote_dev_sync) and hmm_close copy a writable map back too, so
 * that what hmmd saves holds it, as the embedded engine's flush writes
 * a mapped chunk as it is.
 * Nothing stays at the device between maps, so a tensor that another
 * process shares and writes is never stale here, and an evict at the
 * device has nothing to do.  A map that
 * does not fit the device budget waits for this process's unmaps up to
 * config.wait_ms, then fails with -ENOMEM, as in the embedded engine.
 * A device-to-host copy that fails leaves the map in place (its bytes
 * are still at the device): hmm_unmap says so and may be called again.
 *
 * The maps are on the context's sdev list (remote.h; h->lock); counters
 * go to the context's own device tier (h->tier[HMM_TIER_DEVICE]), which
 * hmm_stats reports in shared mode.  Threading: any thread; copies wait
 * on h->cond.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dev.h"
#include "err.h"
#include "remote.h"

struct sdev_map {
	struct hmm_list link;		/* on hmm_remote_ctx(h)->sdev */
	struct hmm_tensor *t;
	void *ptr;			/* what hmm_map returned */
	void *host;			/* hmmd's host map of [off, +len) */
	struct hmm_cmap *own;		/* ... ended by this handle alone:
					   a user's host map of off has
					   the same pointer */
	uint64_t off, len;
	uint64_t addr, span;		/* the device memory */
	unsigned access;
	int busy;			/* hmm_remote_dev_sync copying it:
					   its unmap waits (h->lock) */
};

struct sdev_copy {
	struct hmm *h;
	int done, err;
};

static void sdev_copy_done(void *arg, int err)
{
	struct sdev_copy *c = arg;

	pthread_mutex_lock(&c->h->lock);
	c->err = err;
	c->done = 1;
	pthread_cond_broadcast(&c->h->cond);
	pthread_mutex_unlock(&c->h->lock);
}

/* One copy through the backend's queue, waited for: 0 or -errno. */
static int sdev_copy(struct hmm *h, int dir, uint64_t dev, void *host,
		     uint64_t bytes)
{
	struct sdev_copy c = { h, 0, 0 };
	int r = h->dev->copy(h->dev_priv, dir, dev, host, bytes,
			     sdev_copy_done, &c);

	if (r < 0)
		return r;
	pthread_mutex_lock(&h->lock);
	while (!c.done)
		pthread_cond_wait(&h->cond, &h->lock);
	pthread_mutex_unlock(&h->lock);
	return c.err;
}

/* Take span bytes of the device budget for t through the admission,
 * waiting up to wait_ms for this process's unmaps.  h->lock held.  0 or
 * -ENOMEM. */
static int sdev_room(struct hmm *h, struct hmm_tensor *t, uint64_t span)
{
	struct hmm_admit a = {
		.tier = HMM_TIER_DEVICE, .bytes = span,
		.wait_s = h->cfg.wait_ms / 1000.0,
	};
	int r = hmm_budget_admit(h, &a);

	if (r < 0)
		return hmm_err(r, "hmm_map: tensor %s: %s", t->name,
			       hmm_last_error());
	h->tier[HMM_TIER_DEVICE].pinned += span;
	return 0;
}

/* Give m's device memory and budget back; h->lock not held. */
static void sdev_free(struct hmm *h, struct sdev_map *m, int populated)
{
	if (populated)
		h->dev->depopulate(h->dev_priv, m->addr, m->span);
	if (m->addr)
		h->dev->release(h->dev_priv, m->addr, m->span);
	pthread_mutex_lock(&h->lock);
	h->tier[HMM_TIER_DEVICE].pinned -= m->span;
	hmm_budget_give(h, HMM_TIER_DEVICE, m->span);
	pthread_mutex_unlock(&h->lock);
}

/* A device map's time, from t0, as the device tier's stall (hmm.h:
 * "time maps waited for this tier"), whether it then failed or not. */
static void sdev_stall(struct hmm *h, struct hmm_tensor *t, uint64_t off,
		       uint64_t len, double t0)
{
	double t1 = hmm_now();

	pthread_mutex_lock(&h->lock);
	h->tier[HMM_TIER_DEVICE].st.stall_s += t1 - t0;
	pthread_mutex_unlock(&h->lock);
	hmm_trace_event(h, "stall", "map device via hmmd", t->name,
			off / h->chunk_bytes, len, t0, t1, 0);
}

int hmm_remote_dev_map(struct hmm_tensor *t, uint64_t off, uint64_t len,
		       unsigned access, void **ptr)
{
	struct hmm *h = t->h;
	uint64_t skew = off % h->chunk_bytes;
	double t0 = hmm_now();
	struct sdev_map *m;
	int r, populated = 0;

	m = calloc(1, sizeof(*m));
	if (!m)
		return hmm_err(-ENOMEM, "hmm_map: tensor %s: no memory",
			       t->name);
	*m = (struct sdev_map){ .t = t, .off = off, .len = len,
				.access = access };
	m->span = (skew + len + h->chunk_bytes - 1) / h->chunk_bytes *
		  h->chunk_bytes;
	/* the device's room and memory before hmmd's host map: a DISCARD
	   one makes its whole chunks dirty and unread in hmmd at once, and
	   when a refusal here ended it again they were left zeros, the
	   tensor's bytes there lost (test_hmmd_stress) */
	pthread_mutex_lock(&h->lock);
	r = sdev_room(h, t, m->span);
	pthread_mutex_unlock(&h->lock);
	if (r < 0)
		goto out_free;
	r = h->dev->reserve(h->dev_priv, m->span, &m->addr);
	if (r < 0) {
		m->addr = 0;
		r = hmm_err(r, "hmm_map: tensor %s: device address range of "
			    "%llu bytes: %s", t->name,
			    (unsigned long long)m->span, hmm_last_error());
		goto out_dev;
	}
	r = h->dev->populate(h->dev_priv, m->addr, m->span);
	if (r < 0) {
		r = hmm_err(r, "hmm_map: tensor %s: device memory: %s",
			    t->name, hmm_last_error());
		goto out_dev;
	}
	populated = 1;
	r = hmm_client_map_own(hmm_remote_of(t)->c, hmm_remote_of(t)->t.id,
			       off, len, access, &m->host, &m->own);
	if (r < 0)
		goto out_dev;
	if (!(access & HMM_DISCARD)) {
		r = sdev_copy(h, HMM_H2D, m->addr + skew, m->host, len);
		if (r < 0) {
			r = hmm_err(r, "hmm_map: tensor %s: host to device "
				    "copy of [%llu, +%llu): %s", t->name,
				    (unsigned long long)off,
				    (unsigned long long)len, strerror(-r));
			goto out_host;
		}
	}
	m->ptr = (void *)(uintptr_t)(m->addr + skew);
	pthread_mutex_lock(&h->lock);
	hmm_list_add_tail(&hmm_remote_ctx(h)->sdev, &m->link);
	h->tier[HMM_TIER_DEVICE].st.misses++;
	if (!(access & HMM_DISCARD)) {
		h->tier[HMM_TIER_DEVICE].st.bytes_in += len;
		h->tier[HMM_TIER_DEVICE].st.io_ops++;
	}
	pthread_mutex_unlock(&h->lock);
	sdev_stall(h, t, off, len, t0);
	*ptr = m->ptr;
	return 0;

out_host:
	hmm_client_unmap_own(hmm_remote_of(t)->c, m->own);
out_dev:
	sdev_free(h, m, populated);
out_free:
	free(m);
	sdev_stall(h, t, off, len, t0);	/* a failed map waited too */
	return r;
}

/* The device map of t at ptr, taken off the sdev list; NULL if none. */
static struct sdev_map *sdev_take(struct hmm *h, struct hmm_tensor *t,
				  void *ptr)
{
	struct hmm_list *l = &hmm_remote_ctx(h)->sdev, *p;
	struct sdev_map *m = NULL;

	pthread_mutex_lock(&h->lock);
	for (p = l->next; p != l; p = p->next) {
		struct sdev_map *x = hmm_container_of(p, struct sdev_map,
						      link);

		if ((!t || x->t == t) && (!ptr || x->ptr == ptr)) {
			while (x->busy)	/* stays on the list meanwhile */
				pthread_cond_wait(&h->cond, &h->lock);
			hmm_list_del(&x->link);
			m = x;
			break;
		}
	}
	pthread_mutex_unlock(&h->lock);
	return m;
}

int hmm_remote_dev_unmap(struct hmm_tensor *t, void *ptr)
{
	struct hmm *h = t->h;
	struct sdev_map *m;
	int r = 0;

	if (!h->dev || !ptr)
		return -ENOENT;
	m = sdev_take(h, t, ptr);
	if (!m)
		return -ENOENT;		/* not a device map: a host one? */
	if (m->access & (HMM_WRITE | HMM_DISCARD)) {
		double t0 = hmm_now();

		r = sdev_copy(h, HMM_D2H, (uintptr_t)ptr, m->host, m->len);
		if (r < 0) {	/* the bytes are still at the device */
			pthread_mutex_lock(&h->lock);
			hmm_list_add_tail(&hmm_remote_ctx(h)->sdev, &m->link);
			pthread_mutex_unlock(&h->lock);
			return hmm_err(r, "hmm_unmap: tensor %s: device to "
				       "host copy of [%llu, +%llu): %s; still "
				       "mapped, call again", t->name,
				       (unsigned long long)m->off,
				       (unsigned long long)m->len,
				       strerror(-r));
		}
		pthread_mutex_lock(&h->lock);
		h->tier[HMM_TIER_DEVICE].st.bytes_out += m->len;
		h->tier[HMM_TIER_DEVICE].st.io_ops++;
		pthread_mutex_unlock(&h->lock);
		hmm_trace_event(h, "io", "device to host", t->name,
				m->off / h->chunk_bytes, m->len, t0,
				hmm_now(), 2);
	}
	sdev_free(h, m, 1);
	r = hmm_client_unmap_own(hmm_remote_of(t)->c, m->own);
	free(m);
	return r;
}

/*
 * Copy every writable device map's bytes back to its host map in hmmd,
 * the maps staying: hmm_flush saves what they hold, as the embedded
 * engine writes a mapped dirty chunk as it is.  Their unmaps wait for
 * the copies.  0 or the first copy's -errno (the others still copied).
 */
int hmm_remote_dev_sync(struct hmm *h)
{
	struct hmm_list *l = &hmm_remote_ctx(h)->sdev, *p;
	int r, first = 0;

	pthread_mutex_lock(&h->lock);
	for (p = l->next; p != l; p = p->next) {
		struct sdev_map *x = hmm_container_of(p, struct sdev_map,
						      link);

		if (!(x->access & (HMM_WRITE | HMM_DISCARD)) || x->busy)
			continue;
		x->busy = 1;	/* not unmapped, not taken off l */
		pthread_mutex_unlock(&h->lock);
		r = sdev_copy(h, HMM_D2H, (uintptr_t)x->ptr, x->host, x->len);
		if (r < 0 && !first)
			first = hmm_err(r, "hmm_flush: tensor %s: device to "
					"host copy of [%llu, +%llu): %s",
					x->t->name,
					(unsigned long long)x->off,
					(unsigned long long)x->len,
					strerror(-r));
		pthread_mutex_lock(&h->lock);
		x->busy = 0;
		pthread_cond_broadcast(&h->cond);
	}
	pthread_mutex_unlock(&h->lock);
	return first;
}

/* At close: a writable map's bytes go back to hmmd first, so that a
 * saved tensor keeps them, as an unmap would have. */
void hmm_remote_dev_fini(struct hmm *h)
{
	struct sdev_map *m;

	while ((m = sdev_take(h, NULL, NULL))) {
		if (m->access & (HMM_WRITE | HMM_DISCARD))
			sdev_copy(h, HMM_D2H, (uintptr_t)m->ptr, m->host,
				  m->len);
		sdev_free(h, m, 1);
		hmm_client_unmap_own(hmm_remote_of(m->t)->c, m->own);
		free(m);
	}
}

/*
 * The bytes of t that this process's device maps hold, each byte once:
 * every map is a copy of its own, and two of one range are still that
 * range (residency never more than the tensor).  h->lock held.
 */
static uint64_t sdev_union(struct hmm *h, struct hmm_tensor *t)
{
	struct hmm_list *l = &hmm_remote_ctx(h)->sdev, *p;
	uint64_t pos = 0, n = 0, s, e;

	for (;;) {	/* from pos: the first run of maps, merged */
		s = UINT64_MAX;
		for (p = l->next; p != l; p = p->next) {
			struct sdev_map *x = hmm_container_of(p,
						struct sdev_map, link);

			if (x->t == t && x->off + x->len > pos &&
			    (x->off > pos ? x->off : pos) < s)
				s = x->off > pos ? x->off : pos;
		}
		if (s == UINT64_MAX)
			return n;
		e = s;
		for (p = l->next; p != l; p = p->next) {
			struct sdev_map *x = hmm_container_of(p,
						struct sdev_map, link);

			if (x->t == t && x->off <= e && x->off + x->len > e) {
				e = x->off + x->len;
				p = l;	/* again: one may reach on now */
			}
		}
		n += e - s;
		pos = e;
	}
}

void hmm_remote_dev_residency(struct hmm_tensor *t, uint64_t *bytes)
{
	struct hmm *h = t->h;

	pthread_mutex_lock(&h->lock);
	*bytes += sdev_union(h, t);
	pthread_mutex_unlock(&h->lock);
}
