// SPDX-License-Identifier: MIT
/*
 * hmm-bench attn — FlashAttention-2 forward and backward (hk_attn.h) on
 * the CPU, fp32 and bf16, against the machine's peak measured in the
 * same run.
 *
 * FLOPs are counted the standard way (FlashAttention papers): forward
 * 4 * Nq * Nk * d per (batch, head) — two matmuls — halved when causal;
 * backward 2.5x the forward (five matmuls, S recomputed).  Exp, masking
 * and packing are not counted.
 *
 * The peak is that of the instructions the pass's products run on,
 * measured, never taken from a data sheet: a loop of independent
 * multiply-adds with no memory operands, on the same number of threads
 * through the same hk_parallel pool, run right after each pass for as
 * long as that pass took (so a busy machine takes the same share from
 * both), medians reported:
 *	avx2 and scalar paths	12 chains of vfmadd132ps ymm (16 flop each)
 *	avx512			12 chains of vfmadd132ps zmm (32 flop each)
 *	amx (bf16)		tdpbf16ps into 4 tiles from 4 (16 x 16 x 32,
 *				16384 flop each)
 *	avx512bf16 (bf16)	12 chains of vdpbf16ps zmm (64 flop each)
 * (the FMA form is gcc's choice; any of 132/213/231 is the same
 * instruction on the same ports).  The scalar path multiplies with mulss
 * and addss, so against the AVX2 loop it shows the machine's peak, not
 * its own instructions' (an eighth of that).  JSON says which ("peak"),
 * how ("peak_method") and what was counted ("flop", "flop_formula").  Each repetition runs fp32 then bf16 (or the
 * one --dtype names), forward then backward, each followed by its peak
 * loop; bf16_vs_f32 is the median over repetitions of t_f32 / t_bf16.
 *
 * --vs-torch times Debian's torch 1.13 (/usr/bin/python3) doing naive
 * fp32 attention at the same shape and threads: matmul, softmax, matmul,
 * and autograd for the backward (torch 1.13 has no fused SDPA), then
 * times ours (fp32) again right after it; the speedup compares those
 * adjacent medians.
 */
#include <errno.h>
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "hk.h"
#include "hk_attn.h"
#include "hk_adamw.h"	/* hk_bf16_from_f32 */

#define PEAK_CHUNK 100000L	/* FMA loop iterations between clock reads */

struct opts {
	int B, H, N, d, threads, reps, json, vs_torch, causal;
	int dtypes[2], ndtypes;
};

/* One thread's loop: runs until `secs` passed; flops counted. */
struct peak_part {
	double secs;
	int kind;		/* PEAK_* */
	double flops[64];
	float sink[64 * 16];
};

enum { PEAK_AVX2, PEAK_AVX512, PEAK_AMX, PEAK_DPBF16 };

/* How every peak is had (JSON "peak_method", --help). */
static const char peak_method[] =
	"measured, not from a data sheet: the loop named in \"peak\" "
	"(independent multiply-adds, no memory operands) on the same threads "
	"through hk_parallel, run right after each pass for as long as it took; "
	"GFLOP/s = flop the loop did / its wall time; medians over repetitions";
/* The FLOP count the GFLOP/s are of (JSON "flop_formula"). */
static const char *const flop_formula[2] = {
	"4 B H N^2 d (QK^T and PV, 2 flop per multiply-add), /2 when causal",
	"10 B H N^2 d = 2.5x forward (QK^T recomputed, dV, dP, dQ, dK), "
	"/2 when causal",
};

static const char *const peak_what[] = {
	"avx2 fma: 12 independent chains of vfmadd132ps ymm, 16 flop each",
	"avx512 fma: 12 independent chains of vfmadd132ps zmm, 32 flop each",
	"amx: tdpbf16ps 16x16x32 into 4 tiles, 16384 flop each",
	"avx512bf16: 12 independent chains of vdpbf16ps zmm, 64 flop each",
};

__attribute__((target("avx2,fma"))) static double fma_avx2(double secs,
							  float *sink)
{
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
	} while (bench_now() - t0 < secs);
#pragma GCC unroll 12
	for (int k = 1; k < 12; k++)
		a[0] = _mm256_add_ps(a[0], a[k]);
	*sink = _mm256_cvtss_f32(a[0]);
	return its * 12.0 * 8 * 2;
}

