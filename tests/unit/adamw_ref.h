/* SPDX-License-Identifier: MIT */
/*
 * adamw_ref.h — what test_adamw.c, tests/gpu/test_adamw_gpu.cu and the
 * emulator's test_kern_emu.cpp share: the AdamW variants they run
 * (storage types and hyperparameters), the arguments a variant makes,
 * and the random data they draw (t.h's t_rand underneath, so a seed
 * gives the same values on each).  Header-only; compiles as C and as C++
 * (g++, nvcc).  Include after hk_adamw.h.
 */
#ifndef HMM_TESTS_ADAMW_REF_H
#define HMM_TESTS_ADAMW_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

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

/* vr's hk_adamw_args over n elements at step; the arrays left NULL. */
static inline struct hk_adamw_args adamw_ref_args(const struct variant *vr,
						  size_t n, int64_t step)
{
	struct hk_adamw_args a;

	memset(&a, 0, sizeof(a));
	a.n = n;
	a.grad_dtype = vr->gdt;
	a.state_dtype = vr->sdt;
	a.lr = vr->lr;
	a.beta1 = vr->b1;
	a.beta2 = vr->b2;
	a.eps = vr->eps;
	a.weight_decay = vr->wd;
	a.grad_scale = vr->scale;
	a.step = step;
	a.name = vr->name;
	return a;
}

/* Bytes per element of array k of vr: 0 param, 1 grad, 2 m, 3 v, 4 the
 * param's bf16 copy. */
static inline size_t adamw_ref_elsize(const struct variant *vr, int k)
{
	return k == 0 ? 4 : k == 1 ? (vr->gdt ? 2 : 4) :
	       k == 4 ? 2 : (vr->sdt ? 2 : 4);
}

/* The GPU tests' starting param p, m and v (stored as vr says) of n
 * elements from seed. */
static inline void adamw_ref_start(const struct variant *vr, size_t n,
				   uint64_t seed, void *p, void *m, void *v)
{
	for (size_t i = 0; i < n; i++) {
		double mi = frand(&seed) * 1e-3;
		float pi = (float)(2 * frand(&seed));

		memcpy((char *)p + 4 * i, &pi, 4);
		if (vr->sdt) {
			((uint16_t *)m)[i] = hk_bf16_from_f32((float)mi);
			((uint16_t *)v)[i] =
				hk_bf16_from_f32((float)(mi * mi * 1.5));
		} else {
			((float *)m)[i] = (float)mi;
			((float *)v)[i] = (float)(mi * mi * 1.5);
		}
	}
}

#endif /* HMM_TESTS_ADAMW_REF_H */
