// SPDX-License-Identifier: MIT
/*
 * hmm-bench train — the main job's cost of offloading: hmm-train's preset
 * with the host budget at a quarter of the training state (the store in
 * use) against the same preset with an unlimited budget (all in memory),
 * runs interleaved, medians of the runs' median step times.  Also the
 * tokens/s and the fraction of the machine's FMA peak (the faster of an
 * AVX2 and an AVX-512 FMA loop on every thread, measured between the runs) that the step's FLOPs
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
#include <errno.h>
#include <immintrin.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "hk.h"
#include "train_run.h"
#include "train_torch.h"

#define FMA_ITERS 3000000L

/* Ten independent FMA chains in registers (latency 4, 2 ports: 8+ hide
 * it); written out one by one so the compiler keeps them in registers.
 * One loop per vector width: T the type, P the intrinsics' prefix. */
#define FMA_PART(name, isa, T, P, lanes)                                    \
	__attribute__((target(isa))) static void name(void *arg, int i,     \
						      int n)                \
	{                                                                   \
		T m = P##_set1_ps(0.999999f), c = P##_set1_ps(1e-6f);       \
		T a0 = P##_set1_ps(0), a1 = P##_set1_ps(1);                 \
		T a2 = P##_set1_ps(2), a3 = P##_set1_ps(3);                 \
		T a4 = P##_set1_ps(4), a5 = P##_set1_ps(5);                 \
		T a6 = P##_set1_ps(6), a7 = P##_set1_ps(7);                 \
		T a8 = P##_set1_ps(8), a9 = P##_set1_ps(9);                 \
		float out[lanes];                                           \
									    \
		for (long it = 0; it < FMA_ITERS; it++) {                   \
			a0 = P##_fmadd_ps(a0, m, c);                        \
			a1 = P##_fmadd_ps(a1, m, c);                        \
			a2 = P##_fmadd_ps(a2, m, c);                        \
			a3 = P##_fmadd_ps(a3, m, c);                        \
			a4 = P##_fmadd_ps(a4, m, c);                        \
			a5 = P##_fmadd_ps(a5, m, c);                        \
			a6 = P##_fmadd_ps(a6, m, c);                        \
			a7 = P##_fmadd_ps(a7, m, c);                        \
			a8 = P##_fmadd_ps(a8, m, c);                        \
			a9 = P##_fmadd_ps(a9, m, c);                        \
		}                                                           \
		a0 = P##_add_ps(P##_add_ps(P##_add_ps(a0, a1),              \
					   P##_add_ps(a2, a3)),             \
				P##_add_ps(P##_add_ps(a4, a5),              \
					   P##_add_ps(P##_add_ps(a6, a7),   \
						      P##_add_ps(a8, a9))));\
		P##_storeu_ps(out, a0);                                     \
		((float *)arg)[i] = out[0];                                 \
	}

FMA_PART(fma_part_avx2, "avx2,fma", __m256, _mm256, 8)
FMA_PART(fma_part_avx512, "avx512f", __m512, _mm512, 16)

/* GFLOP/s of one FMA loop on every thread at once. */
static double fma_rate(void (*part)(void *, int, int), int lanes)
{
	float sink[64];
	double t;
	int n = hk_threads();

	t = bench_now();
	hk_parallel(n, part, sink);
	t = bench_now() - t;
	return n * FMA_ITERS * 10.0 * lanes * 2 / t / 1e9;
}

/* The best of the AVX2 and AVX-512 FMA loops the CPU runs (a kernel may
 * use either, so the peak is the faster); 0 without AVX2. */
static double fma_peak(void)
{
	double p = 0, q;

	if (hk_isa_supported(HK_ISA_AVX2))
		p = fma_rate(fma_part_avx2, 8);
	if (hk_isa_supported(HK_ISA_AVX512) &&
	    (q = fma_rate(fma_part_avx512, 16)) > p)
		p = q;
	return p;
}

static const char usage[] =
	"usage: hmm-bench train [--preset NAME] [--steps N] [--reps N] "
	"[--batch N] [--store PATH] [--json]\n"
	"       hmm-bench train --vs-torch [--torch-venv DIR] [--preset "
	"NAME] [--steps N] [--reps N] [--batch N] [--json]\n"
	"  default preset at a quarter host budget vs unlimited, "
	"interleaved (default: 10 steps, 2..100000; 3 reps, 1..16);\n"
	"  --vs-torch: in memory vs the same GPT in Debian's torch "
	"(and DIR/bin/python's)\n";

/* The basics of --store, checked before anything runs: its folder is
 * one hmm-train can make the file in.  What the file holds hmm-train
 * judges (exit 2, passed on by run_train). */
