// SPDX-License-Identifier: MIT
/*
 * map.c — MAP and UNMAP of a range of a tensor in the host tier: the
 * engine pins the range (charged to the uid's quota, engine.c), and the
 * client gets the tensor's own memfd (see hmmd.h): no copy either way;
 * two clients of one shared tensor share its pages.  A uid that may not
 * reach the whole tensor gets a copy of the range instead (reach_ok,
 * map_window).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "err.h"
#include "guard.h"
#include "request.h"

/*
 * Copy back into the engine's pages at eptr the bytes of a write copy's
 * window (fd, the range at woff) that differ from snap, the range as it
 * was sent: the bytes the client changed, and no others, so that a copy
 * that left a byte alone never overwrites what another map wrote there
 * meanwhile (a second copy map of the range, this client's or another's,
 * or a memfd map's).  Returns the bytes of the 4 KiB pieces that
 * changed, or -errno.
 */
static int64_t copy_back(int fd, uint64_t woff, uint64_t len,
			 const uint8_t *snap, uint8_t *eptr)
{
	size_t wlen = woff + len;
	uint8_t *w = mmap(NULL, wlen, PROT_READ, MAP_SHARED, fd, 0);
	int64_t back = 0;

	if (w == MAP_FAILED)
		return -errno;
	for (uint64_t o = 0; o < len; o += 4096) {
		uint64_t n = len - o < 4096 ? len - o : 4096;
		const uint8_t *src = w + woff + o;

		if (!memcmp(src, snap + o, n))
			continue;
		for (uint64_t i = 0; i < n; i++)
			if (src[i] != snap[o + i])
				eptr[o + i] = src[i];
		back += n;
	}
	munmap(w, wlen);
	return back;
}

/*
 * Undo one map: a copy's written bytes come back (counted in
 * copy_bytes), then unpin, release; a map of the tensor's own memfd
 * wrote straight into the engine's pages, so there is nothing to copy.
 * Called with e->lock held; the engine's unmap runs with it dropped (mp
 * is off every list, and only cl's own thread reaches it).
 */
void hmmd_map_undo(struct hmmd_engine *e, struct hmmd_client *cl,
		      struct hmmd_map *mp)
{
	uint64_t back = 0;
	int64_t n;
	int ret;

	pthread_mutex_unlock(&e->lock);
	if (mp->wfd >= 0) {		/* a copy: its written bytes come back */
		n = mp->snap ? copy_back(mp->wfd, mp->woff, mp->len, mp->snap,
					 mp->eptr) : 0;
		if (n >= 0)
			back = n;
		else
			hmmd_log("client %llu: tensor %llu: copy back of "
				 "[%llu, +%llu): %s", (unsigned long long)cl->id,
				 (unsigned long long)mp->dt->id,
				 (unsigned long long)mp->off,
				 (unsigned long long)mp->len, strerror(-n));
		close(mp->wfd);
		mp->wfd = -1;
		free(mp->snap);
		mp->snap = NULL;
	}
	ret = hmm_engine_unmap_exact(mp->dt->t, mp->eptr, mp->len,
				     mp->access);
	pthread_mutex_lock(&e->lock);
	e->copy_bytes += back;
	if (ret)
		hmmd_log("client %llu: unmap of tensor %llu: %s",
			 (unsigned long long)cl->id,
			 (unsigned long long)mp->dt->id, hmm_last_error());
	mp->dt->pinned -= mp->charge;
	eng_release(e, cl, mp->charge);
	e->unmaps++;
}

