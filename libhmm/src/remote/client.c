// SPDX-License-Identifier: MIT
/*
 * client.c — hmmd's client side (see client.h): connect and hello, then
 * one round trip per call over proto_sock.c.  A host map's memfd (the
 * tensor's own memory in hmmd) is mapped here (MAP_SHARED) from the
 * page of the range's first byte, and the mapping kept until unmap.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "err.h"
#include "proto_sock.h"

/* One map this client holds.  Allocated by map, freed by unmap. */
struct hmm_cmap {
	struct hmm_cmap *next;
	uint64_t id, off, len;
	unsigned access;
	int own;		/* hmm_client_map_own's: ended by its handle */
	void *uptr;		/* what map returned: base + byte offset */
	void *wbase;		/* a copy's window (HMM_PROTO_MAP_F_COPY),
				   mapped for this map alone; or NULL */
	size_t wlen;
};

/*
 * A tensor's host file (hmmd's memfd) mapped whole, once per client, so
 * every map of the tensor returns base + offset, as in the embedded
 * engine: two maps of one range get one pointer.  Made by the first map,
 * unmapped when the tensor is freed or the client closes.  On c->bases
 * under c->lock.
 */
struct cbase {
	struct cbase *next;
	uint64_t id;
	void *base;
	size_t len;
};

/*
 * One call in flight: on its caller's stack, on c->pend from its send
 * until its reply (or its deadline).  Whoever receives the reply fills
 * r, fds and ret and sets done; the caller then takes it off the list.
 */
struct pend {
	struct pend *next;
	uint64_t seq;
	struct hmm_proto_msg *r;
	int *fds;			/* NULL: the reply may carry none */
	unsigned nfds;
	int ret;			/* the reply's type, or -errno */
	int done;
};

/*
 * Allocated by hmm_client_open, freed by hmm_client_close.
 *
 * Calls from many threads share the socket: each sends its request (one
 * datagram: sends never interleave) and waits for the reply of its seq.
 * One waiter at a time is the reader: it receives whatever arrives and
 * hands each reply to the call of its seq, until its own comes or its
 * deadline passes; then another waiter takes over.  So a thread may
 * unmap while another one's map waits in hmmd for the room it frees.
 */
struct hmm_client {
	int fd;
	pid_t pid;			/* the process that connected */
	pthread_mutex_t lock;		/* protects all below */
	pthread_cond_t cond;		/* a reply came, or the reader left */
	uint64_t seq;
	struct pend *pend;		/* calls waiting for their reply */
	int reading;			/* a thread is the reader */
	int broken;			/* -errno: the connection is dead */
	char gone[HMM_PROTO_DETAIL_MAX]; /* why, when hmmd said so */
	unsigned version;		/* negotiated at hello */
	uint32_t chunk_bytes;		/* hmmd's, from its hello reply */
	struct hmm_cmap *maps;
	struct cbase *bases;
	uint8_t in[HMM_PROTO_RECV_BUF];	/* the reader's */
};

int hmm_client_fd(const struct hmm_client *c)
{
	return c->fd;
}

