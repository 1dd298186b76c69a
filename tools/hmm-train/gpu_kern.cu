// SPDX-License-Identifier: MIT
/*
 * gpu_kern.cu — the kernels of hmm-train --device cuda other than its
 * matrix products (cuBLAS): embedding, LayerNorm, GELU, bias/residual,
 * softmax cross-entropy and the qkv <-> heads packing, each the device
 * form of layers.c / model.c / attn.c; plus kernels/core's SIMT attention
 * kernels (attn_simt.cuh, the one copy, included with C names).
 *
 * Built by `make` into a fatbin for sm_80 and sm_90a (NVFLAGS, --fatbin),
 * embedded in hmm-train by gpu_fatbin.S and loaded through the driver
 * (cuModuleLoadData, cuModuleGetFunction by these extern "C" names), so
 * hmm-train links no CUDA runtime and runs where no GPU is.
 *
 * Determinism: no atomics.  Every output element has one owning thread
 * (or one warp, whose shuffle reduction has a fixed order), and sums
 * over rows (bias, LayerNorm and embedding gradients) are a thread per
 * column walking the rows in order: the same bits every run and at every
 * device budget.  Launch shapes: gpu_step.c (the GK_* constants below).
 *
 * History: v1 (this file), compiled for sm_80/sm_90a; not yet run on a
 * GPU (none on the machine it was written on): tests/gpu/run.sh's
 * "hmm-train --device cuda" is its first check.
 */
#include <math.h>
#include <stdint.h>

#define HK_ATTN_GLOBAL extern "C" __global__
#include "cuda/attn_simt.cuh"

#define GELU_K 0.7978845608028654f	/* layers.c's constants */
#define GELU_C 0.044715f

/* One thread per element: y[r][c] = wte[tok[r]][c] + wpe[r % T][c]. */
extern "C" __global__ void gk_embed_fwd(float *x, const float *wte,
					const float *wpe, const int *tok,
					int n, int T, int d)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	int r, c;

	if (i >= (size_t)n * d)
		return;
	r = (int)(i / d), c = (int)(i % d);
	x[i] = wte[(size_t)tok[r] * d + c] + wpe[(size_t)(r % T) * d + c];
}

/* gte[v][c] += sum of dx[r][c] over rows with tok[r] = v: a thread per
 * column c walks the rows in order (it alone writes column c). */
extern "C" __global__ void gk_wte_bwd(float *gte, const float *dx,
				      const int *tok, int n, int d)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;

	if (c >= d)
		return;
	for (int r = 0; r < n; r++)
		gte[(size_t)tok[r] * d + c] += dx[(size_t)r * d + c];
}

/* gpe[t][c] = sum over b of dx[b*T + t][c]: a thread per (t, c). */
extern "C" __global__ void gk_wpe_bwd(float *gpe, const float *dx, int n,
				      int T, int d)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	float s = 0;

	if (i >= (size_t)T * d)
		return;
	for (int r = (int)(i / d); r < n; r += T)
		s += dx[(size_t)r * d + i % d];
	gpe[i] = s;
}

/* A warp per row: y = (x - mean) * rstd * g + b (layers.c ln_fwd). */
extern "C" __global__ void gk_ln_fwd(float *y, float *mean, float *rstd,
				     const float *x, const float *g,
				     const float *b, int n, int d)
{
	int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	const float *xr = x + (size_t)r * d;
	float m = 0, v = 0, rs;

	if (r >= n)
		return;
	for (int c = lane; c < d; c += 32)
		m += xr[c];
	m = warp_sum(m) / d;
	for (int c = lane; c < d; c += 32)
		v += (xr[c] - m) * (xr[c] - m);
	v = warp_sum(v) / d;
	rs = 1.0f / sqrtf(v + 1e-5f);
	for (int c = lane; c < d; c += 32)
		y[(size_t)r * d + c] = (xr[c] - m) * rs * g[c] + b[c];
	if (!lane) {
		mean[r] = m;
		rstd[r] = rs;
	}
}

