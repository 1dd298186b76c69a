// SPDX-License-Identifier: MIT
/*
 * conn.c — one client of hmmd: receive a datagram and decode it
 * (libhmm/src/proto/proto_sock.c over the codec proto.c), answer it.
 *
 * A client that breaks the protocol (a malformed message, a reply type,
 * anything before hello, a second hello, file descriptors sent to the
 * daemon) gets one ERROR saying why, and its connection is closed with
 * the reason logged; no other client notices.
 * Requests go to hmmd_request (request.c) and the engine.
 *
 * Each client has its own thread, which blocks in its socket and in the
 * engine: a client that pipelines requests without reading its replies
 * stalls only its own thread, in send().  A map that must wait for room
 * (the budget, or the client's own quota) is handed to a thread of its
 * own (a "job", at most CONN_JOBS_MAX at a time, else served in line),
 * so that the client's other requests, the unmaps that make that room
 * among them, go on meanwhile; its reply then comes after later ones
 * (replies are matched by seq).  When the peer goes (kill -9 included)
 * its waiting maps give up, and the thread releases its pins and handles
 * in the engine (hmmd_client_free).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine.h"
#include "err.h"
#include "hmmd.h"
#include "log.h"
#include "proto_sock.h"

#define CONN_JOBS_MAX	32	/* maps of one client waiting at once */

/* Allocated by hmmd_conn_new, freed by hmmd_conn_free; owns fd. */
struct hmmd_conn {
	int fd;
	uint64_t id;			/* this daemon run's client number */
	struct ucred cred;		/* SO_PEERCRED at accept */
	int version;			/* negotiated; 0 before hello */
	char name[HMM_PROTO_NAME_MAX];	/* from hello */
	uint64_t msgs;			/* messages served */
	const struct hmmd_config *cfg;
	struct hmmd_engine *e;
	struct hmmd_client *cl;		/* after hello; the thread's */
	pthread_t thread;
	int started;
	int done;			/* set by the thread as it ends (atomic) */
	pthread_mutex_t send_lock;	/* one reply at a time on fd */
	pthread_mutex_t jobs_lock;	/* protects jobs */
	pthread_cond_t jobs_cond;	/* a job ended */
	unsigned jobs;			/* job threads running */
	uint8_t in[HMM_PROTO_RECV_BUF];
	uint8_t out[HMM_PROTO_MSG_MAX];	/* the connection thread's */
};

/* A map served on a thread of its own; allocated by on_msg, freed by
 * job_main. */
struct job {
	struct hmmd_conn *c;
	struct hmm_proto_msg m;
	uint8_t out[HMM_PROTO_MSG_MAX];
};

int hmmd_conn_new(int fd, uint64_t id, const struct hmmd_config *cfg,
		  struct hmmd_engine *e, struct hmmd_conn **out)
{
	socklen_t len = sizeof(struct ucred);
	struct hmmd_conn *c = calloc(1, sizeof(*c));
	int fl;

	if (!c)
		return -ENOMEM;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &len) < 0) {
		int err = -errno;

		free(c);
		return err;
	}
	/* the thread blocks in its own socket */
	fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	c->fd = fd;
	c->id = id;
	c->cfg = cfg;
	c->e = e;
	pthread_mutex_init(&c->send_lock, NULL);
	pthread_mutex_init(&c->jobs_lock, NULL);
	pthread_cond_init(&c->jobs_cond, NULL);
	*out = c;
	return 0;
}

int hmmd_conn_done(struct hmmd_conn *c)
{
	return __atomic_load_n(&c->done, __ATOMIC_ACQUIRE);
}

int hmmd_conn_hung_up(struct hmmd_conn *c)
{
	struct pollfd p = { .fd = c->fd, .events = POLLRDHUP };

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP));
}

void hmmd_conn_kick(struct hmmd_conn *c)
{
	shutdown(c->fd, SHUT_RDWR);
}

void hmmd_conn_free(struct hmmd_conn *c)
{
	if (c->started)
		pthread_join(c->thread, NULL);
	close(c->fd);
	pthread_cond_destroy(&c->jobs_cond);
	pthread_mutex_destroy(&c->jobs_lock);
	pthread_mutex_destroy(&c->send_lock);
	free(c);
}

/* An ERROR of err with detail into buf; its length. */
static int error_msg(uint8_t *buf, size_t cap, uint64_t seq, int err,
		     const char *detail)
{
	struct hmm_proto_error e;

	hmm_proto_error_fill(&e, err, "%s", detail);
	return hmm_proto_error_encode(buf, cap, seq, &e);
}

