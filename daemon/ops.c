// SPDX-License-Identifier: MIT
/*
 * ops.c — hmmd's requests on the embedded engine: hello, tensors (new,
 * open-by-name, free), map/unmap of the tensor's memfd, prefetch, evict,
 * wait, flush, stats (and stats2), share/attach, quota_set, list.
 *
 * Names.  A persistent tensor of uid U named N is saved in the store as
 * "uU/N", so names never collide between uids and a restarted hmmd finds
 * it by that name; TENSOR_NEW with HMM_PROTO_TENSOR_PERSIST opens the
 * saved one when it exists (same dtype and shape, else -EEXIST) and makes
 * it otherwise.  ATTACH with the caller's own uid opens its persistent
 * tensor by name; with another uid, only a tensor that uid SHAREd under
 * that name with the caller's uid.  Temporaries are named "cID/N".
 *
 * Isolation.  A request names a tensor by id, and only an id in the
 * client's own handle table is accepted (administrators, uid 0 or
 * hmmd's uid, may also evict, prefetch and list any tensor).
 *
 * Host maps (see hmmd.h): the tensor's own memfd, pinned while mapped,
 * no copy.  Two clients of one shared tensor share its pages.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine.h"
#include "err.h"
#include "proto.h"

/* ---- clients ---------------------------------------------------------------- */

static uint64_t cap_quota(uint64_t asked, uint64_t max)
{
	return asked && asked < max ? asked : max;
}

int hmmd_client_new(struct hmmd_engine *e, uint64_t id, pid_t pid,
		    uid_t uid, const struct hmm_proto_hello *h,
		    struct hmmd_client **out,
		    struct hmm_proto_hello_reply *rep)
{
	struct hmmd_client *cl = calloc(1, sizeof(*cl));
	uint64_t hmax;
	struct hmm_stats st;

	if (!cl)
		return hmm_err(-ENOMEM, "hello: no memory for a client");
	hmm_stats(e->h, &st);
	hmax = e->cfg->client_quota && e->cfg->client_quota < e->budget ?
	       e->cfg->client_quota : e->budget;
	cl->id = id;
	cl->pid = pid;
	cl->uid = uid;
	cl->admin = uid == 0 || uid == getuid();
	memcpy(cl->name, h->name, sizeof(cl->name));
	cl->quota[HMM_TIER_HOST] = cap_quota(h->quota[HMM_TIER_HOST], hmax);
	cl->quota[HMM_TIER_DEVICE] = cap_quota(h->quota[HMM_TIER_DEVICE],
				st.tier[HMM_TIER_DEVICE].capacity);
	cl->quota[HMM_TIER_STORE] = cap_quota(h->quota[HMM_TIER_STORE],
		st.tier[HMM_TIER_STORE].capacity ?
		st.tier[HMM_TIER_STORE].capacity : UINT64_MAX);
	eng_quota_sync(e, cl);
	pthread_mutex_lock(&e->lock);
	cl->next = e->clients;
	e->clients = cl;
	e->nclients++;
	pthread_mutex_unlock(&e->lock);
	memset(rep, 0, sizeof(*rep));
	rep->version = 1;
	rep->features = h->features & HMM_PROTO_FEAT_MEMFD;
	rep->client_id = id;
	memcpy(rep->quota, cl->quota, sizeof(rep->quota));
	rep->chunk_bytes = e->chunk;
	*out = cl;
	return 0;
}

/*
 * Undo one map: unpin, release.  The client wrote straight into the
 * engine's pages (zero-copy), so there is nothing to copy back.  Called
 * with e->lock held; the engine's unmap runs with it dropped (mp is off
 * every list, and only cl's own thread reaches it).
 */
static void unmap_one(struct hmmd_engine *e, struct hmmd_client *cl,
		      struct mapping *mp)
{
	int ret;

	pthread_mutex_unlock(&e->lock);
	ret = hmm_unmap(mp->dt->t, mp->eptr);
	pthread_mutex_lock(&e->lock);
	if (ret)
		hmmd_log("client %llu: unmap of tensor %llu: %s",
			 (unsigned long long)cl->id,
			 (unsigned long long)mp->dt->id, hmm_last_error());
	mp->dt->pinned -= mp->charge;
	eng_release(e, cl, mp->charge);
	e->unmaps++;
}

