// SPDX-License-Identifier: MIT
/*
 * test_hmmd_attack — a hostile client, on the raw protocol, must never
 * hurt hmmd or another client (issue 18):
 *
 *  - it ftruncates the memfd a MAP sent it (to 0, and larger) and asks
 *    for an evict: the file's size cannot change (sealed), hmmd lives and
 *    answers, the tensor's bytes are intact;
 *  - the same with --host-dir (a tmpfs O_TMPFILE, which cannot be
 *    sealed): the truncation works, hmmd lives and keeps serving;
 *  - a read-only share mapped by another uid (nobody) cannot be made
 *    writable by reopening /proc/self/fd/N for writing, nor mapped
 *    shared-writable, and its bytes stay the owner's;
 *  - an ERROR reply carries exactly its detail and zeros after it (no
 *    stray bytes of hmmd's memory), for a 63-byte persistent name;
 *  - a client refused for too many connections is told so by
 *    hmm_open, never "Broken pipe".
 *
 * It counts the bad inputs tried and prints them with hmmd's crashes.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/vfs.h>
#include <sys/wait.h>

#include "t.h"
#include "hmmd_t.h"
#include "prom.h"
#include "err.h"
#include "proto.h"
#include "proto_sock.h"

#define CHUNK	(64u << 10)
#define TBYTES	(4 * CHUNK)
#define TMPFS_MAGIC_	0x01021994

static char hmmd[4096], dir[1024], sock[100], store[4096], logf[4096];
static char hostdir[4096];
static uint8_t rbuf[HMM_PROTO_RECV_BUF];
static unsigned bad_inputs, crashes;

static rlim_t nofile;		/* hmmd's soft RLIMIT_NOFILE (0: ours) */

static char mport[32];		/* hmmd's --metrics address */

static const char *wait_ms;	/* --wait-ms for the next start (NULL: none) */

static pid_t start(const char *host_dir)
{
	char *argv[20] = {
		hmmd, "--socket", sock, "--store", store, "--store-size",
		"16M", "--host-budget", "4M", "--chunk", "64K", "--format",
		"--metrics", mport, "--host-dir", (char *)host_dir, NULL,
	};
	pid_t pid;

	if (!host_dir)
		argv[14] = NULL;	/* no --host-dir */
	if (wait_ms) {
		int i = host_dir ? 16 : 14;

		argv[i] = "--wait-ms";
		argv[i + 1] = (char *)wait_ms;
		argv[i + 2] = NULL;
	}
	unlink(sock);
	pid = t_hmmd_spawn(hmmd, argv, logf, 1, NULL);
	t_hmmd_wait_listen(pid, sock, 20, logf);
	/* lowered after hmmd raised its own at start: soft and hard */
	if (nofile && prlimit(pid, RLIMIT_NOFILE,
			      &(struct rlimit){ nofile, nofile }, NULL))
		t_fail_all("prlimit %d: %s", (int)pid, strerror(errno));
	return pid;
}

static int reaped = -1;		/* the status alive() reaped */

static int status_of(int st)
{
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int alive(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, WNOHANG) != pid)
		return 1;
	reaped = status_of(st);
	return 0;
}

/* SIGTERM pid; its exit status, 128 + signal when a signal killed it. */
static int stop(pid_t pid)
{
	int st;

	if (!alive(pid))
		return reaped;
	kill(pid, SIGTERM);
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return status_of(st);
}

/* Run one attack on a fresh hmmd (host_dir NULL: memfds). */
static void attack(void (*fn)(const char *, int), const char *mode,
		   const char *host_dir, int sealed)
{
	pid_t pid = start(host_dir);

	chmod(sock, 0666);	/* nobody's client connects too */
	fn(mode, sealed);
	if (!t_ok(alive(pid), "%s: hmmd alive after the attack", mode))
		crashes++;
	if (!t_eq(stop(pid), 0, "%s: SIGTERM: exit 0", mode))
		crashes++;
}

/*
 * In a forked child: become nobody, in dir first and naming the socket
 * by its relative name, so that the folders above dir need not let
 * nobody through (HMM_TEST_DIR may lie under a 0700 home or mktemp
 * folder: connect by the full path then fails with EACCES).  0 or -1.
 */
static int as_nobody(void)
{
	if (chdir(dir))
		return -1;
	snprintf(sock, sizeof(sock), "a.sock");
	return setgroups(0, NULL) || setgid(65534) || setuid(65534) ? -1 : 0;
}

/* One request (encoded here) and its reply: the reply's type or -err. */
static int call(int fd, unsigned type, uint64_t seq, const void *body,
		struct hmm_proto_msg *rep, int *rfd)
{
	uint8_t msg[HMM_PROTO_MSG_MAX];
	unsigned nfds = 0;
	int n = hmm_proto_encode(msg, sizeof(msg), type, 0, seq, body);

	if (rfd)
		*rfd = -1;
	if (n < 0)
		return n;
	return hmm_proto_call(fd, msg, n, rbuf, sizeof(rbuf), rep, rfd,
			      rfd ? &nfds : NULL, 10000);
}

