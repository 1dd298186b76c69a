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

/*
 * HK_ADAMW_VARIANTS(name): define name(a, c, lo, hi), which calls the
 * including file's always-inline body(a, c, lo, hi, bf16 grad, bf16
 * states, bf16 copy out, scaled) with the four flags as constants, so
 * the compiler makes one specialised loop per combination.
 */
#define HK_ADAMW_V_(key) case key:					\
	body(a, c, lo, hi, key & 1, key >> 1 & 1, key >> 2 & 1, key >> 3 & 1); \
	break
#define HK_ADAMW_VARIANTS(name)						\
static void name(const struct hk_adamw_args *a,				\
		 const struct hk_adamw_coef *c, size_t lo, size_t hi)	\
{									\
	switch (a->grad_dtype | a->state_dtype << 1 |			\
		!!a->param_bf16 << 2 | c->scaled << 3) {		\
	HK_ADAMW_V_(0); HK_ADAMW_V_(1); HK_ADAMW_V_(2); HK_ADAMW_V_(3);	\
	HK_ADAMW_V_(4); HK_ADAMW_V_(5); HK_ADAMW_V_(6); HK_ADAMW_V_(7);	\
	HK_ADAMW_V_(8); HK_ADAMW_V_(9); HK_ADAMW_V_(10); HK_ADAMW_V_(11); \
	HK_ADAMW_V_(12); HK_ADAMW_V_(13); HK_ADAMW_V_(14); HK_ADAMW_V_(15); \
	}								\
}

#endif /* HK_ADAMW_OPS_H */
