// SPDX-License-Identifier: MIT
/*
 * attn.cu — FlashAttention-2 forward and backward on NVIDIA GPUs, the
 * contract of hk_attn.h on device pointers (hk_attn_fwd_cuda,
 * hk_attn_bwd_cuda).
 *
 * Built by `make` for sm_80 and sm_90a (NVFLAGS in the Makefile):
 *	nvcc -O3 -std=c++17 -Ikernels/core -gencode arch=compute_80,code=sm_80
 *	     -gencode arch=compute_90a,code=sm_90a -c kernels/core/cuda/attn.cu
 * Validated against the CPU kernels (themselves tested against fp64) by
 * tests/gpu/test_attn_gpu.cu; timed by tests/gpu/bench_attn_gpu.cu.
 *
 * Kernels, picked per call:
 *  - bf16 with d in {32, 64, 80, 96, 128} on sm_80+: the tensor-core
 *    forward and backward of attn_mma.cu (mma.sync.m16n8k16, fp32
 *    accumulators; see that file).
 *  - everything else (fp32, any d <= 256), or HK_ATTN_SIMT set: the SIMT
 *    kernels here.  fwd_simt: a warp per query row, each lane holding d/32
 *    of q and o, K/V tiles of 16 keys in shared memory, online softmax per
 *    tile.  bwd_dkdv: a warp per key row walks the query rows (and heads
 *    of the GQA group) that see it, recomputing P from lse, dK and dV in
 *    registers; bwd_dq: a warp per query row walks its keys.
 *  - both: d_rows computes D = rowsum(dout * o) first.  No atomics: each
 *    output row has one owner, results are deterministic.
 *
 * History: v1, SIMT everywhere plus the mma.sync forward and backward.
 * Not yet run on a GPU (no GPU on the machines this was written on):
 * tests/gpu/run.sh on a GPU machine is the first check, and its numbers
 * belong here.
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "hk_attn.h"

extern "C" int hk_attn_resolve(const struct hk_attn *a, struct hk_attn *out);
extern "C" int hk_attn_bad(const char *fmt, int v);

#include "attn_dev.cuh"

/* ---- forward, SIMT ------------------------------------------------------ */

#define S_ROWS	8	/* warps (query rows) per block */
#define S_TK	16	/* keys per shared tile */
#define S_DV	8	/* 256 / 32: values of a row per lane */

__global__ void fwd_simt(struct args a, const void *q, const void *k,
			 const void *v, void *o, float *lse)
{
	__shared__ float ks[S_TK][256], vs[S_TK][256];
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int bh = blockIdx.y, b = bh / a.H, g = bh % a.H / a.grp;
	int i0 = blockIdx.x * S_ROWS, i = i0 + warp;
	int last = min(i0 + S_ROWS, a.Nq) - 1;
	int jend = vis(a, last), myvis = i < a.Nq ? vis(a, i) : 0;
	float qr[S_DV], acc[S_DV], m = -INFINITY, l = 0;

	for (int t = 0; t < S_DV; t++) {
		int x = lane + 32 * t;

		qr[t] = i < a.Nq && x < a.d ?
			ld(q, ((size_t)bh * a.Nq + i) * a.d + x, a.dtype) : 0;
		acc[t] = 0;
	}
	for (int j0 = 0; j0 < jend; j0 += S_TK) {
		int n = min(S_TK, a.Nk - j0);

		__syncthreads();
		for (int e = threadIdx.x; e < S_TK * a.d; e += blockDim.x) {
			int r = e / a.d, x = e % a.d;
			size_t off = r < n ? kv_off(a, b, g, j0 + r) + x : 0;

			ks[r][x] = r < n ? ld(k, off, a.dtype) : 0;
			vs[r][x] = r < n ? ld(v, off, a.dtype) : 0;
		}
		__syncthreads();
		int lim = min(n, myvis - j0);

		if (lim <= 0)
			continue;
		float s[S_TK], mx = -INFINITY;

		for (int r = 0; r < S_TK; r++) {
			float p = 0;

			for (int t = 0; t < S_DV; t++)
				if (lane + 32 * t < a.d)
					p += qr[t] * ks[r][lane + 32 * t];
			p = warp_sum(p) * a.scale;
			s[r] = r < lim ? p : -INFINITY;
			mx = fmaxf(mx, s[r]);
		}
		float mnew = fmaxf(m, mx);
		float alpha = m == -INFINITY ? 0.f : __expf(m - mnew);

		l *= alpha;
		for (int t = 0; t < S_DV; t++)
			acc[t] *= alpha;
		for (int r = 0; r < lim; r++) {
			float p = __expf(s[r] - mnew);

			l += p;
			for (int t = 0; t < S_DV; t++)
				if (lane + 32 * t < a.d)
					acc[t] += p * vs[r][lane + 32 * t];
		}
		m = mnew;
	}
	if (i >= a.Nq)
		return;
	for (int t = 0; t < S_DV; t++) {
		int x = lane + 32 * t;

		if (x < a.d)
			st(o, ((size_t)bh * a.Nq + i) * a.d + x,
			   l > 0 ? acc[t] / l : 0.f, a.dtype);
	}
	if (lse && lane == 0)
		lse[(size_t)bh * a.Nq + i] = l > 0 ? m + logf(l) : -INFINITY;
}