static int rawc(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct hmm_proto_hello h = { 1, HMM_PROTO_VERSION_MAX,
				     HMM_PROTO_FEAT_MEMFD,
				     { 0, 2u << 20, 16u << 20 }, "attack" };
	struct hmm_proto_msg m;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -1;
	if (call(fd, HMM_PROTO_HELLO, 1, &h, &m, NULL) != HMM_PROTO_HELLO_REPLY) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A new u8 tensor of TBYTES bytes named name (flags); its id or 0. */
static uint64_t tensor(int fd, const char *name, uint32_t flags)
{
	struct hmm_proto_tensor t;
	struct hmm_proto_msg m;

	memset(&t, 0, sizeof(t));
	t.dtype = HMM_DTYPE_U8;
	t.ndim = 1;
	t.shape[0] = TBYTES;
	t.flags = flags;
	snprintf(t.name, sizeof(t.name), "%s", name);
	if (call(fd, HMM_PROTO_TENSOR_NEW, 2, &t, &m, NULL) !=
	    HMM_PROTO_TENSOR_REPLY)
		return 0;
	return m.u.tensor.id;
}

/* MAP the whole tensor id: the fd sent (*mfd) and its mapping, or NULL. */
static uint8_t *map(int fd, uint64_t id, uint32_t access, int *mfd)
{
	struct hmm_proto_range r = { id, 0, HMM_ALL, HMM_TIER_HOST, access };
	struct hmm_proto_msg m;
	uint8_t *p;

	if (call(fd, HMM_PROTO_MAP, 3, &r, &m, mfd) != HMM_PROTO_MAP_REPLY ||
	    *mfd < 0)
		return NULL;
	p = mmap(NULL, TBYTES, PROT_READ | (access & HMM_WRITE ? PROT_WRITE :
		 0), MAP_SHARED, *mfd, m.u.map_reply.addr);
	return p == MAP_FAILED ? NULL : p;
}

/* A raw connection whose hello asks host quota q (0: hmmd's default);
 * the quota granted in *got.  -1 when connect or hello fails. */
static int rawc_quota(uint64_t q, uint64_t *got)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct hmm_proto_hello h = { 1, HMM_PROTO_VERSION_MAX,
				     HMM_PROTO_FEAT_MEMFD, { 0, q, 0 },
				     "attack" };
	struct hmm_proto_msg m;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    call(fd, HMM_PROTO_HELLO, 1, &h, &m, NULL) !=
	    HMM_PROTO_HELLO_REPLY) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*got = m.u.hello_reply.quota[HMM_TIER_HOST];
	return fd;
}

/* A u8 tensor of bytes; MAP all of it: the reply's type or -err. */
static int tensor_map(int fd, const char *name, uint64_t bytes,
		      uint64_t *id)
{
	struct hmm_proto_tensor t;
	struct hmm_proto_range r;
	struct hmm_proto_msg m;
	int mfd, ret;

	memset(&t, 0, sizeof(t));
	t.dtype = HMM_DTYPE_U8;
	t.ndim = 1;
	t.shape[0] = bytes;
	snprintf(t.name, sizeof(t.name), "%s", name);
	ret = call(fd, HMM_PROTO_TENSOR_NEW, 2, &t, &m, NULL);
	if (ret != HMM_PROTO_TENSOR_REPLY)
		return ret;
	*id = m.u.tensor.id;
	r = (struct hmm_proto_range){ *id, 0, HMM_ALL, HMM_TIER_HOST,
				      HMM_READ | HMM_WRITE };
	ret = call(fd, HMM_PROTO_MAP, 3, &r, &m, &mfd);
	if (mfd >= 0)
		close(mfd);
	return ret;
}

static int unmap(int fd, uint64_t id)
{
	struct hmm_proto_range r = { id, 0, HMM_ALL, HMM_TIER_HOST, 0 };
	struct hmm_proto_msg m;

	return call(fd, HMM_PROTO_UNMAP, 4, &r, &m, NULL);
}

static int evict(int fd, uint64_t id)
{
	struct hmm_proto_range r = { id, 0, HMM_ALL, HMM_TIER_HOST, 0 };
	struct hmm_proto_msg m;

	return call(fd, HMM_PROTO_EVICT, 5, &r, &m, NULL);
}

static int stats(int fd)
{
	struct hmm_proto_msg m;

	return call(fd, HMM_PROTO_STATS, 6, NULL, &m, NULL);
}

/*
 * Item 1: ftruncate what MAP sent, then evict (hmmd reads the pages for
 * the store's crc).  sealed: the memfd refuses every size change and
 * the bytes come back intact.
 */
