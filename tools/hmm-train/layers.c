// SPDX-License-Identifier: MIT
/*
 * layers.c — layernorm, GELU, bias, residual and softmax cross-entropy,
 * forward and backward (layers.h).  Row work is spread over hk_parallel
 * in fixed row ranges; each output element is computed by exactly one
 * thread with a fixed operation order, so results never depend on the
 * thread count.  Parameter gradients (sums over rows) run on one thread.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "hk.h"
#include "layers.h"

#define ROWS_PER_PART 16

struct rows_job {
	float *y, *mean, *rstd, *dx;
	const float *x, *g, *b, *dy;
	int n, d, accumulate;
};

static int nparts(int n)
{
	int p = (n + ROWS_PER_PART - 1) / ROWS_PER_PART;

	return p < 1 ? 1 : p > 64 ? 64 : p;
}

static void ln_fwd_part(void *arg, int i, int np)
{
	struct rows_job *j = arg;
	size_t lo, hi;

	hk_split(j->n, i, np, 1, &lo, &hi);
	for (size_t r = lo; r < hi; r++) {
		const float *x = j->x + r * j->d;
		float *y = j->y + r * j->d;
		float m = 0, v = 0, rs;

		for (int c = 0; c < j->d; c++)
			m += x[c];
		m /= j->d;
		for (int c = 0; c < j->d; c++)
			v += (x[c] - m) * (x[c] - m);
		v /= j->d;
		rs = 1.0f / sqrtf(v + 1e-5f);
		for (int c = 0; c < j->d; c++)
			y[c] = (x[c] - m) * rs * j->g[c] + j->b[c];
		j->mean[r] = m;
		j->rstd[r] = rs;
	}
}

void ln_fwd(float *y, float *mean, float *rstd, const float *x,
	    const float *g, const float *b, int n, int d)
{
	struct rows_job j = { .y = y, .mean = mean, .rstd = rstd, .x = x,
			      .g = g, .b = b, .n = n, .d = d };

	hk_parallel(nparts(n), ln_fwd_part, &j);
}

static void ln_bwd_part(void *arg, int i, int np)
{
	struct rows_job *j = arg;
	size_t lo, hi;
	int d = j->d;

	hk_split(j->n, i, np, 1, &lo, &hi);
	for (size_t r = lo; r < hi; r++) {
		const float *x = j->x + r * d, *dy = j->dy + r * d;
		float *dx = j->dx + r * d;
		float m = j->mean[r], rs = j->rstd[r];
		float s1 = 0, s2 = 0;

		for (int c = 0; c < d; c++) {
			float dxh = dy[c] * j->g[c];

			s1 += dxh;
			s2 += dxh * (x[c] - m) * rs;
		}
		s1 /= d;
		s2 /= d;
		for (int c = 0; c < d; c++) {
			float xh = (x[c] - m) * rs;
			float v = rs * (dy[c] * j->g[c] - s1 - xh * s2);

			dx[c] = j->accumulate ? dx[c] + v : v;
		}
	}
}

void ln_bwd(float *dx, float *dg, float *db, const float *dy,
	    const float *x, const float *mean, const float *rstd,
	    const float *g, int n, int d, int accumulate)
{
	struct rows_job j = { .dx = dx, .mean = (float *)mean,
			      .rstd = (float *)rstd, .x = x, .g = g, .dy = dy,
			      .n = n, .d = d, .accumulate = accumulate };

	for (int r = 0; r < n; r++) {
		const float *xr = x + (size_t)r * d, *dyr = dy + (size_t)r * d;

		for (int c = 0; c < d; c++) {
			dg[c] += dyr[c] * (xr[c] - mean[r]) * rstd[r];
			db[c] += dyr[c];
		}
	}
	hk_parallel(nparts(n), ln_bwd_part, &j);
}

/*
 * GELU, tanh form, written as x * sigmoid(2z): 0.5 (1 + tanh z) = s with
 * s = 1 / (1 + exp(-2z)), z = K (x + 0.044715 x^3), and 1 - tanh^2 z =
 * 4 s (1 - s).  One exp and one division per element instead of tanhf
 * (libm's tanhf was a quarter of a step); the AVX-512 path computes exp
 * with a degree-6 polynomial (about 2 ulp).  Which path runs is fixed
 * per machine (hk_isa()), so results are the same run after run.
 */
#define GELU_K 0.7978845608028654f	/* sqrt(2 / pi) */
#define GELU_C 0.044715f

struct ew_job {
	float *y;
	const float *x, *dy;
	size_t n;
};

static inline float gelu_s(float x)
{
	float a = -2 * GELU_K * (x + GELU_C * x * x * x);

	a = a < -88 ? -88 : a > 88 ? 88 : a;
	return 1 / (1 + expf(a));
}

static inline float gelu_ds(float x, float s)
{
	return s + x * 2 * s * (1 - s) * GELU_K * (1 + 3 * GELU_C * x * x);
}

/* exp(a) for a in [-88, 88]: 2^n * p(r), r = a - n ln 2 in two parts. */
__attribute__((target("avx512f"))) static inline __m512 exp512(__m512 a)
{
	__m512 n = _mm512_roundscale_ps(_mm512_mul_ps(a,
				_mm512_set1_ps(1.44269504f)),
				_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), a);
	__m512 p = _mm512_set1_ps(1.0f / 720);

	r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1));
	return _mm512_scalef_ps(p, n);
}

