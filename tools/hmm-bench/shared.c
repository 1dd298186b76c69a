// SPDX-License-Identifier: MIT
/*
 * shared.c — `hmm-bench shared`: two clients through one hmmd against
 * two independent embedded processes, same workload, same store device.
 *
 * Each of the two workers streams over its own tensor of --size bytes in
 * slices of --slice bytes for --passes passes (map READ|WRITE, touch
 * every page, unmap), so with a host budget below the tensor the engine
 * writes back and reads in through the store all the time.
 *   independent: two processes, each hmm_open() on its own store file
 *                with host budget --host;
 *   shared:      one hmmd (next to hmm-bench, or --hmmd PATH) with host
 *                budget --host for both, its store in the same folder;
 *                the workers are hmmd clients (libhmm/src/remote/client.c).
 * Reported: aggregate store MB/s (bytes in + out of the store tier over
 * the wall time of the workers) of each and their ratio; the peak host
 * bytes of the engine(s) (sum of both processes' peaks, against hmmd's
 * peak) and their ratio, medians of --reps interleaved runs.  hmmd's
 * host maps are the engine's own pages (a shmem file per tensor, see
 * daemon/hmmd.h), so its host peak is all the host memory the shared
 * side pins: nothing is copied.  Those files are memfds (4 KiB pages
 * where shmem_enabled is "never", and O_DIRECT into them 2-3x slower
 * than into the embedded engine's huge pages) unless hmmd has a
 * --host-dir: as root we mount a huge=within_size tmpfs for it, as
 * hmmd.service does.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "client.h"
#include "err.h"
#include "hmm.h"

#define MAX_REPS	15
#define CHUNK		(2ll << 20)	/* libhmm's and hmmd's default */

struct sh_opts {
	int64_t size, slice, host;
	int passes, json, reps;
	const char *dir, *hmmd;
	const char *host_dir;	/* hmmd --host-dir; NULL = memfds */
	int no_mount;		/* --memfd: do not mount a huge tmpfs */
};

/* Results of one worker, sent to the parent through a pipe. */
struct sh_res {
	uint64_t store_bytes;	/* independent: its store tier in + out */
	uint64_t host_peak;	/* independent: its host peak */
	int err;
};

static void touch(uint8_t *p, size_t len, int pass)
{
	size_t i;

	for (i = 0; i < len; i += 4096)
		p[i] += (uint8_t)pass;
}

static int work_embedded(const struct sh_opts *o, int k, struct sh_res *r)
{
	char path[PATH_MAX];
	int64_t shape[1] = { o->size };
	struct hmm_config cfg;
	struct hmm_tensor *t;
	struct hmm_stats st;
	struct hmm *h;
	int pass, ret;
	int64_t off;
	void *p;

	snprintf(path, sizeof(path), "%s/bench-shared-%d.store", o->dir, k);
	hmm_config_default(&cfg);
	cfg.store_path = path;
	cfg.store_size = (uint64_t)o->size * 2 + (64 << 20);
	cfg.host_budget = o->host;
	ret = hmm_open(&cfg, &h);
	if (ret)
		return ret;
	unlink(path);	/* open is all it needs: gone even after a SIGKILL */
	ret = hmm_tensor_new(h, "stream", HMM_DTYPE_U8, 1, shape, &t);
	for (pass = 0; !ret && pass < o->passes; pass++)
		for (off = 0; !ret && off < o->size; off += o->slice) {
			ret = hmm_map(t, off, o->slice, HMM_TIER_HOST,
				      HMM_READ | HMM_WRITE, &p);
			if (ret)
				break;
			touch(p, o->slice, pass);
			ret = hmm_unmap(t, p);
		}
	hmm_stats(h, &st);
	r->store_bytes = st.tier[HMM_TIER_STORE].bytes_in +
			 st.tier[HMM_TIER_STORE].bytes_out;
	r->host_peak = st.tier[HMM_TIER_HOST].peak;
	hmm_close(h);
	return ret;
}

static int work_client(const struct sh_opts *o, const char *sock,
		       struct sh_res *r)
{
	int64_t shape[1] = { o->size };
	struct hmm_proto_tensor t;
	struct hmm_client *c;
	int pass, ret;
	int64_t off;
	void *p;

	ret = hmm_client_open(sock, NULL, "bench", &c, NULL);
	if (ret)
		return ret;
	ret = hmm_client_tensor_new(c, "stream", HMM_DTYPE_U8, 1, shape, 0,
				    &t);
	for (pass = 0; !ret && pass < o->passes; pass++)
		for (off = 0; !ret && off < o->size; off += o->slice) {
			ret = hmm_client_map(c, t.id, off, o->slice,
					     HMM_READ | HMM_WRITE, &p);
			if (ret)
				break;
			touch(p, o->slice, pass);
			ret = hmm_client_unmap(c, p);
		}
	hmm_client_close(c);
	return ret;
}

