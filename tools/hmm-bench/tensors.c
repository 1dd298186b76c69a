// SPDX-License-Identifier: MIT
/*
 * hmm-bench tensors — a forward-then-backward layer trace over tensors
 * four times the host budget, replayed under three policies:
 *
 *   none   LRU eviction, no prefetch at all
 *   lru    LRU eviction, the trainer hints the next layer (hmm_prefetch)
 *   sched  the schedule-aware policy, no hints: it records the first step
 *
 * Each step maps every layer (READ) in order 0..L-1 then L-1..0 and
 * "computes" on it: a step's compute is compute_ratio x the step's I/O
 * floor (below), spread evenly over its 2L layer visits.  Reported per policy: stall_s (time maps waited),
 * store_read_bytes, total_s; and floor_s = the bytes that must move (the
 * reads of Belady's MIN on the same trace and budget, simulated here) /
 * the store's raw read bandwidth (store.h directly, registered pool
 * buffers, 16 in flight) measured in the same run, between policies.
 *
 * Targets: sched stall <= 0.2 x none stall, sched total <= 1.15 x floor.
 * Both can only hold for an I/O-bound trace whose compute is a little
 * under the floor: with compute c x floor, a perfect pipeline ends at
 * the floor with a stall of (1 - c) x floor, while no prefetch stalls
 * about a whole floor.  So the default compute_ratio is 0.9, calibrated
 * on the raw store bandwidth measured first (the median of five samples).
 * A compute above the floor makes total / floor > 1 by construction;
 * bound_s = max(floor, compute) and the ratio to it are reported too.
 * floor_s uses the raw store, so total / floor also shows what libhmm's
 * read path costs over the raw store.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "hmm.h"
#include "pool.h"
#include "store.h"

struct opts {
	int layers, steps, depth;
	int64_t layer_bytes, chunk;
	double compute_ratio;
	const char *store;
	const char *trace_dir;	/* --trace-dir: DIR/POLICY.json per run */
	char trace_tmp[3][4200];	/* written there, renamed when whole */
	int json;
	int reps;		/* interleaved repetitions (medians) */
};

#define MAXREP	9
#define CALIB	5	/* raw samples the compute is calibrated on */

static const char *const names[] = { "none", "lru", "sched" };

struct result {
	double stall_s, total_s, compute_s;
	uint64_t read_bytes, prefetch_hits;
};

/* The layers' bytes in whole chunks: what the store and budget hold. */
static uint64_t states(const struct opts *o)
{
	return (uint64_t)o->layers *
	       ((o->layer_bytes + o->chunk - 1) / o->chunk * o->chunk);
}

static int open_ctx(const struct opts *o, uint32_t policy, struct hmm **h,
		    struct hmm_tensor **ts, const char *trace)
{
	struct hmm_config cfg;
	char name[32];
	int64_t n = o->layer_bytes;
	int l, r;

	hmm_config_default(&cfg);
	cfg.store_path = o->store;
	cfg.store_size = hmm_store_required(states(o), (uint32_t)o->chunk);
	/* the raw measurement left a smaller store in the file: format it
	   at this size (hmm_open keeps an existing store's size) */
	cfg.flags = HMM_CONFIG_STORE_FORMAT;
	cfg.host_budget = states(o) / 4;	/* a layer at least: layers >= 4 */
	cfg.chunk_bytes = o->chunk;
	cfg.policy = policy;
	cfg.prefetch_depth = o->depth;
	cfg.trace_path = trace;	/* NULL: none */
	r = hmm_open(&cfg, h);
	if (r)
		return r;
	for (l = 0; l < o->layers; l++) {
		void *p;

		snprintf(name, sizeof(name), "layer%d", l);
		r = hmm_tensor_new(*h, name, HMM_DTYPE_U8, 1, &n, &ts[l]);
		if (!r)
			r = hmm_map(ts[l], 0, HMM_ALL, HMM_TIER_HOST,
				    HMM_DISCARD, &p);
		if (r)
			return r;
		memset(p, l + 1, n);
		hmm_unmap(ts[l], p);
	}
	for (l = 0; l < o->layers; l++)
		hmm_evict(ts[l], 0, HMM_ALL, HMM_TIER_HOST);
	return hmm_wait(*h, NULL);
}

