/* SPDX-License-Identifier: MIT */
/*
 * attn_simt.cuh — the SIMT attention kernels (fwd_simt, d_rows, bwd_dkdv,
 * bwd_dq; attn.cu's header comment describes them), the one copy of
 * each: attn.cu launches them through the runtime for hk_attn_*_cuda,
 * and hmm-train's fatbin (tools/hmm-train/gpu_kern.cu) includes them
 * with HK_ATTN_GLOBAL defined as extern "C" __global__ so that the
 * driver finds them by name (cuModuleGetFunction) with no runtime
 * linked.  Launch: 32 * S_ROWS threads; fwd_simt and bwd_dq a grid of
 * (ceil(Nq / S_ROWS), B * H), bwd_dkdv (ceil(Nk / S_ROWS), B * Hkv),
 * d_rows ceil(B * H * Nq / S_ROWS); d_rows before the other two.
 */
#ifndef HK_CUDA_ATTN_SIMT_CUH
#define HK_CUDA_ATTN_SIMT_CUH

#include "attn_dev.cuh"

#ifndef HK_ATTN_GLOBAL
#define HK_ATTN_GLOBAL __global__
#endif

/* ---- forward, SIMT ------------------------------------------------------ */

#define S_ROWS	HK_ATTN_SIMT_ROWS	/* warps (query rows) per block */
#define S_TK	16	/* keys per shared tile */
#define S_DV	8	/* 256 / 32: values of a row per lane */

HK_ATTN_GLOBAL void fwd_simt(struct args a, const void *q, const void *k,
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
HK_ATTN_GLOBAL void d_rows(struct args a, const void *o, const void *dout,
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
HK_ATTN_GLOBAL void bwd_dkdv(struct args a, const void *q, const void *k,
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
HK_ATTN_GLOBAL void bwd_dq(struct args a, const void *q, const void *k,
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

#endif /* HK_CUDA_ATTN_SIMT_CUH */
