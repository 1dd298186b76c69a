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
 * Kernels:
 *  - fwd_mma: the FA2 forward with tensor cores, for bf16 and d in
 *    {32, 64, 80, 96, 128}.  A block of 4 warps owns 64 query rows (16
 *    per warp, Q fragments in registers); K/V tiles of 32 keys are
 *    gathered through the block table into shared memory; S = Q K^T and
 *    O += P V run on mma.sync.m16n8k16 bf16 with fp32 accumulators; the
 *    online softmax works on the accumulator fragments (row max and sum
 *    across the 4 threads of a quad by shuffles), P is re-packed from the
 *    S accumulators into A fragments in registers (no shared memory).
 *  - fwd_simt: every other case (fp32, any d <= 256): a warp per query
 *    row, each lane holding d/32 of q and o, K/V tiles of 16 keys in
 *    shared memory, online softmax per tile.
 *  - backward, deterministic (no atomics): d_rows computes
 *    D = rowsum(dout * o); bwd_dkdv gives each warp one key row and walks
 *    the query rows (and heads of the GQA group) that see it, recomputing
 *    P from lse, accumulating dK and dV in registers; bwd_dq gives each
 *    warp one query row and walks its keys.  fp32 SIMT.
 *
 * History: v1 (this file) SIMT everywhere + mma.sync forward.  Not yet
 * run on a GPU in this tree's CI (no GPU on the build machines); the
 * numbers go in docs/architecture.md when tests/gpu/run.sh has run.
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>

#include "hk_attn.h"

extern "C" int hk_attn_resolve(const struct hk_attn *a, struct hk_attn *out);
extern "C" int hk_attn_bad(const char *fmt, int v);

#define FULL 0xffffffffu

/* What every kernel needs to know about one call (passed by value). */
struct args {
	int B, H, Hkv, Nq, Nk, d, dtype, causal, grp, off;
	float scale;
	const int32_t *table;
	int bs, maxb;
};

static struct args make_args(const struct hk_attn *a)
{
	struct args g;

	g.B = a->B;
	g.H = a->H;
	g.Hkv = a->Hkv;
	g.Nq = a->Nq;
	g.Nk = a->Nk;
	g.d = a->d;
	g.dtype = a->dtype;
	g.causal = a->causal;
	g.grp = a->H / a->Hkv;
	g.off = a->Nk - a->Nq;
	g.scale = a->scale;
	g.table = a->block_table;
	g.bs = a->block_size;
	g.maxb = a->max_blocks;
	return g;
}

__device__ __forceinline__ float ld(const void *p, size_t i, int dtype)
{
	if (dtype == HK_F32)
		return ((const float *)p)[i];
	return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}

__device__ __forceinline__ void st(void *p, size_t i, float x, int dtype)
{
	if (dtype == HK_F32)
		((float *)p)[i] = x;
	else
		((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(x);
}

/* Element offset of key/value row t of (batch b, kv head g). */
__device__ __forceinline__ size_t kv_off(const struct args &a, int b, int g,
					 int t)
{
	if (!a.table)
		return (((size_t)b * a.Hkv + g) * a.Nk + t) * a.d;
	int32_t blk = a.table[(size_t)b * a.maxb + t / a.bs];

	return (((size_t)blk * a.Hkv + g) * a.bs + t % a.bs) * a.d;
}

/* Keys query row i sees: [0, vis). */
__device__ __forceinline__ int vis(const struct args &a, int i)
{
	if (!a.causal)
		return a.Nk;
	int n = i + a.off + 1;

	return n < 0 ? 0 : n > a.Nk ? a.Nk : n;
}

__device__ __forceinline__ float warp_sum(float x)
{
	for (int o = 16; o; o >>= 1)
		x += __shfl_xor_sync(FULL, x, o);
	return x;
}

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

/* ---- forward, tensor cores (bf16, sm_80+) ------------------------------ */

#define M_WARPS	4
#define M_ROWS	(16 * M_WARPS)	/* query rows per block */
#define M_TK	32		/* keys per shared tile */

__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4],
					 uint32_t b0, uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
		     "{%0,%1,%2,%3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
		       "r"(b1));
#endif
}

__device__ __forceinline__ uint32_t pack2(float lo, float hi)
{
	__nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);

	return *(uint32_t *)&v;
}

__device__ __forceinline__ uint32_t pack2h(__nv_bfloat16 lo,
					   __nv_bfloat16 hi)
{
	__nv_bfloat162 v;

	v.x = lo;
	v.y = hi;
	return *(uint32_t *)&v;
}

/*
 * Fragment layout of m16n8k16 (g = lane / 4, t = lane % 4): A regs hold
 * rows g, g+8 and columns 2t, 2t+1 (regs 0, 1) and 2t+8, 2t+9 (regs 2,
 * 3); B regs hold rows (k) 2t, 2t+1 and 2t+8, 2t+9 of column (n) g;
 * C holds rows g (c0, c1) and g+8 (c2, c3), columns 2t, 2t+1.
 */