void hmmd_client_free(struct hmmd_engine *e, struct hmmd_client *cl)
{
	struct hmmd_client **pp;
	struct mapping *mp;
	unsigned i;

	pthread_mutex_lock(&e->lock);
	while ((mp = cl->maps)) {
		cl->maps = mp->next;
		unmap_one(e, cl, mp);
		dt_put(e, mp->dt);
		free(mp);
	}
	for (i = 0; i < cl->nhandles; i++) {
		struct dt *dt = cl->handles[i].dt;

		if (dt->owner == cl->id)
			dt->owner = 0;
		dt_put(e, dt);
	}
	for (pp = &e->clients; *pp != cl; pp = &(*pp)->next)
		;
	*pp = cl->next;
	e->nclients--;
	pthread_mutex_unlock(&e->lock);
	free(cl->handles);
	free(cl);
}

/* ---- replies ------------------------------------------------------------------ */

struct req {
	struct hmmd_engine *e;
	struct hmmd_client *cl;
	const struct hmm_proto_msg *m;
	void *out;
	size_t cap;
	int *fd;
	int nowait;		/* a map that must wait returns 0 instead */
};

/* An ERROR reply of err with a detail; the detail also goes to the log
 * when verbose. */
static int reply_err(struct req *q, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int reply_err(struct req *q, int err, const char *fmt, ...)
{
	struct hmm_proto_error pe;
	char d[HMM_PROTO_DETAIL_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(d, sizeof(d), fmt, ap);
	va_end(ap);
	hmm_proto_error_fill(&pe, err, "%s", d);
	if (q->e->cfg->verbose)
		hmmd_log("client %llu: %s: %s", (unsigned long long)q->cl->id,
			 hmm_proto_type_name(q->m->hdr.type), d);
	return hmm_proto_error_encode(q->out, q->cap, q->m->hdr.seq, &pe);
}

static int reply_ok(struct req *q)
{
	return hmm_proto_ok_encode(q->out, q->cap, q->m->hdr.seq);
}

static int reply_tensor(struct req *q, struct dt *dt)
{
	struct hmm_proto_tensor r;
	unsigned i, nd = hmm_tensor_ndim(dt->t);

	memset(&r, 0, sizeof(r));
	r.id = dt->id;
	r.bytes = hmm_tensor_bytes(dt->t);
	r.dtype = hmm_tensor_dtype(dt->t);
	r.ndim = nd;
	for (i = 0; i < nd; i++)
		r.shape[i] = hmm_tensor_shape(dt->t)[i];
	r.flags = dt->flags;
	memcpy(r.name, dt->name, sizeof(r.name));
	return hmm_proto_tensor_reply_encode(q->out, q->cap, q->m->hdr.seq,
					     &r);
}

/* ---- handles ------------------------------------------------------------------ */

static struct handle *handle_of(struct hmmd_client *cl, uint64_t id)
{
	unsigned i;

	for (i = 0; i < cl->nhandles; i++)
		if (cl->handles[i].dt->id == id)
			return &cl->handles[i];
	return NULL;
}

/* Give cl a handle on dt (a ref); lock held.  0 or -ENOMEM. */
static int handle_add(struct hmmd_client *cl, struct dt *dt, unsigned access)
{
	struct handle *h;

	if (handle_of(cl, dt->id))
		return 0;
	if (cl->nhandles == cl->cap) {
		unsigned n = cl->cap ? cl->cap * 2 : 8;

		h = realloc(cl->handles, n * sizeof(*h));
		if (!h)
			return -ENOMEM;
		cl->handles = h;
		cl->cap = n;
	}
	cl->handles[cl->nhandles++] = (struct handle){ dt, access };
	dt->refs++;
	return 0;
}

/* Take back cl's handle on dt (lock held). */
static void handle_drop(struct hmmd_engine *e, struct hmmd_client *cl,
			struct dt *dt)
{
	struct handle *h = handle_of(cl, dt->id);

	if (!h)
		return;
	*h = cl->handles[--cl->nhandles];
	dt_put(e, dt);
}

static struct dt *find_kept(struct hmmd_engine *e, uid_t uid,
			    const char *name)
{
	struct dt *dt;

	for (dt = e->tensors; dt; dt = dt->next)
		if (dt->flags & HMM_PROTO_TENSOR_PERSIST && !dt->freed &&
		    dt->owner_uid == uid && !strcmp(dt->name, name))
			return dt;
	return NULL;
}

static struct dt *dt_new(struct hmmd_engine *e, struct hmmd_client *cl,
			 struct hmm_tensor *t, const char *name, uint32_t flags)
{
	struct dt *dt = calloc(1, sizeof(*dt));

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

/* ---- tensor_new, tensor_free, attach, share -------------------------------- */

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
	if (p + n >= HMM_PROTO_NAME_MAX) {
		if (persist)
			return -ENAMETOOLONG;
		n = HMM_PROTO_NAME_MAX - 1 - p;	/* need not be unique */
	}
	memcpy(dst, pre, p);
	memcpy(dst + p, name, n);
	dst[p + n] = 0;
	return 0;
}

/* Open the persistent tensor of cl named name; lock held (dropped around
 * the engine).  Returns dt with a handle for cl, or NULL and *err. */
static struct dt *open_kept(struct req *q, const char *name, int *err)
{
	struct hmmd_engine *e = q->e;
	char sname[HMM_PROTO_NAME_MAX];
	struct hmm_tensor *t;
	struct dt *dt = find_kept(e, q->cl->uid, name);

	if (!dt) {
		*err = store_name(sname, q->cl, name, 1);
		if (*err)
			return NULL;
		pthread_mutex_unlock(&e->lock);
		*err = hmm_tensor_open(e->h, sname, &t);
		pthread_mutex_lock(&e->lock);
		if (*err)
			return NULL;
		dt = dt_new(e, q->cl, t, name, HMM_PROTO_TENSOR_PERSIST);
		if (!dt) {
			*err = -ENOMEM;	/* the tensor stays open, unused */
			return NULL;
		}
		dt->owner = 0;
	}
	*err = handle_add(q->cl, dt, HMM_READ | HMM_WRITE);
	return *err ? NULL : dt;
}

static int tensor_new_locked(struct req *q)
{
	const struct hmm_proto_tensor *m = &q->m->u.tensor;
	int persist = m->flags & HMM_PROTO_TENSOR_PERSIST;
	struct hmmd_engine *e = q->e;
	char sname[HMM_PROTO_NAME_MAX];
	struct hmm_tensor *t;
	uint64_t bytes;
	struct dt *dt;
	int ret, had;

	ret = store_name(sname, q->cl, m->name, persist);
	if (ret)
		return reply_err(q, ret, "tensor %s: name too long with its "
				 "uid prefix (%s)", m->name, sname);
	pthread_mutex_lock(&e->lock);
	if (persist) {
		dt = find_kept(e, q->cl->uid, m->name);
		had = dt && handle_of(q->cl, dt->id);
		dt = open_kept(q, m->name, &ret);
		if (dt && !same_form(dt->t, m)) {
			if (!had)
				handle_drop(e, q->cl, dt);
			pthread_mutex_unlock(&e->lock);
			return reply_err(q, -EEXIST, "tensor %s: saved with "
					 "another dtype or shape", m->name);
		}
		if (dt) {
			pthread_mutex_unlock(&e->lock);
			return reply_tensor(q, dt);
		}
		if (ret != -ENOENT) {
			pthread_mutex_unlock(&e->lock);
			return reply_err(q, ret, "tensor %s: open: %s",
					 m->name, hmm_last_error());
		}
	}
	pthread_mutex_unlock(&e->lock);
	ret = hmm_tensor_new(e->h, sname, m->dtype, m->ndim, m->shape, &t);
	if (ret)
		return reply_err(q, ret, "tensor %s: %s", m->name,
				 hmm_last_error());
	bytes = hmm_tensor_bytes(t);
	pthread_mutex_lock(&e->lock);
	if (q->cl->used[HMM_TIER_STORE] + bytes >
	    q->cl->quota[HMM_TIER_STORE]) {
		pthread_mutex_unlock(&e->lock);
		hmm_tensor_free(t);
		return reply_err(q, -EDQUOT, "tensor %s: %llu bytes over the "
				 "store quota %llu", m->name,
				 (unsigned long long)bytes,
				 (unsigned long long)
				 q->cl->quota[HMM_TIER_STORE]);
	}
	dt = dt_new(e, q->cl, t, m->name, m->flags);
	ret = dt ? handle_add(q->cl, dt, HMM_READ | HMM_WRITE) : -ENOMEM;
	if (ret) {
		if (dt) {
			dt->freed = 1;
			dt->refs = 1;
			dt_put(e, dt);
		} else {
			hmm_tensor_free(t);
		}
		pthread_mutex_unlock(&e->lock);
		return reply_err(q, -ENOMEM, "tensor %s: no memory", m->name);
	}
	q->cl->used[HMM_TIER_STORE] += bytes;
	pthread_mutex_unlock(&e->lock);
	return reply_tensor(q, dt);
}

static int on_tensor_free(struct req *q)
{
	uint64_t id = q->m->u.tensor_free.id;
	struct hmmd_engine *e = q->e;
	struct handle *h;
	struct mapping *mp;
	struct dt *dt;

	pthread_mutex_lock(&e->lock);
	h = handle_of(q->cl, id);
	if (!h) {
		pthread_mutex_unlock(&e->lock);
		return reply_err(q, -ENOENT, "tensor %llu: not yours",
				 (unsigned long long)id);
	}
	dt = h->dt;
	for (mp = q->cl->maps; mp; mp = mp->next)
		if (mp->dt == dt) {
			pthread_mutex_unlock(&e->lock);
			return reply_err(q, -EBUSY, "tensor %llu (%s): still "
					 "mapped", (unsigned long long)id,
					 dt->name);
		}
	/* the owner frees it for everyone; an attacher only detaches */
	if (dt->owner_uid == q->cl->uid)
		dt->freed = 1;
	handle_drop(e, q->cl, dt);
	pthread_mutex_unlock(&e->lock);
	return reply_ok(q);
}

static int on_share(struct req *q)
{
	const struct hmm_proto_share *m = &q->m->u.share;
	struct hmmd_engine *e = q->e;
	struct handle *h;
	struct dt *o;

	pthread_mutex_lock(&e->lock);
	h = handle_of(q->cl, m->id);
	if (!h || h->dt->owner_uid != q->cl->uid) {
		pthread_mutex_unlock(&e->lock);
		return reply_err(q, -ENOENT, "share: tensor %llu: not yours",
				 (unsigned long long)m->id);
	}
	for (o = e->tensors; o; o = o->next)
		if (o != h->dt && o->owner_uid == q->cl->uid &&
		    !strcmp(o->share_name, m->name)) {
			pthread_mutex_unlock(&e->lock);
			return reply_err(q, -EEXIST, "share: name %s: taken by "
					 "tensor %llu", m->name,
					 (unsigned long long)o->id);
		}
	memcpy(h->dt->share_name, m->name, sizeof(m->name));
	h->dt->share_uid = m->uid;
	h->dt->share_access = m->access;
	pthread_mutex_unlock(&e->lock);
	return reply_ok(q);
}

static int attach_locked(struct req *q)
{
	const struct hmm_proto_attach *m = &q->m->u.attach;
	struct hmmd_engine *e = q->e;
	struct dt *dt;
	int ret;

	pthread_mutex_lock(&e->lock);
	if (m->owner_uid == q->cl->uid) {
		dt = open_kept(q, m->name, &ret);
		pthread_mutex_unlock(&e->lock);
		if (!dt)
			return reply_err(q, ret, "attach: %s: no persistent "
					 "tensor of uid %u by that name",
					 m->name, (unsigned)m->owner_uid);
		return reply_tensor(q, dt);
	}
	for (dt = e->tensors; dt; dt = dt->next)
		if (!dt->freed && dt->owner_uid == m->owner_uid &&
		    dt->share_name[0] && dt->share_uid == q->cl->uid &&
		    !strcmp(dt->share_name, m->name))
			break;
	if (!dt) {
		pthread_mutex_unlock(&e->lock);
		return reply_err(q, -ENOENT, "attach: %s: uid %u shares no "
				 "tensor by that name with uid %u", m->name,
				 (unsigned)m->owner_uid, (unsigned)q->cl->uid);
	}
	ret = handle_add(q->cl, dt, dt->share_access);
	pthread_mutex_unlock(&e->lock);
	if (ret)
		return reply_err(q, ret, "attach: %s: no memory", m->name);
	return reply_tensor(q, dt);
}

/*
 * Opening or making a persistent tensor drops e->lock around the engine;
 * e->open_lock keeps two clients from both missing "uU/name" and making
 * it twice.
 */
static int on_tensor_new(struct req *q)
{
	int persist = q->m->u.tensor.flags & HMM_PROTO_TENSOR_PERSIST, n;

	if (persist)
		pthread_mutex_lock(&q->e->open_lock);
	n = tensor_new_locked(q);
	if (persist)
		pthread_mutex_unlock(&q->e->open_lock);
	return n;
}

static int on_attach(struct req *q)
{
	int n;

	pthread_mutex_lock(&q->e->open_lock);
	n = attach_locked(q);
	pthread_mutex_unlock(&q->e->open_lock);
	return n;
}

/* ---- map, unmap --------------------------------------------------------------- */

/* Resolve HMM_ALL and check the range against the tensor. */
static int range_of(struct req *q, struct dt *dt, uint64_t *off,
		    uint64_t *len)
{
	const struct hmm_proto_range *m = &q->m->u.range;
	uint64_t bytes = hmm_tensor_bytes(dt->t);

	*off = m->off;
	*len = m->len == HMM_ALL ? (m->off < bytes ? bytes - m->off : 0)
				 : m->len;
	if (m->off >= bytes || *len == 0 || *len > bytes - m->off)
		return -EINVAL;
	return 0;
}

static uint64_t charge_of(struct hmmd_engine *e, uint64_t off, uint64_t len)
{
	uint64_t first = off / e->chunk, last = (off + len - 1) / e->chunk;

	return (last - first + 1) * e->chunk;
}

static int map_fail(struct req *q, struct mapping *mp, int err,
		    const char *what)
{
	int n = reply_err(q, err, "map: tensor %llu (%s) [%llu, +%llu): %s",
			  (unsigned long long)q->m->u.range.id, mp->dt->name,
			  (unsigned long long)mp->off,
			  (unsigned long long)mp->len, what);

	free(mp);
	return n;
}

/*
 * A descriptor of t's memfd for the client (sent and closed by the
 * caller) and the offset of t's byte 0 in it.  A handle without write
 * access gets a read-only reopen, so the client cannot write a tensor
 * shared with it read-only.
 */
static int map_fd(struct hmm_tensor *t, int wr, int *out, uint64_t *off)
{
	char path[64];
	int fd, ret;

	ret = hmm_tensor_host_fd(t, &fd, off);
	if (ret)
		return ret;
	if (wr) {
		*out = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	} else {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		*out = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (*out < 0)
		return hmm_err(-errno, "tensor %s: descriptor for the client: "
			       "%s", hmm_tensor_name(t), strerror(errno));
	return 0;
}

static int on_map(struct req *q)
{
	const struct hmm_proto_range *m = &q->m->u.range;
	struct hmmd_engine *e = q->e;
	struct hmm_proto_map_reply r;
	struct mapping *mp;
	struct handle *h;
	uint64_t foff = 0;
	int ret, wr, mfd = -1;

	if (m->tier != HMM_TIER_HOST)
		return reply_err(q, -ENOTSUP, "map: tier %u: hmmd maps the "
				 "host tier only (a device address of hmmd "
				 "is no use to a client)", m->tier);
	mp = calloc(1, sizeof(*mp));
	if (!mp)
		return reply_err(q, -ENOMEM, "map: no memory");
	pthread_mutex_lock(&e->lock);
	h = handle_of(q->cl, m->id);
	if (!h) {
		pthread_mutex_unlock(&e->lock);
		free(mp);
		return reply_err(q, -ENOENT, "map: tensor %llu: not yours",
				 (unsigned long long)m->id);
	}
	mp->dt = h->dt;
	if ((m->access & (HMM_WRITE | HMM_DISCARD)) &&
	    !(h->access & HMM_WRITE)) {
		pthread_mutex_unlock(&e->lock);
		return map_fail(q, mp, -EACCES, "shared read-only");
	}
	if (range_of(q, mp->dt, &mp->off, &mp->len)) {
		pthread_mutex_unlock(&e->lock);
		return map_fail(q, mp, -EINVAL, "outside the tensor");
	}
	mp->tier = m->tier;
	mp->access = m->access;
	wr = !!(h->access & HMM_WRITE);
	mp->charge = charge_of(e, mp->off, mp->len);
	ret = eng_admit(e, q->cl, mp->charge, q->nowait);
	if (ret == -EAGAIN) {		/* serve it where it may wait */
		pthread_mutex_unlock(&e->lock);
		free(mp);
		return 0;
	}
	if (ret) {
		char why[160];

		if (ret == -EDQUOT && mp->charge > q->cl->quota[HMM_TIER_HOST])
			snprintf(why, sizeof(why), "%llu bytes of chunks, more "
				 "than the client's whole host quota %llu",
				 (unsigned long long)mp->charge,
				 (unsigned long long)
				 q->cl->quota[HMM_TIER_HOST]);
		else if (ret == -EDQUOT)
			snprintf(why, sizeof(why), "over the client's host "
				 "quota for %u ms (%llu of %llu pinned by its "
				 "own maps)", e->wait_ms,
				 (unsigned long long)
				 eng_client_pinned(e, q->cl),
				 (unsigned long long)
				 q->cl->quota[HMM_TIER_HOST]);
		else
			snprintf(why, sizeof(why), "the host budget stayed "
				 "full for %u ms (%llu of %llu pinned)",
				 e->wait_ms, (unsigned long long)eng_pinned(e),
				 (unsigned long long)e->budget);
		pthread_mutex_unlock(&e->lock);
		return map_fail(q, mp, ret, why);
	}
	mp->dt->pinned += mp->charge;
	mp->dt->refs++;			/* the mapping holds it */
	pthread_mutex_unlock(&e->lock);

	ret = hmm_map(mp->dt->t, mp->off, mp->len, HMM_TIER_HOST, mp->access,
		      &mp->eptr);
	if (ret)
		goto out_release;
	/* zero-copy: the tensor's own memfd (see hmmd.h) */
	ret = map_fd(mp->dt->t, wr, &mfd, &foff);
	if (ret)
		goto out_unmap;

	pthread_mutex_lock(&e->lock);
	mp->next = q->cl->maps;
	q->cl->maps = mp;
	e->maps++;
	q->cl->maps_done++;
	pthread_mutex_unlock(&e->lock);
	memset(&r, 0, sizeof(r));
	r.id = m->id;
	r.off = mp->off;
	r.len = mp->len;
	r.addr = foff + mp->off;	/* byte off's offset in the memfd */
	r.tier = HMM_TIER_HOST;
	*q->fd = mfd;
	return hmm_proto_encode(q->out, q->cap, HMM_PROTO_MAP_REPLY,
				HMM_PROTO_F_FDS, q->m->hdr.seq, &r);

out_unmap:
	hmm_unmap(mp->dt->t, mp->eptr);
out_release:
	pthread_mutex_lock(&e->lock);
	mp->dt->pinned -= mp->charge;
	eng_release(e, q->cl, mp->charge);
	dt_put(e, mp->dt);
	pthread_mutex_unlock(&e->lock);
	return map_fail(q, mp, ret, hmm_last_error());
}

static int on_unmap(struct req *q)
{
	const struct hmm_proto_range *m = &q->m->u.range;
	struct hmmd_engine *e = q->e;
	struct mapping **pp, *mp;

	pthread_mutex_lock(&e->lock);
	for (pp = &q->cl->maps; (mp = *pp); pp = &mp->next)
		if (mp->dt->id == m->id && mp->off == m->off &&
		    mp->tier == m->tier &&
		    (m->len == HMM_ALL || mp->len == m->len))
			break;
	if (!mp) {
		pthread_mutex_unlock(&e->lock);
		return reply_err(q, -EINVAL, "unmap: tensor %llu [%llu, "
				 "+%llu): not mapped",
				 (unsigned long long)m->id,
				 (unsigned long long)m->off,
				 (unsigned long long)m->len);
	}
	*pp = mp->next;
	unmap_one(e, q->cl, mp);
	dt_put(e, mp->dt);
	pthread_mutex_unlock(&e->lock);
	free(mp);
	return reply_ok(q);
}

/* ---- prefetch, evict ------------------------------------------------------------ */

/* The tensor of id for cl, with a ref held for the call (administrators
 * may name any); NULL when not. */
static struct dt *dt_get(struct req *q, uint64_t id)
{
	struct handle *h;
	struct dt *dt = NULL;

	pthread_mutex_lock(&q->e->lock);
	h = handle_of(q->cl, id);
	if (h)
		dt = h->dt;
	else if (q->cl->admin)
		for (dt = q->e->tensors; dt && dt->id != id; dt = dt->next)
			;
	if (dt)
		dt->refs++;
	pthread_mutex_unlock(&q->e->lock);
	return dt;
}

static void dt_drop(struct req *q, struct dt *dt)
{
	pthread_mutex_lock(&q->e->lock);
	dt_put(q->e, dt);
	pthread_mutex_unlock(&q->e->lock);
}

static int on_move(struct req *q)
{
	const struct hmm_proto_range *m = &q->m->u.range;
	int evict = q->m->hdr.type == HMM_PROTO_EVICT;
	struct dt *dt = dt_get(q, m->id);
	int ret;

	if (!dt)
		return reply_err(q, -ENOENT, "%s: tensor %llu: not yours",
				 evict ? "evict" : "prefetch",
				 (unsigned long long)m->id);
	ret = evict ? hmm_evict(dt->t, m->off, m->len, m->tier) :
		      hmm_prefetch(dt->t, m->off, m->len, m->tier);
	if (!ret && evict)
		ret = hmm_wait(q->e->h, dt->t);
	dt_drop(q, dt);
	if (ret)
		return reply_err(q, ret, "%s: %s", evict ? "evict" :
				 "prefetch", hmm_last_error());
	return reply_ok(q);
}

/*
 * WAIT: the engine's prefetches and evictions of tensor id, or of every
 * tensor cl holds (id 0), are done.  The engine's I/O errors are its
 * context's: the first one met is answered to whichever waits first.
 */
static int on_wait(struct req *q)
{
	uint64_t id = q->m->u.wait.id;
	struct hmmd_engine *e = q->e;
	struct dt **v = NULL, *dt;
	unsigned i, n = 0;
	int ret = 0, r, nomem;

	if (id) {
		dt = dt_get(q, id);
		if (!dt)
			return reply_err(q, -ENOENT, "wait: tensor %llu: not "
					 "yours", (unsigned long long)id);
		ret = hmm_wait(e->h, dt->t);
		dt_drop(q, dt);
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
		return reply_err(q, -ENOMEM, "wait: no memory");
	for (i = 0; i < n; i++) {
		r = hmm_wait(e->h, v[i]->t);
		if (r && !ret)
			ret = r;
		dt_drop(q, v[i]);
	}
	free(v);
out:
	if (ret)
		return reply_err(q, ret, "wait: %s", hmm_last_error());
	return reply_ok(q);
}

/* ---- flush, stats, quota_set, list ---------------------------------------------- */

static int on_flush(struct req *q)
{
	int ret = hmm_flush(q->e->h);

	if (ret)
		return reply_err(q, ret, "flush: %s", hmm_last_error());
	return reply_ok(q);
}

static void tier_out(struct hmm_proto_tier_stats *o,
		     const struct hmm_tier_stats *t)
{
	o->capacity = t->capacity;
	o->resident = t->resident;
	o->peak = t->peak;
	o->pinned = t->pinned;
	o->bytes_in = t->bytes_in;
	o->bytes_out = t->bytes_out;
	o->hits = t->hits;
	o->misses = t->misses;
	o->evictions = t->evictions;
	o->io_ops = t->io_ops;
	o->stall_ns = (uint64_t)(t->stall_s * 1e9);
	o->io_ns = (uint64_t)(t->io_s * 1e9);
}

/* STATS, and STATS2 (version 2): the engine's counters and cl's quota. */
static int on_stats(struct req *q)
{
	struct hmm_proto_stats2_reply r2;
	struct hmm_proto_stats_reply *r = &r2.s;
	struct hmm_stats st;
	int i;

	memset(&r2, 0, sizeof(r2));
	hmm_stats(q->e->h, &st);
	for (i = 0; i < HMM_TIERS; i++)
		tier_out(&r->tier[i], &st.tier[i]);
	r->tensors = st.tensors;
	r->chunks = st.chunks;
	r->io_errors = st.io_errors;
	r2.discard_skips = st.discard_skips;
	r2.prefetches = st.prefetches;
	r2.prefetch_hits = st.prefetch_hits;
	r2.recordings = st.recordings;
	r2.divergences = st.divergences;
	r2.region_faults = st.region_faults;
	r2.region_evictions = st.region_evictions;
	r2.store_direct = st.store_direct;
	pthread_mutex_lock(&q->e->lock);
	/* maps waiting in hmmd for host room stalled as the engine's own
	   waits do: count them in the host tier's stall time */
	r->tier[HMM_TIER_HOST].stall_ns += q->e->wait_ns;
	r->clients = q->e->nclients;
	memcpy(r->quota, q->cl->quota, sizeof(r->quota));
	memcpy(r->used, q->cl->used, sizeof(r->used));
	pthread_mutex_unlock(&q->e->lock);
	if (q->m->hdr.type == HMM_PROTO_STATS2)
		return hmm_proto_stats2_reply_encode(q->out, q->cap,
						     q->m->hdr.seq, &r2);
	return hmm_proto_stats_reply_encode(q->out, q->cap, q->m->hdr.seq,
					    r);
}

static int on_quota_set(struct req *q)
{
	const struct hmm_proto_quota_set *m = &q->m->u.quota_set;
	struct hmmd_engine *e = q->e;
	struct hmmd_client *cl;
	int i;

	pthread_mutex_lock(&e->lock);
	for (cl = e->clients; cl; cl = cl->next)
		if (cl->id == (m->client_id ? m->client_id : q->cl->id))
			break;
	if (!cl || (cl != q->cl && !q->cl->admin)) {
		pthread_mutex_unlock(&e->lock);
		return reply_err(q, cl ? -EPERM : -ENOENT, "quota_set: client "
				 "%llu: %s", (unsigned long long)m->client_id,
				 cl ? "not yours (administrators only)" :
				 "no such client");
	}
	for (i = 0; i < HMM_TIERS; i++) {
		uint64_t max = cl->quota[i];

		if (q->cl->admin)	/* administrators may raise it */
			max = i == HMM_TIER_HOST ? e->budget : UINT64_MAX;
		if (m->quota[i])
			cl->quota[i] = m->quota[i] < max ? m->quota[i] : max;
	}
	eng_quota_sync(e, cl);
	pthread_mutex_unlock(&e->lock);
	hmmd_log("client %llu: quota set by client %llu: host %llu bytes",
		 (unsigned long long)cl->id, (unsigned long long)q->cl->id,
		 (unsigned long long)cl->quota[HMM_TIER_HOST]);
	return reply_ok(q);
}

static void list_client(struct hmm_proto_list_reply *r,
			const struct hmmd_client *cl)
{
	r->id = cl->id;
	r->uid = cl->uid;
	r->pid = cl->pid;
	memcpy(r->a, cl->quota, sizeof(r->a));
	memcpy(r->b, cl->used, sizeof(r->b));
	r->bytes = cl->nhandles;
	memcpy(r->name, cl->name, sizeof(r->name));
}

/* The first entry with id >= cursor that cl may see, into r (lock held). */
static void list_find(struct req *q, struct hmm_proto_list_reply *r)
{
	const struct hmm_proto_list *m = &q->m->u.list;
	const struct hmmd_client *cl, *best = NULL;
	struct dt *dt, *bdt = NULL;

	if (m->what == HMM_PROTO_LIST_CLIENTS) {
		for (cl = q->e->clients; cl; cl = cl->next)
			if (cl->id >= m->cursor && (!best || cl->id < best->id)
			    && (q->cl->admin || cl == q->cl))
				best = cl;
		if (best)
			list_client(r, best);
		return;
	}
	for (dt = q->e->tensors; dt; dt = dt->next)
		if (dt->id >= m->cursor && (!bdt || dt->id < bdt->id) &&
		    (q->cl->admin || handle_of(q->cl, dt->id)))
			bdt = dt;
	if (!bdt)
		return;
	r->id = bdt->id;
	if (hmm_tensor_residency(bdt->t, r->a))
		memset(r->a, 0, sizeof(r->a));
	r->owner = bdt->owner;
	r->uid = bdt->owner_uid;
	r->b[0] = bdt->pinned;
	r->b[1] = bdt->refs;
	r->bytes = hmm_tensor_bytes(bdt->t);
	r->flags = bdt->flags | (bdt->share_name[0] ? 1u << 31 : 0);
	memcpy(r->name, bdt->name, sizeof(r->name));
}

static int on_list(struct req *q)
{
	struct hmm_proto_list_reply r;

	memset(&r, 0, sizeof(r));
	r.what = q->m->u.list.what;
	pthread_mutex_lock(&q->e->lock);
	list_find(q, &r);
	pthread_mutex_unlock(&q->e->lock);
	return hmm_proto_list_reply_encode(q->out, q->cap, q->m->hdr.seq,
					   &r);
}

/* ---- dispatch --------------------------------------------------------------------- */

int hmmd_request(struct hmmd_engine *e, struct hmmd_client *cl,
		 const struct hmm_proto_msg *m, void *out, size_t cap,
		 int *fd)
{
	return hmmd_request_nowait(e, cl, m, out, cap, fd, 0);
}

int hmmd_request_nowait(struct hmmd_engine *e, struct hmmd_client *cl,
			const struct hmm_proto_msg *m, void *out, size_t cap,
			int *fd, int nowait)
{
	struct req q = { e, cl, m, out, cap, fd, nowait };

	*fd = -1;
	switch (m->hdr.type) {
	case HMM_PROTO_TENSOR_NEW:	return on_tensor_new(&q);
	case HMM_PROTO_TENSOR_FREE:	return on_tensor_free(&q);
	case HMM_PROTO_MAP:		return on_map(&q);
	case HMM_PROTO_UNMAP:		return on_unmap(&q);
	case HMM_PROTO_PREFETCH:
	case HMM_PROTO_EVICT:		return on_move(&q);
	case HMM_PROTO_FLUSH:		return on_flush(&q);
	case HMM_PROTO_STATS:
	case HMM_PROTO_STATS2:		return on_stats(&q);
	case HMM_PROTO_SHARE:		return on_share(&q);
	case HMM_PROTO_ATTACH:		return on_attach(&q);
	case HMM_PROTO_QUOTA_SET:	return on_quota_set(&q);
	case HMM_PROTO_LIST:		return on_list(&q);
	case HMM_PROTO_WAIT:		return on_wait(&q);
	}
	return reply_err(&q, -EPROTO, "%s: not a request",
			 hmm_proto_type_name(m->hdr.type));
}
