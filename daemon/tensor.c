// SPDX-License-Identifier: MIT
/*
 * tensor.c — the tensors hmmd holds for clients: TENSOR_NEW (make, or
 * open a persistent one by name), TENSOR_FREE, and the last reference's
 * release (hmmd_tensor_put).
 *
 * Names.  A persistent tensor of uid U named N is saved in the store as
 * "uU/N", so names never collide between uids and a restarted hmmd finds
 * it by that name; TENSOR_NEW with HMM_PROTO_TENSOR_PERSIST opens the
 * saved one when it exists (same dtype and shape, else -EEXIST) and makes
 * it otherwise.  Temporaries are named "cID/N".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guard.h"
#include "request.h"

static struct hmmd_tensor *find_kept(struct hmmd_engine *e, uid_t uid,
			    const char *name)
{
	struct hmmd_tensor *dt;

	for (dt = e->tensors; dt; dt = dt->next)
		if (dt->flags & HMM_PROTO_TENSOR_PERSIST && !dt->freed &&
		    dt->owner_uid == uid && !strcmp(dt->name, name))
			return dt;
	return NULL;
}

static struct hmmd_tensor *tensor_make(struct hmmd_engine *e,
				       struct hmmd_client *cl,
				       struct hmm_tensor *t, const char *name,
				       uint32_t flags)
{
	struct hmmd_tensor *dt = calloc(1, sizeof(*dt));

	if (!dt)
		return NULL;
	dt->t = t;
	dt->id = e->next_tid++;
	dt->owner_uid = cl->uid;
	dt->owner = cl->id;
	dt->flags = flags;
	snprintf(dt->name, sizeof(dt->name), "%s", name);
	dt->next = e->tensors;
	e->tensors = dt;
	return dt;
}

static int same_form(struct hmm_tensor *t, const struct hmm_proto_tensor *m)
{
	unsigned i;

	if (hmm_tensor_dtype(t) != m->dtype || hmm_tensor_ndim(t) != m->ndim)
		return 0;
	for (i = 0; i < m->ndim; i++)
		if (hmm_tensor_shape(t)[i] != m->shape[i])
			return 0;
	return 1;
}

static int store_name(char *dst, struct hmmd_client *cl, const char *name,
		      int persist)
{
	char pre[32];
	size_t p, n = strlen(name);

	if (persist)
		snprintf(pre, sizeof(pre), "u%u/", (unsigned)cl->uid);
	else
		snprintf(pre, sizeof(pre), "c%llu/",
			 (unsigned long long)cl->id);
	p = strlen(pre);
	memcpy(dst, pre, p + 1);	/* named in the error when too long */
	if (p + n >= HMM_PROTO_NAME_MAX) {
		if (persist)
			return -ENAMETOOLONG;
		n = HMM_PROTO_NAME_MAX - 1 - p;	/* need not be unique */
	}
	memcpy(dst + p, name, n);
	dst[p + n] = 0;
	return 0;
}

/* Open the persistent tensor of cl named name; lock held (dropped around
 * the engine).  Returns dt with a handle for cl, or NULL and *err. */
struct hmmd_tensor *hmmd_tensor_open_kept(struct hmmd_req *q,
					  const char *name, int *err)
{
	struct hmmd_engine *e = q->e;
	char sname[HMM_PROTO_NAME_MAX];
	struct hmm_tensor *t;
	struct hmmd_tensor *dt = find_kept(e, q->cl->uid, name);

	if (!dt) {
		*err = store_name(sname, q->cl, name, 1);
		if (*err)
			return NULL;
		pthread_mutex_unlock(&e->lock);
		*err = hmm_tensor_open(e->h, sname, &t);
		pthread_mutex_lock(&e->lock);
		if (*err)
			return NULL;
		dt = tensor_make(e, q->cl, t, name, HMM_PROTO_TENSOR_PERSIST);
		if (!dt) {
			*err = -ENOMEM;	/* the tensor stays open, unused */
			return NULL;
		}
		dt->owner = 0;
	}
	*err = hmmd_handle_add(q->cl, dt, HMM_READ | HMM_WRITE);
	return *err ? NULL : dt;
}

