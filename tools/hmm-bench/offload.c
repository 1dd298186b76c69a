// SPDX-License-Identifier: MIT
/*
 * hmm-bench offload — the offloaded AdamW step (kernels/bind/hk_offload.h)
 * over fp32 p, g, m, v tensors (16 B a parameter) four times the host
 * budget (or more: the budget is at most 1 GiB), against its
 * two floors measured in the same run:
 *	io_floor_s:      fio moving the same bytes (16 B/param read, 12
 *	                 written, mixed, O_DIRECT, io_uring, chunk-sized
 *	                 blocks, each block once, from buffers on huge
 *	                 pages as libhmm's are: fio.c says why) over a
 *	                 file beside the store, at queue depth 16 and at
 *	                 64 each round:
 *	                 the lower of the two depths' medians (not each
 *	                 round's faster run: on a disk whose speed drifts,
 *	                 the least of two samples is lower than a typical
 *	                 one);
 *	compute_floor_s: hk_adamw_step() over the same n in memory
 *	                 (over at most 64M of them, scaled by n / that:
 *	                 the step is linear in n, and 16 B a parameter of
 *	                 a billion would not fit beside the host budget).
 * The store is sized by hmm_store_required(); the store and fio's file
 * are removed on every exit, failures and signals included.
 *
 * The states are cut into segments of at most --segment parameters
 * (default 64M), each its own p, g, m, v tensors, as a model's states
 * are many tensors each stepped by itself (hmm-train steps one
 * hk_offload_adamw per parameter tensor).  A round steps every segment,
 * and right beside each segment's step runs fio moving that segment's
 * bytes at the two queue depths; the three take turns at going first,
 * second and last from one segment and round to the next.  A round's
 * step and floors are the sums over its segments.  Why: the build
 * machine's virtual disk is rate-limited with bursts (a step alone at
 * 1G parameters, four in a row: 62.7, 72.5, 23.2 and 14.1 s; reads come
 * in steps of 150 MB/s, with stalls of seconds that complete nothing),
 * so its speed changes over tens of seconds; a whole step at 1G is a
 * minute or more, and a step set against fio runs a minute away
 * measured the disk's mood as much as hmm.  Segments of a few seconds,
 * each beside its floor, see the same disk.  The step pays for it (its
 * pipeline fills and drains once a segment), fio does not (4 segments
 * of a file against one pass: 0.87-0.91 of its time).
 *
 * The same disk seemed to serve bytes touched seconds before much
 * faster than older ones (interleaved fio runs of 1.75 GiB each, over
 * regions of a 14 GiB file, took 0.8-1.2 s where most of the region had
 * been touched by the run before, 1.7-3.1 s where it had been touched a
 * minute or more before; a later test, 2 GiB read 2, 45 and 100 s after
 * its write, found no order in the age).  Either way a run that moves
 * 28 B a parameter through a region of 16 (as before) touches 0.75 of
 * it twice within seconds, where the step reads each byte once, a round
 * after it wrote it.  So fio moves each
 * segment's 28 B a parameter once through a region of that size (not
 * 28 B over 16, which wrapped), in a file of 28 B a parameter, and its
 * run at 64 uses the region half a round away from its run at 16 (one
 * region both ways with one segment).
 * --reps rounds; medians of the rounds' sums.
 *	ratio = step_s / max(io_floor_s, compute_floor_s)
 * One round runs first, untimed in the medians (reported as warmup_*):
 * the first pass over bytes just written runs at a fraction of the
 * disk's speed on the build machine's virtual disk, fio alone as much
 * as hmm (a 4 GiB fallocated file filled with O_DIRECT writes: fio's
 * first mixed pass 16.8 s, the next three 6.7, 5.0 and 6.8 s).  fio's
 * file is written whole before that round, as the store's states are
 * by their fill, so both start from bytes just written.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "hk.h"
#include "hk_adamw.h"
#include "hk_offload.h"
#include "hmm.h"

#define COMPUTE_N	(64ll << 20)	/* the in-memory floor's n, at most */
#define SEG_N		(64ll << 20)	/* --segment's default */

