// SPDX-License-Identifier: MIT
/*
 * test_hmmd_engine — hmmd with libhmm's engine, driven through the
 * client side (libhmm/src/remote/client.c) on a temporary Unix socket:
 *
 *  - a host map is shared memory (a memfd): bytes written through it are
 *    read back after unmap by a new map, and by another client;
 *  - isolation: another client cannot name a tensor it does not hold;
 *    share by name with one uid lets that uid attach (read-only when
 *    shared so), another uid cannot;
 *  - quotas: N client processes whose quotas add up to more than the
 *    global budget all finish; the pinned bytes (sampled) never pass the
 *    budget and the engine's host residency never passes its capacity;
 *    some maps waited (back-pressure);
 *  - kill -9 of a client releases its pins and frees its temporaries;
 *  - SIGTERM flushes; a restarted hmmd on the same store finds the
 *    persistent tensor byte-exact, by TENSOR_NEW(PERSIST) and by ATTACH;
 *    after a client's FLUSH and kill -9 of hmmd, a restarted one finds
 *    what that flush saved, byte-exact;
 *  - own quotas: -EDQUOT at once; weights: bytes follow quota ratios;
 *  - fair order per uid: the waiter whose uid is furthest below its
 *    quota share goes first, whichever connection asks;
 *  - a uid's quota is the most its connected clients asked: with none
 *    left (its entry kept for a persistent tensor's memfd), a new
 *    hello's 1 MiB, not the gone job's 2 MiB;
 *  - hmmctl: status, clients (host_pinned as the metric says), tensors,
 *    evict (by id and by name; an unknown id is no such tensor),
 *    stats --json, set-quota, and its usage errors (client 0 among
 *    them); as a user who is not an administrator: its uid's clients
 *    and tensors, evict by name, nothing of other uids;
 *  - hmmd_copy_bytes_total counts a copy map's bytes, in and back;
 *  - kill -9 of hmmd while a client waits in map: the map fails with
 *    -ENOTCONN / -ECONNRESET / -EPIPE within 5 s;
 *  - --metrics: Prometheus text over a loopback TCP connection.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "t.h"
#include "hmmd_t.h"
#include "prom.h"
#include "client.h"
#include "err.h"
#include "proto_sock.h"

#define CHUNK	(64u << 10)
#define BUDGET	(8u << 20)

static char hmmd[4096], hmmctl[4096], dir[1024], sock[4096], store[4096], logf[4096];
static char port[16];

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Start hmmd on sock/store with extra args; wait until it listens. */
static pid_t start(const char *wait_ms, int group)
{
	char *argv[32];
	int i = 0;
	pid_t pid;

	argv[i++] = hmmd;
	argv[i++] = "--socket";
	argv[i++] = sock;
	argv[i++] = "--store";
	argv[i++] = store;
	argv[i++] = "--store-size";
	argv[i++] = "64M";
	argv[i++] = "--host-budget";
	argv[i++] = "8M";
	argv[i++] = "--chunk";
	argv[i++] = "64K";
	argv[i++] = "--wait-ms";
	argv[i++] = (char *)wait_ms;
	argv[i++] = "--metrics";
	argv[i++] = port;
	if (group) {
		argv[i++] = "--group";
		argv[i++] = "nogroup";
	}
	argv[i] = NULL;
	unlink(sock);
	pid = t_hmmd_spawn(hmmd, argv, logf, 0, NULL);
	t_hmmd_wait_listen(pid, sock, 20, logf);
	return pid;
}

static int wait_exit(pid_t pid, int secs)
{
	double t0 = now();
	int st;

	while (now() - t0 < secs) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) :
			       128 + WTERMSIG(st);
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

static uint64_t last_id;

static struct hmm_client *conn(uint64_t host_quota, const char *name)
{
	uint64_t q[HMM_TIERS] = { 0, host_quota, 0 };
	struct hmm_proto_hello_reply rep;
	struct hmm_client *c;
	int ret = hmm_client_open(sock, q, name, &c, &rep);

	last_id = rep.client_id;
	if (ret)
		t_fail_all("connect %s: %s", sock, hmm_last_error());
	return c;
}

/* GET /metrics on the loopback port: the body, or "" */
static const char *metrics(void)
{
	static char text[1 << 16];
	const char *body = prom_fetch(atoi(strchr(port, ':') + 1), text,
				      sizeof(text));

	if (!body)
		t_diag("metrics: %s", strerror(errno));
	return body ? body : text;
}

/* The value of metric line "name" (with labels as written), or -1. */
static double metric(const char *name)
{
	return prom_value(metrics(), name);
}

/* ---- data, isolation, sharing --------------------------------------------- */

static uint64_t test_data(struct hmm_client *a, uint8_t *pat, size_t bytes)
{
	int64_t shape[1] = { (int64_t)(bytes / 4) };
	struct hmm_proto_tensor t, t2;
	struct hmm_client *b;
	uint8_t *p;
	void *v;
	int ret;

	ret = hmm_client_tensor_new(a, "w", HMM_DTYPE_F32, 1, shape,
				    HMM_PROTO_TENSOR_PERSIST, &t);
	t_eq(ret, 0, "tensor_new w (persistent): %s", hmm_last_error());
	t_eq(t.bytes, bytes, "w: %zu bytes", bytes);
	ret = hmm_client_map(a, t.id, 0, HMM_ALL, HMM_DISCARD, &v);
	t_eq(ret, 0, "map w DISCARD: %s", hmm_last_error());
	if (ret)
		return t.id;
	memcpy(v, pat, bytes);
	t_eq(hmm_client_unmap(a, v), 0, "unmap w");
	/* push it out of the host tier, then read it back */
	t_eq(hmm_client_evict(a, t.id, 0, HMM_ALL, HMM_TIER_HOST), 0,
	     "evict w to the store: %s", hmm_last_error());
	ret = hmm_client_map(a, t.id, CHUNK, 3 * CHUNK, HMM_READ, &v);
	t_eq(ret, 0, "map w [64K, +192K) READ");
	p = v;
	t_ok(!ret && !memcmp(p, pat + CHUNK, 3 * CHUNK),
	     "bytes written through the memfd are read back");
	if (!ret)
		hmm_client_unmap(a, v);

	b = conn(0, "other");
	ret = hmm_client_map(b, t.id, 0, 4096, HMM_READ, &v);
	t_eq(ret, -ENOENT, "another client cannot map w's id");
	t_ok(strstr(hmm_last_error(), "not yours") != NULL,
	     "detail: %s", hmm_last_error());
	t_eq(hmm_client_tensor_free(b, t.id), -ENOENT,
	     "another client cannot free it");
	t_eq(hmm_client_attach(b, getuid(), "w", &t2), 0,
	     "same uid: attach its persistent w by name");
	t_eq(t2.id, t.id, "attach: the same tensor");
	hmm_client_close(b);
	return t.id;
}

