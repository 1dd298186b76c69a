// SPDX-License-Identifier: MIT
/*
 * hmm-bench attn — FlashAttention-2 forward and backward (hk_attn.h) on
 * the CPU against the machine's FMA peak measured in the same run.
 *
 * FLOPs are counted the standard way (FlashAttention papers): forward
 * 4 * Nq * Nk * d per (batch, head) — two matmuls — halved when causal;
 * backward 2.5x the forward (five matmuls, S recomputed).  Exp, masking
 * and packing are not counted.  The peak is an AVX2 FMA loop (12
 * independent accumulators) on the same number of threads through the
 * same hk_parallel pool, run right after each forward and each backward
 * repetition for as long as that pass took (interleaved, medians
 * reported), so a busy machine takes the same share from both.
 *
 * --vs-torch times Debian's torch 1.13 (/usr/bin/python3) doing naive
 * attention at the same shape and threads: matmul, softmax, matmul, and
 * autograd for the backward (torch 1.13 has no fused SDPA), then times
 * ours again right after it; the speedup compares those adjacent medians.
 */
#include <errno.h>
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "hk.h"
#include "hk_attn.h"

#define PEAK_CHUNK 100000L	/* FMA loop iterations between clock reads */

struct opts {
	int B, H, N, d, threads, reps, json, vs_torch, causal;
};

/* One thread's FMA loop: runs until `secs` passed; flops counted. */
struct peak_part {
	double secs;
	double flops[64];
	float sink[64 * 16];
};

__attribute__((target("avx2,fma"))) static void fma_part(void *arg, int i,
							 int n)
{
	struct peak_part *pp = arg;
	__m256 a[12], m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
	double t0 = bench_now();
	long its = 0;

#pragma GCC unroll 12
	for (int k = 0; k < 12; k++)
		a[k] = _mm256_set1_ps((float)k);
	do {
		for (long it = 0; it < PEAK_CHUNK; it++)
#pragma GCC unroll 12
			for (int k = 0; k < 12; k++)
				a[k] = _mm256_fmadd_ps(a[k], m, c);
		its += PEAK_CHUNK;
	} while (bench_now() - t0 < pp->secs);
#pragma GCC unroll 12
	for (int k = 1; k < 12; k++)
		a[0] = _mm256_add_ps(a[0], a[k]);
	pp->sink[i * 16] = _mm256_cvtss_f32(a[0]);
	pp->flops[i] = its * 12.0 * 8 * 2;
}

/*
 * GFLOP/s of the FMA loop on every thread at once, run for as long as
 * the pass it is compared with (so both see the same share of a busy
 * machine).
 */
static double peak_gflops(int threads, double secs)
{
	struct peak_part pp = { .secs = secs > 0.02 ? secs : 0.02 };
	double t = bench_now(), f = 0;

	hk_parallel(threads, fma_part, &pp);
	t = bench_now() - t;
	for (int i = 0; i < threads; i++)
		f += pp.flops[i];
	return f / t * 1e-9;
}

static float *rnd(size_t n)
{
	float *x = malloc(n * sizeof(float));

	for (size_t i = 0; i < n && x; i++)
		x[i] = (float)((rand() / (double)RAND_MAX) * 2 - 1);
	return x;
}

