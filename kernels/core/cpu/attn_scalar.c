// SPDX-License-Identifier: MIT
/*
 * attn_scalar.c — the reference primitives of the CPU attention: plain C
 * loops, libm expf.  Every machine runs these; the SIMD files must agree
 * with them to rounding (tests/unit/test_attn_*.c force each path).
 */
#include <math.h>

#include "attn.h"

static void gemm_scalar(int m, int n, int k, const float *a, long ars,
			long acs, const float *b, long ldb, float *c, long ldc,
			int acc)
{
	for (int i = 0; i < m; i++) {
		float *ci = c + i * ldc;

		if (!acc)
			for (int j = 0; j < n; j++)
				ci[j] = 0;
		for (int p = 0; p < k; p++) {
			float aip = a[i * ars + p * acs];
			const float *bp = b + p * ldb;

			for (int j = 0; j < n; j++)
				ci[j] += aip * bp[j];
		}
	}
}

static float rowmax_scalar(const float *x, int n)
{
	float mx = -INFINITY;

	for (int i = 0; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	return mx;
}

static float exp_sum_scalar(float *x, int n, float mul, float sub)
{
	float sum = 0;

	for (int i = 0; i < n; i++) {
		x[i] = expf(x[i] * mul - sub);
		sum += x[i];
	}
	return sum;
}

static void dsoft_scalar(float *ds, const float *p, int n, float sub,
			 float mul)
{
	for (int i = 0; i < n; i++)
		ds[i] = mul * p[i] * (ds[i] - sub);
}

static void from_bf16_scalar(float *dst, const uint16_t *src, int n)
{
	for (int i = 0; i < n; i++)
		dst[i] = hk_bf16_f32(src[i]);
}

static void to_bf16_scalar(uint16_t *dst, const float *src, int n)
{
	for (int i = 0; i < n; i++)
		dst[i] = hk_f32_bf16(src[i]);
}

const struct hk_attn_ops hk_attn_scalar_ops = {
	.name = "scalar",
	.gemm = gemm_scalar,
	.rowmax = rowmax_scalar,
	.exp_sum = exp_sum_scalar,
	.dsoft = dsoft_scalar,
	.from_bf16 = from_bf16_scalar,
	.to_bf16 = to_bf16_scalar,
};