template <int D>
__global__ void __launch_bounds__(32 * M_WARPS)
fwd_mma(struct args a, const __nv_bfloat16 *q, const __nv_bfloat16 *k,
	const __nv_bfloat16 *v, __nv_bfloat16 *o, float *lse)
{
	constexpr int LD = D + 8;	/* padded row: fewer bank conflicts */
	__shared__ __align__(16) __nv_bfloat16 qs[M_ROWS * LD];
	__shared__ __align__(16) __nv_bfloat16 ks[M_TK * LD], vs[M_TK * LD];
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int gq = lane / 4, tq = lane % 4;
	int bh = blockIdx.y, b = bh / a.H, g = bh % a.H / a.grp;
	int i0 = blockIdx.x * M_ROWS;
	int last = min(i0 + M_ROWS, a.Nq) - 1;
	int jend = vis(a, last);
	int r0 = i0 + warp * 16 + gq, r1 = r0 + 8;	/* this thread's rows */
	int vis0 = r0 < a.Nq ? vis(a, r0) : 0, vis1 = r1 < a.Nq ? vis(a, r1) : 0;
	uint32_t qa[D / 16][4];
	float oc[D / 8][4], m[2] = { -INFINITY, -INFINITY }, l[2] = { 0, 0 };

	for (int e = threadIdx.x; e < M_ROWS * D / 2; e += blockDim.x) {
		int r = e / (D / 2), x = 2 * (e % (D / 2));
		size_t off = ((size_t)bh * a.Nq + i0 + r) * D + x;
		uint32_t val = 0;

		if (i0 + r < a.Nq)
			val = *(const uint32_t *)(q + off);
		*(uint32_t *)&qs[r * LD + x] = val;
	}
	__syncthreads();
	for (int kc = 0; kc < D / 16; kc++) {
		const __nv_bfloat16 *base = qs + (warp * 16 + gq) * LD +
					    kc * 16 + 2 * tq;

		qa[kc][0] = *(const uint32_t *)base;
		qa[kc][1] = *(const uint32_t *)(base + 8 * LD);
		qa[kc][2] = *(const uint32_t *)(base + 8);
		qa[kc][3] = *(const uint32_t *)(base + 8 * LD + 8);
	}
	for (int dt = 0; dt < D / 8; dt++)
		oc[dt][0] = oc[dt][1] = oc[dt][2] = oc[dt][3] = 0;

	for (int j0 = 0; j0 < jend; j0 += M_TK) {
		int n = min(M_TK, a.Nk - j0);

		__syncthreads();
		for (int e = threadIdx.x; e < M_TK * D / 2; e += blockDim.x) {
			int r = e / (D / 2), x = 2 * (e % (D / 2));
			uint32_t kv = 0, vv = 0;

			if (r < n) {
				size_t off = kv_off(a, b, g, j0 + r) + x;

				kv = *(const uint32_t *)(k + off);
				vv = *(const uint32_t *)(v + off);
			}
			*(uint32_t *)&ks[r * LD + x] = kv;
			*(uint32_t *)&vs[r * LD + x] = vv;
		}
		__syncthreads();

		/* S = Q K^T: 16 rows x 32 keys per warp */
		float sc[M_TK / 8][4];

		for (int nt = 0; nt < M_TK / 8; nt++) {
			sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0;
			for (int kc = 0; kc < D / 16; kc++) {
				const __nv_bfloat16 *kb = ks + (nt * 8 + gq) * LD +
							  kc * 16 + 2 * tq;

				mma16816(sc[nt], qa[kc], *(const uint32_t *)kb,
					 *(const uint32_t *)(kb + 8));
			}
		}
		/* scale, mask, row max over the quad */
		float mx[2] = { -INFINITY, -INFINITY };

		for (int nt = 0; nt < M_TK / 8; nt++)
			for (int e = 0; e < 4; e++) {
				int key = j0 + nt * 8 + 2 * tq + (e & 1);
				int lim = e < 2 ? vis0 : vis1;
				float s = sc[nt][e] * a.scale;

				s = key < lim ? s : -INFINITY;
				sc[nt][e] = s;
				mx[e / 2] = fmaxf(mx[e / 2], s);
			}
		float alpha[2];

		for (int h = 0; h < 2; h++) {
			mx[h] = fmaxf(mx[h], __shfl_xor_sync(FULL, mx[h], 1));
			mx[h] = fmaxf(mx[h], __shfl_xor_sync(FULL, mx[h], 2));
			float mnew = fmaxf(m[h], mx[h]);

			alpha[h] = mnew == -INFINITY ? 1.f :
				   m[h] == -INFINITY ? 0.f :
				   __expf(m[h] - mnew);
			m[h] = mnew;
			l[h] *= alpha[h];
		}
		for (int nt = 0; nt < M_TK / 8; nt++)
			for (int e = 0; e < 4; e++) {
				float mm = m[e / 2];
				float p = mm == -INFINITY ? 0.f :
					  __expf(sc[nt][e] - mm);

				sc[nt][e] = p;
				l[e / 2] += p;
			}
		for (int dt = 0; dt < D / 8; dt++) {
			oc[dt][0] *= alpha[0];
			oc[dt][1] *= alpha[0];
			oc[dt][2] *= alpha[1];
			oc[dt][3] *= alpha[1];
		}
		/* O += P V: P from the S accumulators, V^T fragments */
		for (int kc = 0; kc < M_TK / 16; kc++) {
			uint32_t pa[4] = {
				pack2(sc[2 * kc][0], sc[2 * kc][1]),
				pack2(sc[2 * kc][2], sc[2 * kc][3]),
				pack2(sc[2 * kc + 1][0], sc[2 * kc + 1][1]),
				pack2(sc[2 * kc + 1][2], sc[2 * kc + 1][3]),
			};
			const __nv_bfloat16 *vb = vs + (kc * 16 + 2 * tq) * LD + gq;

			for (int dt = 0; dt < D / 8; dt++) {
				const __nv_bfloat16 *p = vb + dt * 8;
				uint32_t b0 = pack2h(p[0], p[LD]);
				uint32_t b1 = pack2h(p[8 * LD], p[9 * LD]);

				mma16816(oc[dt], pa, b0, b1);
			}
		}
	}
	/* finish: full row sums, o = O / l, lse */
	for (int h = 0; h < 2; h++) {
		l[h] += __shfl_xor_sync(FULL, l[h], 1);
		l[h] += __shfl_xor_sync(FULL, l[h], 2);
	}
	for (int h = 0; h < 2; h++) {
		int r = h ? r1 : r0;
		float inv = l[h] > 0 ? 1.f / l[h] : 0.f;

		if (r >= a.Nq)
			continue;
		for (int dt = 0; dt < D / 8; dt++) {
			size_t off = ((size_t)bh * a.Nq + r) * D + dt * 8 + 2 * tq;

			*(uint32_t *)(o + off) = pack2(oc[dt][2 * h] * inv,
						       oc[dt][2 * h + 1] * inv);
		}
		if (lse && tq == 0)
			lse[(size_t)bh * a.Nq + r] =
				l[h] > 0 ? m[h] + logf(l[h]) : -INFINITY;
	}
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

template <int D>
static void launch_mma(const struct args &g, dim3 grid, cudaStream_t s,
		       const void *q, const void *k, const void *v, void *o,
		       float *lse)
{
	fwd_mma<D><<<grid, 32 * M_WARPS, 0, s>>>(
		g, (const __nv_bfloat16 *)q, (const __nv_bfloat16 *)k,
		(const __nv_bfloat16 *)v, (__nv_bfloat16 *)o, lse);
}

/* 1 if the tensor-core forward takes this call (bf16, d it was built for,
 * and a device that has mma.sync bf16). */
static int use_mma(const struct hk_attn *a)
{
	int dev, major = 0;

	if (a->dtype != HK_BF16 || (a->d != 32 && a->d != 64 && a->d != 80 &&
				    a->d != 96 && a->d != 128))
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
		dim3 grid((a.Nq + M_ROWS - 1) / M_ROWS, a.B * a.H);

		switch (a.d) {
		case 32: launch_mma<32>(g, grid, s, q, k, v, o, lse); break;
		case 64: launch_mma<64>(g, grid, s, q, k, v, o, lse); break;
		case 80: launch_mma<80>(g, grid, s, q, k, v, o, lse); break;
		case 96: launch_mma<96>(g, grid, s, q, k, v, o, lse); break;
		default: launch_mma<128>(g, grid, s, q, k, v, o, lse); break;
		}
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
	if (nq) {
		d_rows<<<(unsigned)((nq + S_ROWS - 1) / S_ROWS), 32 * S_ROWS, 0,
			 s>>>(g, o, dout, D);
		dim3 gq((a.Nq + S_ROWS - 1) / S_ROWS, a.B * a.H);

		bwd_dq<<<gq, 32 * S_ROWS, 0, s>>>(g, q, k, v, lse, dout, D, dq);
	}
	if (a.Nk) {
		dim3 gk((a.Nk + S_ROWS - 1) / S_ROWS, a.B * a.Hkv);

		bwd_dkdv<<<gk, 32 * S_ROWS, 0, s>>>(g, q, k, v, lse, dout, D,
						    dk, dv);
	}
	r = cuda_err(cudaGetLastError(),
		     "hk_attn_bwd_cuda: launch failed (cudaError %d)");
	cudaFreeAsync(D, s);
	return r;
}
