// SPDX-License-Identifier: MIT
/*
 * budget.c — byte-exact budgets per tier.
 *
 * A tier's "used" counts the 4 KiB-rounded bytes of every chunk resident
 * there (and of region blocks, on the host): exactly what is allocated,
 * never rounded to a power of two, never above "cap".  Making room evicts
 * unpinned chunks chosen by the policy; bytes whose eviction is in flight
 * are "pending_free" so that a second caller does not evict more than is
 * needed.  Everything here runs with h->lock held.
 */
#include "chunk.h"

/*
 * Make room for bytes at tier: HMM_READY when they fit now, HMM_AGAIN
 * when evictions are in flight (wait on h->cond), HMM_STARVED when
 * nothing can be evicted.  limit: evict only chunks whose next use is
 * farther than limit (HMM_NO_LIMIT: any).
 */
int hmm_budget_room(struct hmm *h, int tier, uint64_t bytes, uint64_t limit)
{
	struct hmm_tier *T = &h->tier[tier];

	if (bytes > T->cap)
		return HMM_STARVED;
	for (;;) {
		struct hmm_chunk *v;
		int r;

		if (T->used + bytes <= T->cap)
			return HMM_READY;
		if (T->used - T->pending_free + bytes <= T->cap)
			return HMM_AGAIN;
		v = hmm_policy_victim(h, tier, limit);
		if (!v) {
			if (tier == HMM_TIER_HOST && limit == HMM_NO_LIMIT &&
			    hmm_region_reclaim(h, bytes) > 0)
				continue;
			return T->pending_free ? HMM_AGAIN : HMM_STARVED;
		}
		r = hmm_chunk_evict(h, v, tier);
		if (r == HMM_READY || (r == HMM_AGAIN && v->busy))
			continue;	/* dropped, or its copy-down started */
		return r;		/* waits for room elsewhere, or fails */
	}
}

void hmm_budget_take(struct hmm *h, int tier, uint64_t bytes)
{
	struct hmm_tier *T = &h->tier[tier];

	T->used += bytes;
	if (T->used > T->peak)
		T->peak = T->used;
}

void hmm_budget_give(struct hmm *h, int tier, uint64_t bytes)
{
	h->tier[tier].used -= bytes;
	pthread_cond_broadcast(&h->cond);
}
