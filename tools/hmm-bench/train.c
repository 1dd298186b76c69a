// SPDX-License-Identifier: MIT
/*
 * hmm-bench train — the main job's cost of offloading: hmm-train's preset
 * with the host budget at a quarter of the training state (the store in
 * use) against the same preset with an unlimited budget (all in memory),
 * runs interleaved, medians of the runs' median step times.  Also the
 * tokens/s and the fraction of the machine's FMA peak (an AVX2 FMA loop
 * on every thread, measured between the runs) that the step's FLOPs
 * reach.  The runs are the hmm-train binary next to this one, so what is
 * measured is exactly what a user runs.
 *
 * Last line (--json): {"bench":"train",...,"offload_step_s","inmem_step_s",
 * "ratio","offload_stall_s" (seconds per step the offloaded run's maps
 * waited for the store: libhmm's stall_s over the steps),"tok_s",
 * "inmem_tok_s","gflops","peak_gflops","fraction",
 * "peak_rss_bytes","rss_limit_bytes"}.  Target: ratio <= 1.30, peak RSS
 * <= host budget + 128 MiB.
 *
 * --vs-torch: instead, hmm-train in memory against the same GPT in
 * PyTorch (train_torch.c) on the same threads: Debian's torch
 * (/usr/bin/python3) and the torch in a venv (a PyPI torch 2.x:
 * --torch-venv DIR, else $HMM_TORCH_VENV, else build/peers beside this
 * binary's folder when it has bin/python: scripts/peers.sh makes it; a
 * venv found rather than given that cannot run the model is left out,
 * saying why), interleaved rep by rep.  Last line (--json):
 * {"bench":"train_vs_torch",...,"tok_s_hmm","tok_s_torch",
 * "tok_s_torch_recompute" (medians over the reps),"ratio" (the median
 * of each rep's tok/s hmm / torch: a rep's runs are adjacent in time, so
 * their ratio sees the same load),"ratio_recompute", and with a venv
 * "torch2_version","tok_s_torch2","tok_s_torch2_recompute",
 * "ratio_torch2","ratio_torch2_recompute";
 * "load_before","load_after" (1-minute load averages)}.  Target: ratio
 * >= 1.2.
 */
#include <immintrin.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "hk.h"
#include "train_torch.h"

#define FMA_ITERS 3000000L

/* Ten independent FMA chains in registers (latency 4, 2 ports: 8+ hide
 * it); written out one by one so the compiler keeps them in registers. */
__attribute__((target("avx2,fma"))) static void fma_part(void *arg, int i,
							 int n)
{
	__m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
	__m256 a0 = _mm256_set1_ps(0), a1 = _mm256_set1_ps(1);
	__m256 a2 = _mm256_set1_ps(2), a3 = _mm256_set1_ps(3);
	__m256 a4 = _mm256_set1_ps(4), a5 = _mm256_set1_ps(5);
	__m256 a6 = _mm256_set1_ps(6), a7 = _mm256_set1_ps(7);
	__m256 a8 = _mm256_set1_ps(8), a9 = _mm256_set1_ps(9);
	float out[8];

	for (long it = 0; it < FMA_ITERS; it++) {
		a0 = _mm256_fmadd_ps(a0, m, c);
		a1 = _mm256_fmadd_ps(a1, m, c);
		a2 = _mm256_fmadd_ps(a2, m, c);
		a3 = _mm256_fmadd_ps(a3, m, c);
		a4 = _mm256_fmadd_ps(a4, m, c);
		a5 = _mm256_fmadd_ps(a5, m, c);
		a6 = _mm256_fmadd_ps(a6, m, c);
		a7 = _mm256_fmadd_ps(a7, m, c);
		a8 = _mm256_fmadd_ps(a8, m, c);
		a9 = _mm256_fmadd_ps(a9, m, c);
	}
	a0 = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1),
					 _mm256_add_ps(a2, a3)),
			   _mm256_add_ps(_mm256_add_ps(a4, a5),
					 _mm256_add_ps(_mm256_add_ps(a6, a7),
						       _mm256_add_ps(a8, a9))));
	_mm256_storeu_ps(out, a0);
	((float *)arg)[i] = out[0];
}

