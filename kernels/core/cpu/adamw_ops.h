/* SPDX-License-Identifier: MIT */
/*
 * adamw_ops.h — inside the AdamW kernel: the per-step constants and the
 * ops table each ISA file fills (adamw_scalar.c, adamw_avx2.c,
 * adamw_avx512.c).  adamw.c validates, computes the constants, picks the
 * table by hk_isa() and splits the work over threads.
 *
 * Every path computes each element with the same fp32 operations in the
 * same order, so that all of them give the same bits:
 *
 *	g  = grad			(bf16 widened exactly)
 *	g  = g / scale			(only when scaled)
 *	m  = fma(b1, m, omb1 * g)
 *	v  = fma(b2, v, omb2 * (g * g))
 *	d  = fma(sqrt(v), ibc2, eps)
 *	p  = fma(-step_size, m / d, p * decay)
 *
 * then m, v (and the bf16 copy of p) are rounded to nearest even when
 * stored as bf16.
 */
#ifndef HK_ADAMW_OPS_H
#define HK_ADAMW_OPS_H

#include "hk_adamw.h"

/* Per-step constants, computed in double by adamw.c, rounded once. */
struct hk_adamw_coef {
	float decay;		/* 1 - lr * weight_decay */
	float b1, omb1;		/* beta1, 1 - beta1 */
	float b2, omb2;		/* beta2, 1 - beta2 */
	float step_size;	/* lr / (1 - beta1^step) */
	float ibc2;		/* 1 / sqrt(1 - beta2^step) */
	float eps;
	float scale;		/* grad divisor when scaled */
	int scaled;		/* scale != 1 */
};

struct hk_adamw_ops {
	const char *name;
	/* Step elements [lo, hi) of a.  Any thread; touches only that range. */
	void (*step)(const struct hk_adamw_args *a,
		     const struct hk_adamw_coef *c, size_t lo, size_t hi);
	/* 1 if any of x[lo, hi) (dtype HK_ADAMW_*) is inf or NaN. */
	int (*nonfinite)(const void *x, int dtype, size_t lo, size_t hi);
};

/* adamw.c, shared with cuda/adamw.cu.  Any thread. */
/* 0 or -EINVAL with the detail set (hk_adamw_error()). */
int hk_adamw_validate(const struct hk_adamw_args *a);
void hk_adamw_coef_init(struct hk_adamw_coef *c, const struct hk_adamw_args *a);
/* Set the calling thread's detail ("adamw 'name': ..."); returns -EINVAL. */
int hk_adamw_fail(const struct hk_adamw_args *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

extern const struct hk_adamw_ops hk_adamw_scalar_ops;
extern const struct hk_adamw_ops hk_adamw_avx2_ops;
extern const struct hk_adamw_ops hk_adamw_avx512_ops;

#endif /* HK_ADAMW_OPS_H */