static int tensor_new_locked(struct hmmd_req *q)
{
	const struct hmm_proto_tensor *m = &q->m->u.tensor;
	int persist = m->flags & HMM_PROTO_TENSOR_PERSIST;
	struct hmmd_engine *e = q->e;
	char sname[HMM_PROTO_NAME_MAX] = "";
	struct hmm_tensor *t;
	uint64_t bytes;
	struct hmmd_tensor *dt;
	int ret, had;

	ret = store_name(sname, q->cl, m->name, persist);
	if (ret)
		return hmmd_reply_err(q, ret, "tensor %s: name too long with its "
				 "uid prefix %s (at most %d bytes in all)",
				 m->name, sname, HMM_PROTO_NAME_MAX - 1);
	pthread_mutex_lock(&e->lock);
	if (persist) {
		dt = find_kept(e, q->cl->uid, m->name);
		had = dt && hmmd_handle_of(q->cl, dt->id);
		dt = hmmd_tensor_open_kept(q, m->name, &ret);
		if (dt && !same_form(dt->t, m)) {
			if (!had)
				hmmd_handle_drop(e, q->cl, dt);
			pthread_mutex_unlock(&e->lock);
			return hmmd_reply_err(q, -EEXIST, "tensor %s: saved with "
					 "another dtype or shape", m->name);
		}
		if (dt) {
			pthread_mutex_unlock(&e->lock);
			return hmmd_reply_tensor(q, dt);
		}
		if (ret != -ENOENT) {
			pthread_mutex_unlock(&e->lock);
			return hmmd_reply_err(q, ret, "tensor %s: open: %s",
					 m->name, hmm_last_error());
		}
	}
	pthread_mutex_unlock(&e->lock);
	ret = hmm_tensor_new(e->h, sname, m->dtype, m->ndim, m->shape, &t);
	if (ret)
		return hmmd_reply_err(q, ret, "tensor %s: %s", m->name,
				 hmm_last_error());
	bytes = hmm_tensor_bytes(t);
	pthread_mutex_lock(&e->lock);
	if (q->cl->used[HMM_TIER_STORE] + bytes >
	    q->cl->quota[HMM_TIER_STORE]) {
		uint64_t held = q->cl->used[HMM_TIER_STORE];

		pthread_mutex_unlock(&e->lock);
		hmm_tensor_free(t);
		/* the total is over, not the new tensor alone */
		return hmmd_reply_err(q, -EDQUOT, "tensor %s: %llu bytes more "
				 "would make this client's tensors %llu bytes "
				 "(%llu held), over its store quota %llu",
				 m->name, (unsigned long long)bytes,
				 (unsigned long long)(held + bytes),
				 (unsigned long long)held,
				 (unsigned long long)
				 q->cl->quota[HMM_TIER_STORE]);
	}
	dt = tensor_make(e, q->cl, t, m->name, m->flags);
	ret = dt ? hmmd_handle_add(q->cl, dt, HMM_READ | HMM_WRITE) : -ENOMEM;
	if (ret) {
		if (dt) {
			dt->freed = 1;
			dt->refs = 1;
			hmmd_tensor_put(e, dt);
		} else {
			hmm_tensor_free(t);
		}
		pthread_mutex_unlock(&e->lock);
		return hmmd_reply_err(q, ret, "tensor %s: %s", m->name,
				 ret == -EMFILE ? hmm_last_error() :
				 "no memory");
	}
	q->cl->used[HMM_TIER_STORE] += bytes;
	pthread_mutex_unlock(&e->lock);
	return hmmd_reply_tensor(q, dt);
}

/*
 * Opening or making a persistent tensor drops e->lock around the engine;
 * e->open_lock keeps two clients from both missing "uU/name" and making
 * it twice.
 */
int hmmd_req_tensor_new(struct hmmd_req *q)
{
	int persist = q->m->u.tensor.flags & HMM_PROTO_TENSOR_PERSIST, n;

	if (persist)
		pthread_mutex_lock(&q->e->open_lock);
	n = tensor_new_locked(q);
	if (persist)
		pthread_mutex_unlock(&q->e->open_lock);
	return n;
}

int hmmd_req_tensor_free(struct hmmd_req *q)
{
	uint64_t id = q->m->u.tensor_free.id;
	struct hmmd_engine *e = q->e;
	struct hmmd_handle *h;
	struct hmmd_map *mp;
	struct hmmd_tensor *dt;

	pthread_mutex_lock(&e->lock);
	h = hmmd_handle_of(q->cl, id);
	if (!h) {
		pthread_mutex_unlock(&e->lock);
		return hmmd_reply_err(q, -ENOENT, "tensor %llu: not yours",
				 (unsigned long long)id);
	}
	dt = h->dt;
	for (mp = q->cl->maps; mp; mp = mp->next)
		if (mp->dt == dt) {
			pthread_mutex_unlock(&e->lock);
			return hmmd_reply_err(q, -EBUSY, "tensor %llu (%s): still "
					 "mapped", (unsigned long long)id,
					 dt->name);
		}
	/* the owner frees it for everyone; an attacher only detaches */
	if (dt->owner_uid == q->cl->uid)
		dt->freed = 1;
	hmmd_handle_drop(e, q->cl, dt);
	pthread_mutex_unlock(&e->lock);
	return hmmd_reply_ok(q);
}

void hmmd_tensor_put(struct hmmd_engine *e, struct hmmd_tensor *dt)
{
	struct hmmd_client *cl;
	struct hmmd_tensor **pp;
	int ret;

	if (--dt->refs)
		return;
	if (dt->flags & HMM_PROTO_TENSOR_PERSIST && !dt->freed)
		return;		/* kept for its owner, across clients */
	for (pp = &e->tensors; *pp != dt; pp = &(*pp)->next)
		;
	*pp = dt->next;
	for (cl = e->clients; cl; cl = cl->next)
		if (cl->id == dt->owner)
			cl->used[HMM_TIER_STORE] -= hmm_tensor_bytes(dt->t);
	/* unlinked, no refs: nobody else can reach it */
	hmmd_map_reach_drop(e, dt);
	hmmd_guard_remove(dt->guard);
	pthread_mutex_unlock(&e->lock);
	ret = hmm_tensor_free(dt->t);
	if (ret)
		hmmd_log("tensor %llu (%s): free: %s",
			 (unsigned long long)dt->id, dt->name,
			 hmm_last_error());
	pthread_mutex_lock(&e->lock);
	free(dt);
}
