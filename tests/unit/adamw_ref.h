/* SPDX-License-Identifier: MIT */
/*
 * adamw_ref.h — what test_adamw.c and tests/gpu/test_adamw_gpu.cu share:
 * the AdamW variants both run (storage types and hyperparameters) and the
 * random data they draw (t.h's t_rand underneath, so a seed gives the same
 * values on both).  Header-only; compiles as C and as C++ (nvcc).
 */
#ifndef HMM_TESTS_ADAMW_REF_H
#define HMM_TESTS_ADAMW_REF_H

#include <math.h>
#include <stdint.h>

#include "t.h"

/*
 * One configuration of hk_adamw_args.  gdt, sdt: grad and state (m, v)
 * dtypes, 0 fp32 or 1 bf16; pout: also write a bf16 copy of the param;
 * scale: grad_scale (0: none).
 */
struct variant {
	const char *name;
	int gdt, sdt, pout;
	double scale, lr, b1, b2, eps, wd;
};

static const struct variant variants[] = {
	{ "fp32", 0, 0, 0, 0, 1e-3, 0.9, 0.999, 1e-8, 0.01 },
	{ "fp32 scaled", 0, 0, 0, 3, 0.1, 0.5, 0.9, 1e-6, 0.1 },
	{ "bf16 param, fp32 master+grad", 0, 0, 1, 1024, 1e-3, 0.9, 0.999,
	  1e-8, 0.01 },
	{ "bf16 param+grad, fp32 master", 1, 0, 1, 0, 0.05, 0.8, 0.99, 1e-8,
	  0.0 },
	{ "bf16 states, bf16 param+grad", 1, 1, 1, 1024, 1e-3, 0.9, 0.999,
	  1e-8, 0.01 },
	{ "bf16 states, fp32 param", 0, 1, 0, 3, 0.02, 0.9, 0.95, 1e-7, 0.05 },
};

static inline double frand(uint64_t *s)	/* in [-1, 1) */
{
	return (double)(t_rand(s) >> 11) * 0x1p-52 - 1.0;
}

/* Grads over a wide range of magnitudes, some exactly zero. */
static inline double grand(uint64_t *s)
{
	uint64_t r = t_rand(s);

	if (r % 97 == 0)
		return 0;
	return frand(s) * ldexp(1, (int)(r % 25) - 20);
}

#endif /* HMM_TESTS_ADAMW_REF_H */