/* In a child as uid 65534 / 65533: attach "shared-w" of our uid; exit
 * codes say what happened. */
static int other_uid(uid_t uid, const uint8_t *pat)
{
	struct hmm_client *c;
	struct hmm_proto_tensor t;
	pid_t pid = fork();
	void *v;
	int st, ret;

	if (pid == 0) {
		uid_t owner = getuid();

		if (t_hmmd_become(uid, 65534, sock))
			_exit(100);
		ret = hmm_client_open(sock, NULL, "other-uid", &c, NULL);
		if (ret)
			_exit(101);
		ret = hmm_client_attach(c, owner, "shared-w", &t);
		if (ret == -ENOENT)
			_exit(10);
		if (ret)
			_exit(102);
		if (hmm_client_map(c, t.id, 0, 4096, HMM_READ | HMM_WRITE,
				   &v) != -EACCES)
			_exit(103);
		if (hmm_client_map(c, t.id, 0, 4096, HMM_READ, &v))
			_exit(104);
		_exit(memcmp(v, pat, 4096) ? 105 : 0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* fn's status run in a forked child (128 + N: killed by signal N). */
static int in_child(int (*fn)(void))
{
	pid_t pid = fork();
	int st;

	if (pid == 0)
		_exit(fn());
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		t_fail_all("fork: %s", strerror(errno));
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Can uid 65534 reach the socket (from its folder, t_hmmd_become)? */
static int others_reach(void)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		if (t_hmmd_become(65534, 65534, sock))
			_exit(1);
		_exit(access(sock, F_OK) ? 1 : 0);
	}
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	       WEXITSTATUS(st) == 0;
}

static void test_share(struct hmm_client *a, uint64_t id, const uint8_t *pat)
{
	t_eq(hmm_client_share(a, id, 65534, HMM_READ, "shared-w"), 0,
	     "share w as shared-w with uid 65534, read-only");
	if (getuid() != 0 || !getgrnam("nogroup") || !others_reach()) {
		t_diag("not root, no nogroup, or uid 65534 cannot reach %s: "
		       "other uids not tried", sock);
		return;
	}
	t_eq(other_uid(65534, pat), 0, "uid 65534 attaches shared-w, reads "
	     "it, and may not map it for writing (-EACCES)");
	t_eq(other_uid(65533, pat), 10, "uid 65533 cannot attach it "
	     "(-ENOENT)");
}

/* In a child as uid 65534: a job asking 2 MiB (client_quota's cap)
 * maps its persistent "kept" whole, so hmmd keeps the uid's entry for
 * that memfd's reach after the job goes; then a tool asking 1 MiB.
 * Exit 0 when the tool's quota is its own 1 MiB within 2 s (hmmd frees
 * the job after its close, so the hello may come first), 10 when it
 * stays the job's. */
static int kept_uid_child(void)
{
	int64_t shape[1] = { (1 << 20) / 4 };
	struct hmm_proto_stats_reply st;
	struct hmm_proto_tensor t;
	struct hmm_client *c;
	int i, ret = 10;
	void *v;

	if (t_hmmd_become(65534, 65534, sock))
		return 100;
	if (hmm_client_open(sock, (uint64_t[]){ 0, 2 << 20, 0 }, "job", &c,
			    NULL))
		return 101;
	if (hmm_client_tensor_new(c, "kept", HMM_DTYPE_F32, 1, shape,
				  HMM_PROTO_TENSOR_PERSIST, &t) ||
	    hmm_client_map(c, t.id, 0, HMM_ALL, HMM_WRITE, &v) ||
	    hmm_client_unmap(c, v))
		return 102;
	hmm_client_close(c);
	if (hmm_client_open(sock, (uint64_t[]){ 0, 1 << 20, 0 }, "tool", &c,
			    NULL))
		return 103;
	for (i = 0; i < 100 && ret; i++, usleep(20000)) {
		if (hmm_client_stats(c, &st))
			return 104;
		if (st.quota[HMM_TIER_HOST] == 1 << 20)
			ret = 0;
	}
	if (hmm_client_attach(c, 65534, "kept", &t) ||
	    hmm_client_tensor_free(c, t.id))	/* the owner's: gone */
		ret = 105;
	hmm_client_close(c);
	return ret;
}

static void test_kept_uid(void)
{
	if (getuid() != 0 || !getgrnam("nogroup") || !others_reach()) {
		t_ok(1, "a uid's quota with no client left # SKIP not root, "
		     "no nogroup, or uid 65534 cannot reach %s", sock);
		return;
	}
	t_eq(in_child(kept_uid_child), 0,
	     "uid 65534: its job (2 MiB) gone, its entry kept for a "
	     "persistent tensor's memfd: a tool's hello asking 1 MiB gets "
	     "1 MiB (10: the job's 2 MiB)");
}

/* Own quotas: beyond them a map or a tensor fails at once. */
static void test_own_quota(void)
{
	int64_t shape[1] = { (2 << 20) / 4 };
	struct hmm_proto_tensor t;
	struct hmm_client *c;
	void *v;
	double t0;
	int ret;

	if (hmm_client_open(sock, (uint64_t[]){ 0, 1 << 20, 3 << 20 },
			    "small", &c, NULL))
		t_fail_all("connect: %s", hmm_last_error());
	t_eq(hmm_client_tensor_new(c, "a", HMM_DTYPE_F32, 1, shape, 0, &t), 0,
	     "store quota 3 MiB: a 2 MiB tensor");
	t_eq(hmm_client_tensor_new(c, "b", HMM_DTYPE_F32, 1, shape, 0, NULL),
	     -EDQUOT, "a second one: -EDQUOT (store quota)");
	t_ok(strstr(hmm_last_error(), "tensors 4194304 bytes (2097152 held), "
		    "over its store quota 3145728") != NULL, "detail: the "
	     "total over the quota, what it holds: %s", hmm_last_error());
	t0 = now();
	ret = hmm_client_map(c, t.id, 0, HMM_ALL, HMM_READ, &v);
	t_eq(ret, -EDQUOT, "host quota 1 MiB: a 2 MiB map fails at once, "
	     "-EDQUOT (%.2f s)", now() - t0);
	t_ok(strstr(hmm_last_error(), "quota") != NULL, "detail: %s",
	     hmm_last_error());
	t_eq(hmm_client_map(c, t.id, 0, 1 << 20, HMM_READ, &v), 0,
	     "1 MiB of it maps");
	t_eq(hmm_client_map(c, t.id, 1 << 20, 4096, HMM_READ, &v), -EDQUOT,
	     "and nothing more while it is mapped");
	t_eq(hmm_client_tensor_free(c, t.id), -EBUSY,
	     "free of a mapped tensor: -EBUSY");
	ret = hmm_client_map(c, t.id, 0, 4096, HMM_READ, &v);
	t_eq(hmm_client_prefetch(c, t.id, 0, HMM_ALL, HMM_TIER_HOST), 0,
	     "prefetch");
	{
		struct hmm_proto_range q = { t.id, 0, 4096, HMM_TIER_DEVICE,
					     HMM_READ };
		uint8_t b[HMM_PROTO_MSG_MAX], rb[HMM_PROTO_RECV_BUF];
		struct hmm_proto_msg r;
		int n = hmm_proto_map_encode(b, sizeof(b), 77, &q);

		t_eq(hmm_proto_call(hmm_client_fd(c), b, n, rb, sizeof(rb), &r,
				    NULL, NULL, 5000), -ENOTSUP,
		     "a device-tier map: -ENOTSUP");
	}
	hmm_client_close(c);
}

/* ---- hmmctl ---------------------------------------------------------------- */

/* Run hmmctl with args; its stdout (with its stderr when err), and its
 * exit status in *code. */
static const char *ctl_out(const char *args, int *code, int err)
{
	static char out[1 << 15];
	char cmd[12288];
	size_t n;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s --socket %s %s %s", hmmctl, sock, args,
		 err ? "2>&1" : "2>/dev/null");
	f = popen(cmd, "r");
	if (!f)
		t_fail_all("popen %s", cmd);
	n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = 0;
	*code = pclose(f);
	*code = WIFEXITED(*code) ? WEXITSTATUS(*code) : -1;
	return out;
}

static const char *ctl(const char *args, int *code)
{
	return ctl_out(args, code, 0);
}

/* Column col (0: id) of the clients line whose name is name, or -1. */
static long long client_col(const char *out, const char *name, int col)
{
	const char *p;
	char nm[64];
	unsigned long long v[8];

	for (p = out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (sscanf(p, "%llu %llu %llu %63s %llu %llu %llu %llu", &v[0],
			   &v[1], &v[2], nm, &v[3], &v[4], &v[5], &v[6]) == 8
		    && !strcmp(nm, name))
			return col < 3 ? (long long)v[col] :
			       (long long)v[col - 1];
	return -1;
}

/* The numbers on the line of tensors output whose name is name. */
static int tensor_row(const char *out, const char *name, unsigned long long
		      v[6])
{
	char nm[64];
	const char *p = out;

	while (p && *p) {
		if (sscanf(p, "%llu %llu %llu %63s %llu %llu %llu %llu", &v[0],
			   &v[1], &v[2], nm, &v[3], &v[4], &v[5],
			   &v[5]) == 8 && !strcmp(nm, name)) {
			sscanf(p, "%*u %*u %*u %*s %llu %llu %llu %llu",
			       &v[0], &v[1], &v[2], &v[3]);
			return 1;	/* bytes device host store */
		}
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	return 0;
}

static void test_hmmctl(struct hmm_client *a, uint64_t a_id, size_t bytes)
{
	struct hmm_proto_stats_reply st;
	unsigned long long v[6];
	const char *out;
	char args[64];
	void *p;
	int code;

	if (access(hmmctl, X_OK)) {
		t_diag("%s not built: hmmctl not tried", hmmctl);
		return;
	}
	snprintf(args, sizeof(args), "protocol %d", HMM_PROTO_VERSION_MAX);
	out = ctl("status", &code);
	t_ok(code == 0 && strstr(out, args) && strstr(out, "host"),
	     "hmmctl status: %s", args);
	out = ctl("clients", &code);
	t_ok(code == 0 && strstr(out, " main ") && strstr(out, " hmmctl "),
	     "hmmctl clients lists main and itself");
	if (hmm_client_map(a, 1, 0, 4 * CHUNK, HMM_READ, &p))
		t_fail_all("map: %s", hmm_last_error());
	out = ctl("clients", &code);
	snprintf(args, sizeof(args), "hmmd_client_pinned_bytes{client=\"%llu\","
		 "uid=\"%u\"}", (unsigned long long)a_id, (unsigned)getuid());
	t_ok(code == 0 && client_col(out, "main", 5) == 4 * CHUNK &&
	     metric(args) == 4 * CHUNK, "hmmctl clients: main's host_pinned "
	     "is what it pins, %lld, as the metric says, %.0f",
	     client_col(out, "main", 5), metric(args));
	hmm_client_unmap(a, p);
	out = ctl("clients", &code);
	t_eq(client_col(out, "main", 5), 0, "and 0 after its unmap");
	hmm_client_map(a, 1, 0, HMM_ALL, HMM_READ, &p);	/* all on host */
	hmm_client_unmap(a, p);
	out = ctl("tensors", &code);
	t_ok(code == 0 && tensor_row(out, "w", v) && v[0] == bytes &&
	     v[2] == bytes, "hmmctl tensors: w, %zu bytes, all on host", bytes);
	out = ctl("evict 1 host", &code);
	t_eq(code, 0, "hmmctl evict 1 host");
	out = ctl("tensors", &code);
	t_ok(code == 0 && tensor_row(out, "w", v) && v[2] == 0 &&
	     v[3] == bytes, "after evict: w on the host 0, in the store %zu",
	     bytes);
	out = ctl("stats --json", &code);
	t_ok(code == 0 && out[0] == '{' && strstr(out, "\"tiers\":{") &&
	     strstr(out, "\"host\":{\"capacity\":8388608"),
	     "hmmctl stats --json: one object with the tiers");
	snprintf(args, sizeof(args), "set-quota %llu 2M",
		 (unsigned long long)a_id);
	ctl(args, &code);
	t_eq(code, 0, "hmmctl set-quota %llu 2M", (unsigned long long)a_id);
	t_ok(!hmm_client_stats(a, &st) && st.quota[HMM_TIER_HOST] == 2 << 20,
	     "the client's host quota is now 2 MiB");
	hmm_client_quota_set(a, 0, (uint64_t[]){ 0, 0, 0 });
	ctl("set-quota 999 1M", &code);
	t_eq(code, 1, "set-quota of no such client: exit 1");
	ctl("bogus", &code);
	t_eq(code, 2, "unknown command: exit 2");
	hmm_client_map(a, 1, 0, HMM_ALL, HMM_READ, &p);	/* all on host */
	hmm_client_unmap(a, p);
	ctl("evict w", &code);
	t_eq(code, 0, "hmmctl evict w: a tensor by its name, to the store");
	out = ctl("tensors", &code);
	t_ok(code == 0 && tensor_row(out, "w", v) && v[2] == 0 &&
	     v[3] == bytes, "after evict w: on the host 0, in the store %zu",
	     bytes);
	ctl("evict no-such-tensor", &code);
	t_eq(code, 1, "evict of a name no tensor has: exit 1");
	out = ctl_out("evict 999", &code, 1);
	t_ok(code == 1 && strstr(out, "tensor 999: no such tensor") &&
	     !strstr(out, "not yours"), "an administrator's evict of an id "
	     "no tensor has: exit 1, no such tensor: %s", out);
	ctl("set-quota 0 4M", &code);
	t_eq(code, 2, "set-quota of client 0 (no client's id; hmmctl's own "
	     "connection to hmmd): a usage error, exit 2");
	t_ok(!hmm_client_stats(a, &st) && st.quota[HMM_TIER_HOST] == 2 << 20,
	     "quotas unchanged");
	ctl("set-quota 99999999999999999999 1M", &code);
	t_eq(code, 2, "set-quota of a client id past 64 bits: exit 2");
	ctl("set-quota 1 99999999999T", &code);
	t_eq(code, 2, "set-quota of a size past 64 bits: exit 2");
	ctl("evict w gpu", &code);
	t_eq(code, 2, "evict to a tier not host or device: exit 2");
	ctl("status extra", &code);
	t_eq(code, 2, "a stray argument: exit 2");
}

/*
 * In a child as uid 65534 (not an administrator): a job's connection
 * makes "mine" (4 MiB, more than the uid's 2 MiB quota: a map of it is a
 * copy) and writes 1 MiB of it through a copy map, and again through a
 * write copy of a range it also maps read-only, whose unmap must bring
 * the bytes back at once (hmmd ended the read-only one instead before
 * UNMAP_EXACT); then hmmctl, run as
 * the same uid, lists the job and "mine" (not root's clients and
 * tensors), evicts "mine" by name, and is told no more than "not one of
 * uid 65534's" about root's tensor 1.  Exit 0, or the step that failed.
 */
static int nonadmin_child(void)
{
	int64_t shape[1] = { (4 << 20) / 4 };
	unsigned long long v[6];
	struct hmm_proto_tensor t;
	struct hmm_client *c;
	const char *out;
	char cmd[8400];
	int code;
	void *p, *r, *w;

	/* hmmctl beside the socket: the folders above build/ may not let
	 * uid 65534 through (a 0700 clone), and it needs only libc */
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s/hmmctl'", hmmctl, dir);
	if (system(cmd) || t_hmmd_become(65534, 65534, sock))
		return 100;
	snprintf(hmmctl, sizeof(hmmctl), "./hmmctl");
	if (hmm_client_open(sock, NULL, "job", &c, NULL) ||
	    hmm_client_tensor_new(c, "mine", HMM_DTYPE_F32, 1, shape, 0, &t) ||
	    hmm_client_map(c, t.id, 0, 1 << 20, HMM_WRITE, &p))
		return 101;
	memset(p, 7, 1 << 20);
	if (hmm_client_unmap(c, p))
		return 102;
	/* a read and a write copy of one range: the write one's unmap
	   brings its bytes back then, not at the read one's unmap */
	if (hmm_client_map(c, t.id, 0, 1 << 20, HMM_READ, &r) ||
	    hmm_client_map(c, t.id, 0, 1 << 20, HMM_WRITE, &w) || r == w)
		return 103;
	memset(w, 9, 1 << 20);
	if (hmm_client_unmap(c, w) ||
	    hmm_client_map(c, t.id, 0, 1 << 20, HMM_READ, &p))
		return 104;
	if (((uint8_t *)p)[0] != 9 || ((uint8_t *)p)[(1 << 20) - 1] != 9)
		return 15;
	if (hmm_client_unmap(c, p) || hmm_client_unmap(c, r))
		return 105;
	out = ctl("clients", &code);
	if (code || !strstr(out, " job ") || strstr(out, " main "))
		return 10;		/* its uid's job, not root's main */
	out = ctl("tensors", &code);
	if (code || !tensor_row(out, "mine", v) || v[2] != 1 << 20 ||
	    tensor_row(out, "w", v))
		return 11;		/* its uid's tensor, 1 MiB on host */
	ctl("evict mine", &code);
	if (code)
		return 12;
	out = ctl("tensors", &code);
	if (code || !tensor_row(out, "mine", v) || v[2] != 0)
		return 13;		/* evicted from the host */
	out = ctl_out("evict 1", &code, 1);
	if (code != 1 || !strstr(out, "not one of uid 65534's"))
		return 14;		/* root's w: not told it exists */
	hmm_client_close(c);
	return 0;
}

static void test_nonadmin(void)
{
	double copied = metric("hmmd_copy_bytes_total");

	if (getuid() != 0 || !getgrnam("nogroup") || !others_reach() ||
	    access(hmmctl, X_OK)) {
		t_ok(1, "hmmctl as a user # SKIP not root, no nogroup, uid "
		     "65534 cannot reach %s, or no hmmctl", sock);
		return;
	}
	t_eq(in_child(nonadmin_child), 0,
	     "hmmctl as uid 65534 lists its job and the job's tensor, not "
	     "root's (10, 11), evicts it by name (12, 13), and learns nothing "
	     "of root's tensor 1 (14); of a read and a write copy map of one "
	     "range, the write one's unmap brings its bytes back (15)");
	t_eq(metric("hmmd_copy_bytes_total") - copied, 6 << 20,
	     "hmmd_copy_bytes_total: a 1 MiB copy write map counts 1 MiB "
	     "copied in at the map and 1 MiB back at the unmap, a read one "
	     "1 MiB in (two of each: 6 MiB)");
}

/* ---- quotas and back-pressure --------------------------------------------- */

#define NCLIENTS	3
#define ROUNDS		40

/* One client process: quota 4 MiB, maps of all 4 MiB held a little
 * (three of them cannot be pinned at once under the 8 MiB budget). */
static void quota_child(int k)
{
	int64_t shape[1] = { (4 << 20) / 4 };
	struct hmm_proto_tensor t;
	struct hmm_client *c;
	char name[32];
	int i, ret;
	void *v;

	snprintf(name, sizeof(name), "q%d", k);
	if (hmm_client_open(sock, (uint64_t[]){ 0, 4u << 20, 0 }, name, &c,
			    NULL))
		_exit(101);
	if (hmm_client_tensor_new(c, name, HMM_DTYPE_F32, 1, shape, 0, &t))
		_exit(102);
	for (i = 0; i < ROUNDS; i++) {
		ret = hmm_client_map(c, t.id, 0, 4 << 20, HMM_WRITE |
				     HMM_READ, &v);
		if (ret)
			_exit(103);
		((uint32_t *)v)[(i % 2) * ((2 << 20) / 4)] += 1;
		usleep(3000);
		if (hmm_client_unmap(c, v))
			_exit(104);
	}
	/* what was written is there: both halves counted ROUNDS / 2 */
	if (hmm_client_map(c, t.id, 0, 4 << 20, HMM_READ, &v))
		_exit(105);
	ret = ((uint32_t *)v)[0] == ROUNDS / 2 &&
	      ((uint32_t *)v)[(2 << 20) / 4] == ROUNDS / 2;
	hmm_client_close(c);
	_exit(ret ? 0 : 106);
}

static void test_quotas(struct hmm_client *a)
{
	struct hmm_proto_stats_reply st;
	pid_t pids[NCLIENTS];
	double pinned, pmax = 0;
	uint64_t rmax = 0;
	int i, st2, ok = 0, over = 0, samples = 0, running;
	double waits0 = metric("hmmd_waits_total");

	for (i = 0; i < NCLIENTS; i++) {
		pids[i] = fork();
		if (pids[i] == 0)
			quota_child(i);
	}
	do {
		running = 0;
		for (i = 0; i < NCLIENTS; i++)
			if (pids[i] > 0 && waitpid(pids[i], &st2, WNOHANG) ==
			    pids[i]) {
				ok += WIFEXITED(st2) && !WEXITSTATUS(st2);
				if (!WIFEXITED(st2) || WEXITSTATUS(st2))
					t_diag("quota client %d: status %d", i,
					       st2);
				pids[i] = 0;
			} else if (pids[i] > 0) {
				running++;
			}
		pinned = metric("hmmd_pinned_bytes");
		if (!hmm_client_stats(a, &st)) {
			if (st.tier[HMM_TIER_HOST].resident >
			    st.tier[HMM_TIER_HOST].capacity)
				over++;
			if (st.tier[HMM_TIER_HOST].resident > rmax)
				rmax = st.tier[HMM_TIER_HOST].resident;
		}
		if (pinned > BUDGET)
			over++;
		if (pinned > pmax)
			pmax = pinned;
		samples++;
		usleep(2000);
	} while (running);
	t_eq(ok, NCLIENTS, "%d clients with 4 MiB quotas under an 8 MiB "
	     "budget all finish, their bytes right", NCLIENTS);
	t_eq(over, 0, "pinned and resident bytes never above the budget "
	     "(%d samples, peak pinned %.0f, peak resident %llu)", samples,
	     pmax, (unsigned long long)rmax);
	t_ok(metric("hmmd_waits_total") > waits0,
	     "oversubscribed: some maps waited (back-pressure), %.0f",
	     metric("hmmd_waits_total") - waits0);
}

/*
 * Weights: quotas of 4 and 8 MiB under the 8 MiB budget, each client
 * mapping all its quota again and again for the same time: they cannot
 * both hold theirs, so they take turns, and the bytes each got follow
 * the quotas (2:1), with neither starved.
 */
static void weight_child(uint64_t quota, int wfd)
{
	int64_t shape[1] = { (int64_t)(quota / 4) };
	struct hmm_proto_tensor t;
	struct hmm_client *c;
	unsigned long long rounds = 0;
	char line[64];
	double t0;
	void *v;

	if (hmm_client_open(sock, (uint64_t[]){ 0, quota, 0 }, "weight", &c,
			    NULL) ||
	    hmm_client_tensor_new(c, "wt", HMM_DTYPE_F32, 1, shape, 0, &t))
		_exit(1);
	for (t0 = now(); now() - t0 < 2.0; rounds++) {
		if (hmm_client_map(c, t.id, 0, HMM_ALL, HMM_DISCARD, &v))
			_exit(2);
		usleep(5000);
		if (hmm_client_unmap(c, v))
			_exit(3);
	}
	snprintf(line, sizeof(line), "%llu\n", rounds);
	if (write(wfd, line, strlen(line)) < 0)
		_exit(4);
	hmm_client_close(c);
	_exit(0);
}

static void test_weights(void)
{
	uint64_t q[2] = { 4u << 20, 8u << 20 };
	unsigned long long r[2] = { 0, 0 };
	double bytes[2], ratio;
	char line[64];
	int p[2][2], i, st, ok = 0;
	pid_t pid[2];
	FILE *f;

	for (i = 0; i < 2; i++) {
		if (pipe(p[i]))
			t_fail_all("pipe");
		pid[i] = fork();
		if (pid[i] == 0) {
			close(p[i][0]);
			weight_child(q[i], p[i][1]);
		}
		close(p[i][1]);
	}
	for (i = 0; i < 2; i++) {
		f = fdopen(p[i][0], "r");
		if (f && fgets(line, sizeof(line), f))
			r[i] = strtoull(line, NULL, 10);
		if (f)
			fclose(f);
		ok += waitpid(pid[i], &st, 0) == pid[i] && WIFEXITED(st) &&
		      !WEXITSTATUS(st);
	}
	t_eq(ok, 2, "two clients, quotas 4 and 8 MiB, 8 MiB budget: both "
	     "finish");
	bytes[0] = (double)r[0] * q[0];
	bytes[1] = (double)r[1] * q[1];
	ratio = bytes[0] > 0 ? bytes[1] / bytes[0] : 0;
	t_ok(r[0] >= 3 && r[1] >= 3, "neither starves: %llu and %llu maps",
	     r[0], r[1]);
	t_ok(ratio > 1.4 && ratio < 2.8, "bytes mapped follow the weights: "
	     "8M-client / 4M-client = %.2f (quota ratio 2)", ratio);
}

/*
 * Fair order is the uid's: uid 65534 pins 1.5 of its 2 MiB quota on one
 * connection and asks 256 KiB more on a fresh one; uid 65533 (nothing
 * pinned) asks 256 KiB after it; root holds the rest of the budget and
 * frees 256 KiB.  65533 is furthest below its share and goes first.
 * Ranked per connection, the fresh one counted as 0% and, asking first,
 * went first.  A child as uid writes 'w' before its map and 'm' once the
 * map is served ('x': it failed), then holds it until killed.
 */
static void fair_child(uid_t uid, uint64_t bytes, int fd)
{
	int64_t shape[1] = { (int64_t)(bytes / 4) };
	struct hmm_proto_tensor t;
	struct hmm_client *c;
	void *v;
	int ret;

	if (t_hmmd_become(uid, 65534, sock) ||
	    hmm_client_open(sock, NULL, "fair", &c, NULL) ||
	    hmm_client_tensor_new(c, "fair", HMM_DTYPE_F32, 1, shape, 0, &t) ||
	    write(fd, "w", 1) != 1)
		_exit(1);
	ret = hmm_client_map(c, t.id, 0, HMM_ALL, HMM_WRITE, &v);
	if (write(fd, ret ? "x" : "m", 1) != 1)
		_exit(1);
	pause();
	_exit(0);
}

static pid_t fair_fork(uid_t uid, uint64_t bytes, int *rfd)
{
	char ch = 0;
	int p[2];
	pid_t pid;

	if (pipe(p))
		t_fail_all("pipe");
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		fair_child(uid, bytes, p[1]);
	}
	close(p[1]);
	*rfd = p[0];
	if (read(p[0], &ch, 1) != 1 || ch != 'w')
		t_diag("fair child uid %u did not start", (unsigned)uid);
	if (bytes < (1u << 20))		/* a waiter: let it queue */
		usleep(200000);
	else if (read(p[0], &ch, 1) != 1 || ch != 'm')
		t_diag("fair child uid %u did not map", (unsigned)uid);
	return pid;
}

/* Which of the fds in[2] says 'm' first within secs: 0, 1, or -1. */
static int fair_first(const int in[2], double secs)
{
	struct pollfd pf[2] = { { in[0], POLLIN, 0 }, { in[1], POLLIN, 0 } };
	char ch;
	int i;

	if (poll(pf, 2, (int)(secs * 1000)) <= 0)
		return -1;
	for (i = 0; i < 2; i++)
		if (pf[i].revents && read(in[i], &ch, 1) == 1 && ch == 'm')
			return i;
	return -1;
}

static void test_fair_uid(void)
{
	uint64_t held = (3u << 20) / 2, ask = 256u << 10, rest;
	int64_t shape[1] = { BUDGET / 4 };
	struct hmm_proto_tensor t;
	struct hmm_client *root;
	int fd[3], first, second;
	void *big, *small;
	pid_t pid[3];
	int i, st;

	if (getuid() != 0 || !getgrnam("nogroup") || !others_reach()) {
		t_ok(1, "fair order per uid # SKIP not root, no nogroup, or "
		     "uid 65534 cannot reach %s", sock);
		return;
	}
	rest = BUDGET - held - (uint64_t)metric("hmmd_pinned_bytes");
	pid[0] = fair_fork(65534, held, &fd[0]);
	root = conn(BUDGET, "fair-root");
	if (hmm_client_tensor_new(root, "fair-root", HMM_DTYPE_F32, 1, shape,
				  0, &t) ||
	    hmm_client_map(root, t.id, 0, rest - ask, HMM_WRITE, &big) ||
	    hmm_client_map(root, t.id, rest - ask, ask, HMM_WRITE, &small))
		t_fail_all("fair: root pins the budget: %s", hmm_last_error());
	pid[1] = fair_fork(65534, ask, &fd[1]);	/* a fresh connection */
	pid[2] = fair_fork(65533, ask, &fd[2]);
	hmm_client_unmap(root, small);		/* room for one */
	first = fair_first(&fd[1], 3);
	hmm_client_unmap(root, big);		/* room for the other */
	second = fair_first(&fd[1], 3);
	t_ok(first == 1 && second == 0, "fair order is the uid's: with room "
	     "for one 256 KiB map, uid 65533 (0 of its 2 MiB pinned) goes "
	     "before uid 65534's fresh connection (1.5 MiB pinned by its "
	     "other one, asked first): first %s, then %s",
	     first < 0 ? "none" : first ? "65533" : "65534",
	     second < 0 ? "none" : second ? "65533" : "65534");
	for (i = 0; i < 3; i++) {
		kill(pid[i], SIGKILL);
		waitpid(pid[i], &st, 0);
		close(fd[i]);
	}
	hmm_client_close(root);
}

/* ---- kill -9 of a client ---------------------------------------------------- */

static void test_kill_client(struct hmm_client *a)
{
	struct hmm_proto_list_reply l;
	int p[2], st, found, i;
	double pinned0 = metric("hmmd_pinned_bytes");
	char c;
	pid_t pid;

	if (pipe(p))
		t_fail_all("pipe");
	pid = fork();
	if (pid == 0) {
		int64_t shape[1] = { (1 << 20) / 4 };
		struct hmm_proto_tensor t;
		struct hmm_client *k;
		void *v;

		close(p[0]);
		if (hmm_client_open(sock, NULL, "doomed", &k, NULL) ||
		    hmm_client_tensor_new(k, "doomed-tmp", HMM_DTYPE_F32, 1,
					  shape, 0, &t) ||
		    hmm_client_map(k, t.id, 0, HMM_ALL, HMM_WRITE, &v))
			_exit(1);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(p[1]);
	t_eq(read(p[0], &c, 1), 1, "client maps 1 MiB and waits");
	close(p[0]);
	t_eq(metric("hmmd_pinned_bytes"), pinned0 + (1 << 20),
	     "its 1 MiB is pinned");
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	for (i = 0; i < 300; i++) {
		if (metric("hmmd_pinned_bytes") == pinned0)
			break;
		usleep(10000);
	}
	t_eq(metric("hmmd_pinned_bytes"), pinned0,
	     "kill -9: its pins are released");
	found = 0;
	for (l.id = 1; !hmm_client_list(a, HMM_PROTO_LIST_TENSORS, l.id, &l)
	     && l.id; l.id++)
		found += !strcmp(l.name, "doomed-tmp");
	t_eq(found, 0, "kill -9: its temporary tensor is freed");
}

/* ---- restart, kill -9 of hmmd ---------------------------------------------- */

static void test_restart(pid_t *pid, const uint8_t *pat, size_t bytes)
{
	int64_t shape[1] = { (int64_t)(bytes / 4) };
	struct hmm_proto_tensor t;
	struct hmm_client *c;
	void *v;
	int ret;

	kill(*pid, SIGTERM);
	t_eq(wait_exit(*pid, 30), 0, "SIGTERM: hmmd flushes and exits 0");
	*pid = start("60000", 0);
	c = conn(0, "after-restart");
	ret = hmm_client_tensor_new(c, "w", HMM_DTYPE_F32, 1, shape,
				    HMM_PROTO_TENSOR_PERSIST, &t);
	t_eq(ret, 0, "restarted hmmd: tensor_new(PERSIST) w finds it: %s",
	     hmm_last_error());
	ret = ret ? ret : hmm_client_map(c, t.id, 0, HMM_ALL, HMM_READ, &v);
	t_ok(!ret && !memcmp(v, pat, bytes),
	     "restart recovery: w byte-exact (%zu bytes)", bytes);
	if (!ret)
		hmm_client_unmap(c, v);
	/* new contents, flushed by the client: must survive a kill -9 */
	ret = hmm_client_map(c, t.id, 0, HMM_ALL, HMM_WRITE, &v);
	if (!ret) {
		t_fill(v, bytes, 43);
		hmm_client_unmap(c, v);
	}
	t_eq(hmm_client_flush(c), 0, "a client's FLUSH: %s",
	     hmm_last_error());
	shape[0] = 3;
	t_eq(hmm_client_tensor_new(c, "w", HMM_DTYPE_F32, 1, shape,
				   HMM_PROTO_TENSOR_PERSIST, &t), -EEXIST,
	     "w with another shape: -EEXIST");
	hmm_client_close(c);
}

/* After kill -9 of hmmd: what the last FLUSH saved is found, exact. */
static void test_crash_recovery(size_t bytes)
{
	struct hmm_proto_tensor t;
	struct hmm_client *c;
	uint8_t *want = malloc(bytes);
	pid_t pid = start("10000", 0);
	void *v;
	int ret;

	t_fill(want, bytes, 43);
	c = conn(0, "after-crash");
	ret = hmm_client_attach(c, getuid(), "w", &t);
	t_eq(ret, 0, "after kill -9 and restart: attach w by name: %s",
	     ret ? hmm_last_error() : "");
	ret = ret ? ret : hmm_client_map(c, t.id, 0, HMM_ALL, HMM_READ, &v);
	t_ok(!ret && !memcmp(v, want, bytes),
	     "crash recovery: w as flushed before kill -9, byte-exact");
	if (!ret)
		hmm_client_unmap(c, v);
	hmm_client_close(c);
	kill(pid, SIGTERM);
	t_eq(wait_exit(pid, 30), 0, "SIGTERM: exit 0");
	free(want);
}

static void test_kill_daemon(pid_t pid)
{
	int64_t shape[1] = { BUDGET / 4 };
	struct hmm_proto_tensor t;
	struct hmm_client *hog;
	int p[2], st, code;
	pid_t w;
	void *v;
	char ch;

	hog = conn(BUDGET, "hog");
	t_eq(hmm_client_tensor_new(hog, "hog", HMM_DTYPE_F32, 1, shape, 0,
				   &t), 0, "hog: an 8 MiB tensor");
	t_eq(hmm_client_map(hog, t.id, 0, HMM_ALL, HMM_WRITE, &v), 0,
	     "hog pins the whole budget");
	if (pipe(p))
		t_fail_all("pipe");
	w = fork();
	if (w == 0) {
		struct hmm_client *c;
		struct hmm_proto_tensor t2;
		double t0;
		int ret;

		close(p[0]);
		if (hmm_client_open(sock, NULL, "waiter", &c, NULL) ||
		    hmm_client_tensor_new(c, "small", HMM_DTYPE_F32, 1,
					  (int64_t[]){ 1024 }, 0, &t2))
			_exit(1);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		t0 = now();
		ret = hmm_client_map(c, t2.id, 0, HMM_ALL, HMM_READ, &v);
		if (now() - t0 > 5)
			_exit(2);
		_exit(ret == -ENOTCONN || ret == -ECONNRESET ||
		      ret == -EPIPE ? 0 : 3);
	}
	close(p[1]);
	t_eq(read(p[0], &ch, 1), 1, "a client is about to map");
	close(p[0]);
	usleep(300000);		/* it waits in map (the budget is pinned) */
	t_ok(metric("hmmd_waits_total") >= 1, "the map waits in hmmd");
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	code = wait_exit(w, 10);
	t_eq(code, 0, "kill -9 of hmmd: the blocked map fails with "
	     "-ENOTCONN/-ECONNRESET/-EPIPE within 5 s");
	t_ok(hmm_client_stats(hog, &(struct hmm_proto_stats_reply){ 0 }) < 0,
	     "other clients' calls fail too: %s", hmm_last_error());
	hmm_client_close(hog);
}

/*
 * max_clients (64): trainers of an administrator (this test runs as
 * hmmd's uid) hold at most 62 slots; the 63rd is refused at hello with
 * -EUSERS naming the limit; the last 2 are hmmctl's (a control hello):
 * hmmctl status gets in; past all 64, a refusal names max_clients.
 */
static void test_reserve(void)
{
	struct hmm_client *c[64], *ctl[3];
	pid_t pid = start("10000", 0);
	char cmd[10000];
	int i, n = 0, ret;

	for (i = 0; i < 63; i++) {
		ret = hmm_client_open(sock, NULL, "trainer", &c[n], NULL);
		if (ret)
			break;
		n++;
	}
	t_ok(n == 62 && ret == -EUSERS &&
	     strstr(hmm_last_error(), "kept for hmmctl") &&
	     strstr(hmm_last_error(), "max_clients 64"), "max_clients 64: "
	     "%d trainers of an admin in, the next refused: %d %s", n, ret,
	     hmm_last_error());
	snprintf(cmd, sizeof(cmd), "%s --socket %s status >/dev/null 2>&1",
		 hmmctl, sock);
	t_eq(system(cmd), 0, "and hmmctl status still gets in");
	for (i = 0; i < 3; i++)
		ctl[i] = NULL;
	for (i = 0; i < 3; i++) {
		ret = hmm_client_open_feat(sock, NULL, "ctl",
					   HMM_PROTO_FEAT_CONTROL, &ctl[i],
					   NULL);
		if (ret)
			break;
	}
	t_ok(i == 2 && ret == -EUSERS &&
	     strstr(hmm_last_error(), "too many clients (64 connected, "
		    "max_clients 64)"), "two control clients take the kept "
	     "slots; a third is refused naming the limit: %s",
	     hmm_last_error());
	for (i = 0; i < 3; i++)
		hmm_client_close(ctl[i]);
	for (i = 0; i < n; i++)
		hmm_client_close(c[i]);
	kill(pid, SIGTERM);
	t_eq(wait_exit(pid, 30), 0, "SIGTERM: exit 0");
}

/* SIGTERM while a map waits for the budget: the waiter is told hmmd is
 * shutting down (-ESHUTDOWN), at once, not that the budget stayed full
 * for wait_ms, nor only that the connection went. */
static void test_term_waiter(void)
{
	int64_t shape[1] = { BUDGET / 4 };
	pid_t pid = start("20000", 0), w;
	struct hmm_proto_tensor t;
	struct hmm_client *hog;
	char got[300] = "";
	int p[2], q[2];
	ssize_t n;
	void *v;
	char ch;

	hog = conn(BUDGET, "hog");
	if (hmm_client_tensor_new(hog, "hog", HMM_DTYPE_F32, 1, shape, 0,
				  &t) ||
	    hmm_client_map(hog, t.id, 0, HMM_ALL, HMM_WRITE, &v))
		t_fail_all("hog: %s", hmm_last_error());
	if (pipe(p) || pipe(q))
		t_fail_all("pipe");
	w = fork();
	if (w == 0) {
		struct hmm_proto_tensor t2;
		struct hmm_client *c;
		double t0;
		int ret;

		close(p[0]);
		close(q[0]);
		if (hmm_client_open(sock, NULL, "waiter", &c, NULL) ||
		    hmm_client_tensor_new(c, "small", HMM_DTYPE_F32, 1,
					  (int64_t[]){ 1024 }, 0, &t2))
			_exit(1);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		t0 = now();
		ret = hmm_client_map(c, t2.id, 0, HMM_ALL, HMM_READ, &v);
		dprintf(q[1], "%d %.1f %s", ret, now() - t0, hmm_last_error());
		_exit(0);
	}
	close(p[1]);
	close(q[1]);
	t_eq(read(p[0], &ch, 1), 1, "SIGTERM: a client is about to map");
	close(p[0]);
	usleep(300000);		/* it waits in map (the budget is pinned) */
	kill(pid, SIGTERM);
	t_eq(wait_exit(pid, 30), 0, "SIGTERM with a map waiting: exit 0");
	n = read(q[0], got, sizeof(got) - 1);
	got[n > 0 ? n : 0] = '\0';
	close(q[0]);
	wait_exit(w, 10);
	t_ok(atoi(got) == -ESHUTDOWN && strstr(got, "hmmd is shutting down") &&
	     !strstr(got, "stayed full"), "SIGTERM: the waiting map gets "
	     "-ESHUTDOWN \"hmmd is shutting down\" (ret, seconds, detail: %s)",
	     got);
	hmm_client_close(hog);
}

int main(void)
{
	const char *b = getenv("HMM_BUILD");
	size_t bytes = 16 * CHUNK;
	struct hmm_client *a;
	uint8_t *pat;
	uint64_t id, a_id;
	const char *m;
	pid_t pid;

	T_HMMD_PATHS(hmmd, dir, sock, store, logf, "e");
	snprintf(hmmctl, sizeof(hmmctl), "%s/bin/hmmctl", b ? b : "build");
	t_free_port(port, sizeof(port));
	pat = malloc(bytes);
	t_fill(pat, bytes, 42);

	pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);

		dup2(fd, 2);
		execl(hmmd, hmmd, "--socket", sock, "--metrics", "0.0.0.0:1",
		      NULL);
		_exit(127);
	}
	t_eq(wait_exit(pid, 10), 2, "--metrics on a non-loopback address: "
	     "refused before anything starts, exit 2 (a config error)");
	pid = start("10000", getuid() == 0 && getgrnam("nogroup"));
	m = metrics();
	t_ok(strstr(m, "hmm_tier_capacity_bytes{tier=\"host\"} 8388608\n") &&
	     strstr(m, "# TYPE hmmd_clients gauge"),
	     "metrics: Prometheus text over loopback TCP");
	a = conn(0, "main");
	a_id = last_id;
	t_eq(metric("hmmd_clients"), 1, "metrics: one client");
	t_eq(metric("hmm_store_pool_bytes"), 4 << 20,
	     "metrics: the store's pool in force (default 4 MiB)");
	t_eq(metric("hmm_store_io_depth"), 4, "metrics: io depth 4");
	t_eq(metric("hmm_store_queue_depth"), 64, "metrics: queue depth 64");
	id = test_data(a, pat, bytes);
	t_ok(metric("hmm_store_io_inflight_peak") >= 1 &&
	     metric("hmm_store_io_inflight_peak") <= 4,
	     "metrics: store I/Os in flight at once, within io_depth");
	test_hmmctl(a, a_id, bytes);
	test_own_quota();
	test_share(a, id, pat);
	test_kept_uid();
	test_nonadmin();
	test_kill_client(a);
	test_quotas(a);
	test_weights();
	test_fair_uid();
	hmm_client_close(a);
	test_restart(&pid, pat, bytes);
	test_kill_daemon(pid);
	test_crash_recovery(bytes);
	test_term_waiter();
	test_reserve();
	t_diag("hmmd log: %s", logf);
	free(pat);
	return t_done();
}