static void test_truncate(const char *mode, int sealed)
{
	static const off_t sizes[] = { 0, 1, CHUNK, 4 * TBYTES };
	int c = rawc(), mfd, ok = 1;
	uint8_t *p, pat[TBYTES];
	uint64_t id;
	unsigned i;

	if (!t_ok(c >= 0, "%s: a client connects", mode))
		return;
	id = tensor(c, "victim", 0);
	p = id ? map(c, id, HMM_READ | HMM_WRITE, &mfd) : NULL;
	if (!t_ok(p != NULL, "%s: tensor mapped read-write", mode))
		return;
	t_fill(pat, sizeof(pat), 7);
	memcpy(p, pat, sizeof(pat));
	munmap(p, TBYTES);
	t_eq(unmap(c, id), HMM_PROTO_OK, "%s: unmapped", mode);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int r = ftruncate(mfd, sizes[i]);

		bad_inputs++;
		if (sealed && !t_ok(r < 0 && errno == EPERM, "%s: ftruncate "
				    "to %lld refused (EPERM)", mode,
				    (long long)sizes[i]))
			ok = 0;
		bad_inputs++;
		r = evict(c, id);
		if (!t_ok(r == HMM_PROTO_OK || (r < 0 && r != -ENOTCONN &&
			  r != -ECONNRESET && r != -EPIPE && r != -ETIMEDOUT),
			  "%s: evict after ftruncate %lld answered (%d)", mode,
			  (long long)sizes[i], r)) {
			crashes++;
			close(close(mfd) ? -1 : c);
			return;
		}
	}
	close(mfd);
	t_eq(stats(c), HMM_PROTO_STATS_REPLY, "%s: hmmd still serves", mode);
	p = map(c, id, HMM_READ, &mfd);
	if (t_ok(p != NULL, "%s: mapped again", mode)) {
		if (sealed)
			t_ok(ok && !memcmp(p, pat, sizeof(pat)),
			     "%s: the bytes survived, exact", mode);
		munmap(p, TBYTES);
		close(mfd);
		unmap(c, id);
	}
	close(c);
}

/*
 * Item 2: in a child as nobody, attach the read-only share, map it
 * read-only, then try to write it: reopen /proc/self/fd/N O_RDWR and
 * O_WRONLY, mmap it shared-writable, mprotect.  Exit code: 0 when every
 * attempt failed, 10 + k when attempt k wrote, 2 when attach/map failed.
 */
static int ro_child(void)
{
	struct hmm_proto_attach a;
	struct hmm_proto_msg m;
	char path[64];
	uint8_t *p;
	int c, mfd, wfd, k = 0;

	if (as_nobody())
		return 3;
	c = rawc();
	if (c < 0)
		return 4;
	memset(&a, 0, sizeof(a));
	a.owner_uid = 0;
	snprintf(a.name, sizeof(a.name), "ro");
	if (call(c, HMM_PROTO_ATTACH, 2, &a, &m, NULL) !=
	    HMM_PROTO_TENSOR_REPLY)
		return 2;
	p = map(c, m.u.tensor.id, HMM_READ, &mfd);
	if (!p)
		return 2;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
	for (k = 0; k < 2; k++) {
		wfd = open(path, k ? O_WRONLY : O_RDWR);
		if (wfd >= 0) {
			if (pwrite(wfd, "X", 1, 0) == 1)
				return 10 + k;
			close(wfd);
		}
	}
	if (mmap(NULL, TBYTES, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0) !=
	    MAP_FAILED)
		return 12;
	if (mprotect(p, TBYTES, PROT_READ | PROT_WRITE) == 0)
		return 13;
	if (fchmod(mfd, 0666) == 0)
		return 14;
	if (ftruncate(mfd, 0) == 0)
		return 15;
	return 0;
}

static void test_readonly_share(const char *mode, int sealed)
{
	struct hmm_proto_share s;
	struct hmm_proto_msg m;
	uint8_t pat[TBYTES], *p;
	int c = rawc(), mfd, st;
	uint64_t id;
	pid_t pid;

	if (getuid() != 0) {
		t_ok(1, "# SKIP read-only share as another uid: needs root");
		return;
	}
	id = tensor(c, "shared-ro", 0);
	p = id ? map(c, id, HMM_READ | HMM_WRITE, &mfd) : NULL;
	if (!t_ok(p != NULL, "owner maps its tensor"))
		return;
	t_fill(pat, sizeof(pat), 9);
	memcpy(p, pat, sizeof(pat));
	memset(&s, 0, sizeof(s));
	s.id = id;
	s.uid = 65534;
	s.access = HMM_READ;
	snprintf(s.name, sizeof(s.name), "ro");
	t_eq(call(c, HMM_PROTO_SHARE, 7, &s, &m, NULL), HMM_PROTO_OK,
	     "shared read-only with nobody");
	pid = fork();
	if (pid == 0)
		_exit(ro_child());
	bad_inputs += 6;
	st = -1;
	waitpid(pid, &st, 0);
	if (!t_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "nobody cannot "
		  "write a read-only share (reopen rw/wo, mmap shared rw, "
		  "mprotect, fchmod, ftruncate)"))
		t_diag("child exit %d (10 reopen O_RDWR wrote, 11 O_WRONLY, "
		       "12 mmap, 13 mprotect, 14 fchmod, 15 ftruncate)",
		       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	t_ok(!memcmp(p, pat, sizeof(pat)), "the owner's bytes are intact");
	munmap(p, TBYTES);
	close(mfd);
	unmap(c, id);
	close(c);
}