/*
 * config.io_depth for the step's context, unless --io-depth says.  The
 * step queues its pieces' reads ahead and three write-backs behind,
 * and libhmm's default of 4 in the store at a time left the disk
 * waiting: at 256M parameters (medians of 3, interleaved, loaded
 * machine) the step took 14.8 / 14.3 s at 4, 9.2 / 9.4 at 8, 7.7-9.8
 * at 16 and 6.6 / 7.1 at 32.  64 is the queue depth at which fio's
 * floor ran faster in every run on this machine's disk, so the step
 * gets as many I/Os in flight as its floor; with the read-ahead filling
 * it (hk_offload.h: depth 0), 256M ran at 1.07 / 1.10 of the floor at
 * 64 and 0.87 / 1.24 at 32, against 1.42 / 1.39 at 32 with 2 pieces
 * read ahead (one interleaved series, quiet machine).
 * A store sized by hmm_store_required holds it: the I/O thread waits
 * for room rather than outrun the store's slack.
 */
#define IO_DEPTH	64

struct opts {
	int64_t n, chunk, budget, seg;
	int depth, io_depth, reps, json;
	int members;		/* --stripe N (else 1); 0: paths given */
	const char *dir;
	const char *stripe;	/* --stripe: N, or PATH,PATH,... */
};

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "hmm-bench offload: %s: %s\n", what, detail);
	exit(1);
}

static void fill_tensor(struct hmm *h, struct hmm_tensor *t, uint64_t bytes,
			uint64_t piece, float base)
{
	for (uint64_t o = 0; o < bytes; o += piece) {
		uint64_t len = bytes - o < piece ? bytes - o : piece;
		float *p;

		if (hmm_map(t, o, len, HMM_TIER_HOST, HMM_DISCARD, (void **)&p))
			die("fill", hmm_last_error());
		for (uint64_t i = 0; i < len / 4; i++)
			p[i] = base + 1e-6f * (float)(i & 1023);
		hmm_unmap(t, p);
		hmm_evict(t, o, len, HMM_TIER_HOST);
	}
	if (hmm_wait(h, t))
		die("fill", hmm_last_error());
}

/* One segment of the states: its tensors and its step's arguments. */
struct seg {
	int64_t n;			/* its parameters */
	struct hmm_tensor *t[4];	/* p, g, m, v */
	struct hk_offload_adamw off;
};

/*
 * fio at queue depth qd moving segment g's bytes (28 B a parameter,
 * 16/28 of them reads) once through region `region` of `file`, which
 * is 28 B times o->seg parameters long: each block is read or written
 * once, as the step reads each byte once and writes to other places.
 */
static double fio_s(const struct opts *o, const char *file, int qd,
		    int region, const struct seg *g)
{
	double s = bench_fio_qd_s(file, o->chunk, 28 * o->seg * region,
				  28 * g->n, 28 * g->n, 57, qd);

	if (s < 0)
		die("fio", "failed (said above)");
	if (s == 0)
		die("fio", "its floor ran in under a millisecond, too short "
		    "to time: give a larger --n");
	return s;
}

/* The offloaded step number `step`, timed. */
static double timed_step(struct hmm *h, struct hk_offload_adamw *off,
			 int64_t step)
{
	double t0 = bench_now();

	off->hp.step = step;
	off->start = 0;
	if (hk_offload_adamw_step(h, off))
		die("step", hk_offload_error());
	return bench_now() - t0;
}

static double compute_s(float *a[4], size_t n, int64_t step)
{
	struct hk_adamw_args x = {
		.n = n, .param = a[0], .grad = a[1], .exp_avg = a[2],
		.exp_avg_sq = a[3], .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999,
		.eps = 1e-8, .weight_decay = 0.01, .step = step,
	};
	double t0 = bench_now();

	hk_adamw_step(&x);
	return bench_now() - t0;
}

static const char usage[] =
	"usage: hmm-bench offload [--n PARAMS] [--budget B] [--depth K] "
	"[--io-depth Q] [--chunk B] [--segment PARAMS] [--dir DIR] "
	"[--stripe N|P[,P...]] [--reps N] [--json]\n"
	"  --n PARAMS  parameters (default 8M: p, g, m, v = 128 MiB),\n"
	"              at least --chunk / 4\n"
	"  --budget B  host budget (default a quarter of the states,\n"
	"              at most 1G), at least 4 --chunk\n"
	"  --depth K   pieces read ahead (default: as many as fill the\n"
	"              io depth with reads, at least 2)\n"
	"  --io-depth Q  config.io_depth, store I/Os in flight, 1..4096 "
	"(default 64)\n"
	"  --chunk B   libhmm chunk bytes, a multiple of 4K (default 2M)\n"
	"  --segment PARAMS  parameters per segment, each its own tensors\n"
	"              and stepped beside its own fio floor (default 64M)\n"
	"  --dir DIR   where the store and fio's file go "
	"(default $HMM_TEST_DIR, build/tmp,\n"
	"              $TMPDIR or /var/tmp; not made)\n"
	"  --stripe N  stripe the store over N files in DIR (1..8)\n"
	"  --stripe P[,P...]  or over these new files or block devices\n"
	"  --reps N    timed rounds, 1..100 (default 3)\n";

