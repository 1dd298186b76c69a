/* SPDX-License-Identifier: MIT */
/*
 * preset.h — named model sizes for --preset, each with its default step
 * count, learning rate and the loss its default run must get below
 * (tests/integration/test_train_loss.sh checks "default").
 * Static storage; any thread.
 */
#ifndef HMM_TRAIN_PRESET_H
#define HMM_TRAIN_PRESET_H

#include "model.h"

struct preset {
	const char *name;
	struct gpt_config cfg;
	int steps;		/* default --steps */
	int warmup;		/* linear LR warm-up steps, then constant */
	double lr;
	double loss_max;	/* after `steps` on the synthetic corpus */
	const char *about;
};

const struct preset *preset_find(const char *name);	/* NULL if none */
const struct preset *preset_list(void);	/* ends with name == NULL */

#endif /* HMM_TRAIN_PRESET_H */
