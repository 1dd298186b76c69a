/* SPDX-License-Identifier: MIT */
/*
 * attn.h — inside the CPU attention (attn.c): the three primitives each
 * ISA provides.  attn.c owns the tiling, masking, online softmax and
 * threading; attn_scalar.c / attn_avx2.c / attn_avx512.c fill one
 * hk_attn_ops each.  All buffers are fp32, allocated by attn.c.
 */
#ifndef HK_CPU_ATTN_H
#define HK_CPU_ATTN_H

struct hk_attn_ops {
	const char *name;
	/*
	 * C[m][n] = (acc ? C : 0) + A * B, A is m x k with A(i,p) at
	 * a[i * ars + p * acs] (so a transposed A costs nothing), B is k x n
	 * row-major with row stride ldb, C row stride ldc.  n is a multiple
	 * of 8; b and c rows hold n valid floats.  m, k >= 0.
	 */
	void (*gemm)(int m, int n, int k, const float *a, long ars, long acs,
		     const float *b, long ldb, float *c, long ldc, int acc);
	/* max of x[0..n), -INFINITY for n == 0 */
	float (*rowmax)(const float *x, int n);
	/*
	 * x[i] = exp(x[i] * mul - sub) for i < n, -INFINITY giving exactly 0;
	 * returns the sum of the new x.  n is a multiple of 8.
	 */
	float (*exp_sum)(float *x, int n, float mul, float sub);
};

extern const struct hk_attn_ops hk_attn_scalar_ops;
extern const struct hk_attn_ops hk_attn_avx2_ops;
extern const struct hk_attn_ops hk_attn_avx512_ops;

#endif /* HK_CPU_ATTN_H */
