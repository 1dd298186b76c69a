// SPDX-License-Identifier: MIT
/* knobs.c — check and resolve the I/O and thread knobs (knobs.h). */
#include <errno.h>
#include <unistd.h>

#include "err.h"
#include "knobs.h"

int hmm_knobs_check(const struct hmm_config *c)
{
	if (c->pool_bytes % 4096 || c->pool_bytes > HMM_CONFIG_POOL_MAX)
		return hmm_err(-EINVAL, "config.pool_bytes %u: must be a "
			       "multiple of 4096, at most 1 GiB (0 = %u)",
			       c->pool_bytes, HMM_POOL_DEFAULT);
	if (c->io_depth > HMM_CONFIG_DEPTH_MAX)
		return hmm_err(-EINVAL, "config.io_depth %u: must be 1..%u "
			       "(0 = %u)", c->io_depth, HMM_CONFIG_DEPTH_MAX,
			       HMM_IO_DEPTH_DEFAULT);
	if (c->queue_depth > HMM_CONFIG_DEPTH_MAX)
		return hmm_err(-EINVAL, "config.queue_depth %u: must be "
			       "1..%u (0 = max(%u, io_depth))",
			       c->queue_depth, HMM_CONFIG_DEPTH_MAX,
			       HMM_QUEUE_DEPTH_DEFAULT);
	if (c->kernel_threads > HMM_CONFIG_THREADS_MAX)
		return hmm_err(-EINVAL, "config.kernel_threads %u: must be "
			       "1..%u (0 = online CPUs)", c->kernel_threads,
			       HMM_CONFIG_THREADS_MAX);
	return 0;
}

void hmm_knobs_resolve(struct hmm_config *c)
{
	long n;

	if (!c->pool_bytes)
		c->pool_bytes = HMM_POOL_DEFAULT;
	if (!c->io_depth)
		c->io_depth = HMM_IO_DEPTH_DEFAULT;
	if (!c->queue_depth)
		c->queue_depth = c->io_depth > HMM_QUEUE_DEPTH_DEFAULT ?
				 c->io_depth : HMM_QUEUE_DEPTH_DEFAULT;
	if (!c->kernel_threads) {
		n = sysconf(_SC_NPROCESSORS_ONLN);
		c->kernel_threads = n < 1 ? 1 : n > (long)HMM_CONFIG_THREADS_MAX ?
				    HMM_CONFIG_THREADS_MAX : (uint32_t)n;
	}
}