/*
 * The store's own read bandwidth, the ceiling: the store used directly
 * (store.h) with buffers from its registered pool, 16 chunk reads in
 * flight, over a budget's worth of freshly written extents.
 */
#define RAW_QD	16
static void raw_done(struct hmm_io *io)
{
}

static double measure_raw(const struct opts *o)
{
	struct hmm_store_config sc = {
		.path = o->store,
		.queue_depth = 2 * RAW_QD, .pool_bytes = RAW_QD * o->chunk,
		.numa_node = -1,
		.flags = HMM_STORE_CREATE | HMM_STORE_TRUNCATE,
	};
	uint64_t n = states(o) / 4 / o->chunk, i;	/* at least 1 */
	struct hmm_io io[RAW_QD], *ios[RAW_QD];
	struct hmm_store *s;
	void *buf[RAW_QD];
	double t0 = 0, t1 = 1;
	int k;

	sc.size = hmm_store_required(n * o->chunk, (uint32_t)o->chunk);
	if (hmm_store_open(&sc, &s)) {
		fprintf(stderr, "hmm-bench tensors: %s\n", hmm_last_error());
		exit(1);
	}
	for (k = 0; k < RAW_QD; k++) {
		buf[k] = hmm_pool_alloc(hmm_store_pool(s), o->chunk);
		if (!buf[k])
			buf[k] = aligned_alloc(4096, o->chunk);
		memset(buf[k], k + 1, o->chunk);
		ios[k] = &io[k];
	}
	for (int pass = 0; pass < 2; pass++) {	/* write, then time reads */
		t0 = bench_now();
		for (i = 0; i < n; i += RAW_QD) {
			int m = n - i < RAW_QD ? n - i : RAW_QD;

			for (k = 0; k < m; k++) {
				memset(&io[k], 0, sizeof(io[k]));
				io[k].op = pass ? HMM_IO_READ : HMM_IO_WRITE;
				io[k].len = o->chunk;
				io[k].key = i + k;
				io[k].buf = buf[k];
				io[k].done = raw_done;
			}
			hmm_store_submit(s, ios, m);
			for (k = 0; k < m; k++)
				hmm_store_wait(s, &io[k]);
		}
		t1 = bench_now();
	}
	for (k = 0; k < RAW_QD; k++)
		if (hmm_pool_contains(hmm_store_pool(s), buf[k], o->chunk))
			hmm_pool_free(hmm_store_pool(s), buf[k]);
		else
			free(buf[k]);
	hmm_store_close(s);
	return (double)n * o->chunk / (t1 - t0);
}

/* Store read bandwidth through libhmm: prefetch a budget's worth. */
static double measure_bw(const struct opts *o)
{
	struct hmm_tensor **ts = calloc(o->layers, sizeof(*ts));
	struct hmm *h;
	double t0, t1;
	int l, n = o->layers / 4;

	if (open_ctx(o, HMM_POLICY_LRU, &h, ts, NULL)) {
		fprintf(stderr, "hmm-bench tensors: %s\n", hmm_last_error());
		exit(1);
	}
	t0 = bench_now();
	for (l = 0; l < n; l++)
		hmm_prefetch(ts[l], 0, HMM_ALL, HMM_TIER_HOST);
	hmm_wait(h, NULL);
	t1 = bench_now();
	hmm_close(h);
	free(ts);
	return (double)n * o->layer_bytes / (t1 - t0);
}

/*
 * The layer's compute: touch each page, then sleep the rest of secs, as
 * a GPU kernel would leave the CPU to the I/O thread (a spin would only
 * measure CPU contention on a small machine).
 */
static void compute(const uint8_t *p, int64_t n, double secs)
{
	double end = bench_now() + secs;
	volatile uint64_t s = 0;
	struct timespec ts;
	int64_t i;

	for (i = 0; i < n; i += 4096)
		s += p[i];
	ts.tv_sec = (time_t)end;
	ts.tv_nsec = (long)((end - ts.tv_sec) * 1e9);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
		;
}

