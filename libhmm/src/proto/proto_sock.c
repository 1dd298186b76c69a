// SPDX-License-Identifier: MIT
/*
 * proto_sock.c — hmmd messages on a SOCK_SEQPACKET socket (see
 * proto_sock.h): send and receive with SCM_RIGHTS, and a client's
 * request/reply round trip bounded in time.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "proto_sock.h"

/* Control buffer for HMM_PROTO_FDS_MAX fds, aligned for cmsghdr. */
union fd_ctl {
	char buf[CMSG_SPACE(HMM_PROTO_FDS_MAX * sizeof(int))];
	struct cmsghdr align;
};

static void close_all(const int *fds, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++)
		close(fds[i]);
}

/* -errno of a failed send or recv, as a sentence. */
static int io_err(int err, const char *what, const char *type)
{
	const char *why = err == EAGAIN ? "no room (would block)" :
			  err == EPIPE || err == ECONNRESET ? "peer is gone" :
			  strerror(err);

	return hmm_err(-err, "%s %s: %s", what, type, why);
}

int hmm_proto_send(int sock, const void *buf, size_t len, const int *fds,
		   unsigned nfds, int flags)
{
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct hmm_proto_hdr h;
	union fd_ctl ctl;
	const char *type;
	ssize_t n;

	if (hmm_proto_hdr_decode(buf, len, &h)) {
		char why[512];

		snprintf(why, sizeof(why), "%s", hmm_last_error());
		return hmm_err(-EINVAL, "send: not a message: %s", why);
	}
	type = hmm_proto_type_name(h.type);
	if (!!(h.flags & HMM_PROTO_F_FDS) != (nfds > 0) ||
	    nfds > HMM_PROTO_FDS_MAX)
		return hmm_err(-EINVAL,
			       "send %s: %u fds, flag F_FDS %s (1..%d with it, "
			       "0 without)", type, nfds,
			       h.flags & HMM_PROTO_F_FDS ? "set" : "clear",
			       HMM_PROTO_FDS_MAX);
	if (nfds) {
		struct cmsghdr *cm;

		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	}
	do
		n = sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return io_err(errno, "send", type);
	return 0;
}

/* Collect the fds that came with mh into got[]; their count. */
static unsigned take_fds(struct msghdr *mh, int *got)
{
	struct cmsghdr *cm;
	unsigned n = 0;

	for (cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		size_t k, i;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < k && n < HMM_PROTO_FDS_MAX; i++)
			memcpy(&got[n++], CMSG_DATA(cm) + i * sizeof(int),
			       sizeof(int));
	}
	return n;
}

/* The fds that came with a decoded message agree with its header. */
static int check_fds(const struct hmm_proto_msg *msg, unsigned n,
		     int taken, int ctrunc)
{
	const char *type = hmm_proto_type_name(msg->hdr.type);

	if (n && !taken)
		return hmm_err(-EPROTO, "message %s: %u file descriptors came "
			       "with it: none are taken here", type, n);
	if (ctrunc)
		return hmm_err(-EPROTO, "message %s: more than %d file "
			       "descriptors came with it", type,
			       HMM_PROTO_FDS_MAX);
	if (!!(msg->hdr.flags & HMM_PROTO_F_FDS) != (n > 0))
		return hmm_err(-EPROTO, "message %s: %u file descriptors came "
			       "with it, flag F_FDS %s", type, n,
			       msg->hdr.flags & HMM_PROTO_F_FDS ?
			       "set" : "clear");
	return 0;
}

