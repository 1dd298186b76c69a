// SPDX-License-Identifier: MIT
/*
 * test_hmmd_save — hmm_flush in shared mode saves every tensor the
 * context holds, as in the embedded engine (man/libhmm.3): a real hmmd
 * on a temporary socket and store, each context a forked child (some
 * setuid to nobody) through the public hmm.h calls:
 *
 *  - a context's hmm_tensor_new tensors, flushed and the context
 *    closed: another context of the uid opens them byte-exact; one freed
 *    before a second flush is no longer saved (-ENOENT);
 *  - another uid does not find them (its own names only);
 *  - a later context's flush of a tensor of the same name replaces the
 *    saved one; the tensor it replaced, still held open, keeps its bytes;
 *  - after kill -9 of hmmd, a restarted one has what the flush saved,
 *    and frees the temporary the flush saved too (no client can open it:
 *    its store space would be held for good);
 *  - hmm_tensor_free of an opened saved tensor deletes it; a context
 *    does not open one it holds again (-ENOENT, as embedded: a second
 *    handle's free once deleted it under the first);
 *  - a name too long for hmmd's "u<uid>/" prefix: hmm_flush says so
 *    (-ENAMETOOLONG naming it) and still saves the others, and
 *    hmm_tensor_open of it is -ENOENT (no such name saved);
 *  - hmmctl after a restart lists the saved tensors (owner 0) before any
 *    job opens them, and `hmmctl rm` deletes one: nobody's own, not
 *    root's (exit 1, "not one of uid 65534's"); root's while a context
 *    holds it open (which keeps its bytes, but no later open finds it);
 *    a client's temporary is refused (exit 1); after kill -9 and a
 *    restart the deleted ones stay gone (rm flushed the store);
 *  - a tensor written through a device map (a copy of its own in this
 *    process) that is still mapped at the flush and at the close: the
 *    saved tensor has the bytes its holder left (found by fuzz_api's
 *    shared mode: neither copied them back, and it read as zeros).
 */
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "t.h"
#include "hmmd_t.h"
#include "hmm.h"

#define CHUNK	(64u << 10)
#define TB	(320u << 10)	/* 5 chunks */

static char hmmd[4096], hmmctl[4096], dir[4096], sock[200], store[4200];
static char logf[4200];

static pid_t start(void)
{
	char *argv[] = { hmmd, "--socket", sock, "--store", store,
			 "--store-size", "64M", "--host-budget", "4M",
			 "--chunk", "64K", "--group", "nogroup",
			 "--module", "none", NULL };
	pid_t pid;

	unlink(sock);
	pid = t_hmmd_spawn(hmmd, argv, logf, 0, NULL);
	t_hmmd_wait_listen(pid, sock, 20, logf);
	return pid;
}

static void stop(pid_t pid, int sig)
{
	int st;

	kill(pid, sig);
	waitpid(pid, &st, 0);
}

static int ctx(uid_t uid, struct hmm **h)
{
	return t_hmmd_open(uid, sock, 4 << 20, CHUNK, h);
}

static int fill(struct hmm_tensor *t, uint64_t seed)
{
	void *p;
	int r = hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_WRITE, &p);

	if (r)
		return r;
	t_fill(p, hmm_tensor_bytes(t), seed);
	return hmm_unmap(t, p);
}

/* 1 when t holds seed's pattern, 0 when not, -errno when unreadable. */
static int same(struct hmm_tensor *t, uint64_t seed)
{
	uint64_t n = hmm_tensor_bytes(t);
	uint8_t *want = malloc(n);
	void *p;
	int r = want ? hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p) :
		-ENOMEM;

	if (r) {
		free(want);
		return r;
	}
	t_fill(want, n, seed);
	r = !memcmp(p, want, n);
	hmm_unmap(t, p);
	free(want);
	return r;
}

static struct hmm_tensor *mk(struct hmm *h, const char *name)
{
	int64_t n = TB;
	struct hmm_tensor *t = NULL;

	hmm_tensor_new(h, name, HMM_DTYPE_U8, 1, &n, &t);
	return t;
}

/* The first context: w (seed 5) and g (seed 6) made and flushed; g
 * freed, flushed again.  Writes "flush1 flush2 | detail". */
