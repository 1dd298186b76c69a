// SPDX-License-Identifier: MIT
/*
 * test_hmmd_errowner — an asynchronous error in hmmd belongs to the
 * client whose tensor met it (man/libhmm.3: hmm_wait waits for this
 * client's prefetches and evictions).  hmmd starts with HMM_FAULT=eio@1
 * and a 1 MiB host budget: root's context writes 768 KiB of its tensor
 * and holds it dirty; nobody's context then writes 1 MiB of its own,
 * which evicts root's oldest chunk to the store, and that first store
 * write fails.
 *
 *  - nobody's hmm_wait returns 0, its detail never names root's tensor;
 *  - root's hmm_wait returns -EIO naming its tensor, once (the next
 *    wait returns 0); its bytes are all there and a flush then saves
 *    them (0).
 */
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>

#include "t.h"
#include "hmmd_t.h"
#include "hmm.h"

#define CHUNK	(64u << 10)
#define PIECE	(256u << 10)	/* a uid's quota: a quarter of 1 MiB */

static char hmmd[4096], dir[4096], sock[200], store[4200], logf[4200];

static int ctx(uid_t uid, struct hmm **h)
{
	return t_hmmd_open(uid, sock, PIECE, CHUNK, h);
}

/* Make name of bytes and write it piecewise (seed + piece index). */
static struct hmm_tensor *write_pieces(struct hmm *h, const char *name,
				       uint64_t bytes, uint64_t seed)
{
	int64_t n = (int64_t)bytes;
	struct hmm_tensor *t;
	uint64_t off;
	void *p;

	if (hmm_tensor_new(h, name, HMM_DTYPE_U8, 1, &n, &t))
		return NULL;
	for (off = 0; off < bytes; off += PIECE) {
		if (hmm_map(t, off, PIECE, HMM_TIER_HOST, HMM_WRITE, &p))
			return NULL;
		t_fill(p, PIECE, seed + off / PIECE);
		hmm_unmap(t, p);
	}
	return t;
}

static int check_pieces(struct hmm_tensor *t, uint64_t bytes, uint64_t seed)
{
	static uint8_t want[PIECE];
	uint64_t off;
	void *p;
	int ok = 1;

	for (off = 0; off < bytes; off += PIECE) {
		if (hmm_map(t, off, PIECE, HMM_TIER_HOST, HMM_READ, &p))
			return -1;
		t_fill(want, PIECE, seed + off / PIECE);
		ok &= !memcmp(p, want, PIECE);
		hmm_unmap(t, p);
	}
	return ok;
}

/* nobody: "wait | detail" */
static int job_nobody(int fd, void *arg)
{
	struct hmm *h;
	int r;

	if (ctx(65534, &h))
		return 2;
	if (!write_pieces(h, "mine", 4 * PIECE, 70))
		return 3;
	r = hmm_wait(h, NULL);
	dprintf(fd, "%d | %s\n", r, r ? hmm_last_error() : "");
	hmm_close(h);
	return 0;
}

int main(void)
{
	char line[1024], rline[1024] = "";
	int ready[2], go[2], res[2], a, b, c, d, st;
	char *argv[] = { hmmd, "--socket", sock, "--store", store,
			 "--store-size", "64M", "--host-budget", "1M",
			 "--chunk", "64K", "--wait-ms", "3000", "--group",
			 "nogroup", "--module", "none", NULL };
	pid_t pid, root;
	ssize_t k;

	if (getuid() != 0 || !getpwuid(65534))
		t_skip_all("needs root and uid 65534 (nobody) for a second "
			   "uid");
	T_HMMD_PATHS(hmmd, dir, sock, store, logf, "errowner");
	t_watchdog(120, "test_hmmd_errowner");
	setenv("HMM_FAULT", "eio@1", 1);	/* hmmd's first store write */
	pid = t_hmmd_spawn(hmmd, argv, logf, 0, NULL);
	unsetenv("HMM_FAULT");
	t_hmmd_wait_listen(pid, sock, 20, logf);

	if (pipe(ready) || pipe(go) || pipe(res))
		t_fail_all("pipe: %s", strerror(errno));
	fflush(stdout);
	root = fork();
	if (root == 0) {		/* root's context */
		struct hmm_tensor *t;
		struct hmm *h;
		char x;
		int r1, r2, r3, ok;
		char det[300];

		if (ctx(0, &h) ||
		    !(t = write_pieces(h, "root_private_name", 3 * PIECE, 10)))
			_exit(2);
		if (write(ready[1], "r", 1) != 1 || read(go[0], &x, 1) != 1)
			_exit(3);
		r1 = hmm_wait(h, NULL);
		snprintf(det, sizeof(det), "%s", r1 ? hmm_last_error() : "");
		r2 = hmm_wait(h, NULL);
		ok = check_pieces(t, 3 * PIECE, 10);
		r3 = hmm_flush(h);
		dprintf(res[1], "%d %d %d %d | %s\n", r1, r2, ok, r3, det);
		hmm_close(h);
		_exit(0);
	}
	{
		char x;

		if (read(ready[0], &x, 1) != 1)
			t_fail_all("root's context did not start (log %s)",
				   logf);
	}
	t_eq(t_child(job_nobody, NULL, line, sizeof(line)), 0,
	     "nobody's context ran");
	t_ok(sscanf(line, "%d", &a) == 1 && a == 0,
	     "nobody's hmm_wait: 0, not root's error (%s)", line);
	t_ok(!strstr(line, "root_private_name"),
	     "nobody never sees root's tensor's name (%s)", line);
	if (write(go[1], "g", 1) != 1)
		t_fail_all("go: %s", strerror(errno));
	close(res[1]);
	k = read(res[0], rline, sizeof(rline) - 1);
	rline[k > 0 ? k : 0] = 0;
	rline[strcspn(rline, "\n")] = 0;
	waitpid(root, &st, 0);
	t_ok(sscanf(rline, "%d %d %d %d", &a, &b, &c, &d) == 4 && a == -EIO &&
	     strstr(rline, "root_private_name"),
	     "root's hmm_wait: -EIO naming its tensor (%s)", rline);
	t_ok(b == 0, "once: root's next hmm_wait returns 0 (%s)", rline);
	t_ok(c == 1, "root's bytes are all there (%s)", rline);
	t_ok(d == 0, "root's flush then saves them (%s)", rline);
	kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
	return t_done();
}