/* Run two workers (fn 0: embedded, 1: client); their results; seconds.
 * They are bench children (scratch.c): a signal that ends us stops
 * them before their stores go, and our death by SIGKILL ends them. */
static double run_two(const struct sh_opts *o, const char *sock,
		      struct sh_res res[2])
{
	int fds[2][2], k;
	pid_t pid[2] = { -1, -1 };
	double t0 = bench_now();

	for (k = 0; k < 2; k++) {
		memset(&res[k], 0, sizeof(res[k]));
		res[k].err = -EIO;	/* until it says otherwise */
		fds[k][0] = -1;
		if (pipe(fds[k]))
			continue;
		pid[k] = bench_child_fork();
		if (pid[k] == 0) {
			struct sh_res r = { 0 };

			close(fds[k][0]);
			r.err = sock ? work_client(o, sock, &r) :
				       work_embedded(o, k, &r);
			if (r.err)
				fprintf(stderr, "hmm-bench shared: worker "
					"%d: %s\n", k, hmm_last_error());
			if (write(fds[k][1], &r, sizeof(r)) != sizeof(r))
				_exit(1);
			_exit(0);
		}
		if (pid[k] < 0)
			fprintf(stderr, "hmm-bench shared: worker %d: cannot "
				"start: %s\n", k, strerror(errno));
		close(fds[k][1]);
	}
	for (k = 0; k < 2; k++) {
		if (fds[k][0] < 0)
			continue;
		if (pid[k] > 0 &&
		    read(fds[k][0], &res[k], sizeof(res[k])) != sizeof(res[k]))
			res[k].err = -EIO;
		close(fds[k][0]);
		if (pid[k] > 0)
			bench_child_close(NULL, pid[k]);
	}
	return bench_now() - t0;
}

/* hmmd's stderr goes to a log of the run's, shown when something
 * failed: what it refused is said there, not here. */
static void show_log(const char *log)
{
	char line[512];
	FILE *f = fopen(log, "re");

	while (f && fgets(line, sizeof(line), f))
		fputs(line, stderr);
	if (f)
		fclose(f);
}

static pid_t start_hmmd(const struct sh_opts *o, const char *sock,
			const char *store, const char *log)
{
	char host[32], size[32];
	struct stat st;
	int status;
	pid_t pid;
	double t0;

	snprintf(host, sizeof(host), "%lld", (long long)o->host);
	snprintf(size, sizeof(size), "%lld",
		 (long long)(o->size * 4 + (64 << 20)));
	/* a bench child: killed on our exits, SIGTERM when we are killed
	 * (then it stops as it does for systemd, removing its socket) */
	pid = bench_child_fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (fd >= 0)
			dup2(fd, 2);
		if (o->host_dir)
			execl(o->hmmd, o->hmmd, "--socket", sock, "--store",
			      store, "--store-size", size, "--host-budget",
			      host, "--host-dir", o->host_dir, NULL);
		else
			execl(o->hmmd, o->hmmd, "--socket", sock, "--store",
			      store, "--store-size", size, "--host-budget",
			      host, NULL);
		_exit(127);
	}
	for (t0 = bench_now(); pid > 0 && bench_now() - t0 < 20;
	     usleep(20000)) {
		if (stat(sock, &st) == 0)
			return pid;
		if (waitpid(pid, &status, WNOHANG) == pid) {
			bench_child_close(NULL, pid);	/* forget it */
			return -1;	/* it refused its options */
		}
	}
	if (pid > 0) {
		kill(pid, SIGKILL);
		bench_child_close(NULL, pid);
	}
	return -1;
}

/*
 * hmmd's host tier on huge pages: a tmpfs of our own mounted with
 * huge=within_size (needs CAP_SYS_ADMIN), since memfds get 4 KiB pages
 * where shmem_enabled is "never" and O_DIRECT into 4 KiB pages is 2-3x
 * slower than into the embedded engine's huge anonymous pages.  Returns
 * 1 when mounted at dir (the caller unmounts), 0 when not.
 */
static int mount_huge(const struct sh_opts *o, const char *dir)
{
	char opts[64];

	snprintf(opts, sizeof(opts), "huge=within_size,mode=0700,size=%lld",
		 (long long)(o->host * 2 + (64 << 20)));
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return 0;
	if (mount("hmm-bench", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts)) {
		rmdir(dir);
		return 0;
	}
	return 1;
}