static int job_make(int fd, void *arg)
{
	struct hmm_tensor *w, *g;
	struct hmm *h;
	int r1, r2;

	if (ctx(0, &h))
		return 2;
	w = mk(h, "w");
	g = mk(h, "g");
	if (!w || !g || fill(w, 5) || fill(g, 6))
		return 3;
	r1 = hmm_flush(h);
	dprintf(fd, "%d ", r1);
	r2 = hmm_tensor_free(g) ? -999 : hmm_flush(h);
	dprintf(fd, "%d | %s\n", r2, hmm_last_error());
	hmm_close(h);
	return 0;
}

/* Open name as uid: writes "open same | detail". */
struct look {
	uid_t uid;
	const char *name;
	uint64_t seed;
	int free_it;		/* then hmm_tensor_free it */
};

static int job_open(int fd, void *arg)
{
	const struct look *l = arg;
	struct hmm_tensor *t = NULL;
	struct hmm *h;
	int r, s = -1, f = 0;

	if (ctx(l->uid, &h))
		return 2;
	r = hmm_tensor_open(h, l->name, &t);
	if (!r)
		s = same(t, l->seed);
	dprintf(fd, "%d %d ", r, s);
	if (!r && l->free_it)
		f = hmm_tensor_free(t);
	dprintf(fd, "%d | %s\n", f, r ? hmm_last_error() : "");
	hmm_close(h);
	return 0;
}

/* A context holding the saved w open (seed 5) while another context
 * makes its own w (seed 7) and flushes: the saved w is then the new
 * one, and the held one keeps its bytes.  Writes "flush held | det". */
static int job_replace(int fd, void *arg)
{
	struct hmm_tensor *old = NULL, *w;
	struct hmm *h, *h2;
	int r, held;

	if (ctx(0, &h) || hmm_tensor_open(h, "w", &old))
		return 2;
	if (ctx(0, &h2) || !(w = mk(h2, "w")) || fill(w, 7))
		return 3;
	r = hmm_flush(h2);
	held = same(old, 5);
	dprintf(fd, "%d %d | %s\n", r, held, r ? hmm_last_error() : "");
	hmm_close(h2);
	hmm_close(h);
	return 0;
}

/* A saved tensor this context holds is not opened again: the saved w
 * opened, then again; "fresh" made and flushed, then opened; w still
 * holds seed 7 after both and "fresh" is freed (deleted).  Writes "open
 * again fresh same | detail of the second open". */
static int job_twice(int fd, void *arg)
{
	struct hmm_tensor *w, *x = NULL, *f;
	char why[300];
	struct hmm *h;
	int a, b;

	if (ctx(0, &h) || hmm_tensor_open(h, "w", &w))
		return 2;
	a = hmm_tensor_open(h, "w", &x);
	snprintf(why, sizeof(why), "%s", hmm_last_error());
	if (!(f = mk(h, "fresh")) || fill(f, 3) || hmm_flush(h))
		return 3;
	b = hmm_tensor_open(h, "fresh", &x);
	dprintf(fd, "%d %d %d | %s\n", a, b, same(w, 7), why);
	if (hmm_tensor_free(f))
		return 4;
	hmm_close(h);
	return 0;
}

/* "dev" written at the device (seed 11), flushed, written again (seed
 * 12) and the context closed, all with the map held.  Writes "flush |
 * detail". */
static int job_device(int fd, void *arg)
{
	struct hmm_config cfg;
	struct hmm_tensor *t;
	struct hmm *h;
	void *p;
	int r;

	if (t_hmmd_config(0, sock, 4 << 20, CHUNK, &cfg))
		return 2;
	cfg.device = "sim";
	cfg.device_budget = 1 << 20;
	if (hmm_open(&cfg, &h) || !(t = mk(h, "dev")) ||
	    hmm_map(t, 0, HMM_ALL, HMM_TIER_DEVICE, HMM_DISCARD, &p))
		return 2;
	t_fill(p, TB, 11);
	r = hmm_flush(h);
	t_fill(p, TB, 12);
	dprintf(fd, "%d | %s\n", r, r ? hmm_last_error() : "");
	hmm_close(h);
	return 0;
}

/* A name of 60 bytes: with "u0/" it fits (63); nobody's "u65534/"
 * does not.  Writes "flush | detail" as nobody; "ok" is saved too. */