static void parse(int argc, char **argv, struct opts *o)
{
	long n;
	const struct bench_arg args[] = {
		{ "--n", BA_SIZE, &o->n, 1024, 1ll << 34 },
		{ "--budget", BA_SIZE, &o->budget, 4096, 1ll << 40 },
		{ "--chunk", BA_SIZE, &o->chunk, 4096, 1 << 30, 4096 },
		{ "--segment", BA_SIZE, &o->seg, 1024, 1ll << 34 },
		{ "--depth", BA_INT, &o->depth, 1, 4096 },
		{ "--io-depth", BA_INT, &o->io_depth, 1, 4096 },
		{ "--reps", BA_INT, &o->reps, 1, 100 },
		{ "--dir", BA_STR, &o->dir },
		{ "--stripe", BA_STR, &o->stripe },
		{ "--json", BA_FLAG, &o->json },
		{ NULL }
	};

	*o = (struct opts){ .n = 8 << 20, .chunk = 2 << 20, .depth = 0,
			    .seg = SEG_N,
			    .io_depth = IO_DEPTH, .reps = 3 };
	bench_args("offload", usage, argc, argv, args);
	o->dir = bench_scratch_dir("--dir", o->dir);
	if (4 * o->n < o->chunk)	/* fio's blocks are chunks too */
		bench_arg_bad("--n", bench_arg_val("--n"), "want at least one "
			      "--chunk of fp32 parameters (--chunk / 4)");
	if (o->budget && o->budget < 4 * o->chunk)	/* p, g, m, v */
		bench_arg_bad("--budget", bench_arg_val("--budget"), "want at "
			      "least 4 --chunk: one piece of p, g, m and v");
	if (!o->budget)
		o->budget = 4 * o->n < (1ll << 30) ? 4 * o->n : 1ll << 30;
	if (o->budget < 4 * o->chunk)
		bench_arg_bad("--n", bench_arg_val("--n"), "its default host "
			      "budget, 4 B a parameter, holds less than 4 "
			      "--chunk (one piece of p, g, m and v): give "
			      "--budget, or a smaller --chunk");
	o->members = 1;
	if (!o->stripe)
		return;
	if (o->stripe[strspn(o->stripe, "0123456789")]) {
		o->members = 0;		/* paths */
		return;
	}
	n = strtol(o->stripe, NULL, 10);	/* LONG_MAX past it */
	if (n < 1 || n > 8)
		bench_arg_bad("--stripe", o->stripe,
			      "want N from 1 to 8, or paths P[,P...]");
	o->members = (int)n;
}

/*
 * The store's path into buf: one file in --dir; --stripe N: N files
 * there (N checked by parse); --stripe P[,P...]: those (a block device
 * used as it is, a file new, made and removed as scratch).  Returns the
 * members.
 */
