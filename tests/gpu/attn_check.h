/* SPDX-License-Identifier: MIT */
/*
 * attn_check.h — what the two attention tests that run the CUDA kernels
 * share: test_attn_gpu.cu (nvcc, on a GPU) and emu/test_kern_emu.cpp
 * (g++, under cuda_emu.h on the CPU).  The case a test runs, the paged
 * copy of dense K/V through a block table, and the two comparisons with
 * the CPU's results (hk_attn_fwd / hk_attn_bwd), each one TAP line:
 *  - attn_close: max |x - ref| <= tol * max |ref| + 1e-6 over a tensor,
 *    a NaN on either side failing;
 *  - attn_lse_close: each log-sum-exp within tol * (1 + |ref|), tol
 *    1e-5 for fp32 and 1e-3 for bf16 inputs (the lse is fp32 either
 *    way), and -inf (a row that sees no key) exactly where the
 *    reference has it.
 * Host code in the C++ both compilers take (no __device__).
 *
 * attn_page allocates with calloc and the caller frees: test_kern_emu
 * includes this after its malloc / calloc / free macros, so there the
 * pool ends before an inaccessible page like its other arrays.
 */
#ifndef HMM_TESTS_GPU_ATTN_CHECK_H
#define HMM_TESTS_GPU_ATTN_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_attn.h"
#include "t.h"

/* One attention case: shapes as struct hk_attn's, dtype HK_F32 or
 * HK_BF16, bs the block size of a paged K/V (0: dense). */
struct attn_case {
	int B, H, Hkv, Nq, Nk, d, causal, dtype, bs;
};

/* Element i of an HK_F32 or HK_BF16 array, as a float. */
static inline float attn_val(const void *p, size_t i, int dtype)
{
	uint32_t u;
	float f;

	if (dtype == HK_F32)
		return ((const float *)p)[i];
	u = (uint32_t)((const uint16_t *)p)[i] << 16;
	memcpy(&f, &u, 4);
	return f;
}

/*
 * A paged copy of dense K or V ([B][Hkv][Nk][d], esz bytes an element):
 * a pool of B * nb + 1 blocks of [Hkv][bs][d], sequence b's token t in
 * block tab[b * nb + t / bs], row t % bs.  tab's entries are below
 * B * nb + 1 (the tests permute 0..B * nb, so one block is spare); what
 * no token lands in stays zero.  The caller frees the pool.
 */
static inline void *attn_page(const struct attn_case *c, const void *x,
			      size_t esz, const int32_t *tab, int nb)
{
	size_t blk = (size_t)c->Hkv * c->bs * c->d * esz;
	char *pool = (char *)calloc(c->B * nb + 1, blk);

	for (int b = 0; b < c->B; b++)
		for (int g = 0; g < c->Hkv; g++)
			for (int t = 0; t < c->Nk; t++) {
				size_t dst = ((size_t)tab[b * nb + t / c->bs] *
					      c->Hkv + g) * c->bs + t % c->bs;
				size_t src = ((size_t)b * c->Hkv + g) * c->Nk + t;

				memcpy(pool + dst * c->d * esz,
				       (const char *)x + src * c->d * esz,
				       c->d * esz);
			}
	return pool;
}

/*
 * One TAP line, "NAME: WHAT: max err E at I (max M)" (no "NAME: " when
 * name is NULL): max |x - ref| <= tol * max |ref| + 1e-6 over n elements
 * of dtype, a NaN in either failing.  Returns whether it held.
 */
static inline int attn_close(const char *name, const char *what,
			     const void *x, const void *ref, size_t n,
			     int dtype, double tol)
{
	double mx = 0, err = 0;
	size_t at = 0;

	for (size_t i = 0; i < n; i++) {
		double r = attn_val(ref, i, dtype), v = attn_val(x, i, dtype);
		double e = isnan(v) || isnan(r) ? INFINITY : fabs(v - r);

		mx = fabs(r) > mx ? fabs(r) : mx;
		if (e > err)
			err = e, at = i;
	}
	return t_ok(err <= tol * mx + 1e-6, "%s%s%s: max err %.3g at %zu "
		    "(max %.3g)", name ? name : "", name ? ": " : "", what,
		    err, at, mx);
}

/*
 * One TAP line, "NAME: lse ... (N off)": each of n log-sum-exps x[i]
 * (of a case with inputs in dtype) within tol * (1 + |ref[i]|) of
 * ref[i], and infinite exactly where ref[i] is (the same sign).
 * Returns whether all were.
 */
static inline int attn_lse_close(const char *name, const float *x,
				 const float *ref, size_t n, int dtype)
{
	double tol = dtype == HK_F32 ? 1e-5 : 1e-3;
	int bad = 0;

	for (size_t i = 0; i < n; i++) {
		if (isinf(ref[i]) || isinf(x[i]))
			bad += !(x[i] == ref[i]);
		else
			bad += !(fabs(x[i] - ref[i]) <=
				 tol * (1 + fabs(ref[i])));
	}
	return t_ok(!bad, "%s: lse within %g, -inf rows included (%d off)",
		    name, tol, bad);
}

#endif /* HMM_TESTS_GPU_ATTN_CHECK_H */
