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
 * it otherwise.  Temporaries are named "cID/N".  SAVE (hmm_flush in
 * shared mode) makes a client's temporary its uid's persistent tensor:
 * its engine tensor is renamed "uU/N" (saved so at the next flush), and
 * one of that name saved before is replaced.
 *
 * Lifetime.  A persistent tensor stays in hmmd while no client holds it:
 * its chunks count in the engine's host residency (unpinned: evicted to
 * the store when room is wanted) and in no client's quota (quotas count
 * a client's pins and the tensors it made while it is connected); the
 * store keeps it across restarts.  It goes when a client of its uid
 * frees it (TENSOR_FREE: the owner uid frees it for everyone), SAVE
 * replaces it, or TENSOR_RM (hmmctl rm) deletes it.  A starting hmmd
 * opens the store's saved ones so (hmmd_tensor_adopt).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
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

/* dt for engine tensor t of uid, made by client owner (0: none). */
static struct hmmd_tensor *tensor_make(struct hmmd_engine *e, uid_t uid,
				       uint64_t owner, struct hmm_tensor *t,
				       const char *name, uint32_t flags)
{
	struct hmmd_tensor *dt = calloc(1, sizeof(*dt));

	if (!dt)
		return NULL;
	dt->t = t;
	dt->id = e->next_tid++;
	dt->owner_uid = uid;
	dt->owner = owner;
	dt->flags = flags;
	snprintf(dt->name, sizeof(dt->name), "%s", name);
	dt->next = e->tensors;
	e->tensors = dt;
	return dt;
}

/*
 * Saved tensor t ("uU/N"), opened by a starting hmmd before any client:
 * uid U's persistent tensor N that nobody holds, as if a client had
 * opened and let it go, so hmmctl lists it (and rm deletes it) before a
 * job opens it again.  0, -EINVAL (not "uU/N"), -ENOMEM.
 */
int hmmd_tensor_adopt(struct hmmd_engine *e, struct hmm_tensor *t)
{
	const char *s = hmm_tensor_name(t), *n;
	unsigned long uid;
	char *end;

	if (s[0] != 'u' || s[1] < '0' || s[1] > '9')
		return -EINVAL;
	uid = strtoul(s + 1, &end, 10);
	if (*end != '/' || uid > (uid_t)-1)
		return -EINVAL;
	n = end + 1;
	if (!*n)
		return -EINVAL;
	return tensor_make(e, (uid_t)uid, 0, t, n, HMM_PROTO_TENSOR_PERSIST) ?
	       0 : -ENOMEM;
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
		dt = tensor_make(e, q->cl->uid, 0, t, name,
				 HMM_PROTO_TENSOR_PERSIST);
		if (!dt) {
			*err = -ENOMEM;	/* the tensor stays open, unused */
			return NULL;
		}
	}
	*err = hmmd_handle_add(q->cl, dt, HMM_READ | HMM_WRITE);
	return *err ? NULL : dt;
}

/* The engine's detail for the tensor it knows as sname, less its
 * "tensor SNAME: " (the client knows the tensor by its own name). */
static const char *engine_detail(const char *sname)
{
	const char *d = hmm_last_error();
	size_t n = strlen(sname);

	if (!strncmp(d, "tensor ", 7) && !strncmp(d + 7, sname, n) &&
	    !strncmp(d + 7 + n, ": ", 2))
		return d + 9 + n;
	return d;
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
				 engine_detail(sname));
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
	dt = tensor_make(e, q->cl->uid, q->cl->id, t, m->name, m->flags);
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
	if (q->m->u.tensor.flags & HMM_PROTO_TENSOR_PERSIST)
		return hmmd_open_locked(q, tensor_new_locked);
	return tensor_new_locked(q);
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

/*
 * dt, its uid's persistent tensor, is replaced by another of its name
 * (SAVE): a temporary from now on, it goes when its last holder lets go
 * (now, when nobody holds it), and its engine tensor takes a name that
 * no restarted hmmd opens ("x<id>/" and its name, cut to fit).  Lock
 * held; may drop it.
 */
static void unkeep(struct hmmd_engine *e, struct hmmd_tensor *dt)
{
	char tmp[HMM_PROTO_NAME_MAX];
	int p = snprintf(tmp, sizeof(tmp), "x%llu/",
			 (unsigned long long)dt->id);
	size_t n = strlen(dt->name);

	if (p + n >= sizeof(tmp))
		n = sizeof(tmp) - 1 - p;
	memcpy(tmp + p, dt->name, n);
	tmp[p + n] = 0;
	dt->flags &= ~HMM_PROTO_TENSOR_PERSIST;
	hmm_tensor_rename(dt->t, tmp);	/* fits: cannot fail */
	dt->refs++;
	hmmd_tensor_put(e, dt);
}

/*
 * SAVE: the client's own tensor becomes its uid's persistent one of its
 * name; the one saved before under that name is replaced: unkept when
 * this hmmd holds it, deleted from the store when an earlier hmmd saved
 * it and nobody opened it since.  e->open_lock held (as TENSOR_NEW's
 * PERSIST and ATTACH: nobody opens or makes that name meanwhile).
 */