/* Median seconds of torch's naive forward and backward; 0 on failure. */
static int torch_times(const struct opts *o, double *fwd, double *bwd)
{
	char cmd[2048];
	FILE *p;
	int n;

	snprintf(cmd, sizeof(cmd),
		"/usr/bin/python3 - <<'EOF' 2>/dev/null\n"
		"import torch, time, statistics\n"
		"torch.set_num_threads(%d)\n"
		"B,H,N,d,causal,reps = %d,%d,%d,%d,%d,%d\n"
		"q,k,v = (torch.randn(B,H,N,d, requires_grad=True) for _ in range(3))\n"
		"do = torch.randn(B,H,N,d)\n"
		"mask = torch.ones(N,N).triu(1).bool()\n"
		"def f():\n"
		"  s = q @ k.transpose(-1,-2) * d**-0.5\n"
		"  if causal: s = s.masked_fill(mask, float('-inf'))\n"
		"  return torch.softmax(s, -1) @ v\n"
		"tf, tb = [], []\n"
		"for r in range(reps + 1):\n"
		"  t = time.perf_counter()\n"
		"  with torch.no_grad(): f()\n"
		"  tf.append(time.perf_counter() - t)\n"
		"  o = f()\n"
		"  t = time.perf_counter()\n"
		"  o.backward(do)\n"
		"  tb.append(time.perf_counter() - t)\n"
		"print(statistics.median(tf[1:]), statistics.median(tb[1:]))\n"
		"EOF\n",
		o->threads, o->B, o->H, o->N, o->d, o->causal, o->reps);
	p = popen(cmd, "r");
	if (!p)
		return -errno;
	n = fscanf(p, "%lf %lf", fwd, bwd);
	pclose(p);
	return n == 2 ? 0 : -ENOENT;
}

static int run_shape(const struct opts *o)
{
	struct hk_attn a = { .B = o->B, .H = o->H, .Hkv = o->H, .Nq = o->N,
			     .Nk = o->N, .d = o->d, .causal = o->causal };
	size_t n = (size_t)o->B * o->H * o->N * o->d;
	float *q = rnd(n), *k = rnd(n), *v = rnd(n), *dout = rnd(n);
	float *out = malloc(n * 4), *dq = malloc(n * 4), *dk = malloc(n * 4);
	float *dv = malloc(n * 4), *lse = malloc((size_t)o->B * o->H * o->N * 4);
	double *tf = calloc(o->reps, 8), *tb = calloc(o->reps, 8);
	double *pf = calloc(o->reps, 8), *pb = calloc(o->reps, 8);
	double flop = 4.0 * o->N * o->N * o->d * o->B * o->H;
	double tor_f = 0, tor_b = 0, adj_f = 0, adj_b = 0;
	double med_t[2], med_p[2];
	const char *pass[2] = { "fwd", "bwd" };
	int r = 0;

	if (!q || !k || !v || !dout || !out || !dq || !dk || !dv || !lse ||
	    !tf || !tb || !pf || !pb) {
		fprintf(stderr, "hmm-bench attn: out of memory\n");
		r = 1;
		goto out;
	}
	if (o->causal)
		flop /= 2;
	hk_attn_fwd(&a, q, k, v, out, lse);	/* warm up */
	for (int i = 0; i < o->reps; i++) {
		double t = bench_now();

		hk_attn_fwd(&a, q, k, v, out, lse);
		tf[i] = bench_now() - t;
		pf[i] = peak_gflops(o->threads, tf[i]);
		t = bench_now();
		hk_attn_bwd(&a, q, k, v, out, lse, dout, dq, dk, dv);
		tb[i] = bench_now() - t;
		pb[i] = peak_gflops(o->threads, tb[i]);
	}
	med_t[0] = bench_median(tf, o->reps);
	med_t[1] = bench_median(tb, o->reps);
	med_p[0] = bench_median(pf, o->reps);
	med_p[1] = bench_median(pb, o->reps);
	if (o->vs_torch && torch_times(o, &tor_f, &tor_b)) {
		fprintf(stderr, "hmm-bench attn: torch (/usr/bin/python3) "
			"did not run; no speedup printed\n");
	} else if (o->vs_torch) {	/* ours again, right after torch */
		for (int i = 0; i < o->reps; i++) {
			double t = bench_now();

			hk_attn_fwd(&a, q, k, v, out, lse);
			pf[i] = bench_now() - t;
			t = bench_now();
			hk_attn_bwd(&a, q, k, v, out, lse, dout, dq, dk, dv);
			pb[i] = bench_now() - t;
		}
		adj_f = bench_median(pf, o->reps);
		adj_b = bench_median(pb, o->reps);
	}
	for (int p = 0; p < 2; p++) {
		double t = med_t[p], pk = med_p[p];
		double gf = flop * (p ? 2.5 : 1) / t * 1e-9;
		double tt = p ? tor_b : tor_f, adj = p ? adj_b : adj_f;

		if (o->json) {
			bench_json_begin(stdout, "attn");
			bench_json_str(stdout, "pass", pass[p]);
			bench_json_str(stdout, "isa", hk_attn_isa_name());
			bench_json_int(stdout, "threads", o->threads);
			bench_json_int(stdout, "B", o->B);
			bench_json_int(stdout, "H", o->H);
			bench_json_int(stdout, "N", o->N);
			bench_json_int(stdout, "d", o->d);
			bench_json_int(stdout, "causal", o->causal);
			bench_json_num(stdout, "seconds", t);
			bench_json_num(stdout, "gflops", gf);
			bench_json_num(stdout, "peak_gflops", pk);
			bench_json_num(stdout, "fraction", gf / pk);
			if (tt > 0) {
				bench_json_num(stdout, "torch_seconds", tt);
				bench_json_num(stdout, "ours_seconds_adjacent",
					       adj);
				bench_json_num(stdout, "speedup_vs_torch",
					       tt / adj);
			}
			bench_json_end(stdout);
		} else {
			printf("attn %s B=%d H=%d N=%d d=%d%s threads=%d %s: "
			       "%.4f s %.1f GFLOP/s, peak %.1f, fraction %.3f",
			       pass[p], o->B, o->H, o->N, o->d,
			       o->causal ? " causal" : "", o->threads,
			       hk_attn_isa_name(), t, gf, pk, gf / pk);
			if (tt > 0)
				printf(", torch %.4f s vs ours %.4f s right "
				       "after: speedup %.2fx", tt, adj, tt / adj);
			printf("\n");
		}
	}
out:
	free(q); free(k); free(v); free(dout); free(out); free(dq); free(dk);
	free(dv); free(lse); free(tf); free(tb); free(pf); free(pb);
	return r;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: hmm-bench attn [--B 1] [--H 8] [--N 2048] [--d 64|128]"
	       " [--causal]\n"
	       "                      [--threads N] [--reps 5] [--json] "
	       "[--vs-torch]\n"
	       "Without --d, runs d = 64 and d = 128.  Lines with "
	       "\"pass\":\"fwd\" and \"bwd\".\n");
}

