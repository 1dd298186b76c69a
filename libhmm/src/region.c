// SPDX-License-Identifier: MIT
/* region.c — placeholder until the userfaultfd path lands. */
#include <errno.h>

#include "ctx.h"
#include "err.h"

void hmm_region_fini(struct hmm *h) {}
int hmm_region_reclaim(struct hmm *h, uint64_t bytes) { return 0; }
int hmm_region_new(struct hmm *h, uint64_t bytes, void **ptr)
{
	return hmm_err(-ENOSYS, "hmm_region_new: not built yet");
}
int hmm_region_advise(struct hmm *h, void *ptr, uint64_t len, int advice)
{
	return hmm_err(-ENOSYS, "hmm_region_advise: not built yet");
}
int hmm_region_free(struct hmm *h, void *ptr)
{
	return hmm_err(-ENOSYS, "hmm_region_free: not built yet");
}