/* A warp per row: dx (+)= LayerNorm's input gradient (ln_bwd_part). */
extern "C" __global__ void gk_ln_bwd_dx(float *dx, const float *dy,
					const float *x, const float *mean,
					const float *rstd, const float *g,
					int n, int d, int accumulate)
{
	int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	size_t o = (size_t)r * d;
	float m, rs, s1 = 0, s2 = 0;

	if (r >= n)
		return;
	m = mean[r], rs = rstd[r];
	for (int c = lane; c < d; c += 32) {
		float dxh = dy[o + c] * g[c];

		s1 += dxh;
		s2 += dxh * (x[o + c] - m) * rs;
	}
	s1 = warp_sum(s1) / d;
	s2 = warp_sum(s2) / d;
	for (int c = lane; c < d; c += 32) {
		float xh = (x[o + c] - m) * rs;
		float v = rs * (dy[o + c] * g[c] - s1 - xh * s2);

		dx[o + c] = accumulate ? dx[o + c] + v : v;
	}
}

/* A thread per column: dg = sum dy * xhat, db = sum dy, rows in order
 * (written, not added: the block's gradient starts here). */
extern "C" __global__ void gk_ln_bwd_dgdb(float *dg, float *db,
					  const float *dy, const float *x,
					  const float *mean, const float *rstd,
					  int n, int d)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	float sg = 0, sb = 0;

	if (c >= d)
		return;
	for (int r = 0; r < n; r++) {
		float v = dy[(size_t)r * d + c];

		sg += v * (x[(size_t)r * d + c] - mean[r]) * rstd[r];
		sb += v;
	}
	dg[c] = sg;
	db[c] = sb;
}

/* A thread per column: db[c] = sum over rows of dy[r][c], in order. */
extern "C" __global__ void gk_bias_grad(float *db, const float *dy, int n,
					int d)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	float s = 0;

	if (c >= d)
		return;
	for (int r = 0; r < n; r++)
		s += dy[(size_t)r * d + c];
	db[c] = s;
}

/* y[r][c] = b[c] (+ res[r][c]): the bias a product is added to. */
extern "C" __global__ void gk_rows_init(float *y, const float *b,
					const float *res, int n, int d)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i >= (size_t)n * d)
		return;
	y[i] = b[i % d] + (res ? res[i] : 0.0f);
}

__device__ __forceinline__ float gelu_s(float x)
{
	float a = -2 * GELU_K * (x + GELU_C * x * x * x);

	a = fminf(fmaxf(a, -88.0f), 88.0f);
	return 1 / (1 + expf(a));
}

extern "C" __global__ void gk_gelu_fwd(float *y, const float *x, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		y[i] = x[i] * gelu_s(x[i]);
}

/* dx = dy * gelu'(x); dx may be dy. */
extern "C" __global__ void gk_gelu_bwd(float *dx, const float *x,
				       const float *dy, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	float v, s;

	if (i >= n)
		return;
	v = x[i], s = gelu_s(v);
	dx[i] = dy[i] * (s + v * 2 * s * (1 - s) * GELU_K *
			 (1 + 3 * GELU_C * v * v));
}

/* A warp per row: loss[r] = logsumexp - logit of the target, and the
 * logits turned in place into d(mean loss)/d(logits). */
extern "C" __global__ void gk_xent(float *l, float *loss, const int *tgt,
				   int n, int V)
{
	int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	float *lr = l + (size_t)r * V, m = -INFINITY, s = 0, lt;

	if (r >= n)
		return;
	for (int c = lane; c < V; c += 32)
		m = fmaxf(m, lr[c]);
	for (int o = 16; o; o >>= 1)
		m = fmaxf(m, __shfl_xor_sync(FULL, m, o));
	for (int c = lane; c < V; c += 32)
		s += expf(lr[c] - m);
	s = warp_sum(s);
	lt = lr[tgt[r]];
	__syncwarp();
	for (int c = lane; c < V; c += 32)
		lr[c] = expf(lr[c] - m) / s / n - (c == tgt[r] ? 1.0f / n : 0);
	if (!lane)
		loss[r] = m + logf(s) - lt;
}

/* dst[b][h][t][j] = src[(b*T+t)*ld + off + h*hd + j] (back: the other
 * way): a thread per element of [B][H][T][hd] (attn.c's pack). */
extern "C" __global__ void gk_pack(float *dst, float *src, int ld, int off,
				   int B, int T, int d, int H, int back)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	int hd = d / H, j, t, h, b;
	size_t s;

	if (i >= (size_t)B * T * d)
		return;
	j = (int)(i % hd);
	t = (int)(i / hd % T);
	h = (int)(i / ((size_t)hd * T) % H);
	b = (int)(i / ((size_t)hd * T * H));
	s = ((size_t)b * T + t) * ld + off + (size_t)h * hd + j;
	if (back)
		src[s] = dst[i];
	else
		dst[i] = src[s];
}
