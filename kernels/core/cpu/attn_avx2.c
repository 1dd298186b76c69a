// SPDX-License-Identifier: MIT
/*
 * attn_avx2.c — AVX2+FMA primitives of the CPU attention (attn.h).
 *
 * gemm: a 6 x 16 register-blocked microkernel (12 ymm accumulators, two B
 * vectors, one broadcast of A: 15 of the 16 ymm registers).  Column
 * panels of 16 are the outer loop so one k x 16 panel of B (<= 16 KiB for
 * k = 256) stays in L1 while every 6-row block of A streams past it; attn.c
 * sizes tiles so A, B and C sit in L2.  An 8-wide variant takes the odd
 * panel when n % 16 == 8.
 *
 * exp: Cephes-style range reduction x = n ln2 + r, |r| <= ln2/2, a degree
 * 5 polynomial for e^r and 2^n built in the exponent bits; ~1 ulp on the
 * x <= 0 range attention uses, exactly 0 below -87.3 (and for -inf).
 */
#include <immintrin.h>
#include <math.h>

#include "attn.h"

#define MR 6

static inline __attribute__((always_inline)) void
kern(int mr, int nv, int k, const float *a, long ars, long acs,
     const float *b, long ldb, float *c, long ldc, int acc)
{
	__m256 s[MR][2];

#pragma GCC unroll 6
	for (int i = 0; i < MR; i++)
#pragma GCC unroll 2
		for (int v = 0; v < 2; v++)
			s[i][v] = _mm256_setzero_ps();
	for (int p = 0; p < k; p++) {
		__m256 b0 = _mm256_loadu_ps(b + p * ldb), b1 = b0;

		if (nv == 2)
			b1 = _mm256_loadu_ps(b + p * ldb + 8);
#pragma GCC unroll 6
		for (int i = 0; i < MR; i++) {
			__m256 ai;

			if (i >= mr)
				break;
			ai = _mm256_broadcast_ss(a + i * ars + p * acs);
			s[i][0] = _mm256_fmadd_ps(ai, b0, s[i][0]);
			if (nv == 2)
				s[i][1] = _mm256_fmadd_ps(ai, b1, s[i][1]);
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
				s[i][v] = _mm256_add_ps(s[i][v],
						_mm256_loadu_ps(ci + 8 * v));
			_mm256_storeu_ps(ci + 8 * v, s[i][v]);
		}
	}
}

/* One call per (mr, nv) so each body is compiled with constants. */
#define KERN_CASE(MRC)                                                     \
	case MRC:                                                          \
		if (nv == 2)                                               \
			kern(MRC, 2, k, a, ars, acs, b, ldb, c, ldc, acc); \
		else                                                       \
			kern(MRC, 1, k, a, ars, acs, b, ldb, c, ldc, acc); \
		break

static void block(int mr, int nv, int k, const float *a, long ars, long acs,
		  const float *b, long ldb, float *c, long ldc, int acc)
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

static void gemm_avx2(int m, int n, int k, const float *a, long ars,
		      long acs, const float *b, long ldb, float *c, long ldc,
		      int acc)
{
	for (int j = 0; j < n; j += 16) {
		int nv = n - j >= 16 ? 2 : 1;

		for (int i = 0; i < m; i += MR)
			block(m - i < MR ? m - i : MR, nv, k, a + i * ars, ars,
			      acs, b + j, ldb, c + i * ldc + j, ldc, acc);
	}
}

static float hmax8(__m256 v)
{
	__m128 x = _mm_max_ps(_mm256_castps256_ps128(v),
			      _mm256_extractf128_ps(v, 1));

	x = _mm_max_ps(x, _mm_movehl_ps(x, x));
	x = _mm_max_ss(x, _mm_shuffle_ps(x, x, 1));
	return _mm_cvtss_f32(x);
}

static float hsum8(__m256 v)
{
	__m128 x = _mm_add_ps(_mm256_castps256_ps128(v),
			      _mm256_extractf128_ps(v, 1));

	x = _mm_add_ps(x, _mm_movehl_ps(x, x));
	x = _mm_add_ss(x, _mm_shuffle_ps(x, x, 1));
	return _mm_cvtss_f32(x);
}

