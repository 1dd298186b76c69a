// SPDX-License-Identifier: MIT
/*
 * hmm-bench adamw — the fused AdamW step (kernels/core/hk_adamw.h) against
 * its ceiling, measured in the same run.
 *
 * AdamW in fp32 reads p, g, m, v and writes p, m, v: 28 bytes per
 * parameter.  The ceiling is a streaming kernel that does exactly that
 * traffic over the same arrays (p += g, m += g, v += g) with nothing else
 * to compute, on the same threads and the same parts (1 MiB of each array,
 * taken by whichever thread is free).  The two run interleaved,
 * `reps` times each, each going first in every other pair; the GB/s are
 * medians, and the fraction is the median over the pairs of
 *	(28 n / t_adamw) / (28 n / t_ceiling) = t_ceiling / t_adamw
 * (a pair shares the machine's load of the moment, which matters on
 * small shared machines).
 * --nt also measures the ceiling with non-temporal stores, the check that
 * the kernel's plain stores are the right choice.  --vs-torch times
 * Debian's torch.optim.AdamW over the same n and threads in
 * /usr/bin/python3 and prints the speedup.
 */
#include <errno.h>
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "hk.h"
#include "hk_adamw.h"

struct arr {
	size_t n;
	float *p, *g, *m, *v;
	int nt;			/* ceiling: non-temporal stores */
};

