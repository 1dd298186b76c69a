// SPDX-License-Identifier: MIT
/*
 * hmm-bench adamw — the fused AdamW step (kernels/core/hk_adamw.h) against
 * its ceiling, measured in the same run.
 *
 * AdamW in fp32 reads p, g, m, v and writes p, m, v: 28 bytes per
 * parameter.  The ceiling is the fastest of several streaming kernels that
 * do exactly that traffic over the same arrays (p += g, m += g, v += g)
 * with nothing else to compute, on the same threads and the same parts
 * (1 MiB of each array, taken by whichever thread is free):
 *
 *	avx512		4 zmm loads, then 3 plain stores (AdamW's own order)
 *	avx512-nt	the same with non-temporal stores (no read for
 *			ownership of the written lines, no cache pollution)
 *	avx2		ymm, each store right after its load
 *	avx2-nt		the same with non-temporal stores
 *	scalar		plain C (only without AVX2)
 *
 * (those the CPU runs).  Each repetition runs AdamW and every streaming
 * kernel once, in an order rotated from one repetition to the next, so
 * that all share the machine's load of the moment.  The ceiling is the
 * streaming kernel with the least median time; the fraction is the
 * median over repetitions of
 *	(28 n / t_adamw) / (28 n / t_ceiling) = t_ceiling / t_adamw
 * with that kernel's time of the same repetition, and the GB/s printed
 * are medians.  (The least of the kernels' times in each repetition
 * would be a minimum of several noisy samples against one: under load it
 * put AdamW at 0.73 where the medians said 0.9.)  On a machine whose
 * CPUs other jobs want too, the times vary 2-3x between repetitions and
 * the fraction by +-0.2, either way: the share of the run in which some
 * task waited for a CPU (/proc/pressure/cpu) is printed ("cpu_stall"),
 * with a warning above 5%.  Without --threads it runs on 1
 * thread and then on every online CPU (at most 64).  --vs-torch times
 * Debian's torch.optim.AdamW over the same n and threads in
 * /usr/bin/python3 and prints the speedup.
 */
#include <errno.h>
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "hk.h"
#include "hk_adamw.h"

struct arr {
	size_t n;
	float *p, *g, *m, *v;
	int kind;		/* which streaming kernel (kinds[]) */
};

/* p += g, m += g, v += g over [lo, hi) in plain C. */
static void stream_c(struct arr *a, size_t lo, size_t hi)
{
	for (size_t k = lo; k < hi; k++) {
		a->p[k] += a->g[k];
		a->m[k] += a->g[k];
		a->v[k] += a->g[k];
	}
}

/* 8 at a time; nt: non-temporal stores (peeled to 32-byte alignment). */
__attribute__((target("avx2"))) static void stream_avx2(struct arr *a,
							 size_t lo, size_t hi,
							 int nt)
{
	size_t i = lo;

	if (nt) {
		size_t al = lo + (-(uintptr_t)(a->p + lo) & 31) / 4;

		stream_c(a, lo, al < hi ? al : hi);
		for (i = al; i + 8 <= hi; i += 8) {
			__m256 g = _mm256_loadu_ps(a->g + i);
			__m256 p = _mm256_load_ps(a->p + i);
			__m256 m = _mm256_load_ps(a->m + i);
			__m256 v = _mm256_load_ps(a->v + i);

			_mm256_stream_ps(a->p + i, _mm256_add_ps(p, g));
			_mm256_stream_ps(a->m + i, _mm256_add_ps(m, g));
			_mm256_stream_ps(a->v + i, _mm256_add_ps(v, g));
		}
		_mm_sfence();
	}
	for (; i + 8 <= hi; i += 8) {
		__m256 g = _mm256_loadu_ps(a->g + i);

		_mm256_storeu_ps(a->p + i,
				 _mm256_add_ps(_mm256_loadu_ps(a->p + i), g));
		_mm256_storeu_ps(a->m + i,
				 _mm256_add_ps(_mm256_loadu_ps(a->m + i), g));
		_mm256_storeu_ps(a->v + i,
				 _mm256_add_ps(_mm256_loadu_ps(a->v + i), g));
	}
	_mm256_zeroupper();	/* gcc puts none before this tail call */
	stream_c(a, i, hi);
}