/* Item 3: the ERROR for a 63-byte persistent name, byte for byte. */
static void test_error_bytes(const char *mode, int sealed)
{
	char name[64], want[HMM_PROTO_DETAIL_MAX];
	struct hmm_proto_tensor t;
	struct hmm_proto_msg m;
	uint8_t msg[HMM_PROTO_MSG_MAX];
	int c = rawc(), n, r;
	ssize_t got;
	size_t i, dl, nz = 0;
	uint8_t *body;

	memset(name, 'n', 63);
	name[63] = 0;
	memset(&t, 0, sizeof(t));
	t.dtype = HMM_DTYPE_U8;
	t.ndim = 1;
	t.shape[0] = 16;
	t.flags = HMM_PROTO_TENSOR_PERSIST;
	memcpy(t.name, name, 64);
	n = hmm_proto_encode(msg, sizeof(msg), HMM_PROTO_TENSOR_NEW, 0, 9, &t);
	bad_inputs++;
	got = n > 0 && send(c, msg, n, 0) == n ?
	      recv(c, rbuf, sizeof(rbuf), 0) : -1;
	r = got > 0 ? hmm_proto_decode(rbuf, got, &m) : -EIO;
	if (!t_eq(r, HMM_PROTO_ERROR, "63-byte persistent name: an ERROR"))
		return;
	snprintf(want, sizeof(want), "tensor %s: name too long with its uid "
		 "prefix u%u/ (at most %d bytes in all)", name,
		 (unsigned)getuid(), HMM_PROTO_NAME_MAX - 1);
	if (!t_ok(m.u.error.err == -ENAMETOOLONG &&
		  !strcmp(m.u.error.detail, want), "detail exact"))
		t_diag("detail: %s", m.u.error.detail);
	/* the wire body: s32 err, u32 reserved, detail[256] zero-padded */
	dl = strlen(want);
	body = rbuf + sizeof(struct hmm_proto_hdr);
	t_ok(got == (ssize_t)sizeof(struct hmm_proto_hdr) + 264 &&
	     !memcmp(body + 8, want, dl), "the detail's bytes on the wire");
	for (i = 4; i < (size_t)got - sizeof(struct hmm_proto_hdr); i++)
		nz += (i < 8 || i >= 8 + dl) && body[i] != 0;
	t_eq(nz, 0, "no byte but err and the detail is nonzero (%zd bytes)",
	     got);
	close(c);
}

/* The bytes in hmmd's log so far. */
static long log_bytes(void)
{
	struct stat st;

	return stat(logf, &st) ? 0 : (long)st.st_size;
}

/*
 * Item 4: one client makes one-byte tensors (each a memfd in hmmd) until
 * refused: the refusal is an ERROR naming hmmd's per-client limit, well
 * before hmmd's fds run out, and another client is served meanwhile.
 */
static void test_tensor_limit(const char *mode, int sealed)
{
	int c = rawc(), c2, i, r = 0;
	struct hmm_proto_tensor t;
	struct hmm_proto_msg m;

	memset(&t, 0, sizeof(t));
	t.dtype = HMM_DTYPE_U8;
	t.ndim = 1;
	t.shape[0] = 1;
	for (i = 0; i < 1100; i++) {
		snprintf(t.name, sizeof(t.name), "t%d", i);
		bad_inputs++;
		r = call(c, HMM_PROTO_TENSOR_NEW, 10 + i, &t, &m, NULL);
		if (r != HMM_PROTO_TENSOR_REPLY)
			break;
	}
	if (!t_ok(i == 1024 && r == -EMFILE, "%s: tensor %d refused (-EMFILE, "
		  "got %d)", mode, i, r))
		t_diag("%s", hmm_last_error());
	t_ok(strstr(hmm_last_error(), "1024 tensors, hmmd's limit per "
		    "client") != NULL, "%s: the error names the limit", mode);
	c2 = rawc();
	t_ok(c2 >= 0 && stats(c2) == HMM_PROTO_STATS_REPLY, "%s: another "
	     "client is served", mode);
	close(c2);
	close(c);
}

/*
 * Item 4: hmmd's fds run out (a low RLIMIT_NOFILE, that the limit per
 * client does not stop: 3 clients): accepting fails; hmmd must neither
 * spin nor flood its log, and once the fds come back a waiting client is
 * served.
 */
