// SPDX-License-Identifier: MIT
/*
 * optim.c — AdamW on one block of parameters (optim.h).
 */
#include <math.h>

#include "optim.h"
#ifndef HMM_TRAIN_NAIVE		/* -DHMM_TRAIN_NAIVE: the plain loop below */
#define HAVE_HK_ADAMW 1
#endif
#ifdef HAVE_HK_ADAMW
#include "hk_adamw.h"
#endif

int optim_adamw(const struct optim_hp *hp, double wd, float *p,
		const float *g, float *m, float *v, size_t n,
		const char *name)
{
#ifdef HAVE_HK_ADAMW
	struct hk_adamw_args a = {
		.n = n, .param = p, .grad = g, .exp_avg = m, .exp_avg_sq = v,
		.lr = hp->lr, .beta1 = hp->beta1, .beta2 = hp->beta2,
		.eps = hp->eps, .weight_decay = wd, .step = hp->step,
		.grad_scale = hp->grad_scale, .name = name,
	};
	int r = hk_adamw_step(&a);

	return r < 0 ? r : 0;
#else
	float b1 = hp->beta1, b2 = hp->beta2, eps = hp->eps;
	float decay = 1.0 - hp->lr * wd;
	float lrc = hp->lr / (1.0 - pow(hp->beta1, hp->step));
	float bc2 = sqrt(1.0 - pow(hp->beta2, hp->step));
	float gs = hp->grad_scale > 0 ? hp->grad_scale : 1;

	for (size_t i = 0; i < n; i++) {
		float gi = g[i] / gs;

		m[i] = b1 * m[i] + (1 - b1) * gi;
		v[i] = b2 * v[i] + (1 - b2) * gi * gi;
		p[i] = p[i] * decay - lrc * m[i] / (sqrtf(v[i]) / bc2 + eps);
	}
	return 0;
#endif
}

const char *optim_impl(void)
{
#ifdef HAVE_HK_ADAMW
	return hk_adamw_isa();
#else
	return "naive";
#endif
}