/* Resolve HMM_ALL and check the range against the tensor. */
static int range_of(struct hmmd_req *q, struct hmmd_tensor *dt, uint64_t *off,
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

static int map_fail(struct hmmd_req *q, struct hmmd_map *mp, int err,
		    const char *what)
{
	int n = hmmd_reply_err(q, err, "map: tensor %llu (%s) [%llu, +%llu): %s",
			  (unsigned long long)q->m->u.range.id, mp->dt->name,
			  (unsigned long long)mp->off,
			  (unsigned long long)mp->len, what);

	free(mp);
	return n;
}

/*
 * A descriptor of dt's memfd for the client (sent and closed by the
 * caller) and the offset of its byte 0 in it.  A handle without write
 * access gets a read-only reopen, so the client cannot write a tensor
 * shared with it read-only; the file is made 0600 (memfds are created
 * 0777), so that a client of another uid cannot upgrade it by opening
 * /proc/self/fd/N for writing (no seal can do this: seals are the
 * inode's, and a write seal would stop hmmd and the writers too).  A
 * client of hmmd's own uid (or root) could still; it could ptrace hmmd
 * anyway.  A file that cannot be sealed (--host-dir)
 * is guarded (guard.c) before it leaves.  Called with e->lock held.
 */
static int map_fd(struct hmmd_tensor *dt, int wr, int *out, uint64_t *off)
{
	struct hmm_tensor *t = dt->t;
	char path[64];
	int fd, ret;

	ret = hmm_tensor_host_fd(t, &fd, off);
	if (ret)
		return ret;
	if (fchmod(fd, 0600) < 0)
		return hmm_err(-errno, "tensor %s: fchmod of its host file: %s",
			       hmm_tensor_name(t), strerror(errno));
	if (!dt->guard) {
		ret = hmmd_guard_add(fd);
		if (ret < 0)
			return hmm_err(ret, "tensor %s: guarding its host file: "
				       "%s", hmm_tensor_name(t), strerror(-ret));
		dt->guard = ret;
	}
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

/*
 * What a client can touch.  The tensor's memfd reaches all of it, not
 * only the range pinned, and a descriptor cannot be taken back: so the
 * memfd goes only to a uid whose reach (the bytes of every tensor whose
 * memfd it holds, until that tensor is freed) stays within its host
 * quota; an administrator (solo) always gets it.  Any other map gets a
 * copy (map_window).  Called with e->lock held; 1: send the memfd.
 */
static int reach_ok(struct hmmd_engine *e, struct hmmd_client *cl,
		    struct hmmd_tensor *dt)
{
	struct hmmd_uid *u = cl->u;
	uint64_t b = hmm_tensor_bytes(dt->t);
	unsigned i;

	b = (b + e->chunk - 1) / e->chunk * e->chunk;
	if (u->solo)
		return 1;
	for (i = 0; i < dt->nreached; i++)
		if (dt->reached[i] == u)
			return 1;
	if (dt->nreached == HMMD_REACHED_MAX || u->reach + b > u->quota)
		return 0;
	dt->reached[dt->nreached++] = u;
	u->reach += b;
	return 1;
}

void hmmd_map_reach_drop(struct hmmd_engine *e, struct hmmd_tensor *dt)
{
	uint64_t b = hmm_tensor_bytes(dt->t);

	b = (b + e->chunk - 1) / e->chunk * e->chunk;
	while (dt->nreached) {
		struct hmmd_uid *u = dt->reached[--dt->nreached];

		u->reach -= b;
		hmmd_uid_put(e, u);
	}
}

/*
 * A copy of mp's range for a client that may not reach the tensor's
 * memfd: a memfd window of the pinned pages (page-rounded), sealed
 * against size changes, so that all the client can touch is the range;
 * hmmd keeps it (mp->wfd) to copy a write map back at unmap, with the
 * range's bytes as sent (mp->snap), so that only what the client changed
 * comes back (copy_back); both copies count in e->copy_bytes (the metric
 * hmmd_copy_bytes_total).  *out: a descriptor for the client; *addr:
 * byte off's offset in it.  The window's pages are as many again as the
 * range's, and a write map's snapshot as many again, for the map's life.
 */
static int map_window(struct hmmd_engine *e, struct hmmd_map *mp, int *out,
		      uint64_t *addr)
{
	uint64_t bytes = hmm_tensor_bytes(mp->dt->t);
	uint64_t start = mp->off & ~4095ull;
	uint64_t end = (mp->off + mp->len + 4095) & ~4095ull;
	uint64_t copy = (end < bytes ? end : bytes) - start;
	const uint8_t *base = (const uint8_t *)mp->eptr - mp->off;
	int fd;

	if (mp->access & (HMM_WRITE | HMM_DISCARD)) {
		mp->snap = malloc(mp->len);
		if (!mp->snap)
			return hmm_err(-ENOMEM, "tensor %s: no memory for a "
				       "copy of [%llu, +%llu)", mp->dt->name,
				       (unsigned long long)mp->off,
				       (unsigned long long)mp->len);
		memcpy(mp->snap, mp->eptr, mp->len);
	}
	fd = memfd_create("hmmd-copy", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		int err = -errno;

		free(mp->snap);
		mp->snap = NULL;
		return hmm_err(err, "tensor %s: a copy's memfd: %s",
			       mp->dt->name, strerror(-err));
	}
	if (ftruncate(fd, end - start) ||
	    pwrite(fd, base + start, copy, 0) != (ssize_t)copy ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
		  F_SEAL_SEAL) ||
	    (*out = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		int err = -errno;

		close(fd);
		free(mp->snap);
		mp->snap = NULL;
		return hmm_err(err, "tensor %s: a copy of [%llu, +%llu): %s",
			       mp->dt->name, (unsigned long long)mp->off,
			       (unsigned long long)mp->len, strerror(-err));
	}
	e->copy_bytes += copy;
	mp->wfd = fd;
	mp->woff = mp->off - start;
	*addr = mp->woff;
	return 0;
}

int hmmd_req_map(struct hmmd_req *q)
{
	const struct hmm_proto_range *m = &q->m->u.range;
	struct hmmd_engine *e = q->e;
	struct hmm_proto_map_reply r;
	struct hmmd_map *mp;
	struct hmmd_handle *h;
	uint64_t foff = 0;
	int ret, wr, mfd = -1;

	if (m->tier != HMM_TIER_HOST)
		return hmmd_reply_err(q, -ENOTSUP, "map: tier %u: hmmd maps the "
				 "host tier only (a device address of hmmd "
				 "is no use to a client)", m->tier);
	mp = calloc(1, sizeof(*mp));
	if (!mp)
		return hmmd_reply_err(q, -ENOMEM, "map: no memory");
	mp->wfd = -1;
	pthread_mutex_lock(&e->lock);
	h = hmmd_handle_of(q->cl, m->id);
	if (!h) {
		pthread_mutex_unlock(&e->lock);
		free(mp);
		return hmmd_reply_err(q, -ENOENT, "map: tensor %llu: not yours",
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

		if (ret == -EDQUOT && mp->charge > q->cl->u->quota)
			snprintf(why, sizeof(why), "%llu bytes of chunks, more "
				 "than uid %u's whole host quota %llu",
				 (unsigned long long)mp->charge,
				 (unsigned)q->cl->uid,
				 (unsigned long long)q->cl->u->quota);
		else if (ret == -EDQUOT)
			snprintf(why, sizeof(why), "over uid %u's host quota "
				 "for %u ms (%llu of %llu pinned by the maps of "
				 "its %u connections)", (unsigned)q->cl->uid,
				 e->wait_ms,
				 (unsigned long long)
				 eng_uid_pinned(e, q->cl->u),
				 (unsigned long long)q->cl->u->quota,
				 q->cl->u->conns);
		else if (ret == -ESHUTDOWN)	/* hmmd_engine_stop woke it */
			snprintf(why, sizeof(why), "hmmd is shutting down");
		else if (ret == -ECONNRESET)
			snprintf(why, sizeof(why), "the client is gone");
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
	/* zero-copy: the tensor's own memfd (see hmmd.h), where the uid
	   may reach all of it; else a copy of the range */
	pthread_mutex_lock(&e->lock);
	if (reach_ok(e, q->cl, mp->dt)) {
		ret = map_fd(mp->dt, wr, &mfd, &foff);
		foff += mp->off;
	} else {
		ret = map_window(e, mp, &mfd, &foff);
	}
	if (ret) {
		pthread_mutex_unlock(&e->lock);
		goto out_unmap;
	}
	mp->next = q->cl->maps;
	q->cl->maps = mp;
	e->maps++;
	q->cl->maps_done++;
	pthread_mutex_unlock(&e->lock);
	memset(&r, 0, sizeof(r));
	r.id = m->id;
	r.off = mp->off;
	r.len = mp->len;
	r.addr = foff;			/* byte off's offset in the memfd */
	r.tier = HMM_TIER_HOST;
	r.flags = mp->wfd >= 0 ? HMM_PROTO_MAP_F_COPY : 0;
	*q->fd = mfd;
	return hmm_proto_encode(q->out, q->cap, HMM_PROTO_MAP_REPLY,
				HMM_PROTO_F_FDS, q->m->hdr.seq, &r);

out_unmap:
	hmm_engine_unmap_exact(mp->dt->t, mp->eptr, mp->len, mp->access);
out_release:
	pthread_mutex_lock(&e->lock);
	mp->dt->pinned -= mp->charge;
	eng_release(e, q->cl, mp->charge);
	hmmd_tensor_put(e, mp->dt);
	pthread_mutex_unlock(&e->lock);
	return map_fail(q, mp, ret, hmm_last_error());
}

int hmmd_req_unmap(struct hmmd_req *q)
{
	const struct hmm_proto_range *m = &q->m->u.range;
	struct hmmd_engine *e = q->e;
	struct hmmd_map **pp, **pick = NULL, *mp;
	int exact = q->m->hdr.type == HMM_PROTO_UNMAP_EXACT;

	/* of this client's maps of the range, newest first: UNMAP_EXACT's
	 * of its access; UNMAP's a read-only one before a writable one (as
	 * hmm_unmap chooses: the writes a client makes later stay seen) */
	pthread_mutex_lock(&e->lock);
	for (pp = &q->cl->maps; (mp = *pp); pp = &mp->next)
		if (mp->dt->id == m->id && mp->off == m->off &&
		    mp->tier == m->tier &&
		    (m->len == HMM_ALL || mp->len == m->len) &&
		    (!exact || mp->access == m->access) &&
		    (!pick || ((*pick)->access & (HMM_WRITE | HMM_DISCARD) &&
			       !(mp->access & (HMM_WRITE | HMM_DISCARD)))))
			pick = pp;
	pp = pick;
	mp = pp ? *pp : NULL;
	if (!mp) {
		pthread_mutex_unlock(&e->lock);
		return hmmd_reply_err(q, -EINVAL, "unmap: tensor %llu [%llu, "
				 "+%llu): not mapped%s",
				 (unsigned long long)m->id,
				 (unsigned long long)m->off,
				 (unsigned long long)m->len,
				 exact ? " with that access" : "");
	}
	*pp = mp->next;
	hmmd_map_undo(e, q->cl, mp);
	hmmd_tensor_put(e, mp->dt);
	pthread_mutex_unlock(&e->lock);
	free(mp);
	return hmmd_reply_ok(q);
}