int hmm_proto_recv(int sock, void *buf, size_t cap, struct hmm_proto_msg *msg,
		   int *fds, unsigned *nfds, int flags)
{
	struct iovec iov = { buf, cap };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	int got[HMM_PROTO_FDS_MAX];
	union fd_ctl ctl;
	unsigned n_got;
	ssize_t n;
	int ret;

	if (nfds)
		*nfds = 0;
	if (cap < HMM_PROTO_RECV_BUF)
		return hmm_err(-EINVAL, "recv: buffer of %zu bytes, want %d",
			       cap, HMM_PROTO_RECV_BUF);
	mh.msg_control = ctl.buf;
	mh.msg_controllen = sizeof(ctl.buf);
	do
		n = recvmsg(sock, &mh, flags | MSG_TRUNC | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return io_err(errno, "recv", "message");
	n_got = take_fds(&mh, got);
	if (n == 0) {
		close_all(got, n_got);
		return hmm_err(-ENOTCONN, "recv: the peer closed the socket");
	}
	ret = hmm_proto_decode(buf, (size_t)n < cap ? (size_t)n : cap, msg);
	if (ret > 0)
		ret = check_fds(msg, n_got, fds && nfds,
				mh.msg_flags & MSG_CTRUNC);
	if (ret < 0) {
		close_all(got, n_got);
		return ret;
	}
	if (n_got) {
		memcpy(fds, got, n_got * sizeof(int));
		*nfds = n_got;
	}
	return msg->hdr.type;
}

/* Milliseconds left until deadline (CLOCK_MONOTONIC ns); -1: none. */
static int left_ms(int64_t deadline)
{
	struct timespec ts;
	int64_t now;

	if (deadline < 0)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = ts.tv_sec * 1000000000ll + ts.tv_nsec;
	return now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
}

/* Wait for ev on sock until deadline: 0, or -ETIMEDOUT. */
static int wait_for(int sock, short ev, int64_t deadline, const char *type)
{
	struct pollfd p = { sock, ev, 0 };
	int ms, r;

	for (;;) {
		ms = left_ms(deadline);
		if (ms == 0)
			return hmm_err(-ETIMEDOUT, "call %s: hmmd did not %s "
				       "in time", type,
				       ev == POLLOUT ? "take it" : "answer");
		r = poll(&p, 1, ms);
		if (r > 0 || (r < 0 && errno != EINTR))
			return 0;	/* the next send/recv says what */
	}
}

int hmm_proto_call(int sock, const void *buf, size_t len, void *rbuf,
		   size_t cap, struct hmm_proto_msg *reply, int *fds,
		   unsigned *nfds, int timeout_ms)
{
	struct hmm_proto_hdr h;
	int64_t deadline = -1;
	const char *type;
	struct timespec ts;
	int ret;

	if (hmm_proto_hdr_decode(buf, len, &h))
		return hmm_err(-EINVAL, "call: not a message");
	type = hmm_proto_type_name(h.type);
	if (timeout_ms >= 0) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		deadline = ts.tv_sec * 1000000000ll + ts.tv_nsec +
			   timeout_ms * 1000000ll;
	}
	while ((ret = hmm_proto_send(sock, buf, len, NULL, 0,
				     MSG_DONTWAIT)) == -EAGAIN) {
		ret = wait_for(sock, POLLOUT, deadline, type);
		if (ret)
			return ret;
	}
	if (ret)
		return ret;
	for (;;) {
		ret = wait_for(sock, POLLIN, deadline, type);
		if (!ret)
			ret = hmm_proto_recv(sock, rbuf, cap, reply, fds, nfds,
					     MSG_DONTWAIT);
		if (ret != -EAGAIN)
			break;
	}
	if (ret < 0)
		return ret;
	if (reply->hdr.seq != h.seq || hmm_proto_is_request(ret)) {
		if (nfds)
			close_all(fds, *nfds);
		if (nfds)
			*nfds = 0;
		return hmm_err(-EPROTO, "call %s seq %llu: got %s seq %llu",
			       type, (unsigned long long)h.seq,
			       hmm_proto_type_name(ret),
			       (unsigned long long)reply->hdr.seq);
	}
	if (ret == HMM_PROTO_ERROR)
		return hmm_err(reply->u.error.err, "hmmd: %s",
			       reply->u.error.detail);
	return ret;
}
