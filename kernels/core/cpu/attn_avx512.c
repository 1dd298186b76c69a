// SPDX-License-Identifier: MIT
/*
 * attn_avx512.c — AVX-512 primitives of the CPU attention (attn.h): the
 * AVX2 design on zmm registers, a 6 x 32 microkernel (12 zmm accumulators)
 * with a masked 16/8-wide tail panel, and the same exp polynomial.  Only
 * called when hk_isa_supported(HK_ISA_AVX512); tests run it where the CPU
 * has AVX-512 and skip it elsewhere.
 */
#include <immintrin.h>
#include <math.h>

#include "attn.h"

#define MR 6

static inline __attribute__((always_inline)) void
kern(int mr, int nv, __mmask16 tail, int k, const float *a, long ars,
     long acs, const float *b, long ldb, float *c, long ldc, int acc)
{
	__mmask16 mk[2] = { nv == 1 ? tail : 0xffff, nv == 2 ? tail : 0 };
	__m512 s[MR][2];

#pragma GCC unroll 6
	for (int i = 0; i < MR; i++)
#pragma GCC unroll 2
		for (int v = 0; v < 2; v++)
			s[i][v] = _mm512_setzero_ps();
	for (int p = 0; p < k; p++) {
		__m512 b0 = _mm512_maskz_loadu_ps(mk[0], b + p * ldb), b1 = b0;

		if (nv == 2)
			b1 = _mm512_maskz_loadu_ps(mk[1], b + p * ldb + 16);
#pragma GCC unroll 6
		for (int i = 0; i < MR; i++) {
			__m512 ai;

			if (i >= mr)
				break;
			ai = _mm512_set1_ps(a[i * ars + p * acs]);
			s[i][0] = _mm512_fmadd_ps(ai, b0, s[i][0]);
			if (nv == 2)
				s[i][1] = _mm512_fmadd_ps(ai, b1, s[i][1]);
		}
	}
#pragma GCC unroll 6
	for (int i = 0; i < MR; i++) {
		float *ci = c + i * ldc;

		if (i >= mr)
			break;
#pragma GCC unroll 2
		for (int v = 0; v < 2; v++) {
			if (v >= nv)
				break;
			if (acc)
				s[i][v] = _mm512_add_ps(s[i][v],
					_mm512_maskz_loadu_ps(mk[v], ci + 16 * v));
			_mm512_mask_storeu_ps(ci + 16 * v, mk[v], s[i][v]);
		}
	}
}

#define KERN_CASE(MRC)                                                   \
	case MRC:                                                        \
		if (nv == 2)                                             \
			kern(MRC, 2, tail, k, a, ars, acs, b, ldb, c,    \
			     ldc, acc);                                  \
		else                                                     \
			kern(MRC, 1, tail, k, a, ars, acs, b, ldb, c,    \
			     ldc, acc);                                  \
		break

static void block(int mr, int nv, __mmask16 tail, int k, const float *a,
		  long ars, long acs, const float *b, long ldb, float *c,
		  long ldc, int acc)
{
	switch (mr) {
	KERN_CASE(6);
	KERN_CASE(5);
	KERN_CASE(4);
	KERN_CASE(3);
	KERN_CASE(2);
	KERN_CASE(1);
	}
}

static void gemm_avx512(int m, int n, int k, const float *a, long ars,
			long acs, const float *b, long ldb, float *c, long ldc,
			int acc)
{
	for (int j = 0; j < n; j += 32) {
		int left = n - j;
		int nv = left > 16 ? 2 : 1;
		int last = left - 16 * (nv - 1);	/* 8 or 16 */
		__mmask16 tail = last >= 16 ? 0xffff : 0x00ff;

		for (int i = 0; i < m; i += MR)
			block(m - i < MR ? m - i : MR, nv, tail, k,
			      a + i * ars, ars, acs, b + j, ldb,
			      c + i * ldc + j, ldc, acc);
	}
}

float hk_attn_avx512_rowmax(const float *x, int n)
{
	__m512 m = _mm512_set1_ps(-INFINITY);
	int i = 0;
	float r;

	for (; i + 16 <= n; i += 16)
		m = _mm512_max_ps(m, _mm512_loadu_ps(x + i));
	r = _mm512_reduce_max_ps(m);
	for (; i < n; i++)
		r = x[i] > r ? x[i] : r;
	return r;
}

static inline __m512 exp16(__m512 x)
{
	const __m512 lo = _mm512_set1_ps(-87.3f), hi = _mm512_set1_ps(88.3f);
	__mmask16 keep = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);
	__m512 n, r, p;
	__m512i e;

	x = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
	n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
				 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
	r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
	p = _mm512_set1_ps(1.9875691500e-4f);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
	p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r),
			    _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
	e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n),
					       _mm512_set1_epi32(127)), 23);
	p = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
	return _mm512_maskz_mov_ps(keep, p);
}

float hk_attn_avx512_exp_sum(float *x, int n, float mul, float sub)
{
	__m512 vm = _mm512_set1_ps(mul), vs = _mm512_set1_ps(sub);
	__m512 acc = _mm512_setzero_ps();

	for (int i = 0; i < n; i += 16) {
		__mmask16 mk = n - i >= 16 ? 0xffff : 0x00ff;
		__m512 v = _mm512_maskz_loadu_ps(mk, x + i);

		v = exp16(_mm512_fmsub_ps(v, vm, vs));
		v = _mm512_maskz_mov_ps(mk, v);
		_mm512_mask_storeu_ps(x + i, mk, v);
		acc = _mm512_add_ps(acc, v);
	}
	return _mm512_reduce_add_ps(acc);
}

void hk_attn_avx512_dsoft(float *ds, const float *p, int n, float sub,
			  float mul)
{
	__m512 vs = _mm512_set1_ps(sub), vm = _mm512_set1_ps(mul);

	for (int i = 0; i < n; i += 16) {
		__mmask16 mk = n - i >= 16 ? 0xffff : 0x00ff;
		__m512 x = _mm512_maskz_loadu_ps(mk, ds + i);

		x = _mm512_sub_ps(x, vs);
		x = _mm512_mul_ps(_mm512_mul_ps(vm,
				  _mm512_maskz_loadu_ps(mk, p + i)), x);
		_mm512_mask_storeu_ps(ds + i, mk, x);
	}
}

const struct hk_attn_ops hk_attn_avx512_ops = {
	.name = "avx512",
	.gemm = gemm_avx512,
	.rowmax = hk_attn_avx512_rowmax,
	.exp_sum = hk_attn_avx512_exp_sum,
	.dsoft = hk_attn_avx512_dsoft,
	.from_bf16 = hk_attn_avx2_from_bf16,
	.to_bf16 = hk_attn_avx2_to_bf16,
};
