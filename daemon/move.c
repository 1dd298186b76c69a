// SPDX-License-Identifier: MIT
/*
 * move.c — the requests that move a tensor's bytes between tiers:
 * PREFETCH, EVICT, WRITEBACK (to the store, kept resident), WAIT (for
 * those to finish) and FLUSH (the store made durable).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend.h"
#include "err.h"
#include "request.h"

/*
 * Asynchronous errors.  hmmd's engine keeps a chunk's failed write-back
 * or eviction as its tensor's (hmm_engine_async_by_tensor, engine.c),
 * never the context's, so that the write of one client's chunk that
 * another client's map made room by is reported to neither the wrong
 * client nor under its name: a tensor's error goes to the first WAIT,
 * FLUSH, EVICT or WRITEBACK of a client of the tensor's uid that holds
 * it (once, as hmm.h's "since the last hmm_wait/hmm_flush"), and no
 * other client sees it.  An administrator evicting another uid's tensor
 * is answered with its error and leaves it for the tensor's uid.
 */

/* Lock not held: take (or peek at) dt's error for q's client. */
static int tensor_err(struct hmmd_req *q, struct hmmd_tensor *dt)
{
	return hmm_tensor_async_take(dt->t, dt->owner_uid != q->cl->uid);
}

/*
 * The tensors q's client holds, each with a ref for the call: *out
 * (malloc, NULL when none) and the count, or -ENOMEM.  Give them back
 * with put_held.
 */
static int get_held(struct hmmd_req *q, struct hmmd_tensor ***out)
{
	struct hmmd_engine *e = q->e;
	struct hmmd_tensor **v = NULL;
	unsigned i, n = 0;
	int nomem;

	pthread_mutex_lock(&e->lock);
	if (q->cl->nhandles)
		v = calloc(q->cl->nhandles, sizeof(*v));
	for (i = 0; v && i < q->cl->nhandles; i++) {
		v[n] = q->cl->handles[i].dt;
		v[n++]->refs++;
	}
	nomem = q->cl->nhandles && !v;
	pthread_mutex_unlock(&e->lock);
	if (nomem)
		return hmm_err(-ENOMEM, "no memory");
	*out = v;
	return (int)n;
}

static void put_held(struct hmmd_req *q, struct hmmd_tensor **v, int n)
{
	int i;

	for (i = 0; i < n; i++)
		hmmd_tensor_drop(q, v[i]);
	free(v);
}

/* The first error of the tensors of q's uid in v[0..n) (every one of
 * them taken), its detail this thread's; 0 when none. */
static int held_err(struct hmmd_req *q, struct hmmd_tensor **v, int n)
{
	char det[HMM_PROTO_DETAIL_MAX] = "";
	int i, r, first = 0;

	for (i = 0; i < n; i++) {
		if (v[i]->owner_uid != q->cl->uid)
			continue;
		r = hmm_tensor_async_take(v[i]->t, 0);
		if (r && !first) {
			first = r;
			snprintf(det, sizeof(det), "%s", hmm_last_error());
		}
	}
	if (first)
		hmm_err(first, "%s", det);
	return first;
}

/*
 * EVICT and WRITEBACK are answered once their writes are done, with the
 * first error they met (the tensor's: see above); PREFETCH at once.
 */
int hmmd_req_move(struct hmmd_req *q)
{
	const struct hmm_proto_range *m = &q->m->u.range;
	unsigned type = q->m->hdr.type;
	const char *what = hmm_proto_type_name(type);
	struct hmmd_tensor *dt = hmmd_tensor_get(q, m->id);
	int ret;

	if (!dt)
		return hmmd_tensor_miss(q, what, m->id);
	if (type == HMM_PROTO_EVICT)
		ret = hmm_evict(dt->t, m->off, m->len, m->tier);
	else if (type == HMM_PROTO_WRITEBACK)
		ret = hmm_writeback(dt->t, m->off, m->len);
	else
		ret = hmm_prefetch(dt->t, m->off, m->len, m->tier);
	if (!ret && type != HMM_PROTO_PREFETCH)
		ret = hmm_wait(q->e->h, dt->t);
	if (!ret && type != HMM_PROTO_PREFETCH)
		ret = tensor_err(q, dt);
	hmmd_tensor_drop(q, dt);
	if (ret)
		return hmmd_reply_err(q, ret, "%s: %s", what, hmm_last_error());
	return hmmd_reply_ok(q);
}

/*
 * WAIT: the engine's prefetches and evictions of tensor id, or of every
 * tensor cl holds (id 0), are done; then the first error of the tensors
 * cl holds of its uid (see above).
 */
int hmmd_req_wait(struct hmmd_req *q)
{
	uint64_t id = q->m->u.wait.id;
	struct hmmd_engine *e = q->e;
	struct hmmd_tensor **v, *dt;
	int i, n, ret = 0, r;

	if (id) {
		dt = hmmd_tensor_get(q, id);
		if (!dt)
			return hmmd_tensor_miss(q, "wait", id);
		ret = hmm_wait(e->h, dt->t);
		hmmd_tensor_drop(q, dt);
	}
	n = get_held(q, &v);
	if (n < 0)
		return hmmd_reply_err(q, n, "wait: %s", hmm_last_error());
	for (i = 0; !id && i < n; i++) {
		r = hmm_wait(e->h, v[i]->t);
		if (r && !ret)
			ret = r;
	}
	r = held_err(q, v, n);
	if (!ret)
		ret = r;
	put_held(q, v, n);
	if (ret)
		return hmmd_reply_err(q, ret, "wait: %s", hmm_last_error());
	return hmmd_reply_ok(q);
}

/*
 * FLUSH: the engine's flush (every client's tensors: it fails, naming
 * none, while a write it made failed), then the first error of the
 * tensors cl holds of its uid, which names cl's own tensor and comes
 * first.
 */
int hmmd_req_flush(struct hmmd_req *q)
{
	char det[HMM_PROTO_DETAIL_MAX];
	struct hmmd_tensor **v;
	int ret = hmm_flush(q->e->h), n, r;

	snprintf(det, sizeof(det), "%s", ret ? hmm_last_error() : "");
	n = get_held(q, &v);
	if (n < 0)
		return hmmd_reply_err(q, n, "flush: %s", hmm_last_error());
	r = held_err(q, v, n);
	put_held(q, v, n);
	if (r)
		return hmmd_reply_err(q, r, "flush: %s", hmm_last_error());
	if (ret)
		return hmmd_reply_err(q, ret, "flush: %s", det);
	return hmmd_reply_ok(q);
}