/* 16 at a time, all four loads first; nt as above (64-byte alignment). */
__attribute__((target("avx512f"))) static void stream_avx512(struct arr *a,
							      size_t lo,
							      size_t hi,
							      int nt)
{
	size_t i = lo;

	if (nt) {
		size_t al = lo + (-(uintptr_t)(a->p + lo) & 63) / 4;

		stream_c(a, lo, al < hi ? al : hi);
		for (i = al; i + 16 <= hi; i += 16) {
			__m512 g = _mm512_loadu_ps(a->g + i);
			__m512 p = _mm512_load_ps(a->p + i);
			__m512 m = _mm512_load_ps(a->m + i);
			__m512 v = _mm512_load_ps(a->v + i);

			_mm512_stream_ps(a->p + i, _mm512_add_ps(p, g));
			_mm512_stream_ps(a->m + i, _mm512_add_ps(m, g));
			_mm512_stream_ps(a->v + i, _mm512_add_ps(v, g));
		}
		_mm_sfence();
	}
	for (; i + 16 <= hi; i += 16) {
		__m512 g = _mm512_loadu_ps(a->g + i);
		__m512 p = _mm512_loadu_ps(a->p + i);
		__m512 m = _mm512_loadu_ps(a->m + i);
		__m512 v = _mm512_loadu_ps(a->v + i);

		_mm512_storeu_ps(a->p + i, _mm512_add_ps(p, g));
		_mm512_storeu_ps(a->m + i, _mm512_add_ps(m, g));
		_mm512_storeu_ps(a->v + i, _mm512_add_ps(v, g));
	}
	_mm256_zeroupper();
	stream_c(a, i, hi);
}

/* The streaming kernels, in the order of the comment above. */
static const struct kind {
	const char *name;
	int isa, nt;
} kinds[] = {
	{ "avx512", HK_ISA_AVX512, 0 },
	{ "avx512-nt", HK_ISA_AVX512, 1 },
	{ "avx2", HK_ISA_AVX2, 0 },
	{ "avx2-nt", HK_ISA_AVX2, 1 },
	{ "scalar", HK_ISA_SCALAR, 0 },
};
#define NKINDS (int)(sizeof(kinds) / sizeof(kinds[0]))

/* Kinds this CPU runs; scalar only when there is no AVX2. */
static int kind_runs(int k)
{
	if (kinds[k].isa == HK_ISA_SCALAR)
		return !hk_isa_supported(HK_ISA_AVX2);
	return hk_isa_supported(kinds[k].isa);
}

static void stream_part(void *arg, int i, int n)
{
	struct arr *a = arg;
	const struct kind *k = &kinds[a->kind];
	size_t lo, hi;

	hk_split(a->n, i, n, 64, &lo, &hi);
	if (k->isa == HK_ISA_AVX512)
		stream_avx512(a, lo, hi, k->nt);
	else if (k->isa == HK_ISA_AVX2)
		stream_avx2(a, lo, hi, k->nt);
	else
		stream_c(a, lo, hi);
}

static double time_stream(struct arr *a, int kind)
{
	double t0 = bench_now();
	size_t parts = (a->n + (1u << 18) - 1) >> 18;	/* as adamw.c */

	a->kind = kind;
	if (parts < (size_t)hk_threads())
		parts = hk_threads();
	hk_parallel((int)parts, stream_part, a);
	return bench_now() - t0;
}

/*
 * Microseconds that some task of this machine waited for a CPU (Linux's
 * pressure stall information, "some total"), or -1 where there is none.
 */
static double cpu_stall_us(void)
{
	FILE *f = fopen("/proc/pressure/cpu", "r");
	double us = -1;

	if (f && fscanf(f, "some avg10=%*f avg60=%*f avg300=%*f total=%lf",
			&us) != 1)
		us = -1;
	if (f)
		fclose(f);
	return us;
}

static double time_adamw(struct arr *a, int64_t step)
{
	struct hk_adamw_args args = {
		.n = a->n, .param = a->p, .grad = a->g,
		.exp_avg = a->m, .exp_avg_sq = a->v,
		.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
		.weight_decay = 0.01, .step = step, .name = "bench",
	};
	double t0 = bench_now();

	if (hk_adamw_step(&args) != 0) {
		fprintf(stderr, "hmm-bench adamw: %s\n", hk_adamw_error());
		exit(1);
	}
	return bench_now() - t0;
}

