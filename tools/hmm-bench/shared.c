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
 *                the workers are hmmd clients (libhmm/src/client.c).
 * Reported: aggregate store MB/s (bytes in + out of the store tier over
 * the wall time of the workers) of each and their ratio; the peak host
 * bytes of the engine(s) (sum of both processes' peaks, against hmmd's
 * peak) and their ratio.  hmmd's host maps are the engine's own pages
 * (a memfd per tensor, see daemon/hmmd.h), so its host peak is all the
 * host memory the shared side pins: nothing is copied.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "client.h"
#include "err.h"
#include "hmm.h"

struct sh_opts {
	int64_t size, slice, host;
	int passes, json;
	const char *dir, *hmmd;
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
	unlink(path);
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

/* Run two workers (fn 0: embedded, 1: client); their results; seconds. */
static double run_two(const struct sh_opts *o, const char *sock,
		      struct sh_res res[2])
{
	int fds[2][2], k, st;
	pid_t pid[2];
	double t0 = bench_now();

	for (k = 0; k < 2; k++) {
		if (pipe(fds[k]))
			return -1;
		pid[k] = fork();
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
		close(fds[k][1]);
	}
	for (k = 0; k < 2; k++) {
		memset(&res[k], 0, sizeof(res[k]));
		if (read(fds[k][0], &res[k], sizeof(res[k])) != sizeof(res[k]))
			res[k].err = -EIO;
		close(fds[k][0]);
		waitpid(pid[k], &st, 0);
	}
	return bench_now() - t0;
}

static pid_t start_hmmd(const struct sh_opts *o, const char *sock,
			const char *store)
{
	char host[32], size[32];
	struct stat st;
	pid_t pid;
	double t0;

	snprintf(host, sizeof(host), "%lld", (long long)o->host);
	snprintf(size, sizeof(size), "%lld",
		 (long long)(o->size * 4 + (64 << 20)));
	unlink(sock);
	unlink(store);
	pid = fork();
	if (pid == 0) {
		int fd = open("/dev/null", O_WRONLY);

		if (fd >= 0)
			dup2(fd, 2);
		execl(o->hmmd, o->hmmd, "--socket", sock, "--store", store,
		      "--store-size", size, "--host-budget", host, NULL);
		_exit(127);
	}
	for (t0 = bench_now(); pid > 0 && bench_now() - t0 < 20;
	     usleep(20000))
		if (stat(sock, &st) == 0)
			return pid;
	if (pid > 0)
		kill(pid, SIGKILL);
	return -1;
}

static int parse(int argc, char **argv, struct sh_opts *o)
{
	static const struct option lo[] = {
		{ "size", required_argument, NULL, 's' },
		{ "slice", required_argument, NULL, 'l' },
		{ "host", required_argument, NULL, 'H' },
		{ "passes", required_argument, NULL, 'p' },
		{ "dir", required_argument, NULL, 'd' },
		{ "hmmd", required_argument, NULL, 'm' },
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	static char self[PATH_MAX], hmmd[PATH_MAX + 8];
	ssize_t n;
	int c;

	o->size = 64 << 20;
	o->slice = 4 << 20;
	o->host = 32 << 20;
	o->passes = 3;
	o->dir = access("build/tmp", W_OK) ? "/tmp" : "build/tmp";
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = 0;
	snprintf(hmmd, sizeof(hmmd), "%s/hmmd", dirname(self));
	o->hmmd = hmmd;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 's': o->size = bench_parse_size(optarg); break;
		case 'l': o->slice = bench_parse_size(optarg); break;
		case 'H': o->host = bench_parse_size(optarg); break;
		case 'p': o->passes = atoi(optarg); break;
		case 'd': o->dir = optarg; break;
		case 'm': o->hmmd = optarg; break;
		case 'j': o->json = 1; break;
		default: return -1;
		}
	}
	if (optind < argc || o->size <= 0 || o->slice <= 0 ||
	    o->slice % 4096 || o->size % o->slice || o->host < o->slice ||
	    o->passes < 1)
		return -1;
	return 0;
}