/* p += g, m += g, v += g: 4 reads, 3 writes per element, 8 at a time. */
__attribute__((target("avx2"))) static void ceil_avx2(struct arr *a,
						       size_t lo, size_t hi)
{
	size_t i = lo;

	if (a->nt) {	/* aligned stores needed: peel to 32 bytes */
		for (; i < hi && ((uintptr_t)(a->p + i) & 31); i++) {
			a->p[i] += a->g[i];
			a->m[i] += a->g[i];
			a->v[i] += a->g[i];
		}
		for (; i + 8 <= hi; i += 8) {
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
	for (; i < hi; i++) {
		a->p[i] += a->g[i];
		a->m[i] += a->g[i];
		a->v[i] += a->g[i];
	}
}

static void ceil_part(void *arg, int i, int n)
{
	struct arr *a = arg;
	size_t lo, hi;

	hk_split(a->n, i, n, 64, &lo, &hi);
	if (hk_isa_supported(HK_ISA_AVX2)) {
		ceil_avx2(a, lo, hi);
		return;
	}
	for (size_t k = lo; k < hi; k++) {
		a->p[k] += a->g[k];
		a->m[k] += a->g[k];
		a->v[k] += a->g[k];
	}
}

static double time_ceiling(struct arr *a, int nt)
{
	double t0 = bench_now();

	size_t parts = (a->n + (1u << 18) - 1) >> 18;	/* as adamw.c */

	a->nt = nt;
	if (parts < (size_t)hk_threads())
		parts = hk_threads();
	hk_parallel((int)parts, ceil_part, a);
	return bench_now() - t0;
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
	double adamw_s, ceil_s, ceil_nt_s, torch_s;
	double fraction;	/* median of the runs' t_ceiling / t_adamw */
};

static void measure(struct arr *a, int reps, int nt, struct result *r)
{
	double *ta = calloc(reps, sizeof(double));
	double *tc = calloc(reps, sizeof(double));
	double *tn = calloc(reps, sizeof(double));
	double *fr = calloc(reps, sizeof(double));

	if (!ta || !tc || !tn || !fr) {
		fprintf(stderr, "hmm-bench adamw: out of memory\n");
		exit(1);
	}
	time_adamw(a, 1);		/* warm: pool threads, caches */
	time_ceiling(a, 0);
	for (int i = 0; i < reps; i++) {
		if (i % 2) {	/* either goes first as often */
			ta[i] = time_adamw(a, 2 + i);
			tc[i] = time_ceiling(a, 0);
		} else {
			tc[i] = time_ceiling(a, 0);
			ta[i] = time_adamw(a, 2 + i);
		}
		fr[i] = tc[i] / ta[i];
		if (nt)
			tn[i] = time_ceiling(a, 1);
	}
	r->adamw_s = bench_median(ta, reps);
	r->ceil_s = bench_median(tc, reps);
	r->fraction = bench_median(fr, reps);
	r->ceil_nt_s = nt ? bench_median(tn, reps) : 0;
	free(ta);
	free(tc);
	free(tn);
	free(fr);
}

static void report(const struct arr *a, int threads, const struct result *r,
		   int json, double frac_1t)
{
	double bytes = 28.0 * a->n;
	double gbps = bytes / r->adamw_s / 1e9, cgbps = bytes / r->ceil_s / 1e9;

	printf("adamw threads=%d isa=%s n=%zu: %.4f s/step, %.3f Gparam/s, "
	       "%.2f GB/s; ceiling %.2f GB/s; fraction %.3f\n", threads,
	       hk_adamw_isa(), a->n, r->adamw_s, a->n / r->adamw_s / 1e9,
	       gbps, cgbps, r->fraction);
	if (r->ceil_nt_s > 0)
		printf("  ceiling with non-temporal stores: %.2f GB/s (%s)\n",
		       bytes / r->ceil_nt_s / 1e9,
		       r->ceil_nt_s < r->ceil_s ? "faster" : "not faster");
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
	bench_json_num(stdout, "fraction", r->fraction);
	if (r->ceil_nt_s > 0)
		bench_json_num(stdout, "ceiling_nt_GBps",
			       bytes / r->ceil_nt_s / 1e9);
	if (frac_1t > 0)
		bench_json_num(stdout, "fraction_1t", frac_1t);
	if (r->torch_s > 0) {
		bench_json_num(stdout, "torch_step_s", r->torch_s);
		bench_json_num(stdout, "speedup_vs_torch",
			       r->torch_s / r->adamw_s);
	}
	bench_json_end(stdout);
}

static int usage(void)
{
	fprintf(stderr,
		"usage: hmm-bench adamw [--n PARAMS] [--threads 1|2] "
		"[--reps N] [--nt] [--json] [--vs-torch]\n"
		"  --n PARAMS   parameters (default 64M: p, g, m, v = 1 GiB)\n"
		"  --threads T  only T threads (default: 1, then 2)\n"
		"  --reps N     interleaved runs of each (default 7)\n"
		"  --nt         also the ceiling with non-temporal stores\n"
		"  --vs-torch   also torch.optim.AdamW (/usr/bin/python3)\n");
	return 2;
}

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
	int threads = 0, reps = 7, json = 0, torch = 0, nt = 0;
	double frac_1t = 0;
	struct arr a;

	for (int i = 1; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(o, "--json"))
			json = 1;
		else if (!strcmp(o, "--vs-torch"))
			torch = 1;
		else if (!strcmp(o, "--nt"))
			nt = 1;
		else if (!strcmp(o, "--n") && v &&
			 (n = bench_parse_size(v)) > 0)
			i++;
		else if (!strcmp(o, "--threads") && v &&
			 (threads = atoi(v)) >= 1 && threads <= 64)
			i++;
		else if (!strcmp(o, "--reps") && v && (reps = atoi(v)) >= 1)
			i++;
		else
			return usage();
	}
	a = (struct arr){ .n = (size_t)n };
	a.p = alloc_filled(a.n, 0.5f, 1e-4f);
	a.g = alloc_filled(a.n, 1e-3f, 2e-6f);	/* > 0: v += g stays > 0 */
	a.m = alloc_filled(a.n, 0.0f, 1e-6f);
	a.v = alloc_filled(a.n, 1e-4f, 1e-8f);
	for (int t = threads ? threads : 1; t <= (threads ? threads : 2); t++) {
		struct result r = { 0 };

		hk_set_threads(t);
		measure(&a, reps, nt, &r);
		if (torch)
			r.torch_s = torch_step_s(a.n, t, reps);
		report(&a, t, &r, json, t > 1 ? frac_1t : 0);
		frac_1t = r.fraction;
	}
	free(a.p);
	free(a.g);
	free(a.m);
	free(a.v);
	return 0;
}

HMM_BENCH(adamw, "fused AdamW step vs a 4-read/3-write stream ceiling",
	  bench_adamw);