static int save_locked(struct hmmd_req *q)
{
	uint64_t id = q->m->u.save.id;
	struct hmmd_engine *e = q->e;
	char sname[HMM_PROTO_NAME_MAX];
	struct hmmd_tensor *dt, *old;
	struct hmmd_handle *h;
	struct hmm_tensor *t;
	int ret = 0, n;

	pthread_mutex_lock(&e->lock);
	h = hmmd_handle_of(q->cl, id);
	dt = h ? h->dt : NULL;
	if (!dt || dt->owner_uid != q->cl->uid) {
		pthread_mutex_unlock(&e->lock);
		return hmmd_reply_err(q, dt ? -EPERM : -ENOENT, "save: tensor "
				 "%llu: %s", (unsigned long long)id, dt ?
				 "another uid's, attached: only its uid saves "
				 "it" : "not yours");
	}
	if (dt->flags & HMM_PROTO_TENSOR_PERSIST) {	/* the saved one */
		pthread_mutex_unlock(&e->lock);
		return hmmd_reply_ok(q);
	}
	if (store_name(sname, q->cl, dt->name, 1)) {
		pthread_mutex_unlock(&e->lock);
		return hmmd_reply_err(q, -ENAMETOOLONG, "save: tensor %s: name "
				 "too long with its uid prefix %s (at most %d "
				 "bytes in all)", dt->name, sname,
				 HMM_PROTO_NAME_MAX - 1);
	}
	dt->refs++;			/* for the call */
	old = find_kept(e, q->cl->uid, dt->name);
	if (old) {
		unkeep(e, old);
	} else {
		pthread_mutex_unlock(&e->lock);
		ret = hmm_tensor_open(e->h, sname, &t);
		if (!ret)
			ret = hmm_tensor_free(t);
		pthread_mutex_lock(&e->lock);
		if (ret == -ENOENT)	/* none saved */
			ret = 0;
	}
	if (ret == 0)
		ret = hmm_tensor_rename(dt->t, sname);
	if (ret == 0)
		dt->flags |= HMM_PROTO_TENSOR_PERSIST;
	n = ret ? hmmd_reply_err(q, ret, "save: tensor %s: the one saved "
				 "before: %s", dt->name, hmm_last_error()) :
		  hmmd_reply_ok(q);
	hmmd_tensor_put(e, dt);
	pthread_mutex_unlock(&e->lock);
	return n;
}

int hmmd_req_save(struct hmmd_req *q)
{
	return hmmd_open_locked(q, save_locked);
}

/*
 * TENSOR_RM (hmmctl rm): an administrator, or a client of its uid,
 * deletes a persistent tensor.  It is unkept (no open by name finds it,
 * and a restarted hmmd sweeps its "x<id>/" name), freed once its holders
 * let go, and the store is flushed, so that a restart opens the table
 * without it.  e->open_lock held.
 */
static int rm_locked(struct hmmd_req *q)
{
	uint64_t id = q->m->u.tensor_free.id;
	struct hmmd_engine *e = q->e;
	struct hmmd_tensor *dt = hmmd_tensor_get(q, id);
	char name[HMM_PROTO_NAME_MAX];
	uid_t uid;
	int ret;

	if (dt && !q->cl->admin && dt->owner_uid != q->cl->uid) {
		hmmd_tensor_drop(q, dt);	/* attached: another uid's */
		dt = NULL;
	}
	if (!dt)
		return hmmd_tensor_miss(q, "rm", id);
	pthread_mutex_lock(&e->lock);
	if (!(dt->flags & HMM_PROTO_TENSOR_PERSIST)) {
		uint64_t owner = dt->owner;

		memcpy(name, dt->name, sizeof(name));
		hmmd_tensor_put(e, dt);
		pthread_mutex_unlock(&e->lock);
		return hmmd_reply_err(q, -EINVAL, "rm: tensor %llu (%s): client "
				      "%llu's temporary, not saved: it goes "
				      "with its client",
				      (unsigned long long)id, name,
				      (unsigned long long)owner);
	}
	memcpy(name, dt->name, sizeof(name));
	uid = dt->owner_uid;
	unkeep(e, dt);
	hmmd_tensor_put(e, dt);		/* the call's: freed if none hold it */
	pthread_mutex_unlock(&e->lock);
	hmmd_log("tensor %llu (%s of uid %u): deleted by uid %u (rm)",
		 (unsigned long long)id, name, (unsigned)uid,
		 (unsigned)q->cl->uid);
	ret = hmm_flush(e->h);
	if (ret)
		return hmmd_reply_err(q, ret, "rm: tensor %llu (%s): deleted, "
				      "but the store's flush failed, so a "
				      "restart may find it: %s",
				      (unsigned long long)id, name,
				      hmm_last_error());
	return hmmd_reply_ok(q);
}

int hmmd_req_tensor_rm(struct hmmd_req *q)
{
	return hmmd_open_locked(q, rm_locked);
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