static int run(const struct opts *o, int mode, double bw, struct result *res)
{
	struct hmm_tensor **ts = calloc(o->layers, sizeof(*ts));
	struct hmm_stats st0, st;
	double per_layer = o->compute_ratio * o->layer_bytes / bw, t0 = 0, tc;
	struct hmm *h;
	int s, i, r;

	r = open_ctx(o, mode == 2 ? HMM_POLICY_SCHEDULE : HMM_POLICY_LRU, &h,
		     ts, o->trace_dir ? o->trace_tmp[mode] : NULL);
	if (r)
		return r;
	memset(res, 0, sizeof(*res));
	for (s = 0; s <= o->steps; s++) {
		if (s == 1) {	/* step 0 is the warm-up (and the record) */
			hmm_stats(h, &st0);
			t0 = bench_now();
		}
		hmm_step_begin(h);
		for (i = 0; i < 2 * o->layers; i++) {
			int l = i < o->layers ? i : 2 * o->layers - 1 - i;
			int nx = i + 1 < 2 * o->layers ? (i + 1 < o->layers ?
				 i + 1 : 2 * o->layers - 2 - i) : 0;
			void *p;

			r = hmm_map(ts[l], 0, HMM_ALL, HMM_TIER_HOST, HMM_READ,
				    &p);
			if (r)
				goto out;
			if (mode == 1)
				hmm_prefetch(ts[nx], 0, HMM_ALL, HMM_TIER_HOST);
			tc = bench_now();
			compute(p, o->layer_bytes, per_layer);
			if (s)
				res->compute_s += bench_now() - tc;
			hmm_unmap(ts[l], p);
		}
		hmm_step_end(h);
	}
	res->total_s = bench_now() - t0;
	hmm_stats(h, &st);
	res->stall_s = st.tier[HMM_TIER_HOST].stall_s -
		       st0.tier[HMM_TIER_HOST].stall_s;
	res->read_bytes = st.tier[HMM_TIER_STORE].bytes_out -
			  st0.tier[HMM_TIER_STORE].bytes_out;
	res->prefetch_hits = st.prefetch_hits - st0.prefetch_hits;
out:
	hmm_close(h);
	free(ts);
	return r;
}

/* Reads of Belady's MIN per step on the same trace (chunks, steady state). */
static uint64_t belady_bytes(const struct opts *o)
{
	int cpl = (o->layer_bytes + o->chunk - 1) / o->chunk;
	int len = 2 * o->layers * cpl, cap = o->layers * cpl / 4;
	int total = o->layers * cpl, steps = 3, n = len * steps, i, j;
	int *seq = malloc(n * sizeof(int)), *res = calloc(total, sizeof(int));
	uint64_t misses = 0;
	int nres = 0;

	for (i = 0; i < n; i++) {
		int k = i % len, l = k / cpl, c = k % cpl;

		if (l >= o->layers)
			l = 2 * o->layers - 1 - l;
		seq[i] = l * cpl + c;
	}
	for (i = 0; i < n; i++) {
		if (res[seq[i]])
			continue;
		if (i >= len * (steps - 1))
			misses++;	/* count the last, steady step */
		if (nres == cap) {	/* evict the one used farthest */
			int victim = -1, far = -1;

			for (j = 0; j < total; j++) {
				int d;

				if (!res[j] || j == seq[i])
					continue;
				for (d = i + 1; d < n && seq[d] != j; d++)
					;
				if (d > far) {
					far = d;
					victim = j;
				}
			}
			res[victim] = 0;
			nres--;
		}
		res[seq[i]] = 1;
		nres++;
	}
	free(seq);
	free(res);
	return misses * (uint64_t)o->chunk;
}

/*
 * --trace-dir: DIR/POLICY.json are the user's names, so one already
 * there is refused unless --overwrite (exit 2, naming each); and each
 * trace is written to a temporary of ours beside it (a scratch file:
 * removed on every exit) and renamed over the name only once hmm_close
 * has written it whole, so that a run stopped at any point leaves the
 * old file, or none, never half a trace.
 */
static int trace_claim(struct opts *o, int overwrite)
{
	char path[4200];
	int m, bad = 0;

	for (m = 0; m < 3; m++) {
		snprintf(path, sizeof(path), "%s/%s.json", o->trace_dir,
			 names[m]);
		if (!overwrite && !access(path, F_OK)) {
			fprintf(stderr, "hmm-bench tensors: --trace-dir: %s "
				"exists; not overwritten (--overwrite replaces "
				"it)\n", path);
			bad = 2;
		}
	}
	for (m = 0; m < 3 && !bad; m++) {
		snprintf(o->trace_tmp[m], sizeof(o->trace_tmp[m]),
			 "%s/.%s.json.%d.tmp", o->trace_dir, names[m],
			 (int)getpid());
		if (bench_scratch_claim("tensors", o->trace_tmp[m]))
			bad = 1;
	}
	return bad;
}

