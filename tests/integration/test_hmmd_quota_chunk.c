// SPDX-License-Identifier: MIT
/*
 * test_hmmd_quota_chunk — a host quota in hmmd below what one map pins
 * (hmmd's maps pin whole chunks, 2 MiB by default) never ends in an
 * unexplained SIGBUS (found by fuzzing: a region block's eviction maps a
 * chunk past the quota, fails, and the next access got SIGBUS).  Every
 * bad combination gets a clear error naming the thing, from both places
 * a quota comes from:
 *
 *  - the client's config (host_budget 1M, chunk 2M): hmm_open works (a
 *    tensor map is refused with hmmd's detail), hmm_region_new is
 *    refused with -EINVAL naming the region, the quota and the chunk;
 *    with a quota of a chunk the same region works (bytes read back);
 *  - hmmd's client_quota below its chunk (flag or config file), or its
 *    host_budget below it: hmmd exits 2 naming both;
 *  - client_quota 32K with 4K chunks (a quota of eight chunks, less than
 *    the 64 KiB a region block maps): hmm_region_new refused, naming them;
 *  - hmmd's default quota (a quarter of a 4M budget, 1M) for another uid
 *    is raised to one chunk, and a region works within it;
 *  - a uid's quota is the most its open connections asked: a tool's
 *    small one does not shrink it (tool_first), and a job's large one
 *    goes with the job (big_leaves), even below what the tool then
 *    pins: that map keeps its bytes, new maps see the tool's quota.
 *
 * Each client runs in a child, so that a SIGBUS fails a check instead of
 * the test.  QUOTA_SET below a chunk is test_hmm_remote's.
 */
#include <grp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>

#include "t.h"
#include "hmmd_t.h"
#include "hmm.h"

static char hmmd[4096], dir[4096], sock[4096], store[4096], logf[4096];

/* hmmd with extra flags (NULL-terminated), listening; its pid. */
static pid_t start(char *const extra[])
{
	char *argv[24] = { hmmd, "--socket", sock, "--store", store,
			   "--store-size", "64M", "--module", "none" };
	int n = 9;

	while (*extra && n < 23)
		argv[n++] = *extra++;
	argv[n] = NULL;
	unlink(sock);
	unlink(store);
	pid_t pid = t_hmmd_spawn(hmmd, argv, logf, 1, NULL);

	t_hmmd_wait_listen(pid, sock, 20, logf);
	chmod(sock, 0666);	/* nobody's client connects too */
	return pid;
}

static void stop(pid_t pid)
{
	int st;

	kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
	t_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "hmmd: exit 0");
}

/* What a client child saw: its exit code (or 128 + signal), and its
 * last line ("region -22 DETAIL", "ok BAD", ...). */
struct seen {
	int code;
	char line[1024];
};

enum { C_OK = 0, C_OPEN = 3, C_REGION = 4, C_BAD = 5, C_UID = 6, C_MAP = 7 };

/* One map of a chunk-sized tensor's first 64 KiB (a chunk's pin) and a
 * write through it; 0 or the map's error, reported to fd. */
static int map_one(int fd, struct hmm *h, uint32_t chunk)
{
	int64_t n = chunk;
	struct hmm_tensor *t;
	void *p;
	int r;

	r = hmm_tensor_new(h, "one", HMM_DTYPE_U8, 1, &n, &t);
	r = r ? r : hmm_map(t, 0, 65536, HMM_TIER_HOST, HMM_WRITE, &p);
	if (r) {
		dprintf(fd, "map %d %s\n", r, hmm_last_error());
		return r;
	}
	memset(p, 0x5a, 65536);
	hmm_unmap(t, p);
	hmm_tensor_free(t);
	return 0;
}

/* In the child: open with host_budget, make a region of rbytes, write a
 * pattern over all of it (evicting blocks through hmmd) and read it
 * back; report to fd.  As nobody when nobody is set, after a map of one
 * 2 MiB chunk (whatever userfaultfd allows nobody). */
