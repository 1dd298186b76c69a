// SPDX-License-Identifier: MIT
/*
 * handle.c — a client's handles: its right to use a tensor (its own, or
 * one attached), the only way a request reaches a tensor.  Isolation: a
 * request names a tensor by id, and only an id in the client's own
 * handle table is accepted for maps, frees and shares; a client may also
 * evict, prefetch, write back, wait for and list the tensors its uid made
 * (a user's hmmctl steers the user's jobs), and administrators (uid 0,
 * hmmd's uid) any tensor.
 */
#include <errno.h>
#include <stdlib.h>

#include "err.h"
#include "request.h"

struct hmmd_handle *hmmd_handle_of(struct hmmd_client *cl, uint64_t id)
{
	unsigned i;

	for (i = 0; i < cl->nhandles; i++)
		if (cl->handles[i].dt->id == id)
			return &cl->handles[i];
	return NULL;
}

/* Give cl a handle on dt (a ref); lock held.  0, -ENOMEM, or -EMFILE
 * (HMMD_CLIENT_TENSORS held already; detail in hmm_last_error()). */
int hmmd_handle_add(struct hmmd_client *cl, struct hmmd_tensor *dt,
		    unsigned access)
{
	struct hmmd_handle *h;

	if (hmmd_handle_of(cl, dt->id))
		return 0;
	if (cl->nhandles >= HMMD_CLIENT_TENSORS)
		return hmm_err(-EMFILE, "the client holds %u tensors, hmmd's "
			       "limit per client", cl->nhandles);
	if (cl->nhandles == cl->cap) {
		unsigned n = cl->cap ? cl->cap * 2 : 8;

		h = realloc(cl->handles, n * sizeof(*h));
		if (!h)
			return -ENOMEM;
		cl->handles = h;
		cl->cap = n;
	}
	cl->handles[cl->nhandles++] = (struct hmmd_handle){ dt, access };
	dt->refs++;
	return 0;
}

/* Take back cl's handle on dt (lock held). */
void hmmd_handle_drop(struct hmmd_engine *e, struct hmmd_client *cl,
			struct hmmd_tensor *dt)
{
	struct hmmd_handle *h = hmmd_handle_of(cl, dt->id);

	if (!h)
		return;
	*h = cl->handles[--cl->nhandles];
	hmmd_tensor_put(e, dt);
}

int hmmd_tensor_seen(struct hmmd_client *cl, struct hmmd_tensor *dt)
{
	return cl->admin || dt->owner_uid == cl->uid ||
	       hmmd_handle_of(cl, dt->id);
}

/* The tensor of id for cl, with a ref held for the call; NULL when cl
 * may not see it (hmmd_tensor_seen) or there is none. */
struct hmmd_tensor *hmmd_tensor_get(struct hmmd_req *q, uint64_t id)
{
	struct hmmd_handle *h;
	struct hmmd_tensor *dt;

	pthread_mutex_lock(&q->e->lock);
	h = hmmd_handle_of(q->cl, id);
	dt = h ? h->dt : NULL;
	if (!dt) {
		for (dt = q->e->tensors; dt && dt->id != id; dt = dt->next)
			;
		if (dt && !hmmd_tensor_seen(q->cl, dt))
			dt = NULL;
	}
	if (dt)
		dt->refs++;
	pthread_mutex_unlock(&q->e->lock);
	return dt;
}

int hmmd_tensor_miss(struct hmmd_req *q, const char *what, uint64_t id)
{
	if (q->cl->admin)
		return hmmd_reply_err(q, -ENOENT, "%s: tensor %llu: no such "
				      "tensor", what, (unsigned long long)id);
	return hmmd_reply_err(q, -ENOENT, "%s: tensor %llu: not one of uid "
			      "%u's (no such tensor, or another uid's)", what,
			      (unsigned long long)id, (unsigned)q->cl->uid);
}

void hmmd_tensor_drop(struct hmmd_req *q, struct hmmd_tensor *dt)
{
	pthread_mutex_lock(&q->e->lock);
	hmmd_tensor_put(q->e, dt);
	pthread_mutex_unlock(&q->e->lock);
}
