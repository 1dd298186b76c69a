// SPDX-License-Identifier: MIT
/*
 * adamw_avx2.c — the AVX2 + FMA path of the AdamW kernel: 8 elements per
 * step with the operations of adamw_ops.h (vsqrtps and vdivps are exact
 * IEEE), unaligned loads and stores, the last < 8 elements through a
 * small buffer so any length works.  The storage variants (grad and state
 * dtype, bf16 copy, grad scale) are 16 specialisations of one inline body.
 *
 * Stores are plain: non-temporal stores were measured slower here (the
 * lines were just read, so no read-for-ownership is saved; hmm-bench
 * adamw times streaming kernels with both kinds of store).
 */
#include <immintrin.h>
#include <string.h>

#include "adamw_ops.h"

#define AI static inline __attribute__((always_inline))

struct vk {
	__m256 decay, b1, omb1, b2, omb2, nss, ibc2, eps, scale;
};

AI void vk_init(struct vk *k, const struct hk_adamw_coef *c)
{
	k->decay = _mm256_set1_ps(c->decay);
	k->b1 = _mm256_set1_ps(c->b1);
	k->omb1 = _mm256_set1_ps(c->omb1);
	k->b2 = _mm256_set1_ps(c->b2);
	k->omb2 = _mm256_set1_ps(c->omb2);
	k->nss = _mm256_set1_ps(-c->step_size);
	k->ibc2 = _mm256_set1_ps(c->ibc2);
	k->eps = _mm256_set1_ps(c->eps);
	k->scale = _mm256_set1_ps(c->scale);
}

AI __m256 ld_bf16(const void *p)
{
	__m128i h = _mm_loadu_si128((const __m128i *)p);

	return _mm256_castsi256_ps(
		_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Round 8 floats to bf16, nearest even; NaN -> quiet NaN, sign kept. */
AI __m128i to_bf16(__m256 x)
{
	const __m256i one = _mm256_set1_epi32(1);
	__m256i u = _mm256_castps_si256(x);
	__m256i hi = _mm256_srli_epi32(u, 16);
	__m256i r = _mm256_add_epi32(u, _mm256_add_epi32(
		_mm256_and_si256(hi, one), _mm256_set1_epi32(0x7fff)));
	__m256i q = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
	__m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);

	r = _mm256_blendv_epi8(_mm256_srli_epi32(r, 16), q,
			       _mm256_castps_si256(nan));
	return _mm_packus_epi32(_mm256_castsi256_si128(r),
				_mm256_extracti128_si256(r, 1));
}

AI __m256 ld(const void *p, int bf)
{
	return bf ? ld_bf16(p) : _mm256_loadu_ps(p);
}

AI void st(void *p, __m256 x, int bf)
{
	if (bf)
		_mm_storeu_si128((__m128i *)p, to_bf16(x));
	else
		_mm256_storeu_ps(p, x);
}

AI void step8(float *p, const void *g, void *m, void *v, uint16_t *pb,
	      const struct vk *k, int gbf, int sbf, int pout, int scaled)
{
	__m256 gg = ld(g, gbf), mm = ld(m, sbf), vv = ld(v, sbf);
	__m256 pp = _mm256_loadu_ps(p), d;

	if (scaled)
		gg = _mm256_div_ps(gg, k->scale);
	mm = _mm256_fmadd_ps(k->b1, mm, _mm256_mul_ps(k->omb1, gg));
	vv = _mm256_fmadd_ps(k->b2, vv,
			     _mm256_mul_ps(k->omb2, _mm256_mul_ps(gg, gg)));
	d = _mm256_fmadd_ps(_mm256_sqrt_ps(vv), k->ibc2, k->eps);
	pp = _mm256_fmadd_ps(k->nss, _mm256_div_ps(mm, d),
			     _mm256_mul_ps(pp, k->decay));
	_mm256_storeu_ps(p, pp);
	if (pout)
		_mm_storeu_si128((__m128i *)pb, to_bf16(pp));
	st(m, mm, sbf);
	st(v, vv, sbf);
}

AI void body(const struct hk_adamw_args *a, const struct hk_adamw_coef *c,
	     size_t lo, size_t hi, int gbf, int sbf, int pout, int scaled)
{
	const size_t gs = gbf ? 2 : 4, ss = sbf ? 2 : 4;
	const char *g = a->grad;
	char *m = a->exp_avg, *v = a->exp_avg_sq;
	uint16_t *pb = a->param_bf16;
	float pt[8] = { 0 }, gt[8] = { 0 }, mt[8] = { 0 }, vt[8] = { 0 };
	uint16_t ht[8];
	struct vk k;
	size_t i, r;

	vk_init(&k, c);
	for (i = lo; i + 8 <= hi; i += 8)
		step8(a->param + i, g + i * gs, m + i * ss, v + i * ss,
		      pout ? pb + i : NULL, &k, gbf, sbf, pout, scaled);
	r = hi - i;
	if (!r)
		return;
	memcpy(pt, a->param + i, r * 4);
	memcpy(gt, g + i * gs, r * gs);
	memcpy(mt, m + i * ss, r * ss);
	memcpy(vt, v + i * ss, r * ss);
	step8(pt, gt, mt, vt, ht, &k, gbf, sbf, pout, scaled);
	memcpy(a->param + i, pt, r * 4);
	memcpy(m + i * ss, mt, r * ss);
	memcpy(v + i * ss, vt, r * ss);
	if (pout)
		memcpy(pb + i, ht, r * 2);
}

HK_ADAMW_VARIANTS(avx2_step)

/* Lanes whose exponent bits are all ones, OR-ed; checked every 4 KiB. */
static int avx2_nonfinite(const void *x, int dtype, size_t lo, size_t hi)
{
	const int bf = dtype == HK_ADAMW_BF16;
	const size_t es = bf ? 2 : 4, lanes = 32 / es;
	const __m256i e32 = _mm256_set1_epi32(0x7f800000);
	const __m256i e16 = _mm256_set1_epi16(0x7f80);
	const char *b = x;
	__m256i acc = _mm256_setzero_si256();
	size_t i;

	for (i = lo; i + lanes <= hi; i += lanes) {
		__m256i u = _mm256_loadu_si256((const __m256i *)(b + i * es));

		if (bf)
			u = _mm256_cmpeq_epi16(_mm256_and_si256(u, e16), e16);
		else
			u = _mm256_cmpeq_epi32(_mm256_and_si256(u, e32), e32);
		acc = _mm256_or_si256(acc, u);
		if (((i - lo) & 1023) == 0 && !_mm256_testz_si256(acc, acc))
			return 1;
	}
	if (!_mm256_testz_si256(acc, acc))
		return 1;
	return hk_adamw_scalar_ops.nonfinite(x, dtype, i, hi);
}

const struct hk_adamw_ops hk_adamw_avx2_ops = {
	.name = "avx2",
	.step = avx2_step,
	.nonfinite = avx2_nonfinite,
};