/* Best effort, for a connection about to close. */
static void send_error(int fd, uint64_t seq, int err, const char *detail)
{
	uint8_t buf[HMM_PROTO_HDR_SIZE + 264];
	int n = error_msg(buf, sizeof(buf), seq, err, detail);

	if (n > 0)	/* the client is going anyway: no matter if it fails */
		hmm_proto_send(fd, buf, n, NULL, 0, MSG_DONTWAIT);
}

void hmmd_conn_refuse(int fd, int err, const char *detail)
{
	send_error(fd, 0, err, detail);
}

/* Answer seq with ERROR err and close: log the reason, return err. */
static int fail(struct hmmd_conn *c, uint64_t seq, int err,
		const char *why)
{
	hmmd_log("client %llu (pid %d uid %d%s%s): closing: %s",
		 (unsigned long long)c->id, (int)c->cred.pid,
		 (int)c->cred.uid, c->name[0] ? " " : "", c->name, why);
	send_error(c->fd, seq, err, why);
	return err;
}

/* Send the reply out[0..n) (and fd, closed here); 0 or -errno. */
static int send_buf(struct hmmd_conn *c, const uint8_t *out, int n, int fd)
{
	int ret;

	if (n < 0) {
		hmmd_log("client %llu: cannot encode a reply: %s",
			 (unsigned long long)c->id, hmm_last_error());
		if (fd >= 0)
			close(fd);
		return n;
	}
	pthread_mutex_lock(&c->send_lock);
	ret = hmm_proto_send(c->fd, out, n, fd >= 0 ? &fd : NULL,
			     fd >= 0, 0);
	pthread_mutex_unlock(&c->send_lock);
	if (fd >= 0)
		close(fd);
	if (ret && c->cfg->verbose)
		hmmd_log("client %llu: reply: %s", (unsigned long long)c->id,
			 hmm_last_error());
	return ret;
}

static int send_reply(struct hmmd_conn *c, int n, int fd)
{
	return send_buf(c, c->out, n, fd);
}

static void *job_main(void *arg)
{
	struct job *j = arg;
	struct hmmd_conn *c = j->c;
	int n, fd;

	n = hmmd_request(c->e, c->cl, &j->m, j->out, sizeof(j->out), &fd);
	send_buf(c, j->out, n, fd);
	free(j);
	pthread_mutex_lock(&c->jobs_lock);
	c->jobs--;
	pthread_cond_broadcast(&c->jobs_cond);
	pthread_mutex_unlock(&c->jobs_lock);
	return NULL;
}

/* Serve m (a map that must wait) on a job thread; -errno when none can
 * be had (the caller serves it in line). */
static int job_start(struct hmmd_conn *c, const struct hmm_proto_msg *m)
{
	struct job *j = malloc(sizeof(*j));
	pthread_attr_t at;
	pthread_t t;
	int r;

	if (!j)
		return -ENOMEM;
	j->c = c;
	j->m = *m;
	pthread_mutex_lock(&c->jobs_lock);
	if (c->jobs >= CONN_JOBS_MAX) {
		pthread_mutex_unlock(&c->jobs_lock);
		free(j);
		return -EAGAIN;
	}
	c->jobs++;
	pthread_mutex_unlock(&c->jobs_lock);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&t, &at, job_main, j);
	pthread_attr_destroy(&at);
	if (r) {
		free(j);
		pthread_mutex_lock(&c->jobs_lock);
		c->jobs--;
		pthread_mutex_unlock(&c->jobs_lock);
		return -r;
	}
	return 0;
}