/* ---- backward, SIMT ----------------------------------------------------- */

/* D[row] = sum dout * o, a warp per row. */
__global__ void d_rows(struct args a, const void *o, const void *dout,
		       float *D)
{
	size_t row = (size_t)blockIdx.x * S_ROWS + threadIdx.x / 32;
	int lane = threadIdx.x % 32;
	float s = 0;

	if (row >= (size_t)a.B * a.H * a.Nq)
		return;
	for (int x = lane; x < a.d; x += 32)
		s += ld(dout, row * a.d + x, a.dtype) *
		     ld(o, row * a.d + x, a.dtype);
	s = warp_sum(s);
	if (lane == 0)
		D[row] = s;
}

/* Shared tile of query-side rows for bwd_dkdv. */
#define B_TQ 16

/* dK, dV of one key row per warp; walks the rows (and heads) that see it. */
__global__ void bwd_dkdv(struct args a, const void *q, const void *k,
			 const void *v, const float *lse, const void *dout,
			 const float *D, void *dk, void *dv)
{
	__shared__ float qs[B_TQ][256], dos[B_TQ][256];
	__shared__ float ls[B_TQ], ds_[B_TQ];
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int bg = blockIdx.y, b = bg / a.Hkv, g = bg % a.Hkv;
	int j0 = blockIdx.x * S_ROWS, j = j0 + warp;
	float kr[S_DV], vr[S_DV], dkr[S_DV], dvr[S_DV];
	/* first query row that sees key j0: i + off + 1 > j0 */
	int istart = a.causal ? max(0, j0 - a.off) : 0;

	for (int t = 0; t < S_DV; t++) {
		int x = lane + 32 * t;
		bool in = j < a.Nk && x < a.d;

		kr[t] = in ? ld(k, kv_off(a, b, g, j) + x, a.dtype) : 0;
		vr[t] = in ? ld(v, kv_off(a, b, g, j) + x, a.dtype) : 0;
		dkr[t] = dvr[t] = 0;
	}
	for (int h = g * a.grp; h < (g + 1) * a.grp; h++) {
		int bh = b * a.H + h;

		for (int ib = istart; ib < a.Nq; ib += B_TQ) {
			int n = min(B_TQ, a.Nq - ib);

			__syncthreads();
			for (int e = threadIdx.x; e < B_TQ * a.d; e += blockDim.x) {
				int r = e / a.d, x = e % a.d;
				size_t off = ((size_t)bh * a.Nq + ib + r) * a.d + x;

				qs[r][x] = r < n ? ld(q, off, a.dtype) : 0;
				dos[r][x] = r < n ? ld(dout, off, a.dtype) : 0;
			}
			if (threadIdx.x < B_TQ) {
				int r = threadIdx.x;
				size_t row = (size_t)bh * a.Nq + ib + r;

				ls[r] = r < n ? lse[row] : -INFINITY;
				ds_[r] = r < n ? D[row] : 0;
			}
			__syncthreads();
			if (j >= a.Nk)
				continue;
			for (int r = 0; r < n; r++) {
				float s = 0, dp = 0, p, dsc;

				if (j >= vis(a, ib + r) || ls[r] == -INFINITY)
					continue;
				for (int t = 0; t < S_DV; t++) {
					int x = lane + 32 * t;

					if (x < a.d) {
						s += qs[r][x] * kr[t];
						dp += dos[r][x] * vr[t];
					}
				}
				s = warp_sum(s);
				dp = warp_sum(dp);
				p = __expf(s * a.scale - ls[r]);
				dsc = p * (dp - ds_[r]) * a.scale;
				for (int t = 0; t < S_DV; t++) {
					int x = lane + 32 * t;

					if (x < a.d) {
						dvr[t] += p * dos[r][x];
						dkr[t] += dsc * qs[r][x];
					}
				}
			}
		}
	}
	if (j >= a.Nk)
		return;
	for (int t = 0; t < S_DV; t++) {
		int x = lane + 32 * t;
		size_t off = (((size_t)b * a.Hkv + g) * a.Nk + j) * a.d + x;

		if (x < a.d) {
			st(dk, off, dkr[t], a.dtype);
			st(dv, off, dvr[t], a.dtype);
		}
	}
}