static void store_dir_check(const char *store)
{
	char dir[PATH_MAX], why[PATH_MAX + 64];
	const char *slash = strrchr(store, '/');
	struct stat st;

	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - store) +
		 (slash == store) : 1, slash ? store : ".");
	if (stat(dir, &st))
		snprintf(why, sizeof(why), "%s: %s", dir, strerror(errno));
	else if (!S_ISDIR(st.st_mode))
		snprintf(why, sizeof(why), "%s: not a folder", dir);
	else
		return;
	bench_arg_bad("--store", store, why);
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
static int vs_torch(const char *bin, const char *const args[], int steps,
		    int reps, const char *vpy, int found, int json)
{
	const char *py[TORCH_MAX] = { "/usr/bin/python3", NULL };
	const char *key[TORCH_MAX] = { "torch", "torch2" };
	char ver[TORCH_MAX][32] = { "", "" };
	double hmm[16], tt[TORCH_MAX][16], tr[TORCH_MAX][16];
	double q[TORCH_MAX][16], q_r[TORCH_MAX][16];	/* per-rep ratios */
	double l0 = loadavg(), th, t[TORCH_MAX], t_r[TORCH_MAX];
	double rq[TORCH_MAX], rq_r[TORCH_MAX];
	struct summary m = { 0 };
	int np = 1;

	if (vpy)
		py[np++] = vpy;
	for (int r = 0, e; r < reps; r++) {
		if ((e = run_train(bin, args, NULL, &m)))
			return e == 2 ? 2 : 1;
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
	char bin[PATH_MAX], vpy[PATH_MAX + 16], nsteps[16], nbatch[16];
	char mine[PATH_MAX + 32];	/* our store, without --store */
	const char *a_mem[9] = { NULL }, *a_off[9] = { NULL };
	int found = 0, e;
	const struct bench_arg args[] = {
		{ "--preset", BA_STR, &preset },
		{ "--steps", BA_INT, &steps, 2, 100000 },
		{ "--reps", BA_INT, &reps, 1, 16 },
		{ "--batch", BA_INT, &batch, 1, 4096 },
		{ "--store", BA_STR, &store },
		{ "--vs-torch", BA_FLAG, &torch },
		{ "--torch-venv", BA_STR, &venv },
		{ "--json", BA_FLAG, &json },
		{ NULL }
	};

	bench_args("train", usage, argc, argv, args);
	/* hmm-train's list, not a preset: it printed the list on stderr
	   and the run failed "without its summary", exit 1 */
	if (!strcmp(preset, "list"))
		bench_arg_bad("--preset", preset, "want a preset's name "
			      "(hmm-train --preset list lists them)");
	if (venv && !torch)
		bench_arg_bad("--torch-venv", venv, "only with --vs-torch");
	if (store && torch)	/* --vs-torch runs in memory only */
		bench_arg_bad("--store", store, "not with --vs-torch");
	if (store)		/* before the in-memory run, which has none */
		store_dir_check(store);
	sibling(bin, sizeof(bin));
	if (access(bin, X_OK)) {
		fprintf(stderr, "hmm-bench train: %s not found (make)\n", bin);
		return 1;
	}
	/* the same arguments, then in memory or with the store */
	snprintf(nsteps, sizeof(nsteps), "%d", steps);
	snprintf(nbatch, sizeof(nbatch), "%d", batch);
	{
		const char *common[] = { "--preset", preset, "--steps", nsteps,
					 "--batch", nbatch };
		int nc = batch > 0 ? 6 : 4;

		for (int i = 0; i < nc; i++)
			a_mem[i] = a_off[i] = common[i];
		a_mem[nc] = "--host-budget";
		a_mem[nc + 1] = "1T";
		a_off[nc] = store ? "--store" : NULL;
		a_off[nc + 1] = store;
	}
	/* without --store, ours in the scratch folder (the man page's
	 * rule), not hmm-train's default place: build/tmp by the working
	 * folder, else $TMPDIR or /var/tmp, whatever $HMM_TEST_DIR says */
	if (!store && !torch)
		snprintf(mine, sizeof(mine), "%s/hmm-bench-train.store",
			 bench_scratch_dir(NULL, NULL));
	if (torch) {
		found = torch_venv_python(venv, vpy, sizeof(vpy));
		return vs_torch(bin, a_mem, steps, reps, found ? vpy : NULL,
				found == 1, json);
	}
	for (int r = 0; r < reps; r++) {
		double p = fma_peak();

		peak = p > peak ? p : peak;
		if ((e = run_train(bin, a_mem, NULL, &m)) ||
		    (e = run_train(bin, a_off, store ? NULL : mine, &o)))
			return e == 2 ? 2 : 1;
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
