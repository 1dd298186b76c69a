// SPDX-License-Identifier: MIT
/*
 * optim.c — AdamW on one block of parameters (optim.h).
 */
#include "optim.h"
#include "hk_adamw.h"

int optim_adamw(const struct optim_hp *hp, double wd, float *p,
		const float *g, float *m, float *v, size_t n,
		const char *name)
{
	struct hk_adamw_args a = {
		.n = n, .param = p, .grad = g, .exp_avg = m, .exp_avg_sq = v,
		.lr = hp->lr, .beta1 = hp->beta1, .beta2 = hp->beta2,
		.eps = hp->eps, .weight_decay = wd, .step = hp->step,
		.grad_scale = hp->grad_scale, .name = name,
	};
	int r = hk_adamw_step(&a);

	return r < 0 ? r : 0;
}

const char *optim_impl(void)
{
	return hk_adamw_isa();
}