/* dQ of one query row per warp; walks its keys. */
__global__ void bwd_dq(struct args a, const void *q, const void *k,
		       const void *v, const float *lse, const void *dout,
		       const float *D, void *dq)
{
	__shared__ float ks[S_TK][256], vs[S_TK][256];
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int bh = blockIdx.y, b = bh / a.H, g = bh % a.H / a.grp;
	int i0 = blockIdx.x * S_ROWS, i = i0 + warp;
	int last = min(i0 + S_ROWS, a.Nq) - 1;
	int jend = vis(a, last), myvis = i < a.Nq ? vis(a, i) : 0;
	size_t row = (size_t)bh * a.Nq + i;
	float qr[S_DV], dor[S_DV], dqr[S_DV];
	float L = i < a.Nq ? lse[row] : -INFINITY, Dr = i < a.Nq ? D[row] : 0;

	for (int t = 0; t < S_DV; t++) {
		int x = lane + 32 * t;
		bool in = i < a.Nq && x < a.d;

		qr[t] = in ? ld(q, row * a.d + x, a.dtype) : 0;
		dor[t] = in ? ld(dout, row * a.d + x, a.dtype) : 0;
		dqr[t] = 0;
	}
	for (int j0 = 0; j0 < jend; j0 += S_TK) {
		int n = min(S_TK, a.Nk - j0);

		__syncthreads();
		for (int e = threadIdx.x; e < S_TK * a.d; e += blockDim.x) {
			int r = e / a.d, x = e % a.d;
			size_t off = r < n ? kv_off(a, b, g, j0 + r) + x : 0;

			ks[r][x] = r < n ? ld(k, off, a.dtype) : 0;
			vs[r][x] = r < n ? ld(v, off, a.dtype) : 0;
		}
		__syncthreads();
		int lim = min(n, myvis - j0);

		if (L == -INFINITY)
			continue;
		for (int r = 0; r < lim; r++) {
			float s = 0, dp = 0, p;

			for (int t = 0; t < S_DV; t++) {
				int x = lane + 32 * t;

				if (x < a.d) {
					s += qr[t] * ks[r][x];
					dp += dor[t] * vs[r][x];
				}
			}
			s = warp_sum(s);
			dp = warp_sum(dp);
			p = __expf(s * a.scale - L);
			p = p * (dp - Dr) * a.scale;
			for (int t = 0; t < S_DV; t++) {
				int x = lane + 32 * t;

				if (x < a.d)
					dqr[t] += p * ks[r][x];
			}
		}
	}
	if (i >= a.Nq)
		return;
	for (int t = 0; t < S_DV; t++) {
		int x = lane + 32 * t;

		if (x < a.d)
			st(dq, row * a.d + x, dqr[t], a.dtype);
	}
}

/* ---- host --------------------------------------------------------------- */

