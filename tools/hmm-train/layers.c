// SPDX-License-Identifier: MIT
/*
 * layers.c — layernorm, GELU, bias, residual and softmax cross-entropy,
 * forward and backward (layers.h).  Row work is spread over hk_parallel
 * in fixed row ranges; each output element is computed by exactly one
 * thread with a fixed operation order, so results never depend on the
 * thread count.  Parameter gradients (sums over rows) run on one thread.
 */
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

#define GELU_K 0.7978845608028654f	/* sqrt(2 / pi) */

struct ew_job {
	float *y;
	const float *x, *dy;
	size_t n;
};

static void gelu_fwd_part(void *arg, int i, int np)
{
	struct ew_job *j = arg;
	size_t lo, hi;

	hk_split(j->n, i, np, 16, &lo, &hi);
	for (size_t k = lo; k < hi; k++) {
		float x = j->x[k];

		j->y[k] = 0.5f * x * (1 + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
	}
}

static void gelu_bwd_part(void *arg, int i, int np)
{
	struct ew_job *j = arg;
	size_t lo, hi;

	hk_split(j->n, i, np, 16, &lo, &hi);
	for (size_t k = lo; k < hi; k++) {
		float x = j->x[k];
		float t = tanhf(GELU_K * (x + 0.044715f * x * x * x));
		float dt = (1 - t * t) * GELU_K * (1 + 3 * 0.044715f * x * x);

		j->y[k] = j->dy[k] * (0.5f * (1 + t) + 0.5f * x * dt);
	}
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

void bias_add(float *y, const float *b, int n, int d)
{
	for (int r = 0; r < n; r++)
		for (int c = 0; c < d; c++)
			y[(size_t)r * d + c] += b[c];
}

void bias_grad(float *db, const float *dy, int n, int d)
{
	memset(db, 0, sizeof(*db) * d);
	for (int r = 0; r < n; r++)
		for (int c = 0; c < d; c++)
			db[c] += dy[(size_t)r * d + c];
}

void add(float *y, const float *a, const float *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		y[i] = a[i] + b[i];
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