static int client(int fd, uint64_t budget, uint64_t rbytes, int nobody)
{
	char addr[4200];
	struct hmm_config cfg;
	uint64_t *p, bad = 0;
	struct hmm *h;
	void *vp;
	int r;

	alarm(60);			/* a hang fails, never blocks */
	if (nobody && (chdir(dir) || setgroups(0, NULL) || setgid(65534) ||
		       setuid(65534))) {
		dprintf(fd, "uid cannot become nobody\n");
		return C_UID;
	}
	/* nobody: the socket by its name in dir (the folders above dir
	   need not let nobody through) */
	snprintf(addr, sizeof(addr), "unix:%s", nobody ?
		 strrchr(sock, '/') + 1 : sock);
	hmm_config_default(&cfg);
	cfg.daemon = addr;
	cfg.host_budget = budget;
	r = hmm_open(&cfg, &h);
	if (r) {
		dprintf(fd, "open %d %s\n", r, hmm_last_error());
		return C_OPEN;
	}
	if (nobody && map_one(fd, h, 2u << 20)) {
		hmm_close(h);
		return C_MAP;
	}
	r = hmm_region_new(h, rbytes, &vp);
	if (r) {
		dprintf(fd, "region %d %s\n", r, hmm_last_error());
		hmm_close(h);
		return C_REGION;
	}
	p = vp;
	for (uint64_t i = 0; i < rbytes / 8; i++)
		p[i] = i * 0x9e3779b97f4a7c15ull;
	for (uint64_t i = 0; i < rbytes / 8; i++)
		bad += p[i] != i * 0x9e3779b97f4a7c15ull;
	hmm_region_free(h, vp);
	hmm_close(h);
	dprintf(fd, "ok %llu\n", (unsigned long long)bad);
	return bad ? C_BAD : C_OK;
}

/* In the child: become nobody, cfg set to reach hmmd by the socket's
 * name in dir (addr holds it); 0, or C_UID reported to fd. */
static int as_nobody(int fd, struct hmm_config *cfg, char *addr, size_t n)
{
	alarm(60);			/* a hang fails, never blocks */
	if (chdir(dir) || setgroups(0, NULL) || setgid(65534) ||
	    setuid(65534)) {
		dprintf(fd, "uid cannot become nobody\n");
		return C_UID;
	}
	snprintf(addr, n, "unix:%s", strrchr(sock, '/') + 1);
	hmm_config_default(cfg);
	cfg->daemon = addr;
	return 0;
}

/* In the child, as nobody: a first connection asking for 4 KiB (as a
 * tool does: hmmctl asks 1 byte) stays open while a second, asking
 * budget, maps a whole tensor of budget bytes; report to fd. */
static int small_first(int fd, uint64_t budget)
{
	char addr[4200];
	struct hmm_config cfg;
	struct hmm *tool, *h;
	struct hmm_tensor *t;
	int64_t n = (int64_t)budget;
	void *p;
	int r;

	if (as_nobody(fd, &cfg, addr, sizeof(addr)))
		return C_UID;
	cfg.host_budget = 4096;
	if ((r = hmm_open(&cfg, &tool))) {
		dprintf(fd, "open %d %s\n", r, hmm_last_error());
		return C_OPEN;
	}
	cfg.host_budget = budget;
	if ((r = hmm_open(&cfg, &h))) {
		dprintf(fd, "open %d %s\n", r, hmm_last_error());
		hmm_close(tool);
		return C_OPEN;
	}
	r = hmm_tensor_new(h, "whole", HMM_DTYPE_U8, 1, &n, &t);
	r = r ? r : hmm_map(t, 0, budget, HMM_TIER_HOST, HMM_WRITE, &p);
	if (r)
		dprintf(fd, "map %d %s\n", r, hmm_last_error());
	else
		dprintf(fd, "ok mapped\n");
	if (!r)
		hmm_unmap(t, p);
	hmm_close(h);
	hmm_close(tool);
	return r ? C_MAP : C_OK;
}

/* hmmd's log, read through lfd, holds want within 5 s; 1 if it does.
 * The fd is opened before the child drops to nobody: the log's folder
 * is 0711, but the folders above it may not be searchable by nobody
 * (tests/run's are 0700). */
static int log_soon(int lfd, const char *want)
{
	static char log[1 << 16];
	ssize_t n;

	for (int i = 0; i < 250; i++, usleep(20000)) {
		n = pread(lfd, log, sizeof(log) - 1, 0);
		if (n < 0)
			continue;
		log[n] = 0;
		if (strstr(log, want))
			return 1;
	}
	return 0;
}

