// SPDX-License-Identifier: MIT
/*
 * share.c — SHARE and ATTACH: a tensor's owner shares it under a name
 * with one uid; ATTACH with the caller's own uid opens its persistent
 * tensor by name, with another uid only a tensor that uid SHAREd under
 * that name with the caller's uid (with the access it granted).
 */
#include <errno.h>
#include <string.h>

#include "err.h"
#include "request.h"

int hmmd_req_share(struct hmmd_req *q)
{
	const struct hmm_proto_share *m = &q->m->u.share;
	struct hmmd_engine *e = q->e;
	struct hmmd_handle *h;
	struct hmmd_tensor *o;

	pthread_mutex_lock(&e->lock);
	h = hmmd_handle_of(q->cl, m->id);
	if (!h || h->dt->owner_uid != q->cl->uid) {
		pthread_mutex_unlock(&e->lock);
		return hmmd_reply_err(q, -ENOENT, "share: tensor %llu: not yours",
				 (unsigned long long)m->id);
	}
	for (o = e->tensors; o; o = o->next)
		if (o != h->dt && o->owner_uid == q->cl->uid &&
		    !strcmp(o->share_name, m->name)) {
			pthread_mutex_unlock(&e->lock);
			return hmmd_reply_err(q, -EEXIST, "share: name %s: taken by "
					 "tensor %llu", m->name,
					 (unsigned long long)o->id);
		}
	memcpy(h->dt->share_name, m->name, sizeof(m->name));
	h->dt->share_uid = m->uid;
	h->dt->share_access = m->access;
	pthread_mutex_unlock(&e->lock);
	return hmmd_reply_ok(q);
}

/*
 * The error of an ATTACH of the caller's own persistent tensor that
 * hmmd_tensor_open_kept refused with err: a name too long for the
 * store with the uid's prefix names no saved tensor, so it is -ENOENT
 * as any other unknown name is (hmm_tensor_open's); any other error is
 * passed on with its detail.
 */
static int attach_err(struct hmmd_req *q, const struct hmm_proto_attach *m,
		      int err)
{
	if (err == -ENOENT || err == -ENAMETOOLONG)
		return hmmd_reply_err(q, -ENOENT, "attach: %s: no persistent "
				 "tensor of uid %u by that name%s", m->name,
				 (unsigned)m->owner_uid, err == -ENOENT ? "" :
				 " (too long with its uid prefix to be "
				 "saved)");
	return hmmd_reply_err(q, err, "attach: %s: %s", m->name,
			 hmm_last_error());
}

static int attach_locked(struct hmmd_req *q)
{
	const struct hmm_proto_attach *m = &q->m->u.attach;
	struct hmmd_engine *e = q->e;
	struct hmmd_tensor *dt;
	int ret;

	pthread_mutex_lock(&e->lock);
	if (m->owner_uid == q->cl->uid) {
		dt = hmmd_tensor_open_kept(q, m->name, &ret);
		pthread_mutex_unlock(&e->lock);
		if (!dt)
			return attach_err(q, m, ret);
		return hmmd_reply_tensor(q, dt);
	}
	for (dt = e->tensors; dt; dt = dt->next)
		if (!dt->freed && dt->owner_uid == m->owner_uid &&
		    dt->share_name[0] && dt->share_uid == q->cl->uid &&
		    !strcmp(dt->share_name, m->name))
			break;
	if (!dt) {
		pthread_mutex_unlock(&e->lock);
		return hmmd_reply_err(q, -ENOENT, "attach: %s: uid %u shares no "
				 "tensor by that name with uid %u", m->name,
				 (unsigned)m->owner_uid, (unsigned)q->cl->uid);
	}
	ret = hmmd_handle_add(q->cl, dt, dt->share_access);
	pthread_mutex_unlock(&e->lock);
	if (ret)
		return hmmd_reply_err(q, ret, "attach: %s: %s", m->name,
				 ret == -EMFILE ? hmm_last_error() :
				 "no memory");
	return hmmd_reply_tensor(q, dt);
}

int hmmd_req_attach(struct hmmd_req *q)
{
	return hmmd_open_locked(q, attach_locked);
}
