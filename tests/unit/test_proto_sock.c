// SPDX-License-Identifier: MIT
/*
 * test_proto_sock — hmmd messages on a SOCK_SEQPACKET socket pair
 * (libhmm/src/proto/proto_sock.c): round trip; a memfd passed with F_FDS
 * reaches the other side as the same file; fds without the flag, the
 * flag without fds, too many fds, fds where none are taken: -EPROTO and
 * no fd left open; an oversized datagram: -EMSGSIZE; the peer closing or
 * dying: -ENOTCONN / -EPIPE, never SIGPIPE, never a hang; a call: its
 * reply, an ERROR's err and detail, a reply to another seq, a timeout.
 */
#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "t.h"
#include "err.h"
#include "proto_sock.h"

static uint8_t buf[8192], rbuf[HMM_PROTO_RECV_BUF];

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;		/* the DIR's own */
}

static void pair(int sv[2])
{
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
		t_fail_all("socketpair: %s", strerror(errno));
}

static int stats_msg(uint64_t seq)
{
	return hmm_proto_stats_encode(buf, sizeof(buf), seq);
}

static int hello_reply_msg(uint64_t seq, uint32_t flags)
{
	struct hmm_proto_hello_reply r = { 1, HMM_PROTO_FEAT_MEMFD, 3,
					   { 0, 1 << 20, 0 }, 2 << 20 };

	return hmm_proto_encode(buf, sizeof(buf), HMM_PROTO_HELLO_REPLY, flags,
				seq, &r);
}

/* Send buf[0..n) with nfds copies of fd, bypassing hmm_proto_send. */
static void raw_send(int sock, int n, int fd, int nfds)
{
	char ctl[CMSG_SPACE(16 * sizeof(int))] = { 0 };
	struct iovec iov = { buf, n };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	int i;

	if (nfds) {
		mh.msg_control = ctl;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		for (i = 0; i < nfds; i++)
			memcpy(CMSG_DATA(cm) + i * sizeof(int), &fd, sizeof(int));
	}
	if (sendmsg(sock, &mh, 0) != n)
		t_fail_all("sendmsg: %s", strerror(errno));
}

static void test_basic(void)
{
	struct hmm_proto_msg m;
	int sv[2], fds[HMM_PROTO_FDS_MAX], n;
	unsigned nfds = 9;

	pair(sv);
	n = stats_msg(5);
	t_eq(hmm_proto_send(sv[0], buf, n, NULL, 0, 0), 0, "send stats");
	t_eq(hmm_proto_recv(sv[1], rbuf, sizeof(rbuf), &m, fds, &nfds, 0),
	     HMM_PROTO_STATS, "recv stats");
	t_ok(m.hdr.seq == 5 && nfds == 0, "seq 5, no fds");
	t_eq(hmm_proto_recv(sv[1], rbuf, sizeof(rbuf), &m, fds, &nfds,
			    MSG_DONTWAIT), -EAGAIN, "nothing queued: -EAGAIN");
	t_eq(hmm_proto_recv(sv[1], rbuf, HMM_PROTO_MSG_MAX, &m, fds, &nfds, 0),
	     -EINVAL, "a buffer without the extra byte: -EINVAL");
	t_eq(hmm_proto_send(sv[0], buf, 20, NULL, 0, 0), -EINVAL,
	     "send of 20 bytes (not a message): -EINVAL");
	t_eq(hmm_proto_send(sv[0], buf, n, &sv[0], 1, 0), -EINVAL,
	     "send stats with an fd: -EINVAL");

	memset(buf, 0, 5000);
	n = stats_msg(6);
	send(sv[0], buf, 5000, 0);
	t_eq(hmm_proto_recv(sv[1], rbuf, sizeof(rbuf), &m, fds, &nfds, 0),
	     -EMSGSIZE, "a 5000-byte datagram: -EMSGSIZE");
	t_ok(strstr(hmm_last_error(), "longer than 4096") != NULL,
	     "detail: %s", hmm_last_error());
	n = stats_msg(7);
	send(sv[0], buf, n, 0);
	t_eq(hmm_proto_recv(sv[1], rbuf, sizeof(rbuf), &m, fds, &nfds, 0),
	     HMM_PROTO_STATS, "the next message is whole");

	close(sv[1]);
	t_eq(hmm_proto_send(sv[0], buf, n, NULL, 0, 0), -EPIPE,
	     "send to a closed peer: -EPIPE, no SIGPIPE");
	close(sv[0]);
	pair(sv);
	close(sv[0]);
	t_eq(hmm_proto_recv(sv[1], rbuf, sizeof(rbuf), &m, fds, &nfds, 0),
	     -ENOTCONN, "recv from a closed peer: -ENOTCONN");
	close(sv[1]);
}