#define MIB (1ull << 20)

/*
 * In the child, as nobody: a tool asking for a chunk (2M) stays while a
 * job of the same uid asking for 8M comes; the tool maps a 4M tensor
 * whole (the job's quota lets it) and writes it; the job goes.  What
 * the tool gets then, reported to fd as "bytes BAD big R wait R after R
 * | DETAIL": BAD bytes of the 4M map that changed; R of a new 4M map
 * (more than the tool's own quota), of a 2M map while the 4M is pinned
 * (waits wait_ms for its unmaps), of a 2M map after the unmap; DETAIL,
 * the 4M map's error.
 */
static int big_leaves(int fd)
{
	int64_t n = 4 * MIB;
	struct hmm_tensor *held, *more;
	int big, wait, after;
	char addr[4200], why[1024] = "";
	struct hmm_config cfg;
	struct hmm *tool, *job;
	uint64_t bad = 0;
	uint8_t *p;
	void *q;
	int r, lfd;

	lfd = open(logf, O_RDONLY | O_CLOEXEC);	/* as root: log_soon */
	if (lfd < 0) {
		dprintf(fd, "open %s: %s\n", logf, strerror(errno));
		return C_BAD;
	}
	if (as_nobody(fd, &cfg, addr, sizeof(addr)))
		return C_UID;
	cfg.host_budget = 2 * MIB;
	if ((r = hmm_open(&cfg, &tool))) {
		dprintf(fd, "open %d %s\n", r, hmm_last_error());
		return C_OPEN;
	}
	cfg.host_budget = 8 * MIB;
	if ((r = hmm_open(&cfg, &job))) {
		dprintf(fd, "open %d %s\n", r, hmm_last_error());
		hmm_close(tool);
		return C_OPEN;
	}
	r = hmm_tensor_new(tool, "held", HMM_DTYPE_U8, 1, &n, &held);
	r = r ? r : hmm_tensor_new(tool, "more", HMM_DTYPE_U8, 1, &n, &more);
	r = r ? r : hmm_map(held, 0, 4 * MIB, HMM_TIER_HOST, HMM_WRITE,
			    (void **)&p);
	if (r) {
		dprintf(fd, "map %d %s\n", r, hmm_last_error());
		hmm_close(job);
		hmm_close(tool);
		return C_MAP;
	}
	for (uint64_t i = 0; i < 4 * MIB; i++)
		p[i] = (uint8_t)(i * 31 + 7);
	hmm_close(job);
	if (!log_soon(lfd, "): gone: its maps")) {
		dprintf(fd, "hmmd's log never said the job was gone\n");
		hmm_close(tool);
		return C_BAD;
	}
	big = hmm_map(more, 0, 4 * MIB, HMM_TIER_HOST, HMM_WRITE, &q);
	if (big)
		snprintf(why, sizeof(why), "%s", hmm_last_error());
	else
		hmm_unmap(more, q);
	wait = hmm_map(more, 0, 2 * MIB, HMM_TIER_HOST, HMM_WRITE, &q);
	if (!wait)
		hmm_unmap(more, q);
	for (uint64_t i = 0; i < 4 * MIB; i++)
		bad += p[i] != (uint8_t)(i * 31 + 7);
	hmm_unmap(held, p);
	after = hmm_map(more, 0, 2 * MIB, HMM_TIER_HOST, HMM_WRITE, &q);
	if (!after)
		hmm_unmap(more, q);
	hmm_close(tool);
	dprintf(fd, "bytes %llu big %d wait %d after %d | %s\n",
		(unsigned long long)bad, big, wait, after, why);
	return C_OK;
}

/* What a child runs: nobody 0 as root, 1 as nobody (client), 2
 * small_first, 3 big_leaves. */
struct cargs {
	uint64_t budget, rbytes;
	int nobody;
};

static int child(int fd, void *arg)
{
	const struct cargs *a = arg;

	if (a->nobody == 3)
		return big_leaves(fd);
	return a->nobody == 2 ? small_first(fd, a->budget) :
	       client(fd, a->budget, a->rbytes, a->nobody);
}

static void run_client(uint64_t budget, uint64_t rbytes, int nobody,
		       struct seen *s)
{
	struct cargs a = { budget, rbytes, nobody };