/* GFLOP/s of the FMA loop on every thread at once; 0 without AVX2. */
static double fma_peak(void)
{
	float sink[64];
	double t;
	int n = hk_threads();

	if (!hk_isa_supported(HK_ISA_AVX2))
		return 0;
	t = bench_now();
	hk_parallel(n, fma_part, sink);
	t = bench_now() - t;
	return n * FMA_ITERS * 10.0 * 8 * 2 / t / 1e9;
}

struct summary {
	double step_s, tok_s, flops, stall_s;
	int64_t rss, budget, state, rd, wr;
	struct torch_gpt shape;
};

static double num(const char *line, const char *key)
{
	char k[64];
	const char *p;

	snprintf(k, sizeof(k), "\"%s\":", key);
	p = strstr(line, k);
	return p ? strtod(p + strlen(k), NULL) : -1;
}

/* Run hmm-train with args; parse its summary line.  0 or -1. */
static int run_train(const char *bin, const char *args, struct summary *s)
{
	char cmd[PATH_MAX + 512], line[4096], last[4096] = "";
	FILE *p;

	snprintf(cmd, sizeof(cmd), "'%s' --json %s 2>&1", bin, args);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p))
		if (strstr(line, "\"summary\":true"))
			snprintf(last, sizeof(last), "%s", line);
		else if (line[0] != '{')
			fprintf(stderr, "hmm-train: %s", line);
	if (pclose(p) != 0 || !last[0]) {
		fprintf(stderr, "hmm-bench train: %s failed\n", cmd);
		return -1;
	}
	s->step_s = num(last, "step_s_median");
	s->tok_s = num(last, "tok_s");
	s->flops = num(last, "step_flops");
	s->rss = num(last, "peak_rss_bytes");
	s->budget = num(last, "host_budget");
	s->state = num(last, "state_bytes");
	s->rd = num(last, "store_read_bytes");
	s->wr = num(last, "store_write_bytes");
	s->stall_s = num(last, "stall_s");
	s->shape = (struct torch_gpt){ num(last, "vocab"), num(last, "ctx"),
				       num(last, "d"), num(last, "heads"),
				       num(last, "layers"), num(last, "batch"),
				       num(last, "threads") };
	return 0;
}

static void sibling(char *buf, size_t cap)
{
	ssize_t n = readlink("/proc/self/exe", buf, cap - 16);
	char *slash;

	buf[n > 0 ? n : 0] = 0;
	slash = strrchr(buf, '/');
	snprintf(slash ? slash + 1 : buf, cap - (slash ? slash + 1 - buf : 0),
		 "hmm-train");
}

/* build/peers beside bin's folder (build/bin), if it has bin/python. */
static int peers_venv(const char *bin, char *buf, size_t cap)
{
	const char *slash = strrchr(bin, '/');
	char py[2 * PATH_MAX];

	if (!slash)
		return 0;
	snprintf(buf, cap, "%.*s/../peers", (int)(slash - bin), bin);
	snprintf(py, sizeof(py), "%s/bin/python", buf);
	return !access(py, X_OK);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: hmm-bench train [--preset NAME] [--steps N] "
		"[--reps N] [--batch N] [--store PATH] [--json]\n"
		"       hmm-bench train --vs-torch [--torch-venv DIR] [--preset "
		"NAME] [--steps N] [--reps N] [--batch N] [--json]\n"
		"  default preset at a quarter host budget vs unlimited, "
		"interleaved (default: 10 steps, 3 reps);\n"
		"  --vs-torch: in memory vs the same GPT in Debian's torch "
		"(and DIR/bin/python's)\n");
}

static double loadavg(void)
{
	double l = -1;
	FILE *f = fopen("/proc/loadavg", "r");

	if (f) {
		if (fscanf(f, "%lf", &l) != 1)
			l = -1;
		fclose(f);
	}
	return l;
}

#define TORCH_MAX 2

