// SPDX-License-Identifier: MIT
/* dev_cuda.c — placeholder until the CUDA driver backend lands. */
#include <errno.h>

#include "dev.h"
#include "err.h"

static int cuda_open(const struct hmm_config *cfg, void **priv,
		     uint64_t *capacity)
{
	return hmm_err(-ENODEV, "device cuda: not built yet");
}

const struct hmm_dev_ops hmm_dev_cuda = {
	.name = "cuda",
	.open = cuda_open,
};