static int job_long(int fd, void *arg)
{
	char name[61];
	struct hmm_tensor *a, *b;
	struct hmm *h;
	int r;

	memset(name, 'n', 60);
	name[60] = 0;
	if (ctx(65534, &h))
		return 2;
	a = mk(h, name);
	b = mk(h, "ok");
	if (!a || !b || fill(b, 9))
		return 3;
	r = hmm_flush(h);
	dprintf(fd, "%d | %s", r, hmm_last_error());
	/* a name that can never be saved opens as any unknown one */
	r = hmm_tensor_open(h, name, &b);
	dprintf(fd, " | %d | %s\n", r, hmm_last_error());
	hmm_close(h);
	return 0;
}

/* A context of uid that saves name (seed) and closes: writes "flush". */
struct save {
	uid_t uid;
	const char *name;
	uint64_t seed;
};

static int job_save(int fd, void *arg)
{
	const struct save *s = arg;
	struct hmm_tensor *t;
	struct hmm *h;

	if (ctx(s->uid, &h))
		return 2;
	t = mk(h, s->name);
	if (!t || fill(t, s->seed))
		return 3;
	dprintf(fd, "%d\n", hmm_flush(h));
	hmm_close(h);
	return 0;
}

/* hmmctl ARGS as uid (0: root): writes "status | output", the output's
 * lines joined by ';' and its runs of spaces squeezed to one. */
struct ctl {
	uid_t uid;
	const char *args;
};

