/* SPDX-License-Identifier: MIT */
/*
 * proto_sock.h — hmmd messages on a SOCK_SEQPACKET socket: one datagram
 * per message, file descriptors beside it as SCM_RIGHTS.  The thin I/O
 * layer over the pure codec (proto.h), shared by hmmd and by libhmm's
 * shared mode so that both sides enforce the same rules:
 *
 *  - a message carries fds if and only if its header has HMM_PROTO_F_FDS,
 *    and at most HMM_PROTO_FDS_MAX of them; a receiver closes every fd of
 *    a message that breaks this and fails it with -EPROTO;
 *  - a datagram longer than HMM_PROTO_MSG_MAX is -EMSGSIZE, never read
 *    in part as if it were whole;
 *  - the peer going away is -ENOTCONN (it closed: end of file) or -EPIPE
 *    / -ECONNRESET (it vanished while we sent); never SIGPIPE.
 *
 * Every function returns 0 (or a message type) or -errno, and leaves a
 * detail for hmm_last_error().  Threading: any thread; one socket must
 * not be used by two calls at the same time (the caller serialises).
 */
#ifndef HMM_PROTO_SOCK_H
#define HMM_PROTO_SOCK_H

#include "proto.h"

#define HMM_PROTO_FDS_MAX	4	/* fds one message may carry */

/* Receive buffers must hold one byte more than the longest message. */
#define HMM_PROTO_RECV_BUF	(HMM_PROTO_MSG_MAX + 1)

/*
 * Send the encoded message buf[0..len) with nfds fds (0 when the header
 * has no HMM_PROTO_F_FDS flag, 1..HMM_PROTO_FDS_MAX when it has).
 * flags: 0 (block) or MSG_DONTWAIT.  Returns 0, -EINVAL (flag and fds
 * disagree, or buf is not a message), -EAGAIN (MSG_DONTWAIT and no
 * room), -EPIPE / -ECONNRESET (the peer is gone), or another -errno.
 */
int hmm_proto_send(int sock, const void *buf, size_t len, const int *fds,
		   unsigned nfds, int flags);

/*
 * Receive one message into buf (cap >= HMM_PROTO_RECV_BUF) and decode it
 * into *msg; its fds (close-on-exec, owned by the caller from now on) go
 * to fds[0..*nfds).  fds may be NULL when the caller takes none: then a
 * message with fds fails.  flags: 0 (block) or MSG_DONTWAIT.
 * Returns the message type (> 0), or -ENOTCONN (the peer closed),
 * -EAGAIN, -EMSGSIZE / -EPROTO / -EINVAL (a malformed message: nothing
 * is left open), or another -errno.
 */
int hmm_proto_recv(int sock, void *buf, size_t cap, struct hmm_proto_msg *msg,
		   int *fds, unsigned *nfds, int flags);

/*
 * One round trip for a client: send the request buf[0..len) (no fds),
 * then wait up to timeout_ms (-1: for ever) for its reply, which must
 * carry the same seq and be a reply type.  The reply is decoded into
 * *reply, its fds as in hmm_proto_recv().  rbuf: cap bytes for it.
 * Returns the reply's type, the err of an ERROR reply (its detail then
 * reads "hmmd: <detail>"), -ETIMEDOUT, -ENOTCONN / -EPIPE / -ECONNRESET
 * (hmmd is gone), -EPROTO (a reply to another seq, a request type), or
 * an error of hmm_proto_recv().
 */
int hmm_proto_call(int sock, const void *buf, size_t len, void *rbuf,
		   size_t cap, struct hmm_proto_msg *reply, int *fds,
		   unsigned *nfds, int timeout_ms);

#endif /* HMM_PROTO_SOCK_H */
