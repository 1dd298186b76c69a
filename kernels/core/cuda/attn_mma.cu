// SPDX-License-Identifier: MIT
/*
 * attn_mma.cu — the tensor-core paths of the CUDA attention: bf16 inputs,
 * fp32 accumulators, mma.sync.m16n8k16 (sm_80 and later), d in {32, 64,
 * 80, 96, 128}.  attn.cu picks them; everything else runs its SIMT
 * kernels.  Compile line as for attn.cu (Makefile NVFLAGS).
 *
 * Fragment layout of m16n8k16 (g = lane / 4, t = lane % 4): A holds rows
 * g and g+8, columns 2t, 2t+1 (regs 0, 1) and 2t+8, 2t+9 (regs 2, 3); B
 * holds rows (k) 2t, 2t+1 and 2t+8, 2t+9 of column (n) g; C holds rows g
 * (c0, c1) and g+8 (c2, c3), columns 2t, 2t+1.  So the C fragments of two
 * neighbouring n-tiles are, once rounded to bf16, the A fragment of one
 * k-chunk: P and dS go from one mma to the next in registers.
 *
 *  fwd: a block of 4 warps owns 64 query rows (16 per warp, Q fragments
 *	in registers); K/V tiles of 32 keys are gathered through the block
 *	table into shared memory; S = Q K^T, online softmax on the
 *	accumulators (row max and sum across the quad by shuffles),
 *	O += P V.
 *  dq: the same walk over keys with lse known: P, dP = dO V^T,
 *	dS = P (dP - D) scale, dQ += dS K.
 *  dkdv: a block owns 64 keys (K, V tiles in shared memory, 16 rows a
 *	warp) and walks 16-row tiles of every query head of its group:
 *	S^T = K Q^T, P^T, dP^T = V dO^T, dS^T, dV += P^T dO, dK += dS^T Q.
 *  No atomics: dq and dk/dv are separate kernels, each output row has one
 *  owner, results are deterministic.  P and dS are rounded to bf16 before
 *  the second mma, as in FlashAttention-2.
 */
#include <math.h>

#include "attn_dev.cuh"

#define WARPS	4
#define ROWS	(16 * WARPS)	/* rows a block owns */
#define TK	32		/* keys (or queries) per streamed tile */

__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4],
					 const uint32_t b[2])
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
	asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
		     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
		     "{%0,%1,%2,%3};\n"
		     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
		     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
		       "r"(b[1]));
#elif defined(HK_CUDA_EMU)	/* tests/gpu/emu: the PTX layout on the CPU */
	hk_emu_mma16816(c, a, b);
#endif
}