	s->code = t_child(child, &a, s->line, sizeof(s->line));
	if (s->code)
		t_diag("client: exit %d (%s): %s", s->code, s->code > 128 ?
		       strsignal(s->code - 128) : "exit", s->line);
}

/* s's detail names every word of want (NULL-terminated). */
static int names(const struct seen *s, const char *const want[])
{
	for (; *want; want++)
		if (!strstr(s->line, *want))
			return 0;
	return 1;
}

/* The quota from the client's config: host_budget 1M, hmmd's chunk 2M. */
static void from_client_config(void)
{
	pid_t pid = start((char *[]){ "--host-budget", "16M", NULL });
	struct seen s;

	run_client(1 << 20, 4 << 20, 0, &s);
	t_ok(s.code != 128 + SIGBUS, "host_budget 1M (quota 1M), chunk 2M: "
	     "no SIGBUS");
	t_ok(s.code == C_REGION && !strncmp(s.line, "region -22 ", 11) &&
	     names(&s, (const char *[]){ "4194304", "quota 1048576",
					  "chunk 2097152", NULL }),
	     "hmm_region_new: -EINVAL naming the region, quota and chunk "
	     "(%s)", s.line);
	t_ok(t_hmmd_log_has(logf, "host quota 1048576 bytes (asked 1048576), "
			    "less than a chunk: no map of it fits"),
	     "hmmd's log says so at its hello");
	run_client(2 << 20, 8 << 20, 0, &s);
	t_eq(s.code, C_OK, "host_budget 2M (a chunk): a region of 8M works, "
	     "its bytes read back after evictions");
	stop(pid);
}

/* hmmd's own per-uid quota (client_quota) and budget below its chunk:
 * refused at start, naming both; from a flag and from a config file. */
