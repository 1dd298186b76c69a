// SPDX-License-Identifier: MIT
/* stats.c — the embedded engine's counters as hmm.h's struct hmm_stats. */
#include <errno.h>
#include <string.h>

#include "chunk.h"
#include "err.h"
#include "store.h"

void hmm_stats_tier(struct hmm *h, int i, struct hmm_tier_stats *ts)
{
	struct hmm_tier *T = &h->tier[i];

	*ts = T->st;
	ts->capacity = T->cap;
	ts->resident = T->used - (i == HMM_TIER_HOST ? hmm_spare_bytes(h) : 0);
	ts->peak = T->peak;
	ts->pinned = T->pinned;
}

int hmm_engine_stats(struct hmm *h, struct hmm_stats *st)
{
	int i;

	pthread_mutex_lock(&h->lock);
	*st = h->st;
	for (i = 0; i < HMM_TIERS; i++)
		hmm_stats_tier(h, i, &st->tier[i]);
	st->tensors = h->ntensors;
	st->chunks = h->live_chunks;
	st->io_depth = h->cfg.io_depth;
	st->kernel_threads = h->cfg.kernel_threads;
	st->host_spare = hmm_spare_bytes(h);
	pthread_mutex_unlock(&h->lock);
	if (h->store) {	/* store stats may be read from any thread */
		struct hmm_store_stats ss;

		hmm_store_stats(h->store, &ss);
		st->tier[HMM_TIER_STORE].capacity = ss.capacity_bytes;
		st->tier[HMM_TIER_STORE].resident = ss.used_bytes;
		st->tier[HMM_TIER_STORE].peak = ss.used_bytes;
		st->store_direct = ss.direct;
		st->pool_bytes = ss.pool_bytes;
		st->queue_depth = ss.queue_depth;
		st->store_buffers_registered = ss.registered_buffers;
	}
	return 0;
}
