// SPDX-License-Identifier: MIT
/*
 * test_hmmd_proto — hmmd on a temporary socket keeps serving a good
 * client while others send garbage, truncated, oversized, wrong-version,
 * out-of-order messages or file descriptors: each bad one gets one ERROR
 * naming the problem and its connection closes, with the reason in the
 * daemon's log.  Also: readiness through $NOTIFY_SOCKET, socket mode
 * 0660, a second daemon refused on a live socket, the config file with
 * flags over it, max_clients, a bad config line, SIGTERM exit 0.
 *
 * hmmd runs its engine with no store here: hello gets a HELLO_REPLY,
 * stats a STATS_REPLY, a map of a tensor the client does not hold
 * -ENOENT.  The engine's own behaviour is tested in test_hmmd_engine.
 */
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "t.h"
#include "hmmd_t.h"
#include "err.h"
#include "proto.h"

static char hmmd[4096], dir[1024];
static uint8_t buf[HMM_PROTO_MSG_MAX + 1024];

/* ---- the daemon ------------------------------------------------------------ */

static int notify_sock(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	unlink(path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		t_fail_all("notify socket %s: %s", path, strerror(errno));
	return fd;
}

/* Start hmmd with args (NULL-terminated), stderr into log. */
static pid_t spawn(const char *const *args, const char *log,
		   const char *notify)
{
	char *argv[16];
	int i;

	argv[0] = hmmd;
	for (i = 0; args[i] && i < 14; i++)
		argv[i + 1] = (char *)args[i];
	argv[i + 1] = NULL;
	return t_hmmd_spawn(hmmd, argv, log, 1, notify);
}

/* The next datagram on the notify socket within secs, or "". */
static const char *notified(int nfd, int secs)
{
	static char msg[256];
	struct pollfd p = { nfd, POLLIN, 0 };
	ssize_t n;

	msg[0] = 0;
	if (poll(&p, 1, secs * 1000) == 1) {
		n = recv(nfd, msg, sizeof(msg) - 1, 0);
		msg[n > 0 ? n : 0] = 0;
	}
	return msg;
}

/* The exit status of pid within secs; -1 (and killed) when it hangs. */
static int wait_exit(pid_t pid, int secs)
{
	int st, i;

	for (i = 0; i < secs * 50; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		usleep(20000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

static int file_has(const char *path, const char *what)
{
	static char text[65536];
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return 0;
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = 0;
	return strstr(text, what) != NULL;
}

/* ---- clients ------------------------------------------------------------ */

static int client(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { 5, 0 };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		t_fail_all("connect %s: %s", path, strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static int hello(uint8_t *out, uint64_t seq, unsigned lo, unsigned hi)
{
	struct hmm_proto_hello h = { lo, hi, HMM_PROTO_FEAT_MEMFD,
				     { 0, 1ull << 30, 0 }, "test" };

	return hmm_proto_hello_encode(out, HMM_PROTO_MSG_MAX, seq, &h);
}

/* Receive one reply: an ERROR with seq, err and a detail holding what. */
static void want_error(int fd, uint64_t seq, int err, const char *what,
		       const char *who)
{
	struct hmm_proto_error e;
	struct hmm_proto_hdr h;
	ssize_t n = recv(fd, buf, sizeof(buf), 0);
	int r = n > 0 ? hmm_proto_error_decode(buf, n, &h, &e) : -EIO;

	if (!t_eq(r, 0, "%s: an ERROR reply", who)) {
		t_diag("recv %zd: %s", n, n < 0 ? strerror(errno) :
		       hmm_last_error());
		return;
	}
	t_ok(e.err == err && h.seq == seq, "%s: err %d seq %llu", who, err,
	     (unsigned long long)seq);
	if (!t_ok(strstr(e.detail, what) != NULL, "%s: detail names \"%s\"",
		  who, what))
		t_diag("detail: %s", e.detail);
}

/* Receive one reply of type with seq. */
static void want_type(int fd, uint64_t seq, unsigned type, const char *who)
{
	struct hmm_proto_msg m;
	ssize_t n = recv(fd, buf, sizeof(buf), 0);
	int r = n > 0 ? hmm_proto_decode(buf, n, &m) : -EIO;

	if (!t_ok(r == (int)type && m.hdr.seq == seq, "%s: a %s, seq %llu",
		  who, hmm_proto_type_name(type), (unsigned long long)seq))
		t_diag("recv %zd: type %d: %s", n, r, r == HMM_PROTO_ERROR ?
		       m.u.error.detail : hmm_last_error());
}

static void want_eof(int fd, const char *who)
{
	ssize_t n = recv(fd, buf, sizeof(buf), 0);

	t_eq(n, 0, "%s: connection closed by hmmd", who);
	close(fd);
}

/* A new client that sends msg[n] gets one ERROR (seq, err, a detail
 * holding what) and its connection closed. */
static void refused(const char *sock, const void *msg, size_t n, uint64_t seq,
		    int err, const char *what, const char *who)
{
	int fd = client(sock);

	send(fd, msg, n, 0);
	want_error(fd, seq, err, what, who);
	want_eof(fd, who);
}

static void send_fd(int fd, const void *msg, size_t len, int passed)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { (void *)msg, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = ctl.b,
			     .msg_controllen = sizeof(ctl.b) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &passed, sizeof(int));
	if (sendmsg(fd, &mh, 0) != (ssize_t)len)
		t_diag("sendmsg: %s", strerror(errno));
}

/*
 * In a child running as uid:gid, connect to sock and say hello.  Returns
 * 0 when hmmd answered (a hello_reply), else the errno that stopped it.
 */
static int connect_as(const char *sock, uid_t uid, gid_t gid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	uint8_t msg[HMM_PROTO_MSG_MAX];
	struct hmm_proto_hello_reply r;
	pid_t pid;
	int st, fd, n;

	pid = fork();
	if (pid == 0) {
		if (setgroups(0, NULL) || setgid(gid) || setuid(uid))
			_exit(100);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
		fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			_exit(errno);
		n = hello(msg, 1, 1, 1);
		send(fd, msg, n, 0);
		n = recv(fd, msg, sizeof(msg), 0);
		_exit(n > 0 && !hmm_proto_hello_reply_decode(msg, n, NULL,
							      &r) ? 0 : 101);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* Can a uid other than ours reach dir (every ancestor searchable)? */
static int others_reach(const char *d)
{
	char path[PATH_MAX], *slash;
	struct stat st;

	if (!realpath(d, path))
		return 0;
	for (;;) {
		if (stat(path, &st) || !(st.st_mode & S_IXOTH))
			return 0;
		slash = strrchr(path, '/');
		if (!slash || slash == path)
			return 1;
		*slash = 0;
	}
}

/* ---- the tests -------------------------------------------------------------- */

/*
 * A client that sends without reading fills its socket both ways: its
 * hmmd thread blocks sending the reply that did not fit, the good client
 * is served meanwhile, and once the slow one reads, every reply arrives
 * in order.  Nobody is disconnected, nothing is lost.
 */
static void test_pipeline(const char *sock, int good)
{
	uint8_t msg[HMM_PROTO_MSG_MAX];
	struct hmm_proto_stats_reply sr;
	struct hmm_proto_hdr h;
	int slow, n, k, i, in_order = 0;
	ssize_t got;

	slow = client(sock);
	n = hello(msg, 1, 1, 1);
	send(slow, msg, n, 0);
	want_type(slow, 1, HMM_PROTO_HELLO_REPLY, "slow hello");
	for (k = 0; k < 20000; k++) {
		n = hmm_proto_stats_encode(msg, sizeof(msg), 1000 + k);
		if (send(slow, msg, n, MSG_DONTWAIT) < 0)
			break;
	}
	t_ok(k > 0 && k < 20000 && errno == EAGAIN,
	     "a client sending without reading stalls (%d requests in)", k);
	n = hmm_proto_stats_encode(msg, sizeof(msg), 14);
	send(good, msg, n, 0);
	want_type(good, 14, HMM_PROTO_STATS_REPLY,
		  "good client served meanwhile");
	for (i = 0; i < k; i++) {
		got = recv(slow, buf, sizeof(buf), 0);
		if (got <= 0 || hmm_proto_stats_reply_decode(buf, got, &h,
							       &sr) ||
		    h.seq != 1000 + (uint64_t)i)
			break;
		in_order++;
	}
	t_eq(in_order, k, "all %d replies arrive, in order", k);
	n = hmm_proto_stats_encode(msg, sizeof(msg), 99);
	send(slow, msg, n, 0);
	want_type(slow, 99, HMM_PROTO_STATS_REPLY, "slow client still served");
	close(slow);
}

/* One good client served throughout while bad ones come and go. */
static void test_isolation(const char *sock, const char *log)
{
	struct hmm_proto_range map = { 42, 0, 4096, HMM_TIER_HOST, HMM_READ };
	uint8_t msg[HMM_PROTO_MSG_MAX];
	int good, bad, n, p[2];
	char why[64];

	good = client(sock);
	n = hello(msg, 11, 1, 1);
	send(good, msg, n, 0);
	want_type(good, 11, HMM_PROTO_HELLO_REPLY, "good hello");

	t_fill(buf, 100, 7);
	refused(sock, buf, 100, 0, -EPROTO, "field magic", "garbage");

	n = hmm_proto_stats_encode(msg, sizeof(msg), 12);
	send(good, msg, n, 0);
	want_type(good, 12, HMM_PROTO_STATS_REPLY, "good stats");

	n = hello(msg, 1, 1, 1);
	refused(sock, msg, n - 46, 0, -EMSGSIZE,
		"field length: 96 but the datagram carries 50", "truncated");

	memset(buf, 0, 5000);
	memcpy(buf, msg, n);
	refused(sock, buf, 5000, 0, -EMSGSIZE, "longer than 4096", "oversized");

	msg[4] = HMM_PROTO_VERSION_MAX + 1;	/* none speaks it yet */
	snprintf(why, sizeof(why), "field version: %d not spoken",
		 HMM_PROTO_VERSION_MAX + 1);
	refused(sock, msg, n, 0, -EPROTO, why, "a version past the newest");

	n = hello(msg, 3, HMM_PROTO_VERSION_MAX + 1, HMM_PROTO_VERSION_MAX + 2);
	snprintf(why, sizeof(why), "client speaks versions %d..%d",
		 HMM_PROTO_VERSION_MAX + 1, HMM_PROTO_VERSION_MAX + 2);
	refused(sock, msg, n, 3, -EPROTO, why, "a hello of versions past the "
		"newest");

	/* a client that agreed on version 1 may not send WAIT (version 2) */
	bad = client(sock);
	n = hello(msg, 1, 1, 1);
	send(bad, msg, n, 0);
	want_type(bad, 1, HMM_PROTO_HELLO_REPLY, "hello 1..1");
	n = hmm_proto_wait_encode(msg, sizeof(msg), 2,
				  &(struct hmm_proto_wait){ 0 });
	send(bad, msg, n, 0);
	want_error(bad, 2, -EPROTO, "of version 2, but hello agreed on 1",
		   "wait after hello 1..1");
	want_eof(bad, "wait after hello 1..1");

	/* nor one that agreed on version 2 WRITEBACK (version 3) */
	bad = client(sock);
	n = hello(msg, 1, 1, 2);
	send(bad, msg, n, 0);
	want_type(bad, 1, HMM_PROTO_HELLO_REPLY, "hello 1..2");
	n = hmm_proto_writeback_encode(msg, sizeof(msg), 2,
				       &(struct hmm_proto_range){ 1, 0, 4096,
				       HMM_TIER_HOST, 0 });
	send(bad, msg, n, 0);
	want_error(bad, 2, -EPROTO, "of version 3, but hello agreed on 2",
		   "writeback after hello 1..2");
	want_eof(bad, "writeback after hello 1..2");

	/* nor one that agreed on version 3 SAVE (version 4) */
	bad = client(sock);
	n = hello(msg, 1, 1, 3);
	send(bad, msg, n, 0);
	want_type(bad, 1, HMM_PROTO_HELLO_REPLY, "hello 1..3");
	n = hmm_proto_save_encode(msg, sizeof(msg), 2,
				  &(struct hmm_proto_save){ 1 });
	send(bad, msg, n, 0);
	want_error(bad, 2, -EPROTO, "of version 4, but hello agreed on 3",
		   "save after hello 1..3");
	want_eof(bad, "save after hello 1..3");

	n = hmm_proto_map_encode(msg, sizeof(msg), 4, &map);
	refused(sock, msg, n, 4, -EPROTO, "message map: before hello",
		"early map");

	n = hmm_proto_ok_encode(msg, sizeof(msg), 5);
	refused(sock, msg, n, 5, -EPROTO, "a reply type", "reply type");

	bad = client(sock);
	n = hello(msg, 6, 1, 1);
	send(bad, msg, n, 0);
	want_type(bad, 6, HMM_PROTO_HELLO_REPLY, "second client hello");
	send(bad, msg, n, 0);
	want_error(bad, 6, -EPROTO, "a second hello", "second hello");
	want_eof(bad, "second hello");

	bad = client(sock);
	if (pipe(p) == 0) {
		send_fd(bad, msg, n, p[0]);
		want_error(bad, 0, -EPROTO, "file descriptors", "fd passed");
		want_eof(bad, "fd passed");
		close(p[0]);
		close(p[1]);
	}

	test_pipeline(sock, good);

	n = hmm_proto_map_encode(msg, sizeof(msg), 13, &map);
	send(good, msg, n, 0);
	want_error(good, 13, -ENOENT, "tensor 42: not yours",
		   "good map after all: someone else's id refused");
	close(good);
	t_ok(file_has(log, "closing: message header: field magic"),
	     "hmmd's log gives the garbage client's reason");
	t_ok(file_has(log, "file descriptors came with it: none are taken"),
	     "hmmd's log gives the fd client's reason");
}

/* A config file with a flag over it, max_clients, a bad line. */
static void test_config(const char *notify, int nfd)
{
	int as_root = geteuid() == 0 && others_reach(dir) &&
		      getgrnam("nogroup") &&
		      getgrnam("nogroup")->gr_gid == 65534;
	char conf[4096], sock[4096], log[4096], msg[HMM_PROTO_MSG_MAX];
	int a, b, n;
	pid_t pid;
	FILE *f;

	snprintf(conf, sizeof(conf), "%s/hmmd.conf", dir);
	snprintf(sock, sizeof(sock), "%s/cfg.sock", dir);
	snprintf(log, sizeof(log), "%s/cfg.log", dir);
	f = fopen(conf, "w");
	fprintf(f, "; test\n[hmmd]\nsocket = %s/not-this.sock\n"
		"max_clients = 1\nhost_budget = 64M\n%s\n", dir,
		as_root ? "socket_group = nogroup" : "");
	fclose(f);
	pid = spawn((const char *[]){ "--config", conf, "--socket", sock,
				      NULL }, log, notify);
	t_ok(!strncmp(notified(nfd, 10), "READY=1", 7),
	     "config: READY=1");
	if (as_root) {
		t_eq(connect_as(sock, 65534, 65534), 0,
		     "socket_group nogroup: uid 65534 in it is served");
		t_eq(connect_as(sock, 65533, 65533), EACCES,
		     "uid 65533, not in it: EACCES");
		t_ok(file_has(log, "uid 65534"), "hmmd logs the peer's uid");
	}
	a = client(sock);
	n = hello((uint8_t *)msg, 1, 1, 1);
	send(a, msg, n, 0);
	want_type(a, 1, HMM_PROTO_HELLO_REPLY,
		  "config: the --socket flag wins");
	b = client(sock);
	want_error(b, 0, -EUSERS, "too many clients", "config: max_clients 1");
	want_eof(b, "config: max_clients 1");
	close(a);
	kill(pid, SIGTERM);
	t_eq(wait_exit(pid, 10), 0, "config: SIGTERM: exit 0");
	notified(nfd, 1);	/* STOPPING=1 */

	f = fopen(conf, "w");
	fprintf(f, "[hmmd]\nbogus = 1\n");
	fclose(f);
	pid = spawn((const char *[]){ "--config", conf, NULL }, log, NULL);
	t_eq(wait_exit(pid, 10), 2, "bad config: exit 2");
	t_ok(file_has(log, "hmmd.conf:2: unknown key \"bogus\""),
	     "bad config: the log names file, line and key");
}

int main(void)
{
	char sock[4096], log[4096], log2[4096], notify[4096], store[4096];
	struct stat st;
	pid_t pid, pid2;
	int nfd;

	/* dir is 0711: others may reach the socket, its mode decides */
	T_HMMD_PATHS(hmmd, dir, sock, store, log, "hmmd");
	snprintf(log2, sizeof(log2), "%s/hmmd2.log", dir);
	snprintf(notify, sizeof(notify), "%s/notify", dir);
	if (strlen(notify) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		t_skip_all("temporary dir %s: too long for a socket path", dir);
	nfd = notify_sock(notify);

	pid = spawn((const char *[]){ "--socket", sock, "--store", store,
				      "--host-budget", "64M", "--store-size", "64M",
				      NULL }, log,
		    notify);
	if (!t_ok(!strncmp(notified(nfd, 10), "READY=1", 7),
		  "hmmd says READY=1 on $NOTIFY_SOCKET")) {
		kill(pid, SIGKILL);
		return t_done();
	}
	t_ok(stat(sock, &st) == 0 && S_ISSOCK(st.st_mode) &&
	     (st.st_mode & 0777) == 0660, "socket %s: mode 0660", sock);
	if (geteuid() == 0 && others_reach(dir))
		t_eq(connect_as(sock, 65534, 65534), EACCES,
		     "another uid, not in the socket's group: EACCES");
	else
		t_diag("not root, or %s not reachable by others: the "
		       "other-uid checks are skipped", dir);

	pid2 = spawn((const char *[]){ "--socket", sock, NULL }, log2, NULL);
	t_eq(wait_exit(pid2, 10), 1, "a second hmmd on a live socket: exit 1");
	t_ok(file_has(log2, "another hmmd serves it"),
	     "second hmmd: says why");

	test_isolation(sock, log);

	kill(pid, SIGTERM);
	t_eq(wait_exit(pid, 10), 0, "SIGTERM: exit 0");
	t_ok(!strncmp(notified(nfd, 1), "STOPPING=1", 10), "STOPPING=1");
	t_ok(access(sock, F_OK) && errno == ENOENT, "socket file removed");

	test_config(notify, nfd);
	close(nfd);
	return t_done();
}
