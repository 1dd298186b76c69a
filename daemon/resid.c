// SPDX-License-Identifier: MIT
/*
 * resid.c — a tensor's bytes resident per tier, for LIST (hmmctl
 * tensors).  hmm.h has no per-tensor residency call yet, so this reads
 * libhmm's chunk table (chunk.h) under the context lock, read-only.  It
 * is the one place hmmd looks inside the engine; it goes away when
 * libhmm grows hmm_tensor_residency(t, bytes[HMM_TIERS]).
 */
#include <pthread.h>

#include "chunk.h"
#include "ctx.h"
#include "engine.h"

void hmmd_residency(struct hmm_tensor *t, uint64_t out[HMM_TIERS])
{
	struct hmm *h = t->h;
	uint32_t i;

	out[0] = out[1] = out[2] = 0;
	pthread_mutex_lock(&h->lock);
	for (i = 0; i < t->nchunks; i++) {
		const struct hmm_chunk *c = &t->chunks[i];

		if (c->res & TB(HMM_TIER_DEVICE))
			out[HMM_TIER_DEVICE] += c->bytes;
		if (c->res & TB(HMM_TIER_HOST))
			out[HMM_TIER_HOST] += c->bytes;
		if (c->stored)
			out[HMM_TIER_STORE] += c->bytes;
	}
	pthread_mutex_unlock(&h->lock);
}
