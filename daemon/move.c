// SPDX-License-Identifier: MIT
/*
 * move.c — the requests that move a tensor's bytes between tiers:
 * PREFETCH, EVICT, WRITEBACK (to the store, kept resident), WAIT (for
 * those to finish) and FLUSH (the store made durable).
 */
#include <errno.h>
#include <stdlib.h>

#include "request.h"

/*
 * EVICT and WRITEBACK are answered once their writes are done, with the
 * first error they met (the engine's errors are its context's: answered
 * here, no other client's WAIT takes them); PREFETCH at once.
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
	hmmd_tensor_drop(q, dt);
	if (ret)
		return hmmd_reply_err(q, ret, "%s: %s", what, hmm_last_error());
	return hmmd_reply_ok(q);
}

/*
 * WAIT: the engine's prefetches and evictions of tensor id, or of every
 * tensor cl holds (id 0), are done.  The engine's I/O errors are its
 * context's: the first one met is answered to whichever waits first.
 */
int hmmd_req_wait(struct hmmd_req *q)
{
	uint64_t id = q->m->u.wait.id;
	struct hmmd_engine *e = q->e;
	struct hmmd_tensor **v = NULL, *dt;
	unsigned i, n = 0;
	int ret = 0, r, nomem;

	if (id) {
		dt = hmmd_tensor_get(q, id);
		if (!dt)
			return hmmd_tensor_miss(q, "wait", id);
		ret = hmm_wait(e->h, dt->t);
		hmmd_tensor_drop(q, dt);
		goto out;
	}
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
		return hmmd_reply_err(q, -ENOMEM, "wait: no memory");
	for (i = 0; i < n; i++) {
		r = hmm_wait(e->h, v[i]->t);
		if (r && !ret)
			ret = r;
		hmmd_tensor_drop(q, v[i]);
	}
	free(v);
out:
	if (ret)
		return hmmd_reply_err(q, ret, "wait: %s", hmm_last_error());
	return hmmd_reply_ok(q);
}

int hmmd_req_flush(struct hmmd_req *q)
{
	int ret = hmm_flush(q->e->h);

	if (ret)
		return hmmd_reply_err(q, ret, "flush: %s", hmm_last_error());
	return hmmd_reply_ok(q);
}