static void test_fds(void)
{
	struct hmm_proto_msg m;
	int sv[2], fds[HMM_PROTO_FDS_MAX], mfd, n, before;
	unsigned nfds;
	struct stat a, b;
	char *p;

	pair(sv);
	mfd = memfd_create("hmm-host", MFD_CLOEXEC);
	if (mfd < 0 || ftruncate(mfd, 4096))
		t_fail_all("memfd: %s", strerror(errno));
	n = hello_reply_msg(1, HMM_PROTO_F_FDS);
	t_eq(hmm_proto_send(sv[0], buf, n, &mfd, 1, 0), 0,
	     "send hello_reply with a memfd");
	t_eq(hmm_proto_recv(sv[1], rbuf, sizeof(rbuf), &m, fds, &nfds, 0),
	     HMM_PROTO_HELLO_REPLY, "recv it");
	t_ok(nfds == 1 && !fstat(fds[0], &b) && !fstat(mfd, &a) &&
	     a.st_ino == b.st_ino && a.st_dev == b.st_dev,
	     "one fd, the same file");
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	if (p != MAP_FAILED) {
		char q = 0;

		strcpy(p, "shared");
		t_ok(pread(mfd, &q, 1, 3) == 1 && q == 'r',
		     "written through the received fd, read through ours");
		munmap(p, 4096);
	}
	close(fds[0]);

	before = open_fds();
	n = hello_reply_msg(2, 0);
	raw_send(sv[0], n, mfd, 1);
	t_eq(hmm_proto_recv(sv[1], rbuf, sizeof(rbuf), &m, fds, &nfds, 0),
	     -EPROTO, "an fd without F_FDS: -EPROTO");
	t_ok(strstr(hmm_last_error(), "flag F_FDS clear") != NULL,
	     "detail: %s", hmm_last_error());
	n = hello_reply_msg(3, HMM_PROTO_F_FDS);
	raw_send(sv[0], n, -1, 0);
	t_eq(hmm_proto_recv(sv[1], rbuf, sizeof(rbuf), &m, fds, &nfds, 0),
	     -EPROTO, "F_FDS without an fd: -EPROTO");
	raw_send(sv[0], n, mfd, 7);
	t_eq(hmm_proto_recv(sv[1], rbuf, sizeof(rbuf), &m, fds, &nfds, 0),
	     -EPROTO, "7 fds: -EPROTO");
	t_ok(strstr(hmm_last_error(), "more than 4") != NULL, "detail: %s",
	     hmm_last_error());
	raw_send(sv[0], n, mfd, 2);
	t_eq(hmm_proto_recv(sv[1], rbuf, sizeof(rbuf), &m, NULL, NULL, 0),
	     -EPROTO, "fds where none are taken: -EPROTO");
	t_ok(strstr(hmm_last_error(), "none are taken here") != NULL,
	     "detail: %s", hmm_last_error());
	memset(buf, 0xee, 64);
	raw_send(sv[0], 64, mfd, 3);
	t_eq(hmm_proto_recv(sv[1], rbuf, sizeof(rbuf), &m, fds, &nfds, 0),
	     -EPROTO, "garbage with fds: -EPROTO");
	t_eq(open_fds(), before, "no fd of a refused message stays open");
	t_eq(nfds, 0, "and none is handed out");
	close(mfd);
	close(sv[0]);
	close(sv[1]);
}

/* A peer that answers one request after another, as told by mode. */
static void peer(int sock, int mode)
{
	struct hmm_proto_msg m;
	struct hmm_proto_error e;
	int n;

	if (hmm_proto_recv(sock, rbuf, sizeof(rbuf), &m, NULL, NULL, 0) < 0)
		_exit(1);
	switch (mode) {
	case 0:			/* OK */
		n = hmm_proto_ok_encode(buf, sizeof(buf), m.hdr.seq);
		break;
	case 1:			/* ERROR */
		hmm_proto_error_fill(&e, -ENOSYS, "stats: not built");
		n = hmm_proto_error_encode(buf, sizeof(buf), m.hdr.seq, &e);
		break;
	case 2:			/* the wrong seq */
		n = hmm_proto_ok_encode(buf, sizeof(buf), m.hdr.seq + 1);
		break;
	default:		/* die without answering */
		_exit(0);
	}
	hmm_proto_send(sock, buf, n, NULL, 0, 0);
}

static void test_call(void)
{
	static const char *what[] = { "OK", "ERROR", "wrong seq", "death" };
	static const int want[] = { HMM_PROTO_OK, -ENOSYS, -EPROTO, -ENOTCONN };
	struct hmm_proto_msg m;
	int sv[2], mode, n, st;
	pid_t pid;

	for (mode = 0; mode < 4; mode++) {
		pair(sv);
		pid = fork();
		if (pid == 0) {
			close(sv[0]);
			peer(sv[1], mode);
			_exit(0);
		}
		close(sv[1]);
		n = stats_msg(40 + mode);
		t_eq(hmm_proto_call(sv[0], buf, n, rbuf, sizeof(rbuf), &m, NULL,
				    NULL, 10000), want[mode],
		     "call answered by %s: %d", what[mode], want[mode]);
		if (mode == 1)
			t_ok(!strcmp(hmm_last_error(), "hmmd: stats: not built"),
			     "ERROR's detail: %s", hmm_last_error());
		if (mode == 2)
			t_ok(strstr(hmm_last_error(), "call stats seq 42: got ok "
				    "seq 43") != NULL, "detail: %s",
			     hmm_last_error());
		close(sv[0]);
		waitpid(pid, &st, 0);
	}

	/* a peer alive that never answers: the bound holds */
	pair(sv);
	n = stats_msg(50);
	t_eq(hmm_proto_call(sv[0], buf, n, rbuf, sizeof(rbuf), &m, NULL, NULL,
			    50), -ETIMEDOUT, "no answer within 50 ms: -ETIMEDOUT");
	t_eq(hmm_proto_call(sv[0], buf, 20, rbuf, sizeof(rbuf), &m, NULL, NULL,
			    50), -EINVAL, "call with no message: -EINVAL");
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	signal(SIGPIPE, SIG_DFL);	/* a SIGPIPE would kill the test */
	test_basic();
	test_fds();
	test_call();
	return t_done();
}
