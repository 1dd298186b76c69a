/* SPDX-License-Identifier: MIT */
/*
 * optim.h — the AdamW step hmm-train applies to one mapped block.
 *
 * optim_adamw(): p, g, m, v of n floats; decoupled weight decay wd.
 * Runs kernels/core's fused AdamW (hk_adamw.h).  Deterministic; any
 * thread.  Returns 0 or -errno.
 */
#ifndef HMM_TRAIN_OPTIM_H
#define HMM_TRAIN_OPTIM_H

#include <stddef.h>
#include <stdint.h>

struct optim_hp {
	double lr, beta1, beta2, eps;
	int64_t step;		/* 1 for the first step */
	double grad_scale;	/* grads are divided by it; 0 means 1 */
};

int optim_adamw(const struct optim_hp *hp, double wd, float *p,
		const float *g, float *m, float *v, size_t n,
		const char *name);
const char *optim_impl(void);

#endif /* HMM_TRAIN_OPTIM_H */