__device__ __forceinline__ uint32_t u32(const __nv_bfloat16 *p)
{
	return *(const uint32_t *)p;
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

/* A = M[r0.., k0..] of row-major M (16 x 16). */
__device__ __forceinline__ void frag_a(uint32_t a[4], const __nv_bfloat16 *M,
				       int ld, int r0, int k0)
{
	int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
	const __nv_bfloat16 *p = M + (r0 + g) * ld + k0 + 2 * t;

	a[0] = u32(p);
	a[1] = u32(p + 8 * ld);
	a[2] = u32(p + 8);
	a[3] = u32(p + 8 * ld + 8);
}

/* B(k, n) = M[n0 + n][k0 + k]: M's rows are B's columns (contiguous). */
__device__ __forceinline__ void frag_bt(uint32_t b[2], const __nv_bfloat16 *M,
					int ld, int n0, int k0)
{
	int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
	const __nv_bfloat16 *p = M + (n0 + g) * ld + k0 + 2 * t;

	b[0] = u32(p);
	b[1] = u32(p + 8);
}

/* B(k, n) = M[k0 + k][n0 + n]: M's rows are B's rows (two loads a reg). */
__device__ __forceinline__ void frag_b(uint32_t b[2], const __nv_bfloat16 *M,
				       int ld, int k0, int n0)
{
	int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
	const __nv_bfloat16 *p = M + (k0 + 2 * t) * ld + n0 + g;

	b[0] = pack2h(p[0], p[ld]);
	b[1] = pack2h(p[8 * ld], p[9 * ld]);
}

/* A fragment of one 16-wide k-chunk from two C fragments (n-tiles). */
__device__ __forceinline__ void frag_acc(uint32_t a[4], const float c0[4],
					 const float c1[4])
{
	a[0] = pack2(c0[0], c0[1]);
	a[1] = pack2(c0[2], c0[3]);
	a[2] = pack2(c1[0], c1[1]);
	a[3] = pack2(c1[2], c1[3]);
}

/* Rows [r0, r0 + n) of q-side tensor (rows of bh) into shared, zero pad. */
template <int D, int LD>
__device__ __forceinline__ void load_q(__nv_bfloat16 *dst,
				       const __nv_bfloat16 *src, size_t row0,
				       int n, int rows)
{
	for (int e = threadIdx.x; e < rows * D / 2; e += blockDim.x) {
		int r = e / (D / 2), x = 2 * (e % (D / 2));

		*(uint32_t *)&dst[r * LD + x] =
			r < n ? u32(src + (row0 + r) * D + x) : 0u;
	}
}

/* Keys [j0, j0 + n) of kv head (b, g) through the block table. */
template <int D, int LD>
__device__ __forceinline__ void load_kv(__nv_bfloat16 *dst,
					const __nv_bfloat16 *src,
					const struct args &a, int b, int g,
					int j0, int n, int rows)
{
	for (int e = threadIdx.x; e < rows * D / 2; e += blockDim.x) {
		int r = e / (D / 2), x = 2 * (e % (D / 2));

		*(uint32_t *)&dst[r * LD + x] =
			r < n ? u32(src + kv_off(a, b, g, j0 + r) + x) : 0u;
	}
}

/* ---- forward ------------------------------------------------------------ */

template <int D>
__global__ void __launch_bounds__(32 * WARPS)
fwd_mma(struct args a, const __nv_bfloat16 *q, const __nv_bfloat16 *k,
	const __nv_bfloat16 *v, __nv_bfloat16 *o, float *lse)
{
	constexpr int LD = D + 8;	/* padded rows: fewer bank conflicts */
	__shared__ __align__(16) __nv_bfloat16 qs[ROWS * LD];
	__shared__ __align__(16) __nv_bfloat16 ks[TK * LD], vs[TK * LD];
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int gq = lane / 4, tq = lane % 4;
	int bh = blockIdx.y, b = bh / a.H, g = bh % a.H / a.grp;
	int i0 = blockIdx.x * ROWS, jend = vis(a, min(i0 + ROWS, a.Nq) - 1);
	int r0 = i0 + warp * 16 + gq, r1 = r0 + 8;	/* this thread's rows */
	int lim[2] = { r0 < a.Nq ? vis(a, r0) : 0, r1 < a.Nq ? vis(a, r1) : 0 };
	uint32_t qa[D / 16][4];
	float oc[D / 8][4], m[2] = { -INFINITY, -INFINITY }, l[2] = { 0, 0 };

	load_q<D, LD>(qs, q, (size_t)bh * a.Nq + i0, min(ROWS, a.Nq - i0), ROWS);
	__syncthreads();
	for (int kc = 0; kc < D / 16; kc++)
		frag_a(qa[kc], qs, LD, warp * 16, kc * 16);
	for (int dt = 0; dt < D / 8; dt++)
		oc[dt][0] = oc[dt][1] = oc[dt][2] = oc[dt][3] = 0;

	for (int j0 = 0; j0 < jend; j0 += TK) {
		int n = min(TK, a.Nk - j0);
		float sc[TK / 8][4], mx[2] = { -INFINITY, -INFINITY }, al[2];

		__syncthreads();
		load_kv<D, LD>(ks, k, a, b, g, j0, n, TK);
		load_kv<D, LD>(vs, v, a, b, g, j0, n, TK);
		__syncthreads();
		for (int nt = 0; nt < TK / 8; nt++) {	/* S = Q K^T */
			sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0;
			for (int kc = 0; kc < D / 16; kc++) {
				uint32_t bf[2];

				frag_bt(bf, ks, LD, nt * 8, kc * 16);
				mma16816(sc[nt], qa[kc], bf);
			}
		}
		for (int nt = 0; nt < TK / 8; nt++)	/* scale, mask, max */
			for (int e = 0; e < 4; e++) {
				int key = j0 + nt * 8 + 2 * tq + (e & 1);
				float s = sc[nt][e] * a.scale;

				s = key < lim[e / 2] ? s : -INFINITY;
				sc[nt][e] = s;
				mx[e / 2] = fmaxf(mx[e / 2], s);
			}
		for (int h = 0; h < 2; h++) {
			float mnew;

			mx[h] = fmaxf(mx[h], __shfl_xor_sync(FULL, mx[h], 1));
			mx[h] = fmaxf(mx[h], __shfl_xor_sync(FULL, mx[h], 2));
			mnew = fmaxf(m[h], mx[h]);
			al[h] = mnew == -INFINITY ? 1.f :
				m[h] == -INFINITY ? 0.f : __expf(m[h] - mnew);
			m[h] = mnew;
			l[h] *= al[h];
		}
		for (int nt = 0; nt < TK / 8; nt++)
			for (int e = 0; e < 4; e++) {
				float mm = m[e / 2];
				float p = mm == -INFINITY ? 0.f :
					  __expf(sc[nt][e] - mm);

				sc[nt][e] = p;
				l[e / 2] += p;	/* this thread's part of the row */
			}
		for (int dt = 0; dt < D / 8; dt++) {
			oc[dt][0] *= al[0];
			oc[dt][1] *= al[0];
			oc[dt][2] *= al[1];
			oc[dt][3] *= al[1];
		}
		for (int kc = 0; kc < TK / 16; kc++) {	/* O += P V */
			uint32_t pa[4];

			frag_acc(pa, sc[2 * kc], sc[2 * kc + 1]);
			for (int dt = 0; dt < D / 8; dt++) {
				uint32_t bf[2];

				frag_b(bf, vs, LD, kc * 16, dt * 8);
				mma16816(oc[dt], pa, bf);
			}
		}
	}
	for (int h = 0; h < 2; h++) {
		int r = h ? r1 : r0;
		float inv;

		l[h] += __shfl_xor_sync(FULL, l[h], 1);
		l[h] += __shfl_xor_sync(FULL, l[h], 2);
		inv = l[h] > 0 ? 1.f / l[h] : 0.f;
		if (r >= a.Nq)
			continue;
		for (int dt = 0; dt < D / 8; dt++)
			*(uint32_t *)(o + ((size_t)bh * a.Nq + r) * D + dt * 8 +
				      2 * tq) = pack2(oc[dt][2 * h] * inv,
						      oc[dt][2 * h + 1] * inv);
		if (lse && tq == 0)
			lse[(size_t)bh * a.Nq + r] =
				l[h] > 0 ? m[h] + logf(l[h]) : -INFINITY;
	}
}

/* ---- backward: dq ------------------------------------------------------- */

template <int D>
__global__ void __launch_bounds__(32 * WARPS)
dq_mma(struct args a, const __nv_bfloat16 *q, const __nv_bfloat16 *k,
       const __nv_bfloat16 *v, const float *lse, const __nv_bfloat16 *dout,
       const float *Dv, __nv_bfloat16 *dq)
{
	constexpr int LD = D + 8;
	__shared__ __align__(16) __nv_bfloat16 qs[ROWS * LD];
	__shared__ __align__(16) __nv_bfloat16 ks[TK * LD], vs[TK * LD];
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int gq = lane / 4, tq = lane % 4;
	int bh = blockIdx.y, b = bh / a.H, g = bh % a.H / a.grp;
	int i0 = blockIdx.x * ROWS, jend = vis(a, min(i0 + ROWS, a.Nq) - 1);
	int r0 = i0 + warp * 16 + gq, r1 = r0 + 8;
	int lim[2] = { r0 < a.Nq ? vis(a, r0) : 0, r1 < a.Nq ? vis(a, r1) : 0 };
	size_t base = (size_t)bh * a.Nq;
	float L[2], Dr[2];
	uint32_t qa[D / 16][4], da[D / 16][4];
	float acc[D / 8][4];

	for (int h = 0; h < 2; h++) {
		int r = h ? r1 : r0;

		L[h] = r < a.Nq ? lse[base + r] : -INFINITY;
		Dr[h] = r < a.Nq ? Dv[base + r] : 0.f;
		if (L[h] == -INFINITY)
			lim[h] = 0;
	}
	load_q<D, LD>(qs, q, base + i0, min(ROWS, a.Nq - i0), ROWS);
	__syncthreads();
	for (int kc = 0; kc < D / 16; kc++)
		frag_a(qa[kc], qs, LD, warp * 16, kc * 16);
	__syncthreads();
	load_q<D, LD>(qs, dout, base + i0, min(ROWS, a.Nq - i0), ROWS);
	__syncthreads();
	for (int kc = 0; kc < D / 16; kc++)
		frag_a(da[kc], qs, LD, warp * 16, kc * 16);
	for (int dt = 0; dt < D / 8; dt++)
		acc[dt][0] = acc[dt][1] = acc[dt][2] = acc[dt][3] = 0;

	for (int j0 = 0; j0 < jend; j0 += TK) {
		int n = min(TK, a.Nk - j0);
		float sc[TK / 8][4], dp[TK / 8][4];

		__syncthreads();
		load_kv<D, LD>(ks, k, a, b, g, j0, n, TK);
		load_kv<D, LD>(vs, v, a, b, g, j0, n, TK);
		__syncthreads();
		for (int nt = 0; nt < TK / 8; nt++) {	/* S, dP = dO V^T */
			for (int e = 0; e < 4; e++)
				sc[nt][e] = dp[nt][e] = 0;
			for (int kc = 0; kc < D / 16; kc++) {
				uint32_t bf[2];

				frag_bt(bf, ks, LD, nt * 8, kc * 16);
				mma16816(sc[nt], qa[kc], bf);
				frag_bt(bf, vs, LD, nt * 8, kc * 16);
				mma16816(dp[nt], da[kc], bf);
			}
			for (int e = 0; e < 4; e++) {	/* dS, scaled */
				int key = j0 + nt * 8 + 2 * tq + (e & 1);
				float p = key < lim[e / 2] ?
					  __expf(sc[nt][e] * a.scale - L[e / 2]) :
					  0.f;

				sc[nt][e] = p * (dp[nt][e] - Dr[e / 2]) * a.scale;
			}
		}
		for (int kc = 0; kc < TK / 16; kc++) {	/* dQ += dS K */
			uint32_t sa[4];

			frag_acc(sa, sc[2 * kc], sc[2 * kc + 1]);
			for (int dt = 0; dt < D / 8; dt++) {
				uint32_t bf[2];

				frag_b(bf, ks, LD, kc * 16, dt * 8);
				mma16816(acc[dt], sa, bf);
			}
		}
	}
	for (int h = 0; h < 2; h++) {
		int r = h ? r1 : r0;

		if (r >= a.Nq)
			continue;
		for (int dt = 0; dt < D / 8; dt++)
			*(uint32_t *)(dq + (base + r) * D + dt * 8 + 2 * tq) =
				pack2(acc[dt][2 * h], acc[dt][2 * h + 1]);
	}
}

/* ---- backward: dk, dv --------------------------------------------------- */

template <int D>
__global__ void __launch_bounds__(32 * WARPS)
dkdv_mma(struct args a, const __nv_bfloat16 *q, const __nv_bfloat16 *k,
	 const __nv_bfloat16 *v, const float *lse,
	 const __nv_bfloat16 *dout, const float *Dv, __nv_bfloat16 *dk,
	 __nv_bfloat16 *dv)
{
	constexpr int LD = D + 8, QT = 16;	/* queries per tile: 48 KiB */
	__shared__ __align__(16) __nv_bfloat16 ks[ROWS * LD], vs[ROWS * LD];
	__shared__ __align__(16) __nv_bfloat16 qs[QT * LD], dos[QT * LD];
	__shared__ float ls[QT], dsv[QT];
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int gq = lane / 4, tq = lane % 4;
	int bg = blockIdx.y, b = bg / a.Hkv, g = bg % a.Hkv;
	int j0 = blockIdx.x * ROWS, nk = min(ROWS, a.Nk - j0);
	int c0 = j0 + warp * 16 + gq, c1 = c0 + 8;	/* this thread's keys */
	int istart = a.causal ? max(0, j0 - a.off) / QT * QT : 0;
	float dka[D / 8][4], dva[D / 8][4];

	load_kv<D, LD>(ks, k, a, b, g, j0, nk, ROWS);
	load_kv<D, LD>(vs, v, a, b, g, j0, nk, ROWS);
	for (int dt = 0; dt < D / 8; dt++)
		for (int e = 0; e < 4; e++)
			dka[dt][e] = dva[dt][e] = 0;
	for (int h = g * a.grp; h < (g + 1) * a.grp; h++) {
		size_t base = (size_t)(b * a.H + h) * a.Nq;

		for (int ib = istart; ib < a.Nq; ib += QT) {
			int n = min(QT, a.Nq - ib);
			float st[QT / 8][4], dp[QT / 8][4];

			__syncthreads();
			load_q<D, LD>(qs, q, base + ib, n, QT);
			load_q<D, LD>(dos, dout, base + ib, n, QT);
			if (threadIdx.x < QT) {
				int r = threadIdx.x;

				ls[r] = r < n ? lse[base + ib + r] : -INFINITY;
				dsv[r] = r < n ? Dv[base + ib + r] : 0.f;
			}
			__syncthreads();
			/* S^T = K Q^T and dP^T = V dO^T: keys x queries */
			for (int nt = 0; nt < QT / 8; nt++) {
				for (int e = 0; e < 4; e++)
					st[nt][e] = dp[nt][e] = 0;
				for (int kc = 0; kc < D / 16; kc++) {
					uint32_t af[4], bf[2];

					frag_a(af, ks, LD, warp * 16, kc * 16);
					frag_bt(bf, qs, LD, nt * 8, kc * 16);
					mma16816(st[nt], af, bf);
					frag_a(af, vs, LD, warp * 16, kc * 16);
					frag_bt(bf, dos, LD, nt * 8, kc * 16);
					mma16816(dp[nt], af, bf);
				}
				for (int e = 0; e < 4; e++) {
					int qi = nt * 8 + 2 * tq + (e & 1);
					int key = e < 2 ? c0 : c1;
					float L = ls[qi], p = 0;

					if (L != -INFINITY && key < a.Nk &&
					    key < vis(a, ib + qi))
						p = __expf(st[nt][e] * a.scale - L);
					st[nt][e] = p;	/* P^T */
					dp[nt][e] = p * (dp[nt][e] - dsv[qi]) *
						    a.scale;	/* dS^T */
				}
			}
			/* dV += P^T dO, dK += dS^T Q (k = this tile's queries) */
			for (int kc = 0; kc < QT / 16; kc++) {
				uint32_t pa[4], sa[4];

				frag_acc(pa, st[2 * kc], st[2 * kc + 1]);
				frag_acc(sa, dp[2 * kc], dp[2 * kc + 1]);
				for (int dt = 0; dt < D / 8; dt++) {
					uint32_t bf[2];

					frag_b(bf, dos, LD, kc * 16, dt * 8);
					mma16816(dva[dt], pa, bf);
					frag_b(bf, qs, LD, kc * 16, dt * 8);
					mma16816(dka[dt], sa, bf);
				}
			}
		}
	}
	for (int hh = 0; hh < 2; hh++) {
		int key = hh ? c1 : c0;
		size_t row = ((size_t)b * a.Hkv + g) * a.Nk + key;

		if (key >= a.Nk)
			continue;
		for (int dt = 0; dt < D / 8; dt++) {
			size_t off = row * D + dt * 8 + 2 * tq;

			*(uint32_t *)(dk + off) = pack2(dka[dt][2 * hh],
							dka[dt][2 * hh + 1]);
			*(uint32_t *)(dv + off) = pack2(dva[dt][2 * hh],
							dva[dt][2 * hh + 1]);
		}
	}
}

/* ---- launchers ---------------------------------------------------------- */
#ifndef HK_CUDA_EMU	/* tests/gpu/emu runs the kernels above, not these */

int hk_attn_mma_d_ok(int d)
{
	return d == 32 || d == 64 || d == 80 || d == 96 || d == 128;
}

typedef const __nv_bfloat16 *cbf;
typedef __nv_bfloat16 *bf;

template <int D>
static void fwd_launch(const struct args &g, const void *q, const void *k,
		       const void *v, void *o, float *lse, cudaStream_t s)
{
	dim3 grid((g.Nq + ROWS - 1) / ROWS, g.B * g.H);

	fwd_mma<D><<<grid, 32 * WARPS, 0, s>>>(g, (cbf)q, (cbf)k, (cbf)v,
					       (bf)o, lse);
}

template <int D>
static void bwd_launch(const struct args &g, const void *q, const void *k,
		       const void *v, const float *lse, const void *dout,
		       const float *D_, void *dq, void *dk, void *dv,
		       cudaStream_t s)
{
	if (g.Nq) {
		dim3 grid((g.Nq + ROWS - 1) / ROWS, g.B * g.H);

		dq_mma<D><<<grid, 32 * WARPS, 0, s>>>(g, (cbf)q, (cbf)k,
						      (cbf)v, lse, (cbf)dout,
						      D_, (bf)dq);
	}
	if (g.Nk) {
		dim3 grid((g.Nk + ROWS - 1) / ROWS, g.B * g.Hkv);

		dkdv_mma<D><<<grid, 32 * WARPS, 0, s>>>(g, (cbf)q, (cbf)k,
							(cbf)v, lse, (cbf)dout,
							D_, (bf)dk, (bf)dv);
	}
}

cudaError_t hk_attn_mma_fwd(const struct args &g, const void *q,
			    const void *k, const void *v, void *o, float *lse,
			    cudaStream_t s)
{
	switch (g.d) {
	case 32: fwd_launch<32>(g, q, k, v, o, lse, s); break;
	case 64: fwd_launch<64>(g, q, k, v, o, lse, s); break;
	case 80: fwd_launch<80>(g, q, k, v, o, lse, s); break;
	case 96: fwd_launch<96>(g, q, k, v, o, lse, s); break;
	case 128: fwd_launch<128>(g, q, k, v, o, lse, s); break;
	default: return cudaErrorInvalidValue;
	}
	return cudaGetLastError();
}

cudaError_t hk_attn_mma_bwd(const struct args &g, const void *q,
			    const void *k, const void *v, const float *lse,
			    const void *dout, const float *D, void *dq,
			    void *dk, void *dv, cudaStream_t s)
{
	switch (g.d) {
	case 32: bwd_launch<32>(g, q, k, v, lse, dout, D, dq, dk, dv, s); break;
	case 64: bwd_launch<64>(g, q, k, v, lse, dout, D, dq, dk, dv, s); break;
	case 80: bwd_launch<80>(g, q, k, v, lse, dout, D, dq, dk, dv, s); break;
	case 96: bwd_launch<96>(g, q, k, v, lse, dout, D, dq, dk, dv, s); break;
	case 128: bwd_launch<128>(g, q, k, v, lse, dout, D, dq, dk, dv, s); break;
	default: return cudaErrorInvalidValue;
	}
	return cudaGetLastError();
}
#endif /* HK_CUDA_EMU */