__attribute__((target("avx512f"))) static double fma_avx512(double secs,
							     float *sink)
{
	__m512 a[12], m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
	double t0 = bench_now();
	long its = 0;

#pragma GCC unroll 12
	for (int k = 0; k < 12; k++)
		a[k] = _mm512_set1_ps((float)k);
	do {
		for (long it = 0; it < PEAK_CHUNK; it++)
#pragma GCC unroll 12
			for (int k = 0; k < 12; k++)
				a[k] = _mm512_fmadd_ps(a[k], m, c);
		its += PEAK_CHUNK;
	} while (bench_now() - t0 < secs);
#pragma GCC unroll 12
	for (int k = 1; k < 12; k++)
		a[0] = _mm512_add_ps(a[0], a[k]);
	*sink = _mm512_reduce_add_ps(a[0]);
	return its * 12.0 * 16 * 2;
}

/* 16 lanes x 2 bf16 products a vdpbf16ps: 1.0 x 2^-20 added each time. */
__attribute__((target("avx512f,avx512bf16"))) static double
dpbf16_loop(double secs, float *sink)
{
	__m512 a[12];
	__m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80);
	__m512bh y = (__m512bh)_mm512_set1_epi32(0x35803580);
	double t0 = bench_now();
	long its = 0;

#pragma GCC unroll 12
	for (int k = 0; k < 12; k++)
		a[k] = _mm512_set1_ps((float)k);
	do {
		for (long it = 0; it < PEAK_CHUNK; it++)
#pragma GCC unroll 12
			for (int k = 0; k < 12; k++)
				a[k] = _mm512_dpbf16_ps(a[k], x, y);
		its += PEAK_CHUNK;
	} while (bench_now() - t0 < secs);
#pragma GCC unroll 12
	for (int k = 1; k < 12; k++)
		a[0] = _mm512_add_ps(a[0], a[k]);
	*sink = _mm512_reduce_add_ps(a[0]);
	return its * 12.0 * 16 * 2 * 2;
}