/* A run's trace, whole: under its name. */
static int trace_keep(const struct opts *o, int m)
{
	char path[4200];

	if (!o->trace_dir)
		return 0;
	snprintf(path, sizeof(path), "%s/%s.json", o->trace_dir, names[m]);
	if (!rename(o->trace_tmp[m], path))
		return 0;
	fprintf(stderr, "hmm-bench tensors: --trace-dir: %s -> %s: %s\n",
		o->trace_tmp[m], path, strerror(errno));
	return 1;
}

static const char usage[] =
	"usage: hmm-bench tensors [--layers N] [--layer-size SIZE] "
	"[--chunk SIZE] [--steps N]\n"
	"  [--depth CHUNKS (0: libhmm's default)] [--compute-ratio R] "
	"[--store PATH [--overwrite]] [--reps N] [--json]\n"
	"  [--trace-dir DIR (Chrome traces DIR/POLICY.json, the last "
	"repetition's)]\n"
	"  PATH: made and removed at exit, or an empty file (emptied again); "
	"one holding\n  data or a device only with --overwrite, and then "
	"left formatted\n"
	"  layers 4..4096 (16), layer-size (8M), chunk a multiple of 4K (2M), "
	"steps 1..1000 (3),\n  depth 0..4096, compute-ratio 0..100 (0.9), "
	"reps 1..9 (3)\n";

static int bench_tensors(int argc, char **argv)
{
	struct opts o = { .layers = 16, .steps = 3, .layer_bytes = 8 << 20,
			  .chunk = 2 << 20, .compute_ratio = 0.9, .reps = 3 };
	struct result res[3], all[MAXREP][3];
	double bw[2 + 3 * MAXREP], raw[CALIB + 3 * MAXREP], v[CALIB];
	double bwm, bwc, rawc, rawm, floor_s, bound_s;
	char key[64], path[4200];
	int c, m, rep, nbw = 0, nraw = 0, overwrite = 0;
	uint64_t must;
	const struct bench_arg args[] = {
		{ "--layers", BA_INT, &o.layers, 4, 4096 },
		{ "--layer-size", BA_SIZE, &o.layer_bytes, 4096, 1ll << 40 },
		{ "--chunk", BA_SIZE, &o.chunk, 4096, 1 << 30, 4096 },
		{ "--steps", BA_INT, &o.steps, 1, 1000 },
		{ "--depth", BA_INT, &o.depth, 0, 4096 },
		{ "--compute-ratio", BA_NUM, &o.compute_ratio, 0, 100 },
		{ "--store", BA_STR, &o.store },
		{ "--overwrite", BA_FLAG, &overwrite },
		{ "--reps", BA_INT, &o.reps, 1, MAXREP },
		{ "--trace-dir", BA_STR, &o.trace_dir },
		{ "--json", BA_FLAG, &o.json },
		{ NULL }
	};

	bench_args("tensors", usage, argc, argv, args);
	if (o.trace_dir)
		bench_scratch_dir("--trace-dir", o.trace_dir);
	if (overwrite && !o.store && !o.trace_dir)
		bench_arg_bad("--overwrite", NULL, "only with --store or "
			      "--trace-dir");
	if (o.trace_dir && (c = trace_claim(&o, overwrite)))
		return c;
	if (o.store && (c = bench_user_file("tensors", "--store", o.store,
					    overwrite)))
		return c;
	if (!o.store) {		/* ours: removed on every exit */
		snprintf(path, sizeof(path), "%s/bench-tensors.store",
			 bench_scratch_dir(NULL, NULL));
		if (bench_scratch_claim("tensors", path))
			return 1;
		o.store = path;
	}
	for (c = 0; c < CALIB; c++)
		raw[nraw++] = measure_raw(&o);
	bw[nbw++] = measure_bw(&o);
	/* a step's compute = compute_ratio x its floor: as if every layer
	 * visit took its share of the floor at this bandwidth (the median
	 * of CALIB samples: one 32 MiB sample on a shared disk is noisy) */
	memcpy(v, raw, sizeof(*v) * CALIB);
	rawc = bench_median(v, CALIB);
	bwc = (double)o.layer_bytes * 2 * o.layers * rawc / belady_bytes(&o);
	for (rep = 0; rep < o.reps; rep++) {
		for (m = 0; m < 3; m++) {
			if (run(&o, m, bwc, &all[rep][m])) {
				fprintf(stderr, "hmm-bench tensors: %s: %s\n",
					names[m], hmm_last_error());
				return 1;
			}
			if (trace_keep(&o, m))
				return 1;
			bw[nbw++] = measure_bw(&o);
			raw[nraw++] = measure_raw(&o);
		}
	}
	for (m = 0; m < 3; m++) {	/* medians over the repetitions */
		double v[MAXREP];

#define MED(f) ({ for (rep = 0; rep < o.reps; rep++)			\
			  v[rep] = all[rep][m].f;			\
		  bench_median(v, o.reps); })
		res[m].stall_s = MED(stall_s);
		res[m].total_s = MED(total_s);
		res[m].compute_s = MED(compute_s);
		res[m].read_bytes = MED(read_bytes);
		res[m].prefetch_hits = MED(prefetch_hits);