static int job_ctl(int fd, void *arg)
{
	const struct ctl *c = arg;
	char cmd[9000], out[4096], *p = out, prev = 0;
	FILE *f;
	int ch, st;

	if (c->uid) {	/* beside the socket: a 0700 clone hides build/ */
		snprintf(cmd, sizeof(cmd), "cp '%s' '%s/hmmctl'", hmmctl, dir);
		if (system(cmd) || t_hmmd_become(c->uid, c->uid, sock))
			return 2;
		snprintf(cmd, sizeof(cmd), "./hmmctl --socket %s %s 2>&1", sock,
			 c->args);
	} else {
		snprintf(cmd, sizeof(cmd), "%s --socket %s %s 2>&1", hmmctl,
			 sock, c->args);
	}
	f = popen(cmd, "r");
	if (!f)
		return 3;
	while ((ch = fgetc(f)) != EOF && p < out + sizeof(out) - 1) {
		ch = ch == '\n' ? ';' : ch;
		if (ch != ' ' || prev != ' ')
			*p++ = prev = (char)ch;
	}
	*p = 0;
	st = pclose(f);
	dprintf(fd, "%d | %s\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1, out);
	return 0;
}

/* hmmctl args as uid: its exit status; its output in line. */
static int run_ctl(uid_t uid, const char *args, char *line, size_t n)
{
	struct ctl c = { uid, args };
	int code = -1;

	if (t_child(job_ctl, &c, line, n) || sscanf(line, "%d", &code) != 1)
		return -1;
	return code;
}

/* The id on the row of hmmctl tensors (job_ctl's line) holding row. */
static unsigned long long row_id(const char *line, const char *row)
{
	const char *p = strstr(line, row);

	while (p && p > line && p[-1] != ';')
		p--;
	return p ? strtoull(p, NULL, 10) : 0;
}

/* hmmctl's view of saved tensors and rm (see the top). */
static pid_t test_rm(pid_t pid)
{
	struct save s = { 65534, "mine", 11 };
	struct hmm_tensor *w, *tmp;
	char line[4096];
	struct look l;
	char rm_w[32];
	struct hmm *h;
	int a;

	t_child(job_save, &s, line, sizeof(line));
	t_ok(atoi(line) == 0, "nobody saves mine (%s)", line);
	stop(pid, SIGTERM);
	pid = start();
	a = run_ctl(0, "tensors", line, sizeof(line));
	t_ok(a == 0 && strstr(line, " 0 0 w ") &&
	     strstr(line, " 0 65534 mine ") && strstr(line, "persist"),
	     "after a restart hmmctl lists the saved w and mine, owner 0, "
	     "before any job opens them (%s)", line);
	snprintf(rm_w, sizeof(rm_w), "rm %llu", row_id(line, " 0 0 w "));
	a = run_ctl(65534, "rm w", line, sizeof(line));
	t_ok(a == 1 && strstr(line, "no tensor \"w\""),
	     "nobody's hmmctl rm w: exit 1, no w it is shown (%s)", line);
	a = run_ctl(65534, rm_w, line, sizeof(line));
	t_ok(a == 1 && strstr(line, "not one of uid 65534's"),
	     "nobody's hmmctl %s (root's w): exit 1 (%s)", rm_w, line);
	a = run_ctl(65534, "rm mine", line, sizeof(line));
	t_eq(a, 0, "nobody's hmmctl rm of its own mine (%s)", line);
	l = (struct look){ 65534, "mine", 11, 0 };
	t_child(job_open, &l, line, sizeof(line));
	t_ok(sscanf(line, "%d", &a) == 1 && a == -ENOENT,
	     "mine no longer opens (%s)", line);

	if (ctx(0, &h) || hmm_tensor_open(h, "w", &w) || !(tmp = mk(h, "tmp")))
		t_fail_all("a context holding w: %s", hmm_last_error());
	a = run_ctl(0, "rm tmp", line, sizeof(line));
	t_ok(a == 1 && strstr(line, "temporary"),
	     "hmmctl rm of a client's temporary: exit 1 (%s)", line);
	a = run_ctl(0, "rm w", line, sizeof(line));
	t_eq(a, 0, "root's hmmctl rm of w, held open (%s)", line);
	t_eq(same(w, 7), 1, "the holder's w keeps its bytes");
	l = (struct look){ 0, "w", 7, 0 };
	t_child(job_open, &l, line, sizeof(line));
	t_ok(sscanf(line, "%d", &a) == 1 && a == -ENOENT,
	     "no later open finds w (%s)", line);
	hmm_close(h);

	stop(pid, SIGKILL);	/* rm flushed: no stop's flush needed */
	pid = start();
	t_child(job_open, &l, line, sizeof(line));
	t_ok(sscanf(line, "%d", &a) == 1 && a == -ENOENT,
	     "after kill -9 and restart: w stays deleted (%s)", line);
	a = run_ctl(0, "tensors", line, sizeof(line));
	t_ok(a == 0 && !strstr(line, " w ") && !strstr(line, " mine "),
	     "and hmmctl lists neither (%s)", line);
	t_eq(run_ctl(0, "rm", line, sizeof(line)), 2,
	     "hmmctl rm without a tensor: exit 2 (%s)", line);
	t_eq(run_ctl(0, "rm 1 2", line, sizeof(line)), 2,
	     "hmmctl rm 1 2: exit 2 (%s)", line);
	return pid;
}

int main(void)
{
	char line[1024];
	struct look l;
	int a, b, c;
	pid_t pid;

	if (getuid() != 0 || !getpwuid(65534))
		t_skip_all("needs root and uid 65534 (nobody) for a second "
			   "uid");
	T_HMMD_PATHS(hmmd, dir, sock, store, logf, "save");
	snprintf(hmmctl, sizeof(hmmctl), "%.*sctl", (int)strlen(hmmd) - 1,
		 hmmd);		/* .../bin/hmmd -> .../bin/hmmctl */
	t_watchdog(120, "test_hmmd_save");
	pid = start();

	t_eq(t_child(job_make, NULL, line, sizeof(line)), 0, "make, flush");
	t_ok(sscanf(line, "%d %d", &a, &b) == 2 && a == 0 && b == 0,
	     "both flushes return 0 (%s)", line);

	l = (struct look){ 0, "w", 5, 0 };
	t_child(job_open, &l, line, sizeof(line));
	t_ok(sscanf(line, "%d %d", &a, &b) == 2 && a == 0 && b == 1,
	     "another context of the uid opens w byte-exact (%s)", line);
	l = (struct look){ 0, "g", 6, 0 };
	t_child(job_open, &l, line, sizeof(line));
	t_ok(sscanf(line, "%d", &a) == 1 && a == -ENOENT,
	     "g, freed before the second flush, is not saved (%s)", line);
	l = (struct look){ 65534, "w", 5, 0 };
	t_child(job_open, &l, line, sizeof(line));
	t_ok(sscanf(line, "%d", &a) == 1 && a == -ENOENT &&
	     !strstr(line, "u0/"),
	     "another uid does not find it (%s)", line);

	t_child(job_replace, NULL, line, sizeof(line));
	t_ok(sscanf(line, "%d %d", &a, &b) == 2 && a == 0 && b == 1,
	     "a later flush of a new w: 0, the held old w keeps its bytes "
	     "(%s)", line);
	l = (struct look){ 0, "w", 7, 0 };
	t_child(job_open, &l, line, sizeof(line));
	t_ok(sscanf(line, "%d %d", &a, &b) == 2 && a == 0 && b == 1,
	     "w is now the later one (%s)", line);
	t_eq(t_child(job_twice, NULL, line, sizeof(line)), 0, "job_twice");
	t_ok(sscanf(line, "%d %d %d", &a, &b, &c) == 3 && a == -ENOENT &&
	     b == -ENOENT && c == 1 && strstr(line, "'w': already open"),
	     "a saved tensor the context holds, opened or flushed, is not "
	     "opened again (-ENOENT naming it, as embedded), and the held "
	     "one keeps its bytes (%s)", line);
	l = (struct look){ 0, "fresh", 3, 0 };
	t_child(job_open, &l, line, sizeof(line));
	t_ok(sscanf(line, "%d", &a) == 1 && a == -ENOENT,
	     "the fresh one, freed by its only holder, is gone (%s)", line);

	t_child(job_long, NULL, line, sizeof(line));
	t_ok(sscanf(line, "%d", &a) == 1 && a == -ENAMETOOLONG &&
	     strstr(line, "nnnnnnnn"),
	     "a name too long with nobody's prefix: -ENAMETOOLONG naming "
	     "it (%s)", line);
	t_ok(strstr(line, " | -2 | ") && strstr(strstr(line, " | -2 | "),
						"nnnnnnnn"),
	     "and hmm_tensor_open of it is -ENOENT naming it, as of any "
	     "name never saved (it was -ENAMETOOLONG, which hmm.h does not "
	     "list) (%s)", line);

	stop(pid, SIGKILL);	/* what the flushes saved is durable */
	pid = start();
	l = (struct look){ 0, "w", 7, 0 };
	t_child(job_open, &l, line, sizeof(line));
	t_ok(sscanf(line, "%d %d", &a, &b) == 2 && a == 0 && b == 1,
	     "after kill -9 and restart: w byte-exact (%s)", line);
	t_ok(t_hmmd_log_has(logf, "engine: freed 1 tensor(s) no client can open"),
	     "and the temporary nnn... the flush saved is freed (the log)");
	l = (struct look){ 65534, "ok", 9, 1 };
	t_child(job_open, &l, line, sizeof(line));
	t_ok(sscanf(line, "%d %d %d", &a, &b, &c) == 3 && a == 0 && b == 1 &&
	     c == 0, "nobody's ok, saved beside the refused name, opens "
	     "byte-exact and frees (%s)", line);
	l = (struct look){ 65534, "ok", 9, 0 };
	t_child(job_open, &l, line, sizeof(line));
	t_ok(sscanf(line, "%d", &a) == 1 && a == -ENOENT,
	     "hmm_tensor_free of an opened saved tensor deletes it (%s)",
	     line);
	stop(pid, SIGTERM);
	pid = start();
	l = (struct look){ 0, "w", 7, 0 };
	t_child(job_open, &l, line, sizeof(line));
	t_ok(sscanf(line, "%d %d", &a, &b) == 2 && a == 0 && b == 1,
	     "after SIGTERM and restart: w byte-exact (%s)", line);
	l = (struct look){ 65534, "ok", 9, 0 };
	t_child(job_open, &l, line, sizeof(line));
	t_ok(sscanf(line, "%d", &a) == 1 && a == -ENOENT,
	     "the freed one stays gone (%s)", line);

	t_child(job_device, NULL, line, sizeof(line));
	t_ok(sscanf(line, "%d", &a) == 1 && a == 0,
	     "a flush with a device map held: 0 (%s)", line);
	l = (struct look){ 0, "dev", 12, 1 };
	t_child(job_open, &l, line, sizeof(line));
	t_ok(sscanf(line, "%d %d %d", &a, &b, &c) == 3 && a == 0 && b == 1 &&
	     c == 0, "it opens with the bytes written at the device before "
	     "the close, the map still held (%s)", line);
	pid = test_rm(pid);
	stop(pid, SIGTERM);
	return t_done();
}