static int store_paths(const struct opts *o, char *buf, size_t cap)
{
	char list[4096], *save = NULL, *p;
	int n = o->members;
	size_t len = 0;
	struct stat st;

	if (!n)
		snprintf(list, sizeof(list), "%s", o->stripe);
	else
		for (int i = 0; i < n && len < sizeof(list); i++)
			len += snprintf(list + len, sizeof(list) - len,
					n == 1 ? "%s%s/hmm-bench-offload.store" :
					"%s%s/hmm-bench-offload.store.%d",
					i ? "," : "", o->dir, i);
	len = 0;
	n = 0;
	for (p = strtok_r(list, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (!(stat(p, &st) == 0 && S_ISBLK(st.st_mode))) {
			if (bench_scratch_claim("offload", p))
				exit(1);
		}
		len += snprintf(buf + len, len < cap ? cap - len : 0, "%s%s",
				n++ ? "," : "", p);
	}
	if (len >= cap || !n)
		die("--stripe", "no path, or paths too long");
	return n;
}

static void store_remove(const char *paths)
{
	char list[4096], *save = NULL;

	snprintf(list, sizeof(list), "%s", paths);
	for (char *p = strtok_r(list, ",", &save); p;
	     p = strtok_r(NULL, ",", &save))
		bench_scratch_remove(p);	/* a device was never added */
}

/* Cut the states into segments of o->seg parameters (rounded up to
 * whole pieces of every tensor, at most n), make and fill each one's
 * tensors.  Returns how many. */
static int make_segs(struct hmm *h, struct opts *o, struct seg **out)
{
	static const char *const nm[4] = { "p", "g", "m", "v" };
	int64_t per = o->chunk / 4;	/* a piece's parameters */
	int64_t seg = (o->seg + per - 1) / per * per;
	int ns;
	struct seg *g;
	char name[32];

	o->seg = seg = seg < o->n ? seg : o->n;
	ns = (int)((o->n + seg - 1) / seg);
	g = calloc(ns, sizeof(*g));
	if (!g)
		die("calloc", strerror(ENOMEM));
	for (int i = 0; i < ns; i++) {
		g[i].n = o->n - i * seg < seg ? o->n - i * seg : seg;
		for (int k = 0; k < 4; k++) {
			snprintf(name, sizeof(name), "%s.%d", nm[k], i);
			if (hmm_tensor_new(h, name, HMM_DTYPE_F32, 1, &g[i].n,
					   &g[i].t[k]))
				die("tensor", hmm_last_error());
			fill_tensor(h, g[i].t[k], 4 * g[i].n, o->chunk,
				    k == 3 ? 1e-4f : 0.01f);
		}
		g[i].off = (struct hk_offload_adamw){
			.param = g[i].t[0], .grad = g[i].t[1],
			.exp_avg = g[i].t[2], .exp_avg_sq = g[i].t[3],
			.hp = { .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999,
				.eps = 1e-8, .weight_decay = 0.01,
				.name = "bench" },
			.chunk_bytes = (uint32_t)o->chunk,
			.depth = (uint32_t)o->depth,
		};
	}
	*out = g;
	return ns;
}

/*
 * Round r (-1: the warm-up): every segment's step (x[0]) and its fio at
 * the two queue depths (x[1], x[2]), each summed over the segments.  The
 * three rotate: in segment i of round r the first to run is
 * (r + 1 + i) mod 3, so over three rounds (or three segments) each runs
 * first, second and last once.
 */
static void round_run(struct hmm *h, const struct opts *o, const char *file,
		      struct seg *g, int ns, int r, double x[3])
{
	x[0] = x[1] = x[2] = 0;
	for (int i = 0; i < ns; i++)
		for (int j = 0; j < 3; j++) {
			int w = (r + 1 + i + j) % 3;

			x[w] += w ? fio_s(o, file, bench_fio_qd[w - 1],
					  (i + (w - 1) * (ns / 2)) % ns, &g[i])
				  : timed_step(h, &g[i].off, r + 2);
		}
}

static int bench_offload(int argc, char **argv)
{
	struct hmm_config cfg;
	struct hmm_stats st;
	struct hmm *h;
	struct seg *g;
	struct opts o;
	char store[4096], scratch[4096];
	const int *qd = bench_fio_qd;
	double *ts, *tq[2], *tc, fq[2], step_s, io_s, c_s, fl;
	double warm[3], warm_io;
	float *mem[4];
	int64_t nc;
	int err, members, best, ns;

	parse(argc, argv, &o);
	nc = o.n < COMPUTE_N ? o.n : COMPUTE_N;
	members = store_paths(&o, store, sizeof(store));
	if (snprintf(scratch, sizeof(scratch), "%s/hmm-bench-offload.fio",
		     o.dir) >= (int)sizeof(scratch))
		die("--dir", "path too long");
	if (bench_scratch_claim("offload", scratch))
		exit(1);
	hmm_config_default(&cfg);
	cfg.store_path = store;
	cfg.store_size = hmm_store_required(16 * o.n, (uint32_t)o.chunk);
	cfg.host_budget = o.budget;
	cfg.chunk_bytes = (uint32_t)o.chunk;
	cfg.io_depth = (uint32_t)o.io_depth;
	if ((err = hmm_open(&cfg, &h)))
		die("hmm_open", hmm_last_error());
	ns = make_segs(h, &o, &g);
	for (int k = 0; k < 4; k++) {
		mem[k] = malloc(4 * nc);
		if (!mem[k])
			die("malloc", strerror(ENOMEM));
		for (int64_t i = 0; i < nc; i++)
			mem[k][i] = k == 3 ? 1e-4f : 0.01f;
	}
	/* fio's file written whole, as the states were by their fill */
	if (bench_fio_qd_s(scratch, o.chunk, 0, 28 * o.seg * ns,
			   28 * o.seg * ns, 0, qd[1]) < 0)
		die("fio", "failed (said above)");
	ts = calloc(o.reps, sizeof(double));
	tc = calloc(o.reps, sizeof(double));
	for (int q = 0; q < 2; q++)
		tq[q] = calloc(o.reps, sizeof(double));
	if (!ts || !tc || !tq[0] || !tq[1])
		die("calloc", strerror(ENOMEM));
	round_run(h, &o, scratch, g, ns, -1, warm);
	for (int r = 0; r < o.reps; r++) {
		double x[3];

		round_run(h, &o, scratch, g, ns, r, x);
		tc[r] = compute_s(mem, nc, r + 2) * ((double)o.n / nc);
		ts[r] = x[0];
		tq[0][r] = x[1];
		tq[1][r] = x[2];
	}
	bench_scratch_remove(scratch);
	warm_io = warm[1] < warm[2] ? warm[1] : warm[2];
	hmm_stats(h, &st);
	printf("  libhmm: %llu prefetches, %llu prefetch hits, host "
	       "misses %llu, host stall %.3f s, store io busy %.3f s, "
	       "io_depth %llu, in flight at most %llu\n",
	       (unsigned long long)st.prefetches,
	       (unsigned long long)st.prefetch_hits,
	       (unsigned long long)st.tier[HMM_TIER_HOST].misses,
	       st.tier[HMM_TIER_HOST].stall_s, st.tier[HMM_TIER_STORE].io_s,
	       (unsigned long long)st.io_depth,
	       (unsigned long long)st.io_inflight_peak);
	step_s = bench_median(ts, o.reps);
	for (int q = 0; q < 2; q++)
		fq[q] = bench_median(tq[q], o.reps);
	best = fq[1] < fq[0];
	io_s = fq[best];
	c_s = bench_median(tc, o.reps);
	fl = io_s > c_s ? io_s : c_s;
	printf("offload n=%lld in %d segment%s depth=%d io_depth=%llu "
	       "chunk=%lld host budget %lld MiB, states %lld MiB: step "
	       "%.3f s; io floor %.3f s (fio at queue depth %d, %.0f MB/s; "
	       "%.3f s at %d); compute floor %.3f s; ratio %.3f "
	       "(untimed warm-up: step %.3f s, io floor %.3f s)\n",
	       (long long)o.n, ns, ns > 1 ? "s" : "", o.depth,
	       (unsigned long long)st.io_depth, (long long)o.chunk,
	       (long long)(cfg.host_budget >> 20),
	       (long long)(16 * o.n >> 20), step_s, io_s, qd[best],
	       28.0 * o.n / io_s / 1e6, fq[!best], qd[!best], c_s,
	       step_s / fl, warm[0], warm_io);
	if (o.json) {
		bench_json_begin(stdout, "offload");
		bench_json_int(stdout, "n", o.n);
		bench_json_int(stdout, "segments", ns);
		bench_json_int(stdout, "depth", o.depth);
		bench_json_int(stdout, "io_depth", (int64_t)st.io_depth);
		bench_json_int(stdout, "prefetch_hits",
			       (int64_t)st.prefetch_hits);
		bench_json_int(stdout, "host_budget", (int64_t)cfg.host_budget);
		bench_json_int(stdout, "store_members", members);
		bench_json_num(stdout, "step_s", step_s);
		bench_json_num(stdout, "io_floor_s", io_s);
		bench_json_int(stdout, "io_floor_qd", qd[best]);
		bench_json_num(stdout, "compute_floor_s", c_s);
		bench_json_num(stdout, "ratio", step_s / fl);
		bench_json_num(stdout, "warmup_step_s", warm[0]);
		bench_json_num(stdout, "warmup_io_floor_s", warm_io);
		bench_json_end(stdout);
	}
	for (int i = 0; i < ns; i++)
		for (int k = 0; k < 4; k++)
			hmm_tensor_free(g[i].t[k]);
	for (int k = 0; k < 4; k++)
		free(mem[k]);
	free(g);
	hmm_close(h);
	store_remove(store);
	free(ts);
	free(tq[0]);
	free(tq[1]);
	free(tc);
	return 0;
}

HMM_BENCH(offload, "offloaded AdamW step vs fio and in-memory floors",
	  bench_offload);