struct tilecfg {
	uint8_t palette, start, rsv[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};

/* Tiles 4..7 hold bf16 1.0; 0..3 accumulate (C += A B, 2 x 2 blocks). */
__attribute__((target("amx-tile,amx-bf16"))) static double
amx_loop(double secs, float *sink)
{
	static const uint16_t ones[16 * 32] __attribute__((aligned(64))) = {
		[0 ... 16 * 32 - 1] = 0x3f80 };
	struct tilecfg cfg = { .palette = 1 };
	float out[16 * 16];
	double t0 = bench_now();
	long its = 0;

	for (int t = 0; t < 8; t++) {
		cfg.colsb[t] = 64;
		cfg.rows[t] = 16;
	}
	_tile_loadconfig(&cfg);
	_tile_zero(0);
	_tile_zero(1);
	_tile_zero(2);
	_tile_zero(3);
	_tile_loadd(4, ones, 64);
	_tile_loadd(5, ones, 64);
	_tile_loadd(6, ones, 64);
	_tile_loadd(7, ones, 64);
	do {
		for (long it = 0; it < PEAK_CHUNK / 100; it++) {
			_tile_dpbf16ps(0, 4, 6);
			_tile_dpbf16ps(1, 4, 7);
			_tile_dpbf16ps(2, 5, 6);
			_tile_dpbf16ps(3, 5, 7);
		}
		its += PEAK_CHUNK / 100;
	} while (bench_now() - t0 < secs);
	_tile_stored(0, out, 64);
	_tile_release();
	*sink = out[0];
	return its * 4.0 * 16 * 16 * 32 * 2;
}

static void peak_part_fn(void *arg, int i, int n)
{
	struct peak_part *pp = arg;
	float *sink = &pp->sink[i * 16];

	pp->flops[i] = pp->kind == PEAK_AMX ? amx_loop(pp->secs, sink) :
		       pp->kind == PEAK_DPBF16 ? dpbf16_loop(pp->secs, sink) :
		       pp->kind == PEAK_AVX512 ? fma_avx512(pp->secs, sink) :
		       fma_avx2(pp->secs, sink);
}

/* The peak loop for the path the calls of dtype take now. */
static int peak_kind(int dtype)
{
	const char *isa = hk_attn_isa_name(dtype);

	return !strcmp(isa, "amx") ? PEAK_AMX :
	       !strcmp(isa, "avx512bf16") ? PEAK_DPBF16 :
	       !strcmp(isa, "avx512") ? PEAK_AVX512 : PEAK_AVX2;
}

/*
 * GFLOP/s of the peak loop on every thread at once, run for as long as
 * the pass it is compared with.
 */
static double peak_gflops(int kind, int threads, double secs)
{
	struct peak_part pp = { .secs = secs > 0.02 ? secs : 0.02,
				.kind = kind };
	double t = bench_now(), f = 0;

	hk_parallel(threads, peak_part_fn, &pp);
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

/* One dtype's tensors: inputs q, k, v, dout; outputs o, lse, dq, dk, dv. */
struct tensors {
	void *q, *k, *v, *dout, *o, *dq, *dk, *dv;
	float *lse;
};

static void *as_dtype(const float *x, size_t n, int dtype)
{
	uint16_t *h;

	if (dtype == HK_F32)
		return (void *)x;
	h = malloc(n * 2);
	for (size_t i = 0; h && i < n; i++)
		h[i] = hk_bf16_from_f32(x[i]);
	return h;
}

static int tensors_init(struct tensors *t, int dtype, float *const in[4],
			size_t n, size_t rows)
{
	size_t es = dtype == HK_F32 ? 4 : 2;

	t->q = as_dtype(in[0], n, dtype);
	t->k = as_dtype(in[1], n, dtype);
	t->v = as_dtype(in[2], n, dtype);
	t->dout = as_dtype(in[3], n, dtype);
	t->o = malloc(n * es);
	t->dq = malloc(n * es);
	t->dk = malloc(n * es);
	t->dv = malloc(n * es);
	t->lse = malloc(rows * 4);
	return t->q && t->k && t->v && t->dout && t->o && t->dq && t->dk &&
	       t->dv && t->lse ? 0 : -ENOMEM;
}

static void tensors_fini(struct tensors *t, int dtype)
{
	if (dtype != HK_F32) {
		free(t->q);
		free(t->k);
		free(t->v);
		free(t->dout);
	}
	free(t->o);
	free(t->dq);
	free(t->dk);
	free(t->dv);
	free(t->lse);
}

static double time_fwd(const struct hk_attn *a, struct tensors *t)
{
	double t0 = bench_now();

	if (hk_attn_fwd(a, t->q, t->k, t->v, t->o, t->lse)) {
		fprintf(stderr, "hmm-bench attn: %s\n", hk_attn_strerror());
		exit(1);
	}
	return bench_now() - t0;
}

static double time_bwd(const struct hk_attn *a, struct tensors *t)
{
	double t0 = bench_now();

	if (hk_attn_bwd(a, t->q, t->k, t->v, t->o, t->lse, t->dout, t->dq,
			t->dk, t->dv)) {
		fprintf(stderr, "hmm-bench attn: %s\n", hk_attn_strerror());
		exit(1);
	}
	return bench_now() - t0;
}

/* Times of one (dtype, pass) over the repetitions. */
struct series {
	double *t, *peak;
};

static void print_line(const struct opts *o, int dtype, int p,
		       double flop, double t, double pk, double vs_f32,
		       double tt, double adj)
{
	static const char *const pass[2] = { "fwd", "bwd" };
	const char *dt = dtype == HK_F32 ? "f32" : "bf16";
	double gf = flop * (p ? 2.5 : 1) / t * 1e-9;

	if (!o->json) {
		printf("attn %s %s B=%d H=%d N=%d d=%d%s threads=%d %s: "
		       "%.4f s %.1f GFLOP/s, peak %.1f (%s), fraction %.3f",
		       pass[p], dt, o->B, o->H, o->N, o->d,
		       o->causal ? " causal" : "", o->threads,
		       hk_attn_isa_name(dtype), t, gf, pk,
		       peak_what[peak_kind(dtype)], gf / pk);
		if (vs_f32 > 0)
			printf(", %.2fx f32's speed", vs_f32);
		if (tt > 0)
			printf(", torch %.4f s vs ours %.4f s right "
			       "after: speedup %.2fx", tt, adj, tt / adj);
		printf("\n");
		return;
	}
	bench_json_begin(stdout, "attn");
	bench_json_str(stdout, "pass", pass[p]);
	bench_json_str(stdout, "dtype", dt);
	bench_json_str(stdout, "isa", hk_attn_isa_name(dtype));
	bench_json_int(stdout, "threads", o->threads);
	bench_json_int(stdout, "B", o->B);
	bench_json_int(stdout, "H", o->H);
	bench_json_int(stdout, "N", o->N);
	bench_json_int(stdout, "d", o->d);
	bench_json_int(stdout, "causal", o->causal);
	bench_json_num(stdout, "seconds", t);
	bench_json_num(stdout, "flop", flop * (p ? 2.5 : 1));
	bench_json_str(stdout, "flop_formula", flop_formula[p]);
	bench_json_num(stdout, "gflops", gf);
	bench_json_num(stdout, "peak_gflops", pk);
	bench_json_str(stdout, "peak", peak_what[peak_kind(dtype)]);
	bench_json_str(stdout, "peak_method", peak_method);
	bench_json_num(stdout, "fraction", gf / pk);
	if (vs_f32 > 0)
		bench_json_num(stdout, "bf16_vs_f32", vs_f32);
	if (tt > 0) {
		bench_json_num(stdout, "torch_seconds", tt);
		bench_json_num(stdout, "ours_seconds_adjacent", adj);
		bench_json_num(stdout, "speedup_vs_torch", tt / adj);
	}
	bench_json_end(stdout);
}

static int run_shape(const struct opts *o)
{
	struct hk_attn a = { .B = o->B, .H = o->H, .Hkv = o->H, .Nq = o->N,
			     .Nk = o->N, .d = o->d, .causal = o->causal };
	size_t n = (size_t)o->B * o->H * o->N * o->d;
	size_t rows = (size_t)o->B * o->H * o->N;
	float *in[4] = { rnd(n), rnd(n), rnd(n), rnd(n) };
	struct tensors ts[2] = { { 0 } };
	struct series sr[2][2] = { { { 0 } } };
	double *ratio[2] = { calloc(o->reps, 8), calloc(o->reps, 8) };
	double flop = 4.0 * o->N * o->N * o->d * o->B * o->H;
	double tor_f = 0, tor_b = 0, adj_f = 0, adj_b = 0;
	int r = 0, both = o->ndtypes == 2;

	for (int x = 0; x < o->ndtypes; x++)
		for (int p = 0; p < 2; p++) {
			sr[x][p].t = calloc(o->reps, 8);
			sr[x][p].peak = calloc(o->reps, 8);
			if (!sr[x][p].t || !sr[x][p].peak)
				r = -ENOMEM;
		}
	for (int x = 0; x < o->ndtypes && !r && in[0] && in[1] && in[2] &&
	     in[3]; x++)
		r = tensors_init(&ts[x], o->dtypes[x], in, n, rows);
	if (r || !in[0] || !in[1] || !in[2] || !in[3] || !ratio[0] ||
	    !ratio[1]) {
		fprintf(stderr, "hmm-bench attn: out of memory\n");
		r = 1;
		goto out;
	}
	if (o->causal)
		flop /= 2;
	for (int x = 0; x < o->ndtypes; x++) {	/* warm up */
		a.dtype = o->dtypes[x];
		time_fwd(&a, &ts[x]);
	}
	for (int i = 0; i < o->reps; i++)
		for (int x = 0; x < o->ndtypes; x++) {
			int kind;

			a.dtype = o->dtypes[x];
			kind = peak_kind(a.dtype);
			sr[x][0].t[i] = time_fwd(&a, &ts[x]);
			sr[x][0].peak[i] = peak_gflops(kind, o->threads,
						       sr[x][0].t[i]);
			sr[x][1].t[i] = time_bwd(&a, &ts[x]);
			sr[x][1].peak[i] = peak_gflops(kind, o->threads,
						       sr[x][1].t[i]);
		}
	for (int p = 0; p < 2 && both; p++)
		for (int i = 0; i < o->reps; i++)
			ratio[p][i] = sr[0][p].t[i] / sr[1][p].t[i];
	if (o->vs_torch && o->dtypes[0] != HK_F32) {
		fprintf(stderr, "hmm-bench attn: --vs-torch compares fp32; "
			"no speedup printed\n");
	} else if (o->vs_torch && torch_times(o, &tor_f, &tor_b)) {
		fprintf(stderr, "hmm-bench attn: torch (/usr/bin/python3) "
			"did not run; no speedup printed\n");
		tor_f = tor_b = 0;
	} else if (o->vs_torch) {	/* ours (fp32) again, right after */
		double *tf = calloc(o->reps, 8), *tb = calloc(o->reps, 8);

		a.dtype = HK_F32;
		for (int i = 0; tf && tb && i < o->reps; i++) {
			tf[i] = time_fwd(&a, &ts[0]);
			tb[i] = time_bwd(&a, &ts[0]);
		}
		if (tf && tb) {
			adj_f = bench_median(tf, o->reps);
			adj_b = bench_median(tb, o->reps);
		} else {
			tor_f = tor_b = 0;
		}
		free(tf);
		free(tb);
	}
	for (int x = 0; x < o->ndtypes; x++)
		for (int p = 0; p < 2; p++) {
			int f32 = o->dtypes[x] == HK_F32;

			print_line(o, o->dtypes[x], p, flop,
				   bench_median(sr[x][p].t, o->reps),
				   bench_median(sr[x][p].peak, o->reps),
				   both && !f32 ?
				   bench_median(ratio[p], o->reps) : 0,
				   f32 ? (p ? tor_b : tor_f) : 0,
				   p ? adj_b : adj_f);
		}
out:
	for (int x = 0; x < o->ndtypes; x++) {
		tensors_fini(&ts[x], o->dtypes[x]);
		for (int p = 0; p < 2; p++) {
			free(sr[x][p].t);
			free(sr[x][p].peak);
		}
	}
	for (int i = 0; i < 4; i++)
		free(in[i]);
	free(ratio[0]);
	free(ratio[1]);
	return r;
}

/* The usage, with the loop of each peak (peak_what), as one string. */
static const char *usage(void)
{
	static char *buf;
	size_t len;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return "usage: hmm-bench attn (out of memory)\n";
	fprintf(f, "usage: hmm-bench attn [--B 1] [--H 8] [--N 2048] [--d 64|128]"
	       " [--causal]\n"
	       "                      [--dtype f32|bf16] [--threads N] "
	       "[--reps 5] [--json] [--vs-torch]\n"
	       "Without --d, runs d = 64 and d = 128; without --dtype, f32 "
	       "and bf16.\nLines with \"pass\":\"fwd\" and \"bwd\".\n"
	       "GFLOP/s count forward 4 B H N^2 d flop (QK^T and PV), "
	       "backward 2.5x that\n(QK^T again, dV, dP, dQ, dK), both "
	       "halved when causal; exp, masking and\npacking are not "
	       "counted.  The peak is measured in the same run: the loop of\n"
	       "the instructions the path's products run on (independent "
	       "chains, no memory\noperands, every thread, for as long as "
	       "the pass took, right after it):\n");
	for (int k = 0; k < (int)(sizeof(peak_what) / sizeof(peak_what[0]));
	     k++)
		fprintf(f, "  %s\n", peak_what[k]);
	fprintf(f, "The scalar path (mulss and addss, one float at a time) "
		"is shown against the\navx2 loop: the machine's peak, not "
		"its own instructions' (an eighth of it).\nbf16_vs_f32 is the "
		"median over repetitions of t_f32 / t_bf16 (each repetition\n"
		"runs f32 then bf16).  JSON: flop, flop_formula, peak, "
		"peak_method.\n");
	fclose(f);
	return buf;
}

static int bench_attn(int argc, char **argv)
{
	struct opts o = { .B = 1, .H = 8, .N = 2048, .d = 0,
			  .threads = hk_threads(), .reps = 5,
			  .dtypes = { HK_F32, HK_BF16 }, .ndtypes = 2 };
	int ds[2] = { 64, 128 }, nd = 2, r = 0;
	const char *dtype = NULL;
	const struct bench_arg args[] = {
		{ "--B", BA_INT, &o.B, 1, 1024 },
		{ "--H", BA_INT, &o.H, 1, 1024 },
		{ "--N", BA_INT, &o.N, 1, 1 << 20 },
		{ "--d", BA_INT, &o.d, 1, 256 },
		{ "--threads", BA_INT, &o.threads, 1, 64 },
		{ "--reps", BA_INT, &o.reps, 1, 1000 },
		{ "--dtype", BA_STR, &dtype },
		{ "--causal", BA_FLAG, &o.causal },
		{ "--vs-torch", BA_FLAG, &o.vs_torch },
		{ "--json", BA_FLAG, &o.json },
		{ NULL }
	};

	bench_args("attn", usage(), argc, argv, args);
	if (dtype) {
		if (strcmp(dtype, "f32") && strcmp(dtype, "bf16"))
			bench_arg_bad("--dtype", dtype, "want f32 or bf16");
		o.dtypes[0] = strcmp(dtype, "f32") ? HK_BF16 : HK_F32;
		o.ndtypes = 1;
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
