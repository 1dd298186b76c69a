// SPDX-License-Identifier: MIT
/*
 * conn.c — one client of hmmd: receive a datagram and decode it
 * (libhmm/src/proto_sock.c over the codec proto.c), answer it.
 *
 * A client that breaks the protocol (a malformed message, a reply type,
 * anything before hello, a second hello, file descriptors sent to the
 * daemon) gets one ERROR saying why, and its connection is closed with
 * the reason logged; no other client notices.
 * Requests that need the engine are answered with -ENOSYS (see hmmd.h).
 *
 * Back-pressure: a reply the client's socket has no room for is kept
 * (one per client) and the client is not read again until it has been
 * sent, so a client that pipelines requests without reading stalls only
 * itself, and the daemon's memory per client stays bounded.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "err.h"
#include "hmmd.h"
#include "proto_sock.h"

/* Allocated by hmmd_conn_new, freed by hmmd_conn_free; owns fd. */
struct hmmd_conn {
	int fd;
	uint64_t id;			/* this daemon run's client number */
	struct ucred cred;		/* SO_PEERCRED at accept */
	int version;			/* negotiated; 0 before hello */
	char name[HMM_PROTO_NAME_MAX];	/* from hello */
	uint64_t msgs;			/* messages served */
	const struct hmmd_config *cfg;
	size_t out_len;			/* bytes in out; 0 = none waiting */
	uint8_t out[HMM_PROTO_MSG_MAX];	/* a reply waiting for room */
};

#define MSGS_PER_TURN	64	/* then let the other clients in */

int hmmd_conn_new(int fd, uint64_t id, const struct hmmd_config *cfg,
		  struct hmmd_conn **out)
{
	socklen_t len = sizeof(struct ucred);
	struct hmmd_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->cred, &len) < 0) {
		int err = -errno;

		free(c);
		return err;
	}
	c->fd = fd;
	c->id = id;
	c->cfg = cfg;
	*out = c;
	return 0;
}

int hmmd_conn_fd(const struct hmmd_conn *c)
{
	return c->fd;
}

void hmmd_conn_free(struct hmmd_conn *c)
{
	close(c->fd);
	free(c);
}

int hmmd_conn_events(const struct hmmd_conn *c)
{
	return c->out_len ? EPOLLOUT : EPOLLIN;
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

/* Send what waits in c->out; 0 (sent or still waiting) or -errno. */
static int flush_out(struct hmmd_conn *c)
{
	int ret = hmm_proto_send(c->fd, c->out, c->out_len, NULL, 0,
				 MSG_DONTWAIT);

	if (ret == -EAGAIN)
		return 0;
	if (ret) {
		hmmd_log("client %llu: closing: %s", (unsigned long long)c->id,
			 hmm_last_error());
		return ret;
	}
	c->out_len = 0;
	return 0;
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

/* A reply that keeps the connection: sent now, or kept until room. */
static int reply_error(struct hmmd_conn *c, uint64_t seq, int err,
		       const char *detail)
{
	int n = error_msg(c->out, sizeof(c->out), seq, err, detail);

	if (n < 0)
		return n;
	c->out_len = n;
	n = flush_out(c);
	if (!n && c->out_len && c->cfg->verbose)
		hmmd_log("client %llu: not reading its replies: stalled",
			 (unsigned long long)c->id);
	return n;
}

static int on_hello(struct hmmd_conn *c, const struct hmm_proto_msg *m)
{
	const struct hmm_proto_hello *h = &m->u.hello;
	char detail[HMM_PROTO_DETAIL_MAX];
	int v;

	if (c->version)
		return fail(c, m->hdr.seq, -EPROTO, "a second hello");
	v = hmm_proto_negotiate(h);
	if (v < 0)
		return fail(c, m->hdr.seq, v, hmm_last_error());
	c->version = v;
	memcpy(c->name, h->name, sizeof(c->name));
	hmmd_log("client %llu (pid %d uid %d %s): hello: version %d, asks "
		 "device %llu host %llu store %llu bytes",
		 (unsigned long long)c->id, (int)c->cred.pid,
		 (int)c->cred.uid, c->name[0] ? c->name : "-", v,
		 (unsigned long long)h->quota[HMM_TIER_DEVICE],
		 (unsigned long long)h->quota[HMM_TIER_HOST],
		 (unsigned long long)h->quota[HMM_TIER_STORE]);
	snprintf(detail, sizeof(detail),
		 "hello: protocol version %d agreed, but hmmd's engine "
		 "(quotas, the shared host tier) is not built yet", v);
	return reply_error(c, m->hdr.seq, -ENOSYS, detail);
}

/* One decoded message. */
static int on_msg(struct hmmd_conn *c, const struct hmm_proto_msg *m)
{
	const char *name = hmm_proto_type_name(m->hdr.type);
	char why[HMM_PROTO_DETAIL_MAX];

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
	snprintf(why, sizeof(why),
		 "%s: not built: hmmd has no engine yet (tensors, maps, "
		 "flush, stats, sharing and quotas wait for libhmm's engine)",
		 name);
	return reply_error(c, m->hdr.seq, -ENOSYS, why);
}

/* Receive and handle one datagram: 1 handled, 0 none queued, <0 close. */
static int serve_one(struct hmmd_conn *c)
{
	static uint8_t buf[HMM_PROTO_RECV_BUF];
	struct hmm_proto_msg m;
	int ret;

	/* fds NULL: any that come are closed and the message refused */
	ret = hmm_proto_recv(c->fd, buf, sizeof(buf), &m, NULL, NULL,
			     MSG_DONTWAIT);
	if (ret == -EAGAIN)
		return 0;
	if (ret == -ENOTCONN) {
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
	ret = on_msg(c, &m);
	return ret < 0 ? ret : 1;
}

int hmmd_conn_serve(struct hmmd_conn *c)
{
	int i, ret;

	for (i = 0; i < MSGS_PER_TURN; i++) {
		if (c->out_len) {
			ret = flush_out(c);
			if (ret || c->out_len)
				return ret;	/* wait for EPOLLOUT */
		}
		ret = serve_one(c);
		if (ret <= 0)
			return ret;
	}
	return 0;
}