static float rowmax_avx2(const float *x, int n)
{
	__m256 m = _mm256_set1_ps(-INFINITY);
	float r;
	int i = 0;

	for (; i + 8 <= n; i += 8)
		m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
	r = hmax8(m);
	for (; i < n; i++)
		r = x[i] > r ? x[i] : r;
	return r;
}

static inline __m256 exp8(__m256 x)
{
	const __m256 lo = _mm256_set1_ps(-87.3f), hi = _mm256_set1_ps(88.3f);
	__m256 zero_mask = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
	__m256 n, r, p;
	__m256i e;

	x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
	n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
			    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
	p = _mm256_set1_ps(1.9875691500e-4f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
	p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r),
			    _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
	e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n),
					       _mm256_set1_epi32(127)), 23);
	p = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
	return _mm256_andnot_ps(zero_mask, p);
}

static float exp_sum_avx2(float *x, int n, float mul, float sub)
{
	__m256 vm = _mm256_set1_ps(mul), vs = _mm256_set1_ps(sub);
	__m256 acc = _mm256_setzero_ps();

	for (int i = 0; i < n; i += 8) {
		__m256 v = _mm256_fmsub_ps(_mm256_loadu_ps(x + i), vm, vs);

		v = exp8(v);
		_mm256_storeu_ps(x + i, v);
		acc = _mm256_add_ps(acc, v);
	}
	return hsum8(acc);
}

static void dsoft_avx2(float *ds, const float *p, int n, float sub,
		       float mul)
{
	__m256 vs = _mm256_set1_ps(sub), vm = _mm256_set1_ps(mul);

	for (int i = 0; i < n; i += 8) {
		__m256 x = _mm256_sub_ps(_mm256_loadu_ps(ds + i), vs);

		x = _mm256_mul_ps(_mm256_mul_ps(vm, _mm256_loadu_ps(p + i)), x);
		_mm256_storeu_ps(ds + i, x);
	}
}

void hk_attn_avx2_from_bf16(float *dst, const uint16_t *src, int n)
{
	int i = 0;

	for (; i + 8 <= n; i += 8) {
		__m128i h = _mm_loadu_si128((const __m128i *)(src + i));

		_mm256_storeu_ps(dst + i, _mm256_castsi256_ps(
			_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
	}
	for (; i < n; i++)
		dst[i] = hk_bf16_f32(src[i]);
}

/* hk_f32_bf16 on 8 floats: u + 0x7fff + ((u >> 16) & 1), the top half. */
static inline __m256i bf16x8(__m256 x)
{
	__m256i u = _mm256_castps_si256(x);
	__m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16),
				       _mm256_set1_epi32(1));
	__m256i r = _mm256_srli_epi32(_mm256_add_epi32(
		_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd), 16);
	__m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));

	return _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc0), nan);
}

void hk_attn_avx2_to_bf16(uint16_t *dst, const float *src, int n)
{
	int i = 0;

	for (; i + 16 <= n; i += 16) {	/* packus interleaves the lanes */
		__m256i h = _mm256_packus_epi32(
			bf16x8(_mm256_loadu_ps(src + i)),
			bf16x8(_mm256_loadu_ps(src + i + 8)));

		_mm256_storeu_si256((__m256i *)(dst + i),
				    _mm256_permute4x64_epi64(h, 0xd8));
	}
	for (; i < n; i++)
		dst[i] = hk_f32_bf16(src[i]);
}

const struct hk_attn_ops hk_attn_avx2_ops = {
	.name = "avx2",
	.gemm = gemm_avx2,
	.rowmax = rowmax_avx2,
	.exp_sum = exp_sum_avx2,
	.dsoft = dsoft_avx2,
	.from_bf16 = hk_attn_avx2_from_bf16,
	.to_bf16 = hk_attn_avx2_to_bf16,
};