/* Median seconds per step of torch.optim.AdamW, or -1. */
static double torch_step_s(size_t n, int threads, int reps)
{
	char cmd[2048];
	double s = -1;
	FILE *f;

	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 -c '\n"
		 "import time, torch\n"
		 "torch.set_num_threads(%d)\n"
		 "n = %zu\n"
		 "p = torch.nn.Parameter(torch.rand(n))\n"
		 "p.grad = torch.rand(n) - 0.5\n"
		 "opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.999), "
		 "eps=1e-8, weight_decay=0.01)\n"
		 "opt.step()\n"
		 "ts = []\n"
		 "for _ in range(%d):\n"
		 "    t0 = time.perf_counter(); opt.step(); "
		 "ts.append(time.perf_counter() - t0)\n"
		 "ts.sort()\n"
		 "print(\"torch\", torch.__version__, ts[len(ts) // 2])\n"
		 "'", threads, n, reps);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	if (fscanf(f, "torch %*s %lf", &s) != 1)
		s = -1;
	if (pclose(f) != 0)
		s = -1;
	return s;
}

struct result {
	double adamw_s, ceil_s, torch_s;
	double kind_s[NKINDS];	/* each streaming kernel's median, or 0 */
	double fraction;	/* median of the reps' t_best / t_adamw */
	double stall;		/* share of the run some task waited for a
				   CPU, or -1 if unknown */
	int best;		/* the kind with the least median: the ceiling */
};

static double *alloc_times(int reps)
{
	double *t = calloc(reps, sizeof(double));

	if (!t) {
		fprintf(stderr, "hmm-bench adamw: out of memory\n");
		exit(1);
	}
	return t;
}

static void measure(struct arr *a, int reps, struct result *r)
{
	double *ta = alloc_times(reps), *tc = alloc_times(reps);
	double *fr = alloc_times(reps), *tk[NKINDS];
	int order[NKINDS + 1], n = 0;

	order[n++] = -1;			/* AdamW */
	for (int k = 0; k < NKINDS; k++) {
		tk[k] = alloc_times(reps);
		if (kind_runs(k))
			order[n++] = k;
	}
	double t0, s0;

	time_adamw(a, 1);		/* warm: pool threads, caches */
	t0 = bench_now();
	s0 = cpu_stall_us();
	for (int j = 1; j < n; j++)
		time_stream(a, order[j]);
	for (int i = 0; i < reps; i++)
		for (int j = 0; j < n; j++) {	/* rotated: each goes first */
			int o = order[(i + j) % n];

			if (o < 0)
				ta[i] = time_adamw(a, 2 + i);
			else
				tk[o][i] = time_stream(a, o);
		}
	r->stall = s0 < 0 ? -1 : (cpu_stall_us() - s0) * 1e-6 /
				  (bench_now() - t0);
	r->best = order[1];
	for (int k = 0; k < NKINDS; k++) {
		if (!kind_runs(k))
			continue;
		memcpy(tc, tk[k], reps * sizeof(double));
		r->kind_s[k] = bench_median(tc, reps);	/* sorts tc */
		if (r->kind_s[k] < r->kind_s[r->best])
			r->best = k;
	}
	for (int i = 0; i < reps; i++)
		fr[i] = tk[r->best][i] / ta[i];
	r->adamw_s = bench_median(ta, reps);
	r->ceil_s = r->kind_s[r->best];
	r->fraction = bench_median(fr, reps);
	for (int k = 0; k < NKINDS; k++)
		free(tk[k]);
	free(ta);
	free(tc);
	free(fr);
}