void hmmd_conn_settle(struct hmmd_conn *c, const struct timespec *until)
{
	pthread_mutex_lock(&c->jobs_lock);
	while (c->jobs && pthread_cond_timedwait(&c->jobs_cond, &c->jobs_lock,
						 until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&c->jobs_lock);
}

/* The peer went: wake its waiting maps and let their jobs end. */
static void jobs_end(struct hmmd_conn *c)
{
	eng_client_gone(c->e, c->cl);
	pthread_mutex_lock(&c->jobs_lock);
	while (c->jobs)
		pthread_cond_wait(&c->jobs_cond, &c->jobs_lock);
	pthread_mutex_unlock(&c->jobs_lock);
}

static int on_hello(struct hmmd_conn *c, const struct hmm_proto_msg *m)
{
	const struct hmm_proto_hello *h = &m->u.hello;
	struct hmm_proto_hello_reply rep;
	int v, ret;

	if (c->version)
		return fail(c, m->hdr.seq, -EPROTO, "a second hello");
	v = hmm_proto_negotiate(h);
	if (v < 0)
		return fail(c, m->hdr.seq, v, hmm_last_error());
	memcpy(c->name, h->name, sizeof(c->name));
	ret = hmmd_client_new(c->e, c->id, c->cred.pid, c->cred.uid, h,
			      &c->cl, &rep);
	if (ret)
		return fail(c, m->hdr.seq, ret, hmm_last_error());
	c->version = v;
	rep.version = v;
	hmmd_log("client %llu (pid %d uid %d %s): hello: version %d, host "
		 "quota %llu bytes (asked %llu)%s", (unsigned long long)c->id,
		 (int)c->cred.pid, (int)c->cred.uid,
		 c->name[0] ? c->name : "-", v,
		 (unsigned long long)rep.quota[HMM_TIER_HOST],
		 (unsigned long long)h->quota[HMM_TIER_HOST],
		 rep.quota[HMM_TIER_HOST] < rep.chunk_bytes ?
		 ", less than a chunk: no map of it fits" : "");
	return send_reply(c, hmm_proto_hello_reply_encode(c->out,
				sizeof(c->out), m->hdr.seq, &rep), -1);
}

/* One decoded message. */
static int on_msg(struct hmmd_conn *c, const struct hmm_proto_msg *m)
{
	const char *name = hmm_proto_type_name(m->hdr.type);
	char why[HMM_PROTO_DETAIL_MAX];
	int n, fd;

	if (c->cfg->verbose)
		hmmd_log("client %llu: %s seq %llu", (unsigned long long)c->id,
			 name, (unsigned long long)m->hdr.seq);
	if (!hmm_proto_is_request(m->hdr.type)) {
		snprintf(why, sizeof(why),
			 "message %s: a reply type, sent to the daemon", name);
		return fail(c, m->hdr.seq, -EPROTO, why);
	}
	if (m->hdr.type == HMM_PROTO_HELLO)
		return on_hello(c, m);
	if (!c->version) {
		snprintf(why, sizeof(why), "message %s: before hello", name);
		return fail(c, m->hdr.seq, -EPROTO, why);
	}
	if (m->hdr.version > c->version) {
		snprintf(why, sizeof(why), "message %s: of version %u, but "
			 "hello agreed on %d", name, m->hdr.version,
			 c->version);
		return fail(c, m->hdr.seq, -EPROTO, why);
	}
	n = hmmd_request_nowait(c->e, c->cl, m, c->out, sizeof(c->out), &fd,
				1);
	if (n == 0 && job_start(c, m) == 0)
		return 0;	/* the job answers */
	if (n == 0)		/* no job: wait here */
		n = hmmd_request(c->e, c->cl, m, c->out, sizeof(c->out), &fd);
	return send_reply(c, n, fd);
}

/* Receive and handle one datagram: 0 handled, <0 close. */
static int serve_one(struct hmmd_conn *c)
{
	struct hmm_proto_msg m;
	struct pollfd p = { c->fd, POLLIN, 0 };
	char why[64];
	int ret;

	/* a connection that holds a slot must say hello soon */
	if (!c->version && poll(&p, 1, HMMD_HELLO_MS) == 0) {
		snprintf(why, sizeof(why), "no hello within %d ms",
			 HMMD_HELLO_MS);
		return fail(c, 0, -ETIMEDOUT, why);
	}
	/* fds NULL: any that come are closed and the message refused */
	ret = hmm_proto_recv(c->fd, c->in, sizeof(c->in), &m, NULL, NULL, 0);
	if (ret == -ENOTCONN || ret == -ECONNRESET) {
		if (c->cfg->verbose)
			hmmd_log("client %llu: gone after %llu messages",
				 (unsigned long long)c->id,
				 (unsigned long long)c->msgs);
		return ret;
	}
	if (ret == -EMSGSIZE || ret == -EPROTO || ret == -EINVAL)
		return fail(c, 0, ret, hmm_last_error());
	if (ret < 0) {
		hmmd_log("client %llu: closing: %s", (unsigned long long)c->id,
			 hmm_last_error());
		return ret;
	}
	c->msgs++;
	return on_msg(c, &m);
}

static void *conn_main(void *arg)
{
	struct hmmd_conn *c = arg;

	while (serve_one(c) == 0)
		;
	if (c->cl) {
		jobs_end(c);
		hmmd_client_free(c->e, c->cl);
		c->cl = NULL;
		hmmd_log("client %llu (pid %d): gone: its maps and "
			 "temporary tensors released", (unsigned long long)c->id,
			 (int)c->cred.pid);
	}
	shutdown(c->fd, SHUT_RDWR);
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

uid_t hmmd_conn_uid(const struct hmmd_conn *c)
{
	return c->cred.uid;
}

int hmmd_conn_start(struct hmmd_conn *c)
{
	int r = pthread_create(&c->thread, NULL, conn_main, c);

	if (r)
		return -r;
	c->started = 1;
	return 0;
}