/* hmmd's engine counters (all clients) through a connection of its own. */
static int sh_stats(const char *sock, struct hmm_proto_stats_reply *st)
{
	struct hmm_client *c;
	int r;

	memset(st, 0, sizeof(*st));
	r = hmm_client_open(sock, (uint64_t[]){ 1, 1, 1 }, "bench-stats", &c,
			    NULL);
	if (r)
		return r;
	r = hmm_client_stats(c, st);
	hmm_client_close(c);
	return r;
}

static const char usage[] =
	"usage: hmm-bench shared [--size 64M] [--slice 4M] [--host 32M] "
	"[--passes 3] [--dir DIR] [--hmmd PATH] [--host-dir TMPFS | --memfd] "
	"[--reps 3] [--json]\n"
	"  (size a multiple of slice, slice of 4096, host at least the 2M\n"
	"  chunks a slice spans; passes 1..1000, reps 1..15)\n";

static void parse(int argc, char **argv, struct sh_opts *o)
{
	const struct bench_arg args[] = {
		{ "--size", BA_SIZE, &o->size, 4096, 1ll << 40, 4096 },
		{ "--slice", BA_SIZE, &o->slice, 4096, 1ll << 30, 4096 },
		{ "--host", BA_SIZE, &o->host, 4096, 1ll << 40 },
		{ "--passes", BA_INT, &o->passes, 1, 1000 },
		{ "--dir", BA_STR, &o->dir },
		{ "--hmmd", BA_STR, &o->hmmd },
		{ "--host-dir", BA_STR, &o->host_dir },
		{ "--memfd", BA_FLAG, &o->no_mount },
		{ "--reps", BA_INT, &o->reps, 1, MAX_REPS },
		{ "--json", BA_FLAG, &o->json },
		{ NULL }
	};
	static char self[PATH_MAX], hmmd[PATH_MAX + 8];
	int64_t span, g, r, t;
	ssize_t n;

	o->size = 64 << 20;
	o->slice = 4 << 20;
	o->host = 32 << 20;
	o->passes = 3;
	o->reps = 3;
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = 0;
	snprintf(hmmd, sizeof(hmmd), "%s/hmmd", dirname(self));
	o->hmmd = hmmd;
	bench_args("shared", usage, argc, argv, args);
	o->dir = bench_scratch_dir("--dir", o->dir);
	/* slices start at multiples of slice, so at multiples of
	 * g = gcd(slice, CHUNK) into a chunk: at most C - g in */
	for (g = o->slice, r = CHUNK; r; t = g % r, g = r, r = t)
		;
	span = (CHUNK - g + o->slice + CHUNK - 1) / CHUNK * CHUNK;
	if (o->host_dir && o->no_mount)
		bench_arg_bad("--memfd", NULL, "not with --host-dir");
	if (o->host_dir) {	/* hmmd would refuse it, less clearly */
		struct statfs sf;

		bench_scratch_dir("--host-dir", o->host_dir);
		if (statfs(o->host_dir, &sf) || sf.f_type != TMPFS_MAGIC)
			bench_arg_bad("--host-dir", o->host_dir, "not a tmpfs");
	}
	if (access(o->hmmd, X_OK))
		bench_arg_bad("--hmmd", o->hmmd, strerror(errno));
	if (o->size % o->slice)
		bench_arg_bad("--size", bench_arg_val("--size") ?: "64M",
			      "want a multiple of --slice");
	if (o->host < span)
		bench_arg_bad("--host", bench_arg_val("--host") ?: "32M",
			      "want at least the 2M chunks a --slice spans");
}

