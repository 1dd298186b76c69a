// SPDX-License-Identifier: MIT
/*
 * adamw.c — the AdamW entry points (hk_adamw.h): validate, compute the
 * per-step constants in double, pick the ISA's ops table, split the
 * elements over hk_parallel()'s threads on cache-line-aligned ranges.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "hk.h"
#include "adamw_ops.h"

/* Below this many elements a step runs on the caller alone. */
#define ADAMW_PAR_MIN	32768
/* Parts are at most this many elements (1 MiB of each fp32 array). */
#define ADAMW_PART	(1u << 18)
/* Split boundaries are multiples of this many elements: 128 bytes of
 * fp32, 64 of bf16, so no two threads write one cache line. */
#define ADAMW_ALIGN	64

static __thread char err_detail[256];

const char *hk_adamw_error(void)
{
	return err_detail;
}

int hk_adamw_fail(const struct hk_adamw_args *a, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(err_detail, sizeof(err_detail), "adamw '%s': ",
		     a && a->name ? a->name : "?");
	va_start(ap, fmt);
	vsnprintf(err_detail + n, sizeof(err_detail) - n, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static int forced_isa = -1;

int hk_adamw_force_isa(int isa)
{
	if (isa != -1 && (isa < HK_ISA_SCALAR || isa > HK_ISA_AMX ||
			  !hk_isa_supported(isa)))
		return -ENOTSUP;
	forced_isa = isa;
	return 0;
}

static const struct hk_adamw_ops *ops(void)
{
	switch (forced_isa >= 0 ? forced_isa : hk_isa()) {
	case HK_ISA_AMX:	/* no tile path: AVX-512 */
	case HK_ISA_AVX512:
		return &hk_adamw_avx512_ops;
	case HK_ISA_AVX2:
		return &hk_adamw_avx2_ops;
	default:
		return &hk_adamw_scalar_ops;
	}
}

const char *hk_adamw_isa(void)
{
	return ops()->name;
}

static int bad_dtype(int dt)
{
	return dt != HK_ADAMW_F32 && dt != HK_ADAMW_BF16;
}

static int misaligned(const void *p, uintptr_t size)
{
	return ((uintptr_t)p & (size - 1)) != 0;
}

int hk_adamw_validate(const struct hk_adamw_args *a)
{
	const int gs = a && a->grad_dtype ? 2 : 4;
	const int ss = a && a->state_dtype ? 2 : 4;

	if (!a)
		return hk_adamw_fail(a, "args is NULL");
	if (a->flags & ~HK_ADAMW_F_ALL)
		return hk_adamw_fail(a, "unknown flags 0x%x", a->flags);
	if (bad_dtype(a->grad_dtype) || bad_dtype(a->state_dtype))
		return hk_adamw_fail(a, "grad_dtype %d / state_dtype %d "
				     "not F32 or BF16",
				     a->grad_dtype, a->state_dtype);
	if (a->n && (!a->param || !a->grad || !a->exp_avg || !a->exp_avg_sq))
		return hk_adamw_fail(a, "param, grad, exp_avg or exp_avg_sq "
				     "is NULL");
	if (misaligned(a->param, 4) || misaligned(a->param_bf16, 2) ||
	    misaligned(a->grad, gs) || misaligned(a->exp_avg, ss) ||
	    misaligned(a->exp_avg_sq, ss))
		return hk_adamw_fail(a, "param, param_bf16, grad, exp_avg or "
				     "exp_avg_sq not aligned to its element");
	if (a->step < 1)
		return hk_adamw_fail(a, "step %lld < 1", (long long)a->step);
	if (!(a->beta1 >= 0 && a->beta1 < 1) ||
	    !(a->beta2 >= 0 && a->beta2 < 1))
		return hk_adamw_fail(a, "beta1 %g / beta2 %g not in [0, 1)",
				     a->beta1, a->beta2);
	if (!(a->lr >= 0 && isfinite(a->lr)) ||
	    !(a->eps >= 0 && isfinite(a->eps)) ||
	    !(a->weight_decay >= 0 && isfinite(a->weight_decay)))
		return hk_adamw_fail(a, "lr %g, eps %g or weight_decay %g "
				     "not finite >= 0",
				     a->lr, a->eps, a->weight_decay);
	if (!(a->grad_scale >= 0 && isfinite(a->grad_scale)))
		return hk_adamw_fail(a, "grad_scale %g not finite >= 0",
				     a->grad_scale);
	return 0;
}

/* The constants of adamw_ops.h, each computed in double, rounded once. */
void hk_adamw_coef_init(struct hk_adamw_coef *c,
			const struct hk_adamw_args *a)
{
	double bc1 = 1.0 - pow(a->beta1, (double)a->step);
	double bc2 = 1.0 - pow(a->beta2, (double)a->step);
	double scale = a->grad_scale > 0 ? a->grad_scale : 1.0;

	c->decay = (float)(1.0 - a->lr * a->weight_decay);
	c->b1 = (float)a->beta1;
	c->omb1 = (float)(1.0 - a->beta1);
	c->b2 = (float)a->beta2;
	c->omb2 = (float)(1.0 - a->beta2);
	c->step_size = (float)(a->lr / bc1);
	c->ibc2 = (float)(1.0 / sqrt(bc2));
	c->eps = (float)a->eps;
	c->scale = (float)scale;
	c->scaled = c->scale != 1.0f;
}

struct job {
	const struct hk_adamw_ops *ops;
	const struct hk_adamw_args *a;
	struct hk_adamw_coef c;
	int found;			/* nonfinite: set by any part */
};

static void step_part(void *arg, int i, int n)
{
	struct job *j = arg;
	size_t lo, hi;

	hk_split(j->a->n, i, n, ADAMW_ALIGN, &lo, &hi);
	if (lo < hi)
		j->ops->step(j->a, &j->c, lo, hi);
}

static void check_part(void *arg, int i, int n)
{
	struct job *j = arg;
	size_t lo, hi;

	hk_split(j->a->n, i, n, ADAMW_ALIGN, &lo, &hi);
	if (lo < hi && j->ops->nonfinite(j->a->grad, j->a->grad_dtype, lo, hi))
		__atomic_store_n(&j->found, 1, __ATOMIC_RELAXED);
}

/*
 * How many parts to cut n elements into: one below ADAMW_PAR_MIN, else
 * at least one per thread and at most ADAMW_PART elements each, so that
 * a thread the system delays leaves its share to the others.
 */
static int parts(size_t n)
{
	size_t want = (n + ADAMW_PART - 1) / ADAMW_PART;
	int t = hk_threads();

	if (n < ADAMW_PAR_MIN || t == 1)
		return 1;
	if (want > 1 << 20)
		want = 1 << 20;
	return want > (size_t)t ? (int)want : t;
}

static int check_one(const struct hk_adamw_args *a)
{
	struct job j = { .ops = ops(), .a = a };

	hk_parallel(parts(a->n), check_part, &j);
	return j.found;
}

static void step_one(const struct hk_adamw_args *a)
{
	struct job j = { .ops = ops(), .a = a };

	hk_adamw_coef_init(&j.c, a);
	hk_parallel(parts(a->n), step_part, &j);
}

int hk_adamw_nonfinite(const void *x, int dtype, size_t n)
{
	struct hk_adamw_args a = {
		.n = n, .grad = x, .grad_dtype = dtype, .name = "nonfinite",
	};

	if (bad_dtype(dtype) || (n && !x))
		return hk_adamw_fail(&a, "dtype %d or NULL array", dtype);
	return check_one(&a);
}

int hk_adamw_check(const struct hk_adamw_args *a, size_t count)
{
	int err;

	if (count && !a)
		return hk_adamw_fail(NULL, "args is NULL");
	for (size_t i = 0; i < count; i++)
		if ((err = hk_adamw_validate(&a[i])))
			return err;
	for (size_t i = 0; i < count; i++)
		if (check_one(&a[i]))
			return 1;
	return 0;
}

int hk_adamw_step_many(const struct hk_adamw_args *a, size_t count)
{
	int err;

	if (count && !a)
		return hk_adamw_fail(NULL, "args is NULL");
	for (size_t i = 0; i < count; i++)
		if ((err = hk_adamw_validate(&a[i])))
			return err;
	for (size_t i = 0; i < count; i++)
		if (a[i].found_inf)
			return HK_ADAMW_SKIPPED;
	for (size_t i = 0; i < count; i++)
		if ((a[i].flags & HK_ADAMW_CHECK_FINITE) && check_one(&a[i]))
			return HK_ADAMW_SKIPPED;
	for (size_t i = 0; i < count; i++)
		step_one(&a[i]);
	return 0;
}

int hk_adamw_step(const struct hk_adamw_args *a)
{
	return hk_adamw_step_many(a, 1);
}