static int bench_shared(int argc, char **argv)
{
	char sock[PATH_MAX], store[PATH_MAX];
	struct hmm_proto_stats_reply st;
	struct sh_res ind[2], sh[2];
	struct hmm_client *c;
	struct sh_opts o;
	double t_ind, t_sh, mb_ind, mb_sh, peak_ind, peak_sh;
	pid_t pid;
	int st2;

	memset(&o, 0, sizeof(o));
	if (parse(argc, argv, &o)) {
		fprintf(stderr, "usage: hmm-bench shared [--size 64M] [--slice "
			"4M] [--host 32M] [--passes 3] [--dir DIR] [--hmmd "
			"PATH] [--json]\n  (size a multiple of slice, slice of "
			"4096, host >= slice)\n");
		return 2;
	}
	t_ind = run_two(&o, NULL, ind);
	if (ind[0].err || ind[1].err)
		return 1;
	snprintf(sock, sizeof(sock), "%s/bench-shared.sock", o.dir);
	snprintf(store, sizeof(store), "%s/bench-shared.store", o.dir);
	pid = start_hmmd(&o, sock, store);
	if (pid < 0) {
		fprintf(stderr, "hmm-bench shared: cannot start %s\n", o.hmmd);
		return 1;
	}
	t_sh = run_two(&o, sock, sh);
	memset(&st, 0, sizeof(st));
	if (!sh[0].err && !sh[1].err &&
	    !hmm_client_open(sock, (uint64_t[]){ 1, 1, 1 }, "bench-stats",
			     &c, NULL)) {
		hmm_client_stats(c, &st);
		hmm_client_close(c);
	}
	kill(pid, SIGTERM);
	waitpid(pid, &st2, 0);
	unlink(store);
	if (sh[0].err || sh[1].err)
		return 1;
	mb_ind = (ind[0].store_bytes + ind[1].store_bytes) / t_ind / 1e6;
	mb_sh = (st.tier[HMM_TIER_STORE].bytes_in +
		 st.tier[HMM_TIER_STORE].bytes_out) / t_sh / 1e6;
	peak_ind = (double)ind[0].host_peak + ind[1].host_peak;
	peak_sh = (double)st.tier[HMM_TIER_HOST].peak;
	printf("independent: %.2f s, store %.1f MB/s, host peak %.0f bytes "
	       "(two processes)\n", t_ind, mb_ind, peak_ind);
	printf("shared:      %.2f s, store %.1f MB/s, host peak %llu bytes "
	       "(hmmd, zero-copy maps)\n", t_sh, mb_sh,
	       (unsigned long long)st.tier[HMM_TIER_HOST].peak);
	printf("ratios: store MB/s %.3f (target >= 0.95), peak host %.3f "
	       "(target <= 0.6)\n", mb_sh / mb_ind, peak_sh / peak_ind);
	if (o.json) {
		bench_json_begin(stdout, "shared");
		bench_json_int(stdout, "size", o.size);
		bench_json_int(stdout, "slice", o.slice);
		bench_json_int(stdout, "host_budget", o.host);
		bench_json_int(stdout, "passes", o.passes);
		bench_json_num(stdout, "independent_s", t_ind);
		bench_json_num(stdout, "shared_s", t_sh);
		bench_json_num(stdout, "independent_store_mbps", mb_ind);
		bench_json_num(stdout, "shared_store_mbps", mb_sh);
		bench_json_num(stdout, "store_mbps_ratio", mb_sh / mb_ind);
		bench_json_num(stdout, "independent_host_peak", peak_ind);
		bench_json_int(stdout, "shared_host_peak",
			       (int64_t)st.tier[HMM_TIER_HOST].peak);
		bench_json_num(stdout, "peak_ratio", peak_sh / peak_ind);
		bench_json_end(stdout);
	}
	return 0;
}

HMM_BENCH(shared, "two clients through one hmmd vs two embedded processes",
	  bench_shared);