/* s = sigmoid(2z) of 16 x */
__attribute__((target("avx512f"))) static inline __m512 gelu_s512(__m512 x)
{
	__m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
	__m512 a = _mm512_mul_ps(_mm512_set1_ps(-2 * GELU_K),
				 _mm512_fmadd_ps(x3, _mm512_set1_ps(GELU_C), x));
	__m512 one = _mm512_set1_ps(1);

	a = _mm512_min_ps(_mm512_max_ps(a, _mm512_set1_ps(-88)),
			  _mm512_set1_ps(88));
	return _mm512_div_ps(one, _mm512_add_ps(one, exp512(a)));
}

__attribute__((target("avx512f"))) static void
gelu_fwd512(float *y, const float *x, size_t lo, size_t hi)
{
	for (size_t k = lo; k < hi; k += 16) {
		__m512 v = _mm512_loadu_ps(x + k);

		_mm512_storeu_ps(y + k, _mm512_mul_ps(v, gelu_s512(v)));
	}
}

__attribute__((target("avx512f"))) static void
gelu_bwd512(float *dx, const float *x, const float *dy, size_t lo, size_t hi)
{
	__m512 k2 = _mm512_set1_ps(2 * GELU_K), c3 = _mm512_set1_ps(3 * GELU_C);
	__m512 one = _mm512_set1_ps(1);

	for (size_t k = lo; k < hi; k += 16) {
		__m512 v = _mm512_loadu_ps(x + k), s = gelu_s512(v);
		/* s + x * 2K s (1 - s) (1 + 3C x^2) */
		__m512 t = _mm512_mul_ps(_mm512_mul_ps(k2, s),
					 _mm512_sub_ps(one, s));
		__m512 q = _mm512_fmadd_ps(_mm512_mul_ps(c3, v), v, one);
		__m512 ds = _mm512_fmadd_ps(_mm512_mul_ps(v, t), q, s);

		_mm512_storeu_ps(dx + k,
				 _mm512_mul_ps(_mm512_loadu_ps(dy + k), ds));
	}
}

static int gelu_wide(size_t n)
{
	return hk_isa() >= HK_ISA_AVX512 && n % 16 == 0;
}

static void gelu_fwd_part(void *arg, int i, int np)
{
	struct ew_job *j = arg;
	size_t lo, hi;

	hk_split(j->n, i, np, 16, &lo, &hi);
	if (gelu_wide(j->n)) {
		gelu_fwd512(j->y, j->x, lo, hi);
		return;
	}
	for (size_t k = lo; k < hi; k++)
		j->y[k] = j->x[k] * gelu_s(j->x[k]);
}

static void gelu_bwd_part(void *arg, int i, int np)
{
	struct ew_job *j = arg;
	size_t lo, hi;

	hk_split(j->n, i, np, 16, &lo, &hi);
	if (gelu_wide(j->n)) {
		gelu_bwd512(j->y, j->x, j->dy, lo, hi);
		return;
	}
	for (size_t k = lo; k < hi; k++)
		j->y[k] = j->dy[k] * gelu_ds(j->x[k], gelu_s(j->x[k]));
}

static int ew_parts(size_t n)
{
	return n < 4096 ? 1 : hk_threads();
}

void gelu_fwd(float *y, const float *x, size_t n)
{
	struct ew_job j = { .y = y, .x = x, .n = n };

	hk_parallel(ew_parts(n), gelu_fwd_part, &j);
}

void gelu_bwd(float *dx, const float *x, const float *dy, size_t n)
{
	struct ew_job j = { .y = dx, .x = x, .dy = dy, .n = n };

	hk_parallel(ew_parts(n), gelu_bwd_part, &j);
}

void rows_init(float *y, const float *b, const float *res, int n, int d)
{
	for (int r = 0; r < n; r++) {
		float *yr = y + (size_t)r * d;

		if (res)
			for (int c = 0; c < d; c++)
				yr[c] = b[c] + res[(size_t)r * d + c];
		else
			memcpy(yr, b, d * sizeof(float));
	}
}

void bias_grad(float *db, const float *dy, int n, int d)
{
	memset(db, 0, sizeof(*db) * d);
	for (int r = 0; r < n; r++)
		for (int c = 0; c < d; c++)
			db[c] += dy[(size_t)r * d + c];
}

double xent_fwd_bwd(float *dlogits, const float *logits, const int *tgt,
		    int n, int v)
{
	double loss = 0;

	for (int r = 0; r < n; r++) {
		const float *l = logits + (size_t)r * v;
		float m = l[0], s = 0;

		for (int c = 1; c < v; c++)
			m = l[c] > m ? l[c] : m;
		for (int c = 0; c < v; c++)
			s += expf(l[c] - m);
		loss += (double)(m + logf(s) - l[tgt[r]]);
		if (dlogits) {
			float *dl = dlogits + (size_t)r * v;

			for (int c = 0; c < v; c++)
				dl[c] = expf(l[c] - m) / s / n;
			dl[tgt[r]] -= 1.0f / n;
		}
	}
	return loss / n;
}