uint32_t hmm_client_chunk_bytes(const struct hmm_client *c)
{
	return c->chunk_bytes;
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* Send out[0..n) whole, waiting for room until deadline; lock not held. */
static int send_req(struct hmm_client *c, const uint8_t *out, int n,
		    unsigned type, int64_t deadline)
{
	struct pollfd p = { c->fd, POLLOUT, 0 };
	int ret;

	while ((ret = hmm_proto_send(c->fd, out, n, NULL, 0,
				     MSG_DONTWAIT)) == -EAGAIN) {
		int64_t left = deadline - mono_ns();

		if (left <= 0)
			return hmm_err(-ETIMEDOUT, "call %s: hmmd did not "
				       "take it in time",
				       hmm_proto_type_name(type));
		poll(&p, 1, (int)(left / 1000000 + 1));
	}
	return ret;
}

/* The connection is dead (err): every call waiting fails with it.
 * Called with c->lock held. */
static void break_all(struct hmm_client *c, int err)
{
	struct pend *q;

	c->broken = err;
	for (q = c->pend; q; q = q->next)
		if (!q->done) {
			q->ret = err;
			q->done = 1;
		}
}

/* The reader's turn: receive one datagram (or time out at deadline) and
 * hand it to its call.  Called and returns with c->lock held. */
static void read_one(struct hmm_client *c, int64_t deadline)
{
	struct pollfd p = { c->fd, POLLIN, 0 };
	struct hmm_proto_msg m;
	int fds[HMM_PROTO_FDS_MAX], ret;
	unsigned nfds = 0;
	int64_t left = deadline - mono_ns();
	struct pend *q;

	pthread_mutex_unlock(&c->lock);
	ret = left > 0 ? poll(&p, 1, (int)(left / 1000000 + 1)) : 0;
	if (ret > 0)
		ret = hmm_proto_recv(c->fd, c->in, sizeof(c->in), &m, fds,
				     &nfds, MSG_DONTWAIT);
	else if (ret < 0 && errno != EINTR)
		ret = hmm_err(-errno, "hmmd socket: poll: %s",
			      strerror(errno));
	else
		ret = -EAGAIN;		/* nothing yet */
	if (ret == -ECONNRESET) {
		/* a peer that closed with our datagram unread is reported
		   before what it sent last (hmmd's word on why): read on */
		int r2 = hmm_proto_recv(c->fd, c->in, sizeof(c->in), &m, fds,
					&nfds, MSG_DONTWAIT);

		if (r2 > 0)
			ret = r2;
	}
	pthread_mutex_lock(&c->lock);
	if (ret == -EAGAIN)
		return;
	if (ret < 0) {
		/* the connection is dead (or hmmd broke the protocol,
		   which is as bad): every call fails with this */
		break_all(c, ret);
		return;
	}
	if (ret == HMM_PROTO_ERROR && m.hdr.seq == 0) {
		/* seq 0 is no call's: hmmd closes the connection and says
		   why (too many clients, no hello in time) */
		const char *w = m.u.error.detail;

		if (!strncmp(w, "hmmd: ", 6))	/* said once, by call() */
			w += 6;
		snprintf(c->gone, sizeof(c->gone), "%.*s",
			 (int)sizeof(c->gone) - 1, w);
		break_all(c, m.u.error.err < 0 ? m.u.error.err : -ECONNRESET);
		return;
	}
	for (q = c->pend; q && q->seq != m.hdr.seq; q = q->next)
		;
	if (!q || q->done || hmm_proto_is_request(ret) ||
	    (nfds && !q->fds)) {
		/* a reply nobody waits for (its call timed out) */
		while (nfds)
			close(fds[--nfds]);
		if (q && !q->done) {
			q->ret = -EPROTO;
			q->done = 1;
		}
		return;
	}
	*q->r = m;
	if (nfds)
		memcpy(q->fds, fds, nfds * sizeof(int));
	q->nfds = nfds;
	q->ret = ret;
	q->done = 1;
}

/*
 * Round trip of the request out[0..n) (seq already in it) as call p;
 * until its reply or timeout_ms.  Called and returns with c->lock held.
 */
static void wait_reply(struct hmm_client *c, struct pend *p, unsigned type,
		       int64_t deadline)
{
	struct pend **pp;

	while (!p->done) {
		if (c->broken) {
			p->ret = c->broken;
			break;
		}
		if (mono_ns() >= deadline) {
			p->ret = -ETIMEDOUT;
			break;
		}
		if (!c->reading) {
			c->reading = 1;
			read_one(c, deadline);
			c->reading = 0;
			pthread_cond_broadcast(&c->cond);
		} else {
			struct timespec ts;
			int64_t dl = deadline;

			/* CLOCK_MONOTONIC condvar: see hmm_client_open */
			ts.tv_sec = dl / 1000000000ll;
			ts.tv_nsec = dl % 1000000000ll;
			pthread_cond_timedwait(&c->cond, &c->lock, &ts);
		}
	}
	for (pp = &c->pend; *pp != p; pp = &(*pp)->next)
		;
	*pp = p->next;
	if (p->ret == -ETIMEDOUT && !p->done)
		hmm_err(-ETIMEDOUT, "call %s: hmmd did not answer in time",
			hmm_proto_type_name(type));
}

/* Encode type+body, round trip, want rtype; reply in *r, fds in fds.
 * Any thread; c->lock not held. */
static int call(struct hmm_client *c, unsigned type, const void *body,
		unsigned rtype, struct hmm_proto_msg *r, int *fds,
		unsigned *nfds, int timeout_ms)
{
	int64_t deadline = mono_ns() + timeout_ms * 1000000ll;
	struct pend p = { .r = r, .fds = nfds ? fds : NULL };
	uint8_t out[HMM_PROTO_MSG_MAX];
	int n, ret;

	if (nfds)
		*nfds = 0;
	pthread_mutex_lock(&c->lock);
	if (c->broken) {
		ret = c->broken;
		pthread_mutex_unlock(&c->lock);
		if (c->gone[0])
			return hmm_err(ret, "hmmd: %s", c->gone);
		return hmm_err(ret, "hmmd: %s: the connection is gone (%s)",
			       hmm_proto_type_name(type), strerror(-ret));
	}
	p.seq = ++c->seq;
	p.next = c->pend;
	c->pend = &p;
	pthread_mutex_unlock(&c->lock);
	n = hmm_proto_encode(out, sizeof(out), type, 0, p.seq, body);
	ret = n < 0 ? n : send_req(c, out, n, type, deadline);
	pthread_mutex_lock(&c->lock);
	/* a send that meets a closed connection reads on: hmmd may have
	   said why it closed it (its ERROR waits in the socket) */
	if (ret && ret != -EPIPE && ret != -ECONNRESET) {
		p.done = 1;
		p.ret = ret;
	}
	wait_reply(c, &p, type, deadline);
	pthread_mutex_unlock(&c->lock);
	ret = p.ret;
	if (ret < 0 && c->gone[0]) {
		ret = hmm_err(ret, "hmmd: %s", c->gone);
	} else if (ret == HMM_PROTO_ERROR) {
		ret = hmm_err(r->u.error.err, "hmmd: %s", r->u.error.detail);
	} else if (ret > 0 && ret != (int)rtype) {
		ret = hmm_err(-EPROTO, "hmmd: %s answered with %s",
			      hmm_proto_type_name(type),
			      hmm_proto_type_name(ret));
	} else if (ret > 0) {
		ret = 0;
	} else if (ret == -EPROTO || ret == -ENOTCONN || ret == -EPIPE ||
		   ret == -ECONNRESET) {
		/* perhaps met by another thread, the reader: say it here */
		ret = hmm_err(ret, "hmmd: %s: %s", hmm_proto_type_name(type),
			      ret == -EPROTO ? "a reply that breaks the "
			      "protocol" : "the connection is gone");
	}
	if (ret && nfds) {
		while (p.nfds)
			close(fds[--p.nfds]);
	}
	if (nfds)
		*nfds = p.nfds;
	return ret;
}

static int simple(struct hmm_client *c, unsigned type, const void *body,
		  unsigned rtype, struct hmm_proto_msg *r)
{
	struct hmm_proto_msg tmp;

	return call(c, type, body, rtype, r ? r : &tmp, NULL, NULL,
		    HMM_CLIENT_TIMEOUT_MS);
}

int hmm_client_open(const char *addr, const uint64_t quota[HMM_TIERS],
		    const char *name, struct hmm_client **out,
		    struct hmm_proto_hello_reply *rep)
{
	return hmm_client_open_feat(addr, quota, name, 0, out, rep);
}

int hmm_client_open_feat(const char *addr, const uint64_t quota[HMM_TIERS],
			 const char *name, uint32_t features,
			 struct hmm_client **out,
			 struct hmm_proto_hello_reply *rep)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	pthread_condattr_t ca;
	struct hmm_proto_hello h;
	struct hmm_proto_msg r;
	struct hmm_client *c;
	int ret;

	if (!strncmp(addr, "unix:", 5))
		addr += 5;
	if (strlen(addr) >= sizeof(sa.sun_path))
		return hmm_err(-ENAMETOOLONG, "hmmd socket %s: too long", addr);
	strcpy(sa.sun_path, addr);
	c = calloc(1, sizeof(*c));
	if (!c)
		return hmm_err(-ENOMEM, "hmmd client: no memory");
	pthread_mutex_init(&c->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cond, &ca);
	pthread_condattr_destroy(&ca);
	c->pid = getpid();
	c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (c->fd < 0 ||
	    connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		ret = hmm_err(-errno, "hmmd socket %s: %s", addr,
			      strerror(errno));
		goto out_free;
	}
	memset(&h, 0, sizeof(h));
	h.version_min = HMM_PROTO_VERSION_MIN;
	h.version_max = HMM_PROTO_VERSION_MAX;
	h.features = HMM_PROTO_FEAT_MEMFD | features;
	if (quota)
		memcpy(h.quota, quota, sizeof(h.quota));
	snprintf(h.name, sizeof(h.name), "%s", name ? name : "");
	ret = call(c, HMM_PROTO_HELLO, &h, HMM_PROTO_HELLO_REPLY, &r, NULL,
		   NULL, HMM_CLIENT_TIMEOUT_MS);
	if (ret)
		goto out_free;
	c->version = r.u.hello_reply.version;
	c->chunk_bytes = r.u.hello_reply.chunk_bytes;
	if (rep)
		*rep = r.u.hello_reply;
	*out = c;
	return 0;

out_free:
	if (c->fd >= 0)
		close(c->fd);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c);
	return ret;
}