static void hmmd_refuses(const char *what, char *const extra[],
			 const char *want)
{
	char *argv[24] = { hmmd, "--socket", sock, "--module", "none" };
	int n = 5, st = 0, i;
	pid_t pid;

	while (*extra && n < 23)
		argv[n++] = *extra++;
	argv[n] = NULL;
	unlink(sock);
	pid = t_hmmd_spawn(hmmd, argv, logf, 1, NULL);
	for (i = 0; i < 500 && waitpid(pid, &st, WNOHANG) == 0; i++)
		usleep(20000);
	if (i == 500) {		/* it serves: the bug */
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	t_ok(i < 500 && WIFEXITED(st) && WEXITSTATUS(st) == 2 &&
	     t_hmmd_log_has(logf, want), "%s: hmmd exits 2, its log names it",
	     what);
}

static void from_hmmd_config(void)
{
	char conf[4200];
	struct seen s;
	FILE *f;
	pid_t pid;

	hmmd_refuses("--client-quota 1M, chunk 2M",
		     (char *[]){ "--client-quota", "1M", NULL },
		     "client_quota 1048576 bytes is less than chunk_bytes "
		     "2097152");
	snprintf(conf, sizeof(conf), "%s/q.conf", dir);
	f = fopen(conf, "w");
	if (!f)
		t_fail_all("%s: %s", conf, strerror(errno));
	fprintf(f, "[hmmd]\nclient_quota = 64K\nchunk_bytes = 128K\n");
	fclose(f);
	hmmd_refuses("client_quota = 64K, chunk_bytes = 128K (a file)",
		     (char *[]){ "--config", conf, NULL },
		     "client_quota 65536 bytes is less than chunk_bytes "
		     "131072");
	hmmd_refuses("--host-budget 1M, chunk 2M",
		     (char *[]){ "--host-budget", "1M", NULL },
		     "host_budget 1048576 bytes is less than chunk_bytes "
		     "2097152");

	/* eight 4K chunks: what hmmd grants; less than a block maps */
	pid = start((char *[]){ "--host-budget", "16M", "--chunk", "4K",
				"--client-quota", "32K", NULL });
	run_client(1 << 20, 4 << 20, 0, &s);
	t_ok(s.code != 128 + SIGBUS, "client_quota 32K, chunk 4K: no SIGBUS");
	t_ok(s.code == C_REGION && !strncmp(s.line, "region -22 ", 11) &&
	     names(&s, (const char *[]){ "quota 32768", "chunk 4096",
					  "65536", NULL }),
	     "hmm_region_new: -EINVAL naming quota, chunk and what a block "
	     "maps (%s)", s.line);
	stop(pid);
}

/* hmmd's default quota for another uid: a quarter of the budget, at
 * least a chunk. */
static void default_quota(void)
{
	pid_t pid = start((char *[]){ "--host-budget", "4M", NULL });
	struct seen s;

	run_client(4 << 20, 8 << 20, 1, &s);
	if (s.code == C_UID) {
		t_ok(1, "default quota for nobody # SKIP %s", s.line);
		stop(pid);
		return;
	}
	t_ok(s.code != C_MAP, "nobody, hmmd's default quota (budget 4M / 4 "
	     "< chunk 2M): a map of one chunk is admitted (%s)",
	     s.code == C_MAP ? s.line : "mapped");
	if (s.code == C_REGION && (strstr(s.line, "region -1 ") ||
				   strstr(s.line, "region -38 "))) {
		t_ok(1, "a region as nobody # SKIP %s", s.line);
	} else if (s.code != C_MAP) {
		t_ok(s.code != 128 + SIGBUS, "nobody, hmmd's default quota "
		     "(budget 4M / 4 < chunk 2M): no SIGBUS");
		t_eq(s.code, C_OK, "its quota is a chunk: a region of 8M "
		     "works, its bytes read back");
	}
	stop(pid);
}

/* A uid's quota is the most its connections asked (each capped), not
 * its first hello's: a tool connected first, asking for almost nothing,
 * once left the uid's job a 4 KiB quota, and its map of 4M failed. */
static void tool_first(void)
{
	pid_t pid = start((char *[]){ "--host-budget", "16M", NULL });
	struct seen s;

	run_client(4 << 20, 0, 2, &s);
	if (s.code == C_UID)
		t_ok(1, "a tool's small quota first # SKIP %s", s.line);
	else
		t_eq(s.code, C_OK, "nobody: a 4 KiB connection open, a second "
		     "one asking 4M maps 4M (%s)", s.line);
	stop(pid);
}

/*
 * A uid's quota falls when the connection that asked most goes: a job's
 * 8M outlived it, left to the uid's tool that asked for 2M.  The tool
 * pins 4M when the job goes, more than its own quota: its map keeps its
 * bytes, and new maps see the quota of 2M (as after a QUOTA_SET below
 * use): one of 4M fails at once, one of 2M waits for its unmap.
 */
static void big_leaves_case(void)
{
	pid_t pid = start((char *[]){ "--host-budget", "32M", "--wait-ms",
				      "300", NULL });
	int bad = -1, big = 1, wait = 1, after = 1;
	struct seen s;

	run_client(0, 0, 3, &s);
	if (s.code == C_UID) {
		t_ok(1, "a job's quota gone with it # SKIP %s", s.line);
		stop(pid);
		return;
	}
	t_eq(s.code, C_OK, "nobody: a tool of 2M and a job of 8M; the job "
	     "goes (%s)", s.line);
	sscanf(s.line, "bytes %d big %d wait %d after %d", &bad, &big, &wait,
	       &after);
	t_eq(bad, 0, "the tool's 4M map, past its own quota once the job "
	     "went, keeps its bytes");
	t_eq(big, -ENOMEM, "a new 4M map: -ENOMEM, more than the "
	     "uid's whole quota, now the tool's 2M (the job's 8M before)");
	t_ok(strstr(s.line, "whole host quota 2097152") != NULL,
	     "its detail names the quota of 2M (%s)", s.line);
	t_eq(wait, -ENOMEM, "a 2M map while the tool pins 4M waits for its "
	     "unmaps (wait_ms), then -ENOMEM");
	t_eq(after, 0, "after the unmap, a 2M map is admitted");
	t_ok(t_hmmd_log_has(logf, "host quota falls from 8388608 to 2097152 "
			    "bytes"),
	     "hmmd's log says the quota fell");
	stop(pid);
}

int main(void)
{
	T_HMMD_PATHS(hmmd, dir, sock, store, logf, "q");
	from_client_config();
	from_hmmd_config();
	default_quota();
	tool_first();
	big_leaves_case();
	return t_done();
}