/* hmm-train in memory vs torch, rep by rep; see the head comment. */
static int vs_torch(const char *bin, const char *args, int steps, int reps,
		    const char *venv, int found, int json)
{
	const char *py[TORCH_MAX] = { "/usr/bin/python3", NULL };
	const char *key[TORCH_MAX] = { "torch", "torch2" };
	char vpy[PATH_MAX + 16], ver[TORCH_MAX][32] = { "", "" };
	double hmm[16], tt[TORCH_MAX][16], tr[TORCH_MAX][16];
	double q[TORCH_MAX][16], q_r[TORCH_MAX][16];	/* per-rep ratios */
	double l0 = loadavg(), th, t[TORCH_MAX], t_r[TORCH_MAX];
	double rq[TORCH_MAX], rq_r[TORCH_MAX];
	struct summary m = { 0 };
	int np = 1;

	if (venv) {
		snprintf(vpy, sizeof(vpy), "%s/bin/python", venv);
		py[np++] = vpy;
	}
	for (int r = 0; r < reps; r++) {
		if (run_train(bin, args, &m))
			return 1;
		hmm[r] = m.shape.batch * m.shape.ctx / m.step_s;
		for (int k = 0; k < np; k++) {
			struct torch_gpt_result res;

			if (torch_gpt_run(py[k], &m.shape, steps, &res)) {
				fprintf(stderr, "hmm-bench train: %s could not "
					"run the model with torch%s\n", py[k],
					k && found && !r ? "; left out" : "");
				if (k && found && !r) {
					np = 1;
					break;
				}
				return 1;
			}
			snprintf(ver[k], sizeof(ver[k]), "%s", res.version);
			tt[k][r] = res.tok_s, tr[k][r] = res.tok_s_recompute;
			q[k][r] = hmm[r] / res.tok_s;
			q_r[k][r] = hmm[r] / res.tok_s_recompute;
		}
		if (!json) {
			printf("rep %d: hmm-train %.1f tok/s", r + 1, hmm[r]);
			for (int k = 0; k < np; k++)
				printf(", torch %s %.1f (recomputing %.1f)",
				       ver[k], tt[k][r], tr[k][r]);
			printf(" (%d threads)\n", m.shape.threads);
		}
	}
	th = bench_median(hmm, reps);
	for (int k = 0; k < np; k++) {
		t[k] = bench_median(tt[k], reps);
		t_r[k] = bench_median(tr[k], reps);
		rq[k] = bench_median(q[k], reps);
		rq_r[k] = bench_median(q_r[k], reps);
		if (!json)
			printf("hmm-train %.1f tok/s vs torch %s %.1f: ratio %.2f "
			       "(target >= 1.2); vs torch recomputing blocks "
			       "%.1f: %.2f\n", th, ver[k], t[k], rq[k],
			       t_r[k], rq_r[k]);
	}
	bench_json_begin(stdout, "train_vs_torch");
	bench_json_int(stdout, "threads", m.shape.threads);
	bench_json_int(stdout, "steps", steps);
	bench_json_int(stdout, "reps", reps);
	bench_json_num(stdout, "tok_s_hmm", th);
	for (int k = 0; k < np; k++) {
		char f[64];

		snprintf(f, sizeof(f), "%s_version", key[k]);
		bench_json_str(stdout, f, ver[k]);
		snprintf(f, sizeof(f), "tok_s_%s", key[k]);
		bench_json_num(stdout, f, t[k]);
		snprintf(f, sizeof(f), "tok_s_%s_recompute", key[k]);
		bench_json_num(stdout, f, t_r[k]);
		snprintf(f, sizeof(f), "ratio%s", k ? "_torch2" : "");
		bench_json_num(stdout, f, rq[k]);
		snprintf(f, sizeof(f), "ratio%s_recompute", k ? "_torch2" : "");
		bench_json_num(stdout, f, rq_r[k]);
	}
	bench_json_num(stdout, "load_before", l0);
	bench_json_num(stdout, "load_after", loadavg());
	bench_json_end(stdout);
	return 0;
}

