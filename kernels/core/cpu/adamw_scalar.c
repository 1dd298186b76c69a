// SPDX-License-Identifier: MIT
/*
 * adamw_scalar.c — the reference path of the AdamW kernel, one element at
 * a time, the operations listed in adamw_ops.h.  fmaf() is the exact fused
 * multiply-add (glibc picks the FMA instruction where the CPU has it).
 */
#include <math.h>
#include <string.h>

#include "adamw_ops.h"

static float ld(const void *base, int dtype, size_t i)
{
	if (dtype == HK_ADAMW_BF16)
		return hk_bf16_to_f32(((const uint16_t *)base)[i]);
	return ((const float *)base)[i];
}

static void st(void *base, int dtype, size_t i, float x)
{
	if (dtype == HK_ADAMW_BF16)
		((uint16_t *)base)[i] = hk_bf16_from_f32(x);
	else
		((float *)base)[i] = x;
}

static void scalar_step(const struct hk_adamw_args *a,
			const struct hk_adamw_coef *c, size_t lo, size_t hi)
{
	for (size_t i = lo; i < hi; i++) {
		float g = ld(a->grad, a->grad_dtype, i);
		float m = ld(a->exp_avg, a->state_dtype, i);
		float v = ld(a->exp_avg_sq, a->state_dtype, i);
		float p = a->param[i], d;

		if (c->scaled)
			g = g / c->scale;
		m = fmaf(c->b1, m, c->omb1 * g);
		v = fmaf(c->b2, v, c->omb2 * (g * g));
		d = fmaf(sqrtf(v), c->ibc2, c->eps);
		p = fmaf(-c->step_size, m / d, p * c->decay);
		a->param[i] = p;
		if (a->param_bf16)
			a->param_bf16[i] = hk_bf16_from_f32(p);
		st(a->exp_avg, a->state_dtype, i, m);
		st(a->exp_avg_sq, a->state_dtype, i, v);
	}
}

static int scalar_nonfinite(const void *x, int dtype, size_t lo, size_t hi)
{
	if (dtype == HK_ADAMW_BF16) {
		const uint16_t *h = x;

		for (size_t i = lo; i < hi; i++)
			if ((h[i] & 0x7f80u) == 0x7f80u)
				return 1;
		return 0;
	}
	for (size_t i = lo; i < hi; i++) {
		uint32_t u;

		memcpy(&u, (const float *)x + i, 4);
		if ((u & 0x7f800000u) == 0x7f800000u)
			return 1;
	}
	return 0;
}

const struct hk_adamw_ops hk_adamw_scalar_ops = {
	.name = "scalar",
	.step = scalar_step,
	.nonfinite = scalar_nonfinite,
};
