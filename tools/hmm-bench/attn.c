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
 * and autograd for the backward (torch 1.13 has no fused SDPA); and,
 * where a torch 2.x venv is found (--torch-venv DIR, $HMM_TORCH_VENV,
 * build/peers: as `hmm-bench train --vs-torch` finds it), its fused
 * F.scaled_dot_product_attention in fp32 and in bf16, forward and
 * autograd backward.  Each torch is one python process (torch_script:
 * medians of reps after a warm-up), followed by ours at its dtype again;
 * each speedup is torch's median / ours right after it.  A torch that
 * does not run is named on stderr and left out; the bench goes on.
 */
#include <errno.h>
#include <immintrin.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "hk.h"
#include "hk_attn.h"
#include "hk_adamw.h"	/* hk_bf16_from_f32 */
#include "train_torch.h"	/* torch_venv_python, torch_script_run */

#define PEAK_CHUNK 100000L	/* FMA loop iterations between clock reads */

struct opts {
	int B, H, N, d, threads, reps, json, vs_torch, causal;
	int dtypes[2], ndtypes;
	const char *torch2;	/* a torch 2.x venv's python, or NULL */
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

/*
 * A torch at the shape, one python process: prints
 * "torch VERSION BACKEND THREADS FWD BWD", the medians of reps after one
 * warm-up.  argv: B H N d causal reps threads sdpa dtype.  sdpa 1:
 * F.scaled_dot_product_attention (torch 2.x; BACKEND the one it picks
 * for these tensors), 0: matmul, masked softmax, matmul (BACKEND
 * "naive"; torch 1.13 has no fused SDPA).  bf16 inputs for bf16.  The
 * forward runs under no_grad; the backward is autograd's, from the
 * output of a forward with grad.  Passed with -c: no single quote.
 */
static const char torch_script[] =
"import statistics, sys, time, torch\n"
"F = torch.nn.functional\n"
"B, H, N, d, causal, reps, threads, sdpa = map(int, sys.argv[1:9])\n"
"dt = torch.bfloat16 if sys.argv[9] == \"bf16\" else torch.float32\n"
"if sdpa and not hasattr(F, \"scaled_dot_product_attention\"):\n"
"    sys.exit(\"torch \" + torch.__version__ + \" has no SDPA\")\n"
"torch.set_num_threads(threads)\n"
"q, k, v = (torch.randn(B, H, N, d, dtype=dt, requires_grad=True)\n"
"           for _ in range(3))\n"
"do = torch.randn(B, H, N, d, dtype=dt)\n"
"mask = torch.ones(N, N, dtype=torch.bool).triu(1)\n"
"def f():\n"
"    if sdpa:\n"
"        return F.scaled_dot_product_attention(q, k, v,\n"
"                                              is_causal=bool(causal))\n"
"    s = q @ k.transpose(-1, -2) * d**-0.5\n"
"    if causal:\n"
"        s = s.masked_fill(mask, float(\"-inf\"))\n"
"    return torch.softmax(s, -1) @ v\n"
"be = \"naive\"\n"
"try:\n"
"    from torch.nn.attention import SDPBackend\n"
"    if sdpa:\n"
"        be = SDPBackend(torch._fused_sdp_choice(q, k, v, None, 0.0,\n"
"                                                bool(causal))).name\n"
"except Exception:\n"
"    be = \"sdpa\"\n"
"tf, tb = [], []\n"
"for r in range(reps + 1):\n"
"    t = time.perf_counter()\n"
"    with torch.no_grad():\n"
"        f()\n"
"    tf.append(time.perf_counter() - t)\n"
"    o = f()\n"
"    t = time.perf_counter()\n"
"    o.backward(do)\n"
"    tb.append(time.perf_counter() - t)\n"
"print(\"torch\", torch.__version__, be, torch.get_num_threads(),\n"
"      statistics.median(tf[1:]), statistics.median(tb[1:]))\n";

/* One torch compared with ours at one dtype (--vs-torch). */
struct peer {
	const char *key;	/* "torch": Debian's 1.13, naive; "torch2" */
	const char *py;		/* a python with that torch */
	int sdpa;		/* F.scaled_dot_product_attention */
	int x;			/* which of opts.dtypes */
	char version[32], backend[32];
	double t[2];		/* its medians, fwd and bwd; 0: did not run */
	double ours[2];		/* ours at that dtype right after it */
};

struct peer_line {
	struct peer *pe;
	int threads;		/* ours: the result must name them */
};

/* "torch VERSION BACKEND THREADS FWD BWD" at our threads, into a peer */
static int peer_result(const char *line, void *arg)
{
	struct peer_line *l = arg;
	struct peer *pe = l->pe;
	int threads;

	return sscanf(line, "torch %31s %31s %d %lf %lf", pe->version,
		      pe->backend, &threads, &pe->t[0], &pe->t[1]) == 5 &&
	       threads == l->threads;
}

/* Run pe's torch (torch_script); 0, or -1 with its words on stderr. */
static int torch_times(const struct opts *o, struct peer *pe)
{
	const int v[8] = { o->B, o->H, o->N, o->d, o->causal, o->reps,
			   o->threads, pe->sdpa };
	char a[8][16];
	char *argv[] = { (char *)pe->py, "-c", (char *)torch_script, a[0],
			 a[1], a[2], a[3], a[4], a[5], a[6], a[7],
			 o->dtypes[pe->x] == HK_F32 ? "f32" : "bf16", NULL };
	struct peer_line l = { pe, o->threads };

	for (int i = 0; i < 8; i++)
		snprintf(a[i], sizeof(a[i]), "%d", v[i]);
	if (torch_script_run(argv, 0, peer_result, &l)) {
		pe->t[0] = pe->t[1] = 0;
		return -1;
	}
	return 0;
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

/*
 * Each torch (pe[np]), then ours at its dtype right after it, reps times;
 * the speedups compare those adjacent medians.  One that does not run is
 * named on stderr and left out (t 0).
 */
static void peers_run(const struct opts *o, struct hk_attn *a,
		      struct tensors *ts, struct peer *pe, int np)
{
	double *t[2] = { calloc(o->reps, 8), calloc(o->reps, 8) };

	for (int i = 0; i < np; i++) {
		if (!t[0] || !t[1] || torch_times(o, &pe[i])) {
			fprintf(stderr, "hmm-bench attn: %s did not time %s; "
				"left out\n", pe[i].py, pe[i].sdpa ?
				"SDPA" : "naive attention");
			pe[i].t[0] = pe[i].t[1] = 0;
			continue;
		}
		a->dtype = o->dtypes[pe[i].x];
		for (int r = 0; r < o->reps; r++) {
			t[0][r] = time_fwd(a, &ts[pe[i].x]);
			t[1][r] = time_bwd(a, &ts[pe[i].x]);
		}
		pe[i].ours[0] = bench_median(t[0], o->reps);
		pe[i].ours[1] = bench_median(t[1], o->reps);
	}
	free(t[0]);
	free(t[1]);
}

/* Times of one (dtype, pass) over the repetitions. */
struct series {
	double *t, *peak;
};

/* The torches of dtype o->dtypes[x] that ran, on its pass p line. */
static void print_peers(const struct opts *o, int x, int p,
			const struct peer *pe, int np)
{
	char f[64];

	for (int i = 0; i < np; i++) {
		const struct peer *e = &pe[i];
		const char *sfx = e->sdpa ? "_torch2" : "";

		if (e->x != x || e->t[p] <= 0)
			continue;
		if (!o->json) {
			printf(", %s", e->key);
			if (e->sdpa)
				printf(" %s SDPA %s", e->version, e->backend);
			printf(" %.4f s vs ours %.4f s right after: speedup "
			       "%.2fx", e->t[p], e->ours[p],
			       e->t[p] / e->ours[p]);
			continue;
		}
		if (e->sdpa) {
			snprintf(f, sizeof(f), "%s_version", e->key);
			bench_json_str(stdout, f, e->version);
			snprintf(f, sizeof(f), "%s_backend", e->key);
			bench_json_str(stdout, f, e->backend);
		}
		snprintf(f, sizeof(f), "%s_seconds", e->key);
		bench_json_num(stdout, f, e->t[p]);
		snprintf(f, sizeof(f), "ours_seconds_adjacent%s", sfx);
		bench_json_num(stdout, f, e->ours[p]);
		snprintf(f, sizeof(f), "speedup_vs_%s", e->key);
		bench_json_num(stdout, f, e->t[p] / e->ours[p]);
	}
}

static void print_line(const struct opts *o, int x, int p, double flop,
		       double t, double pk, double vs_f32,
		       const struct peer *pe, int np)
{
	static const char *const pass[2] = { "fwd", "bwd" };
	int dtype = o->dtypes[x];
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
		print_peers(o, x, p, pe, np);
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
	print_peers(o, x, p, pe, np);
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
	struct peer pe[3];
	int r = 0, both = o->ndtypes == 2, np = 0;

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
	for (int x = 0; x < o->ndtypes && o->vs_torch; x++) {
		if (o->dtypes[x] == HK_F32)
			pe[np++] = (struct peer){ .key = "torch", .x = x,
					.py = "/usr/bin/python3" };
		if (o->torch2)
			pe[np++] = (struct peer){ .key = "torch2", .x = x,
					.py = o->torch2, .sdpa = 1 };
	}
	peers_run(o, &a, ts, pe, np);
	for (int x = 0; x < o->ndtypes; x++)
		for (int p = 0; p < 2; p++) {
			int f32 = o->dtypes[x] == HK_F32;

			print_line(o, x, p, flop,
				   bench_median(sr[x][p].t, o->reps),
				   bench_median(sr[x][p].peak, o->reps),
				   both && !f32 ?
				   bench_median(ratio[p], o->reps) : 0,
				   pe, np);
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

/* A torch 2.x for --vs-torch (torch_venv_python): its python in
 * py[cap], or NULL, said in one line. */
static const char *torch2_python(const char *venv, char *py, size_t cap)
{
	if (!torch_venv_python(venv, py, cap)) {
		fprintf(stderr, "hmm-bench attn: no torch 2.x venv "
			"(--torch-venv, $HMM_TORCH_VENV, build/peers: "
			"scripts/peers.sh); torch 1.13 only\n");
		return NULL;
	}
	if (access(py, X_OK)) {
		fprintf(stderr, "hmm-bench attn: no torch 2.x (%s: %s); torch "
			"1.13 only\n", py, strerror(errno));
		return NULL;
	}
	return py;
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
	       "[--reps 5] [--json]\n"
	       "                      [--vs-torch [--torch-venv DIR]]\n"
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
		"peak_method.\n"
		"--vs-torch: Debian's torch 1.13 (/usr/bin/python3), naive "
		"attention in f32, and\na torch 2.x's "
		"F.scaled_dot_product_attention in f32 and bf16 (DIR/bin/python;"
		"\nDIR: --torch-venv, else $HMM_TORCH_VENV, else build/peers), "
		"each followed by\nours at its dtype; speedup = torch's median "
		"/ ours right after.\n");
	fclose(f);
	return buf;
}

static int bench_attn(int argc, char **argv)
{
	struct opts o = { .B = 1, .H = 8, .N = 2048, .d = 0,
			  .threads = hk_threads(), .reps = 5,
			  .dtypes = { HK_F32, HK_BF16 }, .ndtypes = 2 };
	int ds[2] = { 64, 128 }, nd = 2, r = 0;
	const char *dtype = NULL, *venv = NULL;
	char py[PATH_MAX + 16];
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
		{ "--torch-venv", BA_STR, &venv },
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
	if (venv && !o.vs_torch)
		bench_arg_bad("--torch-venv", venv, "only with --vs-torch");
	if (!hk_isa_supported(HK_ISA_AVX2)) {
		fprintf(stderr, "hmm-bench attn: the FMA peak needs AVX2\n");
		return 1;
	}
	hk_set_threads(o.threads);
	if (o.vs_torch)
		o.torch2 = torch2_python(venv, py, sizeof(py));
	if (o.vs_torch && !o.torch2 && o.dtypes[0] != HK_F32)
		fprintf(stderr, "hmm-bench attn: torch 1.13 is timed in f32 "
			"only: no speedup printed\n");
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