static int bench_shared(int argc, char **argv)
{
	char sock[PATH_MAX], store[PATH_MAX], shm[PATH_MAX], ws[2][PATH_MAX];
	char log[PATH_MAX];
	const char *mine[] = { sock, store, ws[0], ws[1], log };  /* its files */
	struct hmm_proto_stats_reply st0, st;
	double t_ind[MAX_REPS], t_sh[MAX_REPS], mb_ind[MAX_REPS];
	double mb_sh[MAX_REPS], m_t_ind, m_t_sh, m_ind, m_sh;
	double peak_ind = 0, peak_sh;
	struct sh_res ind[2], sh[2];
	int mounted = 0, ret = 0, i;
	struct sh_opts o;
	const char *tier;
	pid_t pid;

	memset(&o, 0, sizeof(o));
	parse(argc, argv, &o);
	snprintf(sock, sizeof(sock), "%s/bench-shared.sock", o.dir);
	snprintf(store, sizeof(store), "%s/bench-shared.store", o.dir);
	snprintf(shm, sizeof(shm), "%s/bench-shared.shm", o.dir);
	snprintf(log, sizeof(log), "%s/bench-shared.log", o.dir);
	/* the files this run makes: none may be there before (a run
	 * stopped by SIGKILL leaves them; nothing here removes another's),
	 * each removed on every exit */
	for (i = 0; i < 2; i++)		/* work_embedded's stores */
		snprintf(ws[i], sizeof(ws[i]), "%s/bench-shared-%d.store", o.dir,
			 i);
	for (i = 0; i < 5; i++)
		if (bench_scratch_claim("shared", mine[i]))
			return 1;
	if (!o.host_dir && !o.no_mount && (mounted = mount_huge(&o, shm))) {
		o.host_dir = shm;
		bench_scratch_mount(shm);	/* on a signal too */
	}
	tier = mounted ? "tmpfs huge=within_size (mounted here)" :
	       o.host_dir ? "tmpfs (--host-dir)" : "memfd";
	pid = start_hmmd(&o, sock, store, log);
	if (pid < 0) {
		show_log(log);
		fprintf(stderr, "hmm-bench shared: cannot start %s (what it "
			"said is above)\n", o.hmmd);
		ret = 1;
		goto out;
	}
	/* interleaved: independent then shared, --reps times; medians */
	for (i = 0; i < o.reps && !ret; i++) {
		t_ind[i] = run_two(&o, NULL, ind);
		ret = ind[0].err || ind[1].err ||
		      sh_stats(sock, &st0) || sh_stats(sock, &st);
		if (ret)
			break;
		t_sh[i] = run_two(&o, sock, sh);
		ret = sh[0].err || sh[1].err || sh_stats(sock, &st);
		if (ret)
			break;
		mb_ind[i] = (ind[0].store_bytes + ind[1].store_bytes) /
			    t_ind[i] / 1e6;
		mb_sh[i] = (st.tier[HMM_TIER_STORE].bytes_in +
			    st.tier[HMM_TIER_STORE].bytes_out -
			    st0.tier[HMM_TIER_STORE].bytes_in -
			    st0.tier[HMM_TIER_STORE].bytes_out) / t_sh[i] / 1e6;
		peak_ind = (double)ind[0].host_peak + ind[1].host_peak;
	}
	kill(pid, SIGTERM);
	bench_child_close(NULL, pid);
out:
	if (mounted && !umount2(shm, MNT_DETACH))
		rmdir(shm);
	bench_scratch_mount(NULL);
	if (ret) {
		if (pid >= 0) {
			show_log(log);
			fprintf(stderr, "hmm-bench shared: a worker failed "
				"(hmmd's log is above)\n");
		}
		return 1;
	}
	m_t_ind = bench_median(t_ind, o.reps);
	m_t_sh = bench_median(t_sh, o.reps);
	m_ind = bench_median(mb_ind, o.reps);
	m_sh = bench_median(mb_sh, o.reps);
	peak_sh = (double)st.tier[HMM_TIER_HOST].peak;
	printf("medians of %d interleaved runs\n", o.reps);
	printf("independent: %.2f s, store %.1f MB/s, host peak %.0f bytes "
	       "(two processes)\n", m_t_ind, m_ind, peak_ind);
	printf("shared:      %.2f s, store %.1f MB/s, host peak %llu bytes "
	       "(hmmd, zero-copy maps; host tier: %s)\n", m_t_sh, m_sh,
	       (unsigned long long)st.tier[HMM_TIER_HOST].peak, tier);
	printf("ratios: store MB/s %.3f (target >= 0.95), peak host %.3f "
	       "(target <= 0.6)\n", m_sh / m_ind, peak_sh / peak_ind);
	if (o.json) {
		bench_json_begin(stdout, "shared");
		bench_json_int(stdout, "size", o.size);
		bench_json_int(stdout, "slice", o.slice);
		bench_json_int(stdout, "host_budget", o.host);
		bench_json_int(stdout, "passes", o.passes);
		bench_json_str(stdout, "host_tier", mounted || o.host_dir ?
			       "tmpfs" : "memfd");
		bench_json_int(stdout, "reps", o.reps);
		bench_json_num(stdout, "independent_s", m_t_ind);
		bench_json_num(stdout, "shared_s", m_t_sh);
		bench_json_num(stdout, "independent_store_mbps", m_ind);
		bench_json_num(stdout, "shared_store_mbps", m_sh);
		bench_json_num(stdout, "store_mbps_ratio", m_sh / m_ind);
		bench_json_int(stdout, "independent_host_peak", (int64_t)peak_ind);
		bench_json_int(stdout, "shared_host_peak",
			       (int64_t)st.tier[HMM_TIER_HOST].peak);
		bench_json_num(stdout, "peak_ratio", peak_sh / peak_ind);
		bench_json_end(stdout);
	}
	return 0;
}

HMM_BENCH(shared, "two clients through one hmmd vs two embedded processes",
	  bench_shared);