/*
 * Hang up and wait (HMM_CLIENT_TIMEOUT_MS at most) for hmmd to hang up
 * too, which it does once it has released what the connection held
 * (daemon/conn.c): so that a context opened right after hmm_close finds
 * the quota and the tensor count as they are without this one.  Only
 * the process that connected: a forked child's shutdown would end its
 * parent's connection too.
 */
static void client_hangup(struct hmm_client *c)
{
	int64_t end = mono_ns() + HMM_CLIENT_TIMEOUT_MS * 1000000ll, left;
	struct pollfd p = { .fd = c->fd, .events = POLLIN };
	char b[64];

	if (c->pid != getpid() || c->broken || shutdown(c->fd, SHUT_WR))
		return;
	while ((left = end - mono_ns()) > 0 &&
	       poll(&p, 1, (int)(left / 1000000) + 1) == 1 &&
	       recv(c->fd, b, sizeof(b), MSG_DONTWAIT) > 0)
		;	/* late replies of calls that gave up: dropped */
}

void hmm_client_close(struct hmm_client *c)
{
	struct hmm_cmap *m;

	if (!c)
		return;
	client_hangup(c);
	while ((m = c->maps)) {
		c->maps = m->next;
		if (m->wbase)
			munmap(m->wbase, m->wlen);
		free(m);
	}
	while (c->bases) {
		struct cbase *b = c->bases;

		c->bases = b->next;
		munmap(b->base, b->len);
		free(b);
	}
	close(c->fd);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

int hmm_client_tensor_new(struct hmm_client *c, const char *name,
			  uint32_t dtype, unsigned ndim, const int64_t *shape,
			  uint32_t flags, struct hmm_proto_tensor *out)
{
	struct hmm_proto_tensor t;
	struct hmm_proto_msg r;
	unsigned i;
	int ret;

	memset(&t, 0, sizeof(t));
	t.dtype = dtype;
	t.ndim = ndim;
	for (i = 0; i < ndim && i < HMM_MAX_DIMS; i++)
		t.shape[i] = shape[i];
	t.flags = flags;
	snprintf(t.name, sizeof(t.name), "%s", name);
	ret = simple(c, HMM_PROTO_TENSOR_NEW, &t, HMM_PROTO_TENSOR_REPLY, &r);
	if (!ret && out)
		*out = r.u.tensor;
	return ret;
}

int hmm_client_tensor_free(struct hmm_client *c, uint64_t id)
{
	struct hmm_proto_tensor_free f = { id };
	struct cbase **pp, *b;
	int ret = simple(c, HMM_PROTO_TENSOR_FREE, &f, HMM_PROTO_OK, NULL);

	if (ret == -EBUSY)	/* still mapped: nothing freed */
		return ret;
	pthread_mutex_lock(&c->lock);
	for (pp = &c->bases; (b = *pp); pp = &b->next)
		if (b->id == id) {
			*pp = b->next;
			munmap(b->base, b->len);
			free(b);
			break;
		}
	pthread_mutex_unlock(&c->lock);
	return ret;
}

/* *base: tensor id's host file in this client, fd mapped whole the
 * first time (read-only when fd is); end: where the map ends in it.
 * c->lock held.  0 or -errno (detail set). */
static int client_base(struct hmm_client *c, uint64_t id, int fd,
		       uint64_t end, uint8_t **base)
{
	struct stat st = { 0 };
	struct cbase *b;

	for (b = c->bases; b && b->id != id; b = b->next)
		;
	if (!b && fstat(fd, &st))
		return hmm_err(-errno, "map: tensor %llu: fstat of the memfd: "
			       "%s", (unsigned long long)id, strerror(errno));
	if (b ? end > b->len : (uint64_t)st.st_size < end)
		return hmm_err(-EPROTO, "map: tensor %llu: host file of %llu "
			       "bytes, the map ends at %llu",
			       (unsigned long long)id, (unsigned long long)
			       (b ? b->len : (uint64_t)st.st_size),
			       (unsigned long long)end);
	if (b) {
		*base = b->base;
		return 0;
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return hmm_err(-ENOMEM, "map: no memory");
	b->id = id;
	b->len = st.st_size;
	b->base = mmap(NULL, b->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		       0);
	if (b->base == MAP_FAILED && errno == EACCES)
		b->base = mmap(NULL, b->len, PROT_READ, MAP_SHARED, fd, 0);
	if (b->base == MAP_FAILED) {
		int err = -errno;

		free(b);
		return hmm_err(err, "map: tensor %llu: mmap of the memfd: %s",
			       (unsigned long long)id, strerror(-err));
	}
	b->next = c->bases;
	c->bases = b;
	*base = b->base;
	return 0;
}

/* A copy's window (HMM_PROTO_MAP_F_COPY) fd, mapped for map m alone;
 * end: where the map ends in it.  0 or -errno (detail set). */
static int client_window(struct hmm_cmap *m, int fd, uint64_t end)
{
	struct stat st;

	if (fstat(fd, &st))
		return hmm_err(-errno, "map: tensor %llu: fstat of the copy: "
			       "%s", (unsigned long long)m->id,
			       strerror(errno));
	if ((uint64_t)st.st_size < end || st.st_size == 0)
		return hmm_err(-EPROTO, "map: tensor %llu: a copy of %llu "
			       "bytes, the map ends at %llu",
			       (unsigned long long)m->id,
			       (unsigned long long)st.st_size,
			       (unsigned long long)end);
	m->wlen = st.st_size;
	m->wbase = mmap(NULL, m->wlen, PROT_READ | PROT_WRITE, MAP_SHARED,
			fd, 0);
	if (m->wbase == MAP_FAILED) {
		int err = -errno;

		m->wbase = NULL;
		return hmm_err(err, "map: tensor %llu: mmap of the copy: %s",
			       (unsigned long long)m->id, strerror(-err));
	}
	return 0;
}

static int client_map(struct hmm_client *c, uint64_t id, uint64_t off,
		      uint64_t len, unsigned access, void **ptr,
		      struct hmm_cmap **own)
{
	struct hmm_proto_range q = { id, off, len, HMM_TIER_HOST, access };
	struct hmm_proto_msg r;
	struct hmm_cmap *m = calloc(1, sizeof(*m));
	unsigned nfds = 0;
	uint8_t *base = NULL;
	int fds[HMM_PROTO_FDS_MAX], ret;

	if (!m)
		return hmm_err(-ENOMEM, "map: no memory");
	/* no lock held while hmmd may make this map wait: another thread
	   of this client may unmap meanwhile (the room it waits for) */
	ret = call(c, HMM_PROTO_MAP, &q, HMM_PROTO_MAP_REPLY, &r, fds, &nfds,
		   HMM_CLIENT_MAP_TIMEOUT_MS);
	if (ret)
		goto out;
	if (nfds != 1) {
		ret = hmm_err(-EPROTO, "map: tensor %llu: %u fds, not 1",
			      (unsigned long long)id, nfds);
		goto out;
	}
	m->id = id;
	m->off = r.u.map_reply.off;
	m->len = r.u.map_reply.len;
	m->access = access;
	m->own = !!own;
	/* [addr, addr + len) of the memfd, the tensor's own memory in
	   hmmd (a read-only fd for a read-only share), mapped whole once;
	   or of a copy of the range, mapped for this map */
	if (r.u.map_reply.flags & HMM_PROTO_MAP_F_COPY) {
		ret = client_window(m, fds[0], r.u.map_reply.addr + m->len);
		base = m->wbase;
	} else {
		pthread_mutex_lock(&c->lock);
		ret = client_base(c, id, fds[0], r.u.map_reply.addr + m->len,
				  &base);
		pthread_mutex_unlock(&c->lock);
	}
	if (ret) {
		/* hmmd holds the pin: give it back (best effort) */
		q.access = 0;
		q.off = m->off;
		q.len = m->len;
		call(c, HMM_PROTO_UNMAP, &q, HMM_PROTO_OK, &r, NULL, NULL,
		     HMM_CLIENT_TIMEOUT_MS);
		goto out;
	}
	m->uptr = base + r.u.map_reply.addr;
	*ptr = m->uptr;
	pthread_mutex_lock(&c->lock);
	m->next = c->maps;
	c->maps = m;
	pthread_mutex_unlock(&c->lock);
	if (own)
		*own = m;
	m = NULL;
out:
	while (nfds)
		close(fds[--nfds]);
	free(m);
	return ret;
}

int hmm_client_map(struct hmm_client *c, uint64_t id, uint64_t off,
		   uint64_t len, unsigned access, void **ptr)
{
	return client_map(c, id, off, len, access, ptr, NULL);
}

int hmm_client_map_own(struct hmm_client *c, uint64_t id, uint64_t off,
		       uint64_t len, unsigned access, void **ptr,
		       struct hmm_cmap **own)
{
	return client_map(c, id, off, len, access, ptr, own);
}

/* Does a map of len bytes and access a end before one of pick's?  The
 * one that pins least first: the shorter, of equals a read-only one
 * (the embedded engine's hmm_unmap chooses so, map.c). */
static int ends_first(uint64_t len, unsigned a, const struct hmm_cmap *pick)
{
	const unsigned w = HMM_WRITE | HMM_DISCARD;

	return len < pick->len ||
	       (len == pick->len && !(a & w) && (pick->access & w));
}

/* Take off c->maps the map that returned ptr, of tensor id (0: of any
 * tensor; ids are nonzero), that an unmap of ptr ends (ends_first; the
 * latest of equals); never another's own map.  NULL if none. */
static struct hmm_cmap *map_take(struct hmm_client *c, uint64_t id,
				 void *ptr)
{
	struct hmm_cmap **pp, **pick = NULL, *m = NULL;

	pthread_mutex_lock(&c->lock);
	for (pp = &c->maps; *pp; pp = &(*pp)->next)
		if ((*pp)->uptr == ptr && !(*pp)->own &&
		    (!id || (*pp)->id == id) &&
		    (!pick || ends_first((*pp)->len, (*pp)->access, *pick)))
			pick = pp;
	if (pick) {
		m = *pick;
		*pick = m->next;
	}
	pthread_mutex_unlock(&c->lock);
	return m;
}

/* End map m, taken off c->maps: hmmd drops its pin (of that very map
 * since version 6: UNMAP_EXACT); m is freed. */
static int map_end(struct hmm_client *c, struct hmm_cmap *m)
{
	struct hmm_proto_range q = { m->id, m->off, m->len, HMM_TIER_HOST,
				     0 };
	unsigned type = HMM_PROTO_UNMAP;
	struct hmm_proto_msg r;
	int ret;

	if (c->version >= 6) {
		type = HMM_PROTO_UNMAP_EXACT;
		q.access = m->access;
	}
	/* the tensor's mapping stays (client_base): the memfd's pages
	   are the tensor's own, punched out by hmmd when it drops them */
	ret = call(c, type, &q, HMM_PROTO_OK, &r, NULL, NULL,
		   HMM_CLIENT_TIMEOUT_MS);
	if (m->wbase)		/* a copy: hmmd took its bytes back */
		munmap(m->wbase, m->wlen);
	free(m);
	return ret;
}

int hmm_client_unmap(struct hmm_client *c, void *ptr)
{
	struct hmm_cmap *m = map_take(c, 0, ptr);

	if (!m)
		return hmm_err(-EINVAL, "unmap %p: not mapped", ptr);
	return map_end(c, m);
}

int hmm_client_unmap_own(struct hmm_client *c, struct hmm_cmap *own)
{
	struct hmm_cmap **pp;
	int found = 0;

	pthread_mutex_lock(&c->lock);
	for (pp = &c->maps; *pp; pp = &(*pp)->next)
		if (*pp == own) {
			*pp = own->next;
			found = 1;
			break;
		}
	pthread_mutex_unlock(&c->lock);
	if (!found)
		return hmm_err(-EINVAL, "unmap: no such map");
	return map_end(c, own);
}

int hmm_client_unmap_tensor(struct hmm_client *c,
			    const struct hmm_proto_tensor *t, void *ptr)
{
	/* another tensor's map of ptr is not t's to end: its pin would
	   go while that tensor still counts it mapped (hmm.h: -EINVAL) */
	struct hmm_cmap *m = map_take(c, t->id, ptr);

	if (!m)
		return hmm_err(-EINVAL, "hmm_unmap: tensor %s: %p is not "
			       "mapped (unmapped twice?)", t->name, ptr);
	return map_end(c, m);
}

int hmm_client_wait(struct hmm_client *c, uint64_t id)
{
	struct hmm_proto_wait w = { id };
	struct hmm_proto_msg r;

	if (c->version < 2)	/* a version-1 hmmd has no WAIT */
		return 0;
	return call(c, HMM_PROTO_WAIT, &w, HMM_PROTO_OK, &r, NULL, NULL,
		    HMM_CLIENT_MAP_TIMEOUT_MS);
}

static int move(struct hmm_client *c, unsigned type, uint64_t id,
		uint64_t off, uint64_t len, int tier)
{
	struct hmm_proto_range q = { id, off, len, (uint32_t)tier, 0 };

	return simple(c, type, &q, HMM_PROTO_OK, NULL);
}

int hmm_client_prefetch(struct hmm_client *c, uint64_t id, uint64_t off,
			uint64_t len, int tier)
{
	return move(c, HMM_PROTO_PREFETCH, id, off, len, tier);
}

int hmm_client_evict(struct hmm_client *c, uint64_t id, uint64_t off,
		     uint64_t len, int tier)
{
	return move(c, HMM_PROTO_EVICT, id, off, len, tier);
}

int hmm_client_writeback(struct hmm_client *c, uint64_t id, uint64_t off,
			 uint64_t len)
{
	if (c->version < 3)	/* an hmmd of version 1 or 2 has none */
		return hmm_err(-EOPNOTSUPP, "writeback: hmmd speaks protocol "
			       "version %u, WRITEBACK is of version 3",
			       c->version);
	return move(c, HMM_PROTO_WRITEBACK, id, off, len, HMM_TIER_HOST);
}

int hmm_client_save(struct hmm_client *c, const struct hmm_proto_tensor *t)
{
	struct hmm_proto_save q = { t->id };

	if (c->version < 4) {	/* an hmmd of version 1 to 3 has none */
		if (t->flags & HMM_PROTO_TENSOR_PERSIST)
			return 0;	/* its FLUSH saves that one */
		return hmm_err(-EOPNOTSUPP, "hmm_flush: tensor %s: hmmd "
			       "speaks protocol version %u, saving a tensor "
			       "(SAVE) is of version 4: upgrade hmmd",
			       t->name, c->version);
	}
	return simple(c, HMM_PROTO_SAVE, &q, HMM_PROTO_OK, NULL);
}

int hmm_client_tensor_rm(struct hmm_client *c, uint64_t id)
{
	struct hmm_proto_tensor_free q = { id };

	if (c->version < 5)	/* an hmmd of version 1 to 4 has none */
		return hmm_err(-EOPNOTSUPP, "rm: hmmd speaks protocol version "
			       "%u, deleting a saved tensor (TENSOR_RM) is of "
			       "version 5: upgrade hmmd", c->version);
	return simple(c, HMM_PROTO_TENSOR_RM, &q, HMM_PROTO_OK, NULL);
}

int hmm_client_flush(struct hmm_client *c)
{
	return simple(c, HMM_PROTO_FLUSH, NULL, HMM_PROTO_OK, NULL);
}

int hmm_client_stats(struct hmm_client *c, struct hmm_proto_stats_reply *st)
{
	struct hmm_proto_msg r;
	int ret = simple(c, HMM_PROTO_STATS, NULL, HMM_PROTO_STATS_REPLY, &r);

	if (!ret)
		*st = r.u.stats_reply;
	return ret;
}

int hmm_client_share(struct hmm_client *c, uint64_t id, uint32_t uid,
		     unsigned access, const char *name)
{
	struct hmm_proto_share s = { id, uid, access, "" };

	snprintf(s.name, sizeof(s.name), "%s", name);
	return simple(c, HMM_PROTO_SHARE, &s, HMM_PROTO_OK, NULL);
}

int hmm_client_attach(struct hmm_client *c, uint32_t owner_uid,
		      const char *name, struct hmm_proto_tensor *out)
{
	struct hmm_proto_attach a = { owner_uid, "" };
	struct hmm_proto_msg r;
	int ret;

	snprintf(a.name, sizeof(a.name), "%s", name);
	ret = simple(c, HMM_PROTO_ATTACH, &a, HMM_PROTO_TENSOR_REPLY, &r);
	if (!ret && out)
		*out = r.u.tensor;
	return ret;
}

int hmm_client_quota_set(struct hmm_client *c, uint64_t client_id,
			 const uint64_t quota[HMM_TIERS])
{
	struct hmm_proto_quota_set q = { client_id, { 0 } };

	memcpy(q.quota, quota, sizeof(q.quota));
	return simple(c, HMM_PROTO_QUOTA_SET, &q, HMM_PROTO_OK, NULL);
}

int hmm_client_list(struct hmm_client *c, uint32_t what, uint64_t cursor,
		    struct hmm_proto_list_reply *out)
{
	struct hmm_proto_list l = { what, cursor };
	struct hmm_proto_msg r;
	int ret = simple(c, HMM_PROTO_LIST, &l, HMM_PROTO_LIST_REPLY, &r);

	if (!ret)
		*out = r.u.list_reply;
	return ret;
}

int hmm_client_stats2(struct hmm_client *c, struct hmm_proto_stats2_reply *r)
{
	struct hmm_proto_msg m;
	int ret;

	memset(r, 0, sizeof(*r));
	if (c->version < 2)	/* STATS: the tier counters only */
		return hmm_client_stats(c, &r->s);
	ret = simple(c, HMM_PROTO_STATS2, NULL, HMM_PROTO_STATS2_REPLY, &m);
	if (!ret)
		*r = m.u.stats2_reply;
	return ret;
}
