// SPDX-License-Identifier: MIT
/*
 * adamw_avx512.c — the AVX-512 (F/BW/VL/DQ) path of the AdamW kernel:
 * 16 elements per step with the operations of adamw_ops.h; the last
 * < 16 elements with masked loads and stores.  Called only when hk_isa()
 * says the CPU runs AVX-512.  Plain stores, as in adamw_avx2.c: on a
 * Xeon with AVX-512 (2 cores) hmm-bench adamw measured its streaming
 * kernel with non-temporal stores at 0.75-0.8 of the one with plain
 * stores, and AdamW at 0.90-0.96 of the latter at 1 and 2 threads on a
 * quiet machine.
 */
#include <immintrin.h>

#include "adamw_ops.h"

#define AI static inline __attribute__((always_inline))

struct vk {
	__m512 decay, b1, omb1, b2, omb2, nss, ibc2, eps, scale;
};

AI void vk_init(struct vk *k, const struct hk_adamw_coef *c)
{
	k->decay = _mm512_set1_ps(c->decay);
	k->b1 = _mm512_set1_ps(c->b1);
	k->omb1 = _mm512_set1_ps(c->omb1);
	k->b2 = _mm512_set1_ps(c->b2);
	k->omb2 = _mm512_set1_ps(c->omb2);
	k->nss = _mm512_set1_ps(-c->step_size);
	k->ibc2 = _mm512_set1_ps(c->ibc2);
	k->eps = _mm512_set1_ps(c->eps);
	k->scale = _mm512_set1_ps(c->scale);
}

/* Masked-off lanes read as zero and are never stored. */
AI __m512 ld(const void *p, int bf, __mmask16 k)
{
	if (bf) {
		__m256i h = _mm256_maskz_loadu_epi16(k, p);

		return _mm512_castsi512_ps(
			_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
	}
	return _mm512_maskz_loadu_ps(k, p);
}

/* Round 16 floats to bf16, nearest even; NaN -> quiet NaN, sign kept. */
AI __m256i to_bf16(__m512 x)
{
	__m512i u = _mm512_castps_si512(x);
	__m512i hi = _mm512_srli_epi32(u, 16);
	__m512i r = _mm512_add_epi32(u, _mm512_add_epi32(
		_mm512_and_si512(hi, _mm512_set1_epi32(1)),
		_mm512_set1_epi32(0x7fff)));
	__m512i q = _mm512_or_si512(hi, _mm512_set1_epi32(0x40));
	__mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);

	r = _mm512_mask_blend_epi32(nan, _mm512_srli_epi32(r, 16), q);
	return _mm512_cvtepi32_epi16(r);
}

AI void st(void *p, __m512 x, int bf, __mmask16 k)
{
	if (bf)
		_mm256_mask_storeu_epi16(p, k, to_bf16(x));
	else
		_mm512_mask_storeu_ps(p, k, x);
}

AI void step16(float *p, const void *g, void *m, void *v, uint16_t *pb,
	       const struct vk *c, __mmask16 k,
	       int gbf, int sbf, int pout, int scaled)
{
	__m512 gg = ld(g, gbf, k), mm = ld(m, sbf, k), vv = ld(v, sbf, k);
	__m512 pp = _mm512_maskz_loadu_ps(k, p), d;

	if (scaled)
		gg = _mm512_div_ps(gg, c->scale);
	mm = _mm512_fmadd_ps(c->b1, mm, _mm512_mul_ps(c->omb1, gg));
	vv = _mm512_fmadd_ps(c->b2, vv,
			     _mm512_mul_ps(c->omb2, _mm512_mul_ps(gg, gg)));
	d = _mm512_fmadd_ps(_mm512_sqrt_ps(vv), c->ibc2, c->eps);
	pp = _mm512_fmadd_ps(c->nss, _mm512_div_ps(mm, d),
			     _mm512_mul_ps(pp, c->decay));
	_mm512_mask_storeu_ps(p, k, pp);
	if (pout)
		_mm256_mask_storeu_epi16(pb, k, to_bf16(pp));
	st(m, mm, sbf, k);
	st(v, vv, sbf, k);
}

AI void body(const struct hk_adamw_args *a, const struct hk_adamw_coef *c,
	     size_t lo, size_t hi, int gbf, int sbf, int pout, int scaled)
{
	const size_t gs = gbf ? 2 : 4, ss = sbf ? 2 : 4;
	const char *g = a->grad;
	char *m = a->exp_avg, *v = a->exp_avg_sq;
	uint16_t *pb = a->param_bf16;
	struct vk k;

	vk_init(&k, c);
	for (size_t i = lo; i < hi; i += 16) {
		__mmask16 mask = hi - i >= 16 ? 0xffff :
				 (__mmask16)((1u << (hi - i)) - 1);

		step16(a->param + i, g + i * gs, m + i * ss, v + i * ss,
		       pout ? pb + i : NULL, &k, mask, gbf, sbf, pout, scaled);
	}
}

HK_ADAMW_VARIANTS(avx512_step)

static int avx512_nonfinite(const void *x, int dtype, size_t lo, size_t hi)
{
	const int bf = dtype == HK_ADAMW_BF16;
	const size_t es = bf ? 2 : 4, lanes = 64 / es;
	const char *b = x;
	size_t i;

	for (i = lo; i + lanes <= hi; i += lanes) {
		__m512i u = _mm512_loadu_si512(b + i * es);

		if (bf) {
			const __m512i e = _mm512_set1_epi16(0x7f80);

			if (_mm512_cmpeq_epi16_mask(_mm512_and_si512(u, e), e))
				return 1;
		} else {
			const __m512i e = _mm512_set1_epi32(0x7f800000);

			if (_mm512_cmpeq_epi32_mask(_mm512_and_si512(u, e), e))
				return 1;
		}
	}
	return hk_adamw_scalar_ops.nonfinite(x, dtype, i, hi);
}

const struct hk_adamw_ops hk_adamw_avx512_ops = {
	.name = "avx512",
	.step = avx512_step,
	.nonfinite = avx512_nonfinite,
};