static int bench_attn(int argc, char **argv)
{
	struct opts o = { .B = 1, .H = 8, .N = 2048, .d = 0,
			  .threads = hk_threads(), .reps = 5 };
	int ds[2] = { 64, 128 }, nd = 2, r = 0;

	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];
		int *dst = !strcmp(s, "--B") ? &o.B : !strcmp(s, "--H") ? &o.H :
			   !strcmp(s, "--N") ? &o.N : !strcmp(s, "--d") ? &o.d :
			   !strcmp(s, "--threads") ? &o.threads :
			   !strcmp(s, "--reps") ? &o.reps : NULL;

		if (dst && i + 1 < argc) {
			*dst = atoi(argv[++i]);
		} else if (!strcmp(s, "--json")) {
			o.json = 1;
		} else if (!strcmp(s, "--vs-torch")) {
			o.vs_torch = 1;
		} else if (!strcmp(s, "--causal")) {
			o.causal = 1;
		} else {
			usage(strcmp(s, "--help") ? stderr : stdout);
			return strcmp(s, "--help") ? 2 : 0;
		}
	}
	if (o.B < 1 || o.H < 1 || o.N < 1 || o.d < 0 || o.d > 256 ||
	    o.threads < 1 || o.reps < 1) {
		usage(stderr);
		return 2;
	}
	if (!hk_isa_supported(HK_ISA_AVX2)) {
		fprintf(stderr, "hmm-bench attn: the FMA peak needs AVX2\n");
		return 1;
	}
	hk_set_threads(o.threads);
	if (o.d) {
		ds[0] = o.d;
		nd = 1;
	}
	for (int i = 0; i < nd && !r; i++) {
		o.d = ds[i];
		r = run_shape(&o);
	}
	return r;
}

HMM_BENCH(attn, "FlashAttention-2 fwd/bwd vs the FMA peak (and torch)",
	  bench_attn);