#undef MED
	}
	bwm = bench_median(bw, nbw);
	rawm = bench_median(raw, nraw);
	must = belady_bytes(&o) * o.steps;
	floor_s = must / rawm;
	bound_s = floor_s > res[2].compute_s ? floor_s : res[2].compute_s;
	for (m = 0; m < 3; m++)
		printf("%-6s stall %.3f s  compute %.3f s  total %.3f s  store "
		       "read %llu MiB  prefetch hits %llu\n", names[m],
		       res[m].stall_s, res[m].compute_s, res[m].total_s,
		       (unsigned long long)res[m].read_bytes >> 20,
		       (unsigned long long)res[m].prefetch_hits);
	printf("store %.0f MiB/s raw, %.0f MiB/s through libhmm (medians of "
	       "%d and %d samples; medians of %d runs above); compute "
	       "calibrated on %.0f MiB/s\n", rawm / (1 << 20),
	       bwm / (1 << 20), nraw, nbw, o.reps, rawc / (1 << 20));
	printf("must move %llu MiB -> floor %.3f s, compute "
	       "%.3f s; sched stall / none %.3f, sched total / floor %.3f, "
	       "/ max(floor, compute) %.3f\n",
	       (unsigned long long)must >> 20, floor_s,
	       res[2].compute_s, res[2].stall_s / res[0].stall_s,
	       res[2].total_s / floor_s, res[2].total_s / bound_s);
	if (!o.json)
		return 0;
	bench_json_begin(stdout, "tensors");
	bench_json_int(stdout, "layers", o.layers);
	bench_json_int(stdout, "layer_bytes", o.layer_bytes);
	bench_json_int(stdout, "chunk_bytes", o.chunk);
	bench_json_int(stdout, "steps", o.steps);
	bench_json_int(stdout, "reps", o.reps);
	for (m = 0; m < 3; m++) {
		snprintf(key, sizeof(key), "%s_stall_s", names[m]);
		bench_json_num(stdout, key, res[m].stall_s);
		snprintf(key, sizeof(key), "%s_total_s", names[m]);
		bench_json_num(stdout, key, res[m].total_s);
		snprintf(key, sizeof(key), "%s_store_read_bytes", names[m]);
		bench_json_int(stdout, key, res[m].read_bytes);
	}
	bench_json_num(stdout, "compute_s", res[2].compute_s);
	bench_json_num(stdout, "store_bw_Bps", rawm);
	bench_json_num(stdout, "calib_bw_Bps", rawc);
	bench_json_num(stdout, "hmm_read_bw_Bps", bwm);
	bench_json_int(stdout, "must_move_bytes", must);
	bench_json_num(stdout, "floor_s", floor_s);
	bench_json_num(stdout, "sched_stall_over_none",
		       res[0].stall_s > 0 ? res[2].stall_s / res[0].stall_s : 0);
	bench_json_num(stdout, "sched_total_over_floor",
		       res[2].total_s / floor_s);
	bench_json_num(stdout, "bound_s", bound_s);
	bench_json_num(stdout, "sched_total_over_bound",
		       res[2].total_s / bound_s);
	bench_json_end(stdout);
	return 0;
}

HMM_BENCH(tensors, "layer trace under no-prefetch, LRU and schedule-aware",
	  bench_tensors);