static void report(const struct arr *a, int threads, const struct result *r,
		   int json)
{
	double bytes = 28.0 * a->n;
	double gbps = bytes / r->adamw_s / 1e9, cgbps = bytes / r->ceil_s / 1e9;

	printf("adamw threads=%d isa=%s n=%zu: %.4f s/step, %.3f Gparam/s, "
	       "%.2f GB/s; ceiling %.2f GB/s (best: %s); fraction %.3f\n",
	       threads, hk_adamw_isa(), a->n, r->adamw_s,
	       a->n / r->adamw_s / 1e9, gbps, cgbps, kinds[r->best].name,
	       r->fraction);
	if (r->stall > 0.05)
		printf("  other tasks waited for a CPU %.0f%% of the run: "
		       "the machine is busy, the times are not the bus's\n",
		       100 * r->stall);
	printf("  streaming kernels:");
	for (int k = 0; k < NKINDS; k++)
		if (r->kind_s[k] > 0)
			printf(" %s %.2f GB/s", kinds[k].name,
			       bytes / r->kind_s[k] / 1e9);
	printf("\n");
	if (r->torch_s > 0)
		printf("  torch.optim.AdamW: %.4f s/step; speedup %.2fx\n",
		       r->torch_s, r->torch_s / r->adamw_s);
	else if (r->torch_s < 0)
		printf("  torch.optim.AdamW: could not run /usr/bin/python3 "
		       "with torch\n");
	if (!json)
		return;
	bench_json_begin(stdout, "adamw");
	bench_json_int(stdout, "threads", threads);
	bench_json_str(stdout, "isa", hk_adamw_isa());
	bench_json_int(stdout, "n", (int64_t)a->n);
	bench_json_num(stdout, "step_s", r->adamw_s);
	bench_json_num(stdout, "gparam_s", a->n / r->adamw_s / 1e9);
	bench_json_num(stdout, "GBps", gbps);
	bench_json_num(stdout, "ceiling_GBps", cgbps);
	bench_json_str(stdout, "ceiling_best", kinds[r->best].name);
	for (int k = 0; k < NKINDS; k++) {
		char key[64];

		if (r->kind_s[k] <= 0)
			continue;
		snprintf(key, sizeof(key), "stream_%s_GBps", kinds[k].name);
		bench_json_num(stdout, key, bytes / r->kind_s[k] / 1e9);
	}
	bench_json_num(stdout, "fraction", r->fraction);
	if (r->stall >= 0)
		bench_json_num(stdout, "cpu_stall", r->stall);
	if (r->torch_s > 0) {
		bench_json_num(stdout, "torch_step_s", r->torch_s);
		bench_json_num(stdout, "speedup_vs_torch",
			       r->torch_s / r->adamw_s);
	}
	bench_json_end(stdout);
}

static const char usage[] =
	"usage: hmm-bench adamw [--n PARAMS] [--threads T] [--reps N] "
	"[--json] [--vs-torch]\n"
	"  --n PARAMS   parameters (default 64M: p, g, m, v = 1 GiB)\n"
	"  --threads T  only T threads, 1..64 (default: 1, then every "
	"online CPU)\n"
	"  --reps N     interleaved runs of each, 1..1000 (default 7)\n"
	"  --vs-torch   also torch.optim.AdamW (/usr/bin/python3)\n";

static float *alloc_filled(size_t n, float base, float step)
{
	float *x = aligned_alloc(64, (n * sizeof(float) + 63) & ~(size_t)63);

	if (!x) {
		fprintf(stderr, "hmm-bench adamw: cannot allocate %zu MiB\n",
			n * sizeof(float) >> 20);
		exit(1);
	}
	for (size_t i = 0; i < n; i++)	/* touch every page now */
		x[i] = base + step * (float)(i & 1023);
	return x;
}

static int bench_adamw(int argc, char **argv)
{
	int64_t n = 64 << 20;
	int threads = 0, reps = 7, json = 0, torch = 0, tset[2], nt;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	struct arr a;
	const struct bench_arg args[] = {
		{ "--n", BA_SIZE, &n, 1, 1ll << 32 },
		{ "--threads", BA_INT, &threads, 1, 64 },
		{ "--reps", BA_INT, &reps, 1, 1000 },
		{ "--json", BA_FLAG, &json },
		{ "--vs-torch", BA_FLAG, &torch },
		{ NULL }
	};

	bench_args("adamw", usage, argc, argv, args);
	a = (struct arr){ .n = (size_t)n };
	a.p = alloc_filled(a.n, 0.5f, 1e-4f);
	a.g = alloc_filled(a.n, 1e-3f, 2e-6f);	/* > 0: v += g stays > 0 */
	a.m = alloc_filled(a.n, 0.0f, 1e-6f);
	a.v = alloc_filled(a.n, 1e-4f, 1e-8f);
	tset[0] = threads ? threads : 1;
	tset[1] = cpus < 1 ? 1 : cpus > 64 ? 64 : (int)cpus;
	nt = threads || tset[1] == 1 ? 1 : 2;
	for (int i = 0; i < nt; i++) {
		struct result r = { 0 };

		hk_set_threads(tset[i]);
		measure(&a, reps, &r);
		if (torch)
			r.torch_s = torch_step_s(a.n, tset[i], reps);
		report(&a, tset[i], &r, json);
	}
	free(a.p);
	free(a.g);
	free(a.m);
	free(a.v);
	return 0;
}

HMM_BENCH(adamw, "fused AdamW step vs a 4-read/3-write stream ceiling",
	  bench_adamw);