static void test_fd_exhaust(const char *mode, int sealed)
{
	struct hmm_proto_tensor t;
	struct hmm_proto_msg m;
	int c[3], late, i, k, r, refused = 0;
	long before = log_bytes();

	memset(&t, 0, sizeof(t));
	t.dtype = HMM_DTYPE_U8;
	t.ndim = 1;
	t.shape[0] = 1;
	for (k = 0; k < 3; k++) {
		c[k] = rawc();
		for (i = 0; i < 200; i++) {
			snprintf(t.name, sizeof(t.name), "t%d", i);
			bad_inputs++;
			r = call(c[k], HMM_PROTO_TENSOR_NEW, 10 + i, &t, &m,
				 NULL);
			if (r != HMM_PROTO_TENSOR_REPLY) {
				refused++;
				break;
			}
		}
	}
	t_ok(refused > 0, "%s: hmmd ran out of fds (%d clients refused a "
	     "tensor: %s)", mode, refused, hmm_last_error());
	late = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	{
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
		connect(late, (struct sockaddr *)&sa, sizeof(sa));
	}
	sleep(2);			/* hmmd cannot accept it meanwhile */
	t_ok(log_bytes() - before < 16384, "%s: hmmd's log grew %ld bytes in "
	     "2 s without fds (rate-limited)", mode, log_bytes() - before);
	for (k = 0; k < 3; k++)
		close(c[k]);
	{
		struct hmm_proto_hello h = { 1, HMM_PROTO_VERSION_MAX,
					     HMM_PROTO_FEAT_MEMFD, { 0 },
					     "late" };

		r = call(late, HMM_PROTO_HELLO, 1, &h, &m, NULL);
	}
	t_eq(r, HMM_PROTO_HELLO_REPLY, "%s: the waiting client is served once "
	     "the fds are back", mode);
	close(late);
}