static int bench_train(int argc, char **argv)
{
	const char *preset = "default", *store = NULL, *venv = NULL;
	int steps = 10, reps = 3, json = 0, batch = 0, torch = 0;
	double off[16], mem[16], otok[16], mtok[16], ostall[16], peak = 0;
	struct summary o = { 0 }, m = { 0 };
	int64_t rss = 0;
	char bin[PATH_MAX], a_off[PATH_MAX + 256], a_mem[160], peers[PATH_MAX];
	int found = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else if (!strcmp(argv[i], "--preset") && i + 1 < argc)
			preset = argv[++i];
		else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
			steps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
			reps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--store") && i + 1 < argc)
			store = argv[++i];
		else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
			batch = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--vs-torch"))
			torch = 1;
		else if (!strcmp(argv[i], "--torch-venv") && i + 1 < argc)
			venv = argv[++i];
		else {
			usage(strcmp(argv[i], "--help") ? stderr : stdout);
			return strcmp(argv[i], "--help") ? 2 : 0;
		}
	}
	if (steps < 2 || reps < 1 || reps > 16 || (venv && !torch)) {
		usage(stderr);
		return 2;
	}
	sibling(bin, sizeof(bin));
	if (access(bin, X_OK)) {
		fprintf(stderr, "hmm-bench train: %s not found (make)\n", bin);
		return 1;
	}
	snprintf(a_mem, sizeof(a_mem), "--preset %s --steps %d", preset, steps);
	if (batch > 0)
		snprintf(a_mem + strlen(a_mem), sizeof(a_mem) - strlen(a_mem),
			 " --batch %d", batch);
	snprintf(a_off, sizeof(a_off), "%s%s%s", a_mem, store ? " --store " : "",
		 store ? store : "");
	strcat(a_mem, " --host-budget 1T");
	if (torch && !venv)
		venv = getenv("HMM_TORCH_VENV");
	if (torch && !venv && peers_venv(bin, peers, sizeof(peers)))
		venv = peers, found = 1;
	if (torch)
		return vs_torch(bin, a_mem, steps, reps, venv, found, json);
	for (int r = 0; r < reps; r++) {
		double p = fma_peak();

		peak = p > peak ? p : peak;
		if (run_train(bin, a_mem, &m) || run_train(bin, a_off, &o))
			return 1;
		mem[r] = m.step_s, mtok[r] = m.tok_s;
		off[r] = o.step_s, otok[r] = o.tok_s;
		ostall[r] = o.stall_s / steps;
		rss = o.rss > rss ? o.rss : rss;
		if (!json)
			printf("rep %d: in memory %.3f s/step, offloaded %.3f "
			       "s/step (store read %.1f MiB, written %.1f MiB), "
			       "FMA peak %.1f GFLOP/s\n", r + 1, m.step_s,
			       o.step_s, o.rd / 1048576.0, o.wr / 1048576.0, p);
	}
	{
		double os = bench_median(off, reps), ms = bench_median(mem, reps);
		double gf = o.flops / ms / 1e9, ogf = o.flops / os / 1e9;
		FILE *f = stdout;

		if (!json)
			printf("offloaded %.3f s/step vs in memory %.3f: ratio %.3f "
			       "(target <= 1.30); in memory %.1f GFLOP/s = %.2f of FMA peak "
			       "%.1f; peak RSS %.1f MiB (limit %.1f)\n", os, ms,
			       os / ms, gf, peak > 0 ? gf / peak : 0, peak,
			       rss / 1048576.0,
			       (o.budget + (128 << 20)) / 1048576.0);
		bench_json_begin(f, "train");
		bench_json_str(f, "preset", preset);
		bench_json_int(f, "steps", steps);
		bench_json_int(f, "reps", reps);
		bench_json_num(f, "offload_step_s", os);
		bench_json_num(f, "inmem_step_s", ms);
		bench_json_num(f, "ratio", os / ms);
		bench_json_num(f, "offload_stall_s", bench_median(ostall, reps));
		bench_json_num(f, "tok_s", bench_median(otok, reps));
		bench_json_num(f, "inmem_tok_s", bench_median(mtok, reps));
		bench_json_num(f, "step_flops", o.flops);
		bench_json_num(f, "gflops", gf);
		bench_json_num(f, "offload_gflops", ogf);
		bench_json_num(f, "peak_gflops", peak);
		bench_json_num(f, "fraction", peak > 0 ? gf / peak : 0);
		bench_json_num(f, "offload_fraction", peak > 0 ? ogf / peak : 0);
		bench_json_int(f, "host_budget", o.budget);
		bench_json_int(f, "state_bytes", o.state);
		bench_json_int(f, "store_read_bytes", o.rd);
		bench_json_int(f, "store_write_bytes", o.wr);
		bench_json_int(f, "peak_rss_bytes", rss);
		bench_json_int(f, "rss_limit_bytes", o.budget + (128 << 20));
		bench_json_end(f);
	}
	return 0;
}

HMM_BENCH(train, "hmm-train: quarter host budget vs in memory", bench_train);