static int cuda_err(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	hk_attn_bad(what, (int)e);
	return -EIO;
}

/*
 * 1 if the tensor-core kernels (attn_mma.cu) take this call: bf16, a d
 * they were built for, a device with mma.sync bf16, and HK_ATTN_SIMT
 * unset (it forces the SIMT kernels, to compare or to rule them out).
 */
static int use_mma(const struct hk_attn *a)
{
	int dev, major = 0;

	if (a->dtype != HK_BF16 || !hk_attn_mma_d_ok(a->d) ||
	    getenv("HK_ATTN_SIMT"))
		return 0;
	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
				   dev) != cudaSuccess)
		return 0;
	return major >= 8;
}

extern "C" int hk_attn_fwd_cuda(const struct hk_attn *a0, const void *q,
				const void *k, const void *v, void *o,
				float *lse, void *stream)
{
	struct hk_attn a;
	cudaStream_t s = (cudaStream_t)stream;
	int r = hk_attn_resolve(a0, &a);

	if (r)
		return r;
	if (!a.B || !a.H || !a.Nq)
		return 0;
	if (!q || !o || (a.Nk && (!k || !v)))
		return hk_attn_bad("hk_attn_fwd_cuda: NULL q, k, v or o%.0d", 0);
	struct args g = make_args(&a);

	if (use_mma(&a)) {
		hk_attn_mma_fwd(g, q, k, v, o, lse, s);
	} else {
		dim3 grid((a.Nq + S_ROWS - 1) / S_ROWS, a.B * a.H);

		fwd_simt<<<grid, 32 * S_ROWS, 0, s>>>(g, q, k, v, o, lse);
	}
	return cuda_err(cudaGetLastError(),
			"hk_attn_fwd_cuda: launch failed (cudaError %d)");
}

extern "C" int hk_attn_bwd_cuda(const struct hk_attn *a0, const void *q,
				const void *k, const void *v, const void *o,
				const float *lse, const void *dout, void *dq,
				void *dk, void *dv, void *stream)
{
	struct hk_attn a;
	cudaStream_t s = (cudaStream_t)stream;
	size_t nq;
	float *D = NULL;
	int r = hk_attn_resolve(a0, &a);

	if (r)
		return r;
	if (!a.B || !a.H)
		return 0;
	if (a.Nq && (!q || !o || !lse || !dout || !dq))
		return hk_attn_bad("hk_attn_bwd_cuda: NULL q, o, lse, dout or "
				   "dq%.0d", 0);
	if (a.Nk && (!k || !v || !dk || !dv))
		return hk_attn_bad("hk_attn_bwd_cuda: NULL k, v, dk or dv%.0d",
				   0);
	struct args g = make_args(&a);

	nq = (size_t)a.B * a.H * a.Nq;
	r = cuda_err(cudaMallocAsync((void **)&D, (nq + 1) * sizeof(float), s),
		     "hk_attn_bwd_cuda: cudaMallocAsync of D (cudaError %d)");
	if (r)
		return r == -EIO ? -ENOMEM : r;
	if (nq)
		d_rows<<<(unsigned)((nq + S_ROWS - 1) / S_ROWS), 32 * S_ROWS, 0,
			 s>>>(g, o, dout, D);
	if (use_mma(&a)) {
		hk_attn_mma_bwd(g, q, k, v, lse, dout, D, dq, dk, dv, s);
	} else {
		dim3 gq((a.Nq + S_ROWS - 1) / S_ROWS, a.B * a.H);
		dim3 gk((a.Nk + S_ROWS - 1) / S_ROWS, a.B * a.Hkv);

		if (a.Nq)
			bwd_dq<<<gq, 32 * S_ROWS, 0, s>>>(g, q, k, v, lse, dout,
							  D, dq);
		if (a.Nk)
			bwd_dkdv<<<gk, 32 * S_ROWS, 0, s>>>(g, q, k, v, lse,
							    dout, D, dk, dv);
	}
	r = cuda_err(cudaGetLastError(),
		     "hk_attn_bwd_cuda: launch failed (cudaError %d)");
	cudaFreeAsync(D, s);
	return r;
}