/* A connection that says nothing; -1 when connect fails. */
static int idle_conn(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* The err of an ERROR waiting on fd within ms, 0 when none came. */
static int error_on(int fd, int ms)
{
	struct pollfd p = { fd, POLLIN, 0 };
	struct hmm_proto_msg m;
	ssize_t n;

	if (poll(&p, 1, ms) != 1)
		return 0;
	n = recv(fd, rbuf, sizeof(rbuf), MSG_DONTWAIT);
	if (n > 0 && hmm_proto_decode(rbuf, n, &m) == HMM_PROTO_ERROR)
		return m.u.error.err;
	return 0;
}

/*
 * Item 5: 64 idle connections of one uid (nobody, max_clients is 64)
 * must not lock everyone out: that uid gets at most half the slots, the
 * rest are refused with "too many clients" said to them; root still
 * connects; and a connection that never says hello is closed after the
 * hello timeout with an ERROR saying so.
 */
static void test_idle_flood(const char *mode, int sealed)
{
	int pfd[2], c, n, got = 0, refused = 0, st;
	char line[64];
	pid_t pid;

	if (getuid() != 0) {
		t_ok(1, "# SKIP idle connections of another uid: needs root");
		return;
	}
	if (pipe(pfd))
		t_fail_all("pipe: %s", strerror(errno));
	pid = fork();
	if (pid == 0) {
		int fds[64], i, k = 0, r = 0;

		if (as_nobody())
			_exit(3);
		for (i = 0; i < 64; i++)	/* all within the hello timeout */
			fds[i] = idle_conn();
		usleep(500000);
		for (i = 0; i < 64; i++)
			if (fds[i] >= 0 && error_on(fds[i], 0) == -EUSERS)
				r++;
			else if (fds[i] >= 0)
				k++;
		n = snprintf(line, sizeof(line), "%d %d\n", k, r);
		if (write(pfd[1], line, n) != n)
			_exit(4);
		pause();
		_exit(0);
	}
	close(pfd[1]);
	n = read(pfd[0], line, sizeof(line) - 1);
	line[n > 0 ? n : 0] = 0;
	sscanf(line, "%d %d", &got, &refused);
	bad_inputs += 64;
	t_ok(got < 64 && got >= 16 && refused == 64 - got, "%s: one uid's 64 "
	     "idle connections: %d kept, %d refused with -EUSERS", mode, got,
	     refused);
	c = rawc();
	t_ok(c >= 0, "%s: root still connects and says hello", mode);
	if (c >= 0)
		close(c);
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	close(pfd[0]);

	c = idle_conn();
	bad_inputs++;
	t_eq(error_on(c, 8000), -ETIMEDOUT, "%s: no hello: an ERROR "
	     "-ETIMEDOUT within 8 s", mode);
	close(c);
}

/*
 * Tries hmm_open through hmmd n times while fds[] hold every slot this
 * uid may take; each must fail with -EUSERS and say "too many clients"
 * (not "Broken pipe": hmmd refuses and closes at once, and the refusal
 * waits in the socket of a client whose hello then meets the closed
 * end).  The number that did.
 */
static int refused_opens(int n)
{
	char addr[128];
	struct hmm_config cfg;
	struct hmm *h;
	int i, ok = 0, ret;

	snprintf(addr, sizeof(addr), "unix:%s", sock);
	hmm_config_default(&cfg);
	cfg.daemon = addr;
	for (i = 0; i < n; i++) {
		if (i & 1)		/* the refusal is there before hello */
			usleep(50000);
		ret = hmm_open(&cfg, &h);
		if (!ret) {
			hmm_close(h);
			continue;
		}
		if (ret == -EUSERS &&
		    strstr(hmm_last_error(), "too many clients"))
			ok++;
		else
			t_diag("hmm_open %d: %d %s", i, ret, hmm_last_error());
	}
	return ok;
}

/*
 * Item 5: a client refused for too many connections is told so: as
 * root with every slot held, and as nobody with its uid's share held.
 */
static void test_refused_open(const char *mode, int sealed)
{
	int fds[64], i, n, st;
	pid_t pid;

	for (i = 0; i < 64; i++)	/* root: every slot of max_clients */
		fds[i] = idle_conn();
	usleep(300000);
	bad_inputs += 6;
	n = refused_opens(6);
	t_eq(n, 6, "%s: root, every slot held: 6 of 6 opens refused with "
	     "-EUSERS \"too many clients\"", mode);
	for (i = 0; i < 64; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (getuid() != 0) {
		t_ok(1, "# SKIP refused as another uid: needs root");
		return;
	}
	usleep(300000);		/* hmmd reaps the closed ones */
	pid = fork();
	if (pid == 0) {
		if (as_nobody())
			_exit(3);
		for (i = 0; i < 32; i++)	/* more than its 31 */
			fds[i] = idle_conn();
		usleep(300000);
		_exit(refused_opens(6));
	}
	bad_inputs += 6;
	st = -1;
	waitpid(pid, &st, 0);
	t_ok(WIFEXITED(st) && WEXITSTATUS(st) == 6, "%s: nobody, its "
	     "share held: 6 of 6 opens refused with -EUSERS \"too many "
	     "clients\" (%d)", mode, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/*
 * Item 6, per uid: two connections of one unprivileged uid (nobody)
 * share its host quota (1 MiB asked, hmmd's budget 4 MiB): 0.75 MiB
 * pinned by one leaves the other's 0.75 MiB map waiting (wait_ms 300)
 * and refused -EDQUOT; once the first unmaps, it goes.  A hello that
 * asks no quota gets a quarter of the budget, not all of it.  Returns
 * a bit per failure.
 */
static int uid_quota_checks(void)
{
	uint64_t q1 = 0, q2 = 0, q0 = 0, a = 0, b = 0;
	int c1 = rawc_quota(1u << 20, &q1), c2 = rawc_quota(1u << 20, &q2);
	int c0 = rawc_quota(0, &q0), bad = 0;

	if (c1 < 0 || c2 < 0 || c0 < 0)
		return 1;
	if (q1 != 1u << 20 || q2 != 1u << 20)
		bad |= 2;
	if (tensor_map(c1, "qa", 3u << 18, &a) != HMM_PROTO_MAP_REPLY)
		bad |= 4;
	if (tensor_map(c2, "qb", 3u << 18, &b) != -EDQUOT)
		bad |= 8;		/* the uid's 1 MiB: 0.75 + 0.75 */
	if (unmap(c1, a) != HMM_PROTO_OK)
		bad |= 16;
	{
		struct hmm_proto_range r = { b, 0, HMM_ALL, HMM_TIER_HOST,
					     HMM_READ | HMM_WRITE };
		struct hmm_proto_msg m;
		int mfd, ret = call(c2, HMM_PROTO_MAP, 3, &r, &m, &mfd);

		if (mfd >= 0)
			close(mfd);
		if (ret != HMM_PROTO_MAP_REPLY)
			bad |= 32;	/* room again once c1 unmapped */
	}
	if (q0 != 1u << 20)
		bad |= 64;		/* default: budget / 4 */
	close(c0);
	close(c1);
	close(c2);
	return bad;
}

/* MAP [off, +len) of id: the reply's type or -err; *m, *mfd. */
static int map_range(int fd, uint64_t id, uint64_t off, uint64_t len,
		     uint32_t access, struct hmm_proto_msg *m, int *mfd)
{
	struct hmm_proto_range r = { id, off, len, HMM_TIER_HOST, access };

	return call(fd, HMM_PROTO_MAP, 3, &r, m, mfd);
}

/* The bytes a descriptor lets its holder touch: its file's size. */
static uint64_t fd_bytes(int fd)
{
	struct stat st;

	return fd >= 0 && !fstat(fd, &st) ? (uint64_t)st.st_size : 0;
}

/*
 * Item 6, what a client can touch: nobody (host quota 1 MiB) maps 256
 * KiB of a 2 MiB tensor: it gets a copy of the range (MAP_F_COPY), a
 * sealed memfd of 256 KiB, not the tensor's 2 MiB memfd; what it wrote
 * there is the tensor's after the unmap.  A 256 KiB tensor (within its
 * reach) comes zero-copy, its own memfd.  Returns a bit per failure.
 */
static int reach_checks(void)
{
	uint64_t q = 0, big = 0, small = 0;
	struct hmm_proto_msg m;
	uint8_t pat[256 << 10], *p;
	int c = rawc_quota(1u << 20, &q), mfd = -1, bad = 0;

	if (c < 0)
		return 1;
	if (tensor_map(c, "big", 2u << 20, &big) != -EDQUOT)
		bad |= 2;			/* 2 MiB > 1 MiB quota */
	if (map_range(c, big, 0, sizeof(pat), HMM_READ | HMM_WRITE, &m, &mfd)
	    != HMM_PROTO_MAP_REPLY)
		return bad | 4;
	if (!(m.u.map_reply.flags & HMM_PROTO_MAP_F_COPY) ||
	    fd_bytes(mfd) != sizeof(pat))
		bad |= 8;			/* a copy of the range alone */
	if (ftruncate(mfd, 2u << 20) == 0)
		bad |= 16;			/* sealed: cannot grow */
	p = mmap(NULL, fd_bytes(mfd), PROT_READ | PROT_WRITE, MAP_SHARED,
		 mfd, 0);
	if (p == MAP_FAILED)
		return bad | 32;
	t_fill(pat, sizeof(pat), 61);
	memcpy(p + m.u.map_reply.addr, pat, sizeof(pat));
	munmap(p, fd_bytes(mfd));
	close(mfd);
	if (unmap(c, big) != HMM_PROTO_OK)
		bad |= 64;
	if (map_range(c, big, 0, sizeof(pat), HMM_READ, &m, &mfd) !=
	    HMM_PROTO_MAP_REPLY)
		return bad | 128;
	p = mmap(NULL, fd_bytes(mfd), PROT_READ, MAP_SHARED, mfd, 0);
	if (p == MAP_FAILED || memcmp(p + m.u.map_reply.addr, pat,
				      sizeof(pat)))
		bad |= 256;			/* the copy came back */
	if (p != MAP_FAILED)
		munmap(p, fd_bytes(mfd));
	close(mfd);
	unmap(c, big);
	if (tensor_map(c, "small", sizeof(pat), &small) !=
	    HMM_PROTO_MAP_REPLY)
		bad |= 512;
	if (map_range(c, small, 0, HMM_ALL, HMM_READ, &m, &mfd) !=
	    HMM_PROTO_MAP_REPLY || m.u.map_reply.flags ||
	    fd_bytes(mfd) < sizeof(pat))
		bad |= 1024;			/* zero-copy within reach */
	if (mfd >= 0)
		close(mfd);
	close(c);
	return bad;
}

/*
 * Two write maps of t's first piece bytes, which come as copies (two
 * pointers): bytes written through the first and unmapped stay the
 * tensor's after the unmap of the second, which wrote nothing (its
 * copy's bytes as sent used to come back whole, over them).  0, or 7
 * (a map failed) or 8 (the first map's bytes were lost).
 */
static int two_copies(struct hmm_tensor *t, uint64_t piece)
{
	static uint8_t pat[256 << 10];
	void *a, *b, *p;
	int bad;

	if (piece > sizeof(pat) ||
	    hmm_map(t, 0, piece, HMM_TIER_HOST, HMM_WRITE, &a))
		return 7;
	if (hmm_map(t, 0, piece, HMM_TIER_HOST, HMM_READ | HMM_WRITE, &b)) {
		hmm_unmap(t, a);
		return 7;
	}
	t_fill(pat, piece, 63);
	memcpy(a, pat, piece);
	bad = hmm_unmap(t, a) || hmm_unmap(t, b) ? 7 : 0;
	if (!bad && hmm_map(t, 0, piece, HMM_TIER_HOST, HMM_READ, &p))
		bad = 7;
	else if (!bad) {
		bad = memcmp(p, pat, piece) ? 8 : 0;
		hmm_unmap(t, p);
	}
	return bad;
}

/*
 * The same through libhmm (hmm_open on hmmd, as nobody): 256 KiB maps of
 * a 2 MiB tensor, which come as copies, write and read back its bytes,
 * a map of every 256 KiB in turn, then two_copies.  0, or the step that
 * failed.
 */
static int lib_copy_checks(void)
{
	static uint8_t pat[2 << 20];
	const uint64_t piece = 256 << 10;
	char addr[128];
	struct hmm_config cfg;
	struct hmm_tensor *t;
	struct hmm *h;
	uint64_t off;
	void *p;
	int bad = 0;

	snprintf(addr, sizeof(addr), "unix:%s", sock);
	hmm_config_default(&cfg);
	cfg.daemon = addr;
	if (hmm_open(&cfg, &h))
		return 1;
	if (hmm_tensor_new(h, "lib", HMM_DTYPE_U8, 1,
			   (int64_t[]){ sizeof(pat) }, &t)) {
		hmm_close(h);
		return 2;
	}
	t_fill(pat, sizeof(pat), 62);
	for (off = 0; !bad && off < sizeof(pat); off += piece) {
		if (hmm_map(t, off, piece, HMM_TIER_HOST, HMM_WRITE, &p))
			bad = 3;
		else {
			memcpy(p, pat + off, piece);
			bad = hmm_unmap(t, p) ? 4 : 0;
		}
	}
	for (off = 0; !bad && off < sizeof(pat); off += piece) {
		if (hmm_map(t, off, piece, HMM_TIER_HOST, HMM_READ, &p))
			bad = 5;
		else {
			bad = memcmp(p, pat + off, piece) ? 6 : 0;
			hmm_unmap(t, p);
		}
	}
	if (!bad)
		bad = two_copies(t, piece);
	hmm_tensor_free(t);
	hmm_close(h);
	return bad;
}

static void test_reach(const char *mode, int sealed)
{
	int st, st2;
	pid_t pid;

	if (getuid() != 0) {
		t_ok(1, "# SKIP reach of another uid: needs root");
		return;
	}
	pid = fork();
	if (pid == 0)
		_exit(as_nobody() ? 1 : reach_checks());
	st = -1;
	waitpid(pid, &st, 0);
	bad_inputs += 2;
	pid = fork();
	if (pid == 0)
		_exit(as_nobody() ? 9 : lib_copy_checks());
	st2 = -1;
	waitpid(pid, &st2, 0);
	t_eq(WIFEXITED(st2) ? WEXITSTATUS(st2) : -1, 0, "%s: through libhmm, "
	     "as nobody: 256 KiB maps (copies) of a 2 MiB tensor write and "
	     "read back its bytes, and two write copies of one piece keep "
	     "what the first wrote past the second's unmap (exit: 1 open, 2 "
	     "new, 3 map, 4 unmap, 5 map again, 6 bytes differ, 7 two "
	     "copies' maps, 8 the first copy's bytes lost)", mode);
	t_eq(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0, "%s: nobody (quota 1 "
	     "MiB) mapping 256 KiB of a 2 MiB tensor gets a sealed 256 KiB "
	     "copy, not the tensor's memfd, written back at unmap; a tensor "
	     "within its reach comes zero-copy (exit bits: 2 whole map not "
	     "refused, 4 map, 8 not a 256 KiB copy, 16 grows, 32 mmap, 64 "
	     "unmap, 128 map again, 256 bytes lost, 512 small, 1024 small "
	     "not zero-copy)", mode);
}

static void test_uid_quota(const char *mode, int sealed)
{
	int st;
	pid_t pid;

	if (getuid() != 0) {
		t_ok(1, "# SKIP per-uid quota of another uid: needs root");
		return;
	}
	pid = fork();
	if (pid == 0)
		_exit(as_nobody() ? 1 : uid_quota_checks());
	st = -1;
	waitpid(pid, &st, 0);
	bad_inputs += 2;
	t_eq(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0, "%s: nobody's two "
	     "connections share its 1 MiB host quota (the second's map "
	     "refused -EDQUOT, served after the first unmaps); no quota "
	     "asked: a quarter of the budget (bits: 1 connect, 2 granted, "
	     "4 first map, 8 second not refused, 16 unmap, 32 not served "
	     "after, 64 default)", mode);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A loopback TCP connection to the metrics port; -1 when none. */
static int metrics_conn(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons(atoi(strchr(mport, ':') + 1));
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/*
 * Item 7: scrapers that send a byte every 300 ms (each read well within
 * any per-read timeout) and ones that send nothing must not hold up a
 * good scrape: it is answered within 1.5 s while they drip.
 */
static void test_slow_scrape(const char *mode, int sealed)
{
	static char text[1 << 16];
	const char *body;
	double t0, dt;
	pid_t pid;
	int st;

	pid = fork();
	if (pid == 0) {
		int fd[6], i, k;

		for (i = 0; i < 6; i++)
			fd[i] = metrics_conn();
		for (k = 0; k < 15; k++) {	/* 4.5 s of drips */
			for (i = 0; i < 3; i++)
				if (fd[i] >= 0)
					send(fd[i], "G", 1, MSG_NOSIGNAL);
			usleep(300000);
		}
		_exit(0);
	}
	usleep(300000);
	bad_inputs += 6;
	t0 = now_s();
	body = prom_fetch(atoi(strchr(mport, ':') + 1), text, sizeof(text));
	dt = now_s() - t0;
	t_ok(body && strstr(body, "hmmd_clients") && dt < 1.5, "%s: a scrape "
	     "is answered in %.2f s while 6 slow scrapers hold on", mode, dt);
	waitpid(pid, &st, 0);
}

int main(void)
{
	struct statfs sf;

	T_HMMD_PATHS(hmmd, dir, sock, store, logf, "a");
	t_free_port(mport, sizeof(mport));

	attack(test_truncate, "memfd truncate", NULL, 1);
	attack(test_readonly_share, "read-only share", NULL, 1);
	attack(test_error_bytes, "error bytes", NULL, 1);
	attack(test_tensor_limit, "tensor limit", NULL, 1);
	attack(test_idle_flood, "idle connections", NULL, 1);
	attack(test_refused_open, "refused open", NULL, 1);
	wait_ms = "300";
	attack(test_uid_quota, "uid quota", NULL, 1);
	attack(test_reach, "reach", NULL, 1);
	wait_ms = NULL;
	attack(test_slow_scrape, "slow scrapers", NULL, 1);
	nofile = 256;
	attack(test_fd_exhaust, "fds exhausted", NULL, 1);
	nofile = 0;

	snprintf(hostdir, sizeof(hostdir), "/dev/shm/hmm-attack.%d",
		 (int)getpid());
	if (statfs("/dev/shm", &sf) == 0 && sf.f_type == TMPFS_MAGIC_ &&
	    mkdir(hostdir, 0700) == 0) {
		attack(test_truncate, "host-dir truncate", hostdir, 0);
		rmdir(hostdir);
	} else {
		t_ok(1, "# SKIP host-dir: /dev/shm is not a tmpfs");
	}
	t_diag("bad inputs tried %u, hmmd crashes %u", bad_inputs, crashes);
	return t_done();
}
