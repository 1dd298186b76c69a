// SPDX-License-Identifier: MIT
/*
 * region_evict.c — evicting a userfaultfd region's blocks (region_int.h).
 *
 * mremap(MREMAP_DONTUNMAP) moves the block's pages atomically to a
 * staging mapping, leaving the range empty (an access now faults and
 * waits for the write); the block backend writes the staging pages and
 * they are unmapped.  A failed write puts the pages back (UFFDIO_COPY)
 * and keeps them resident (and dirty).  One that means the backend is
 * gone or full for good (ops->gone: hmmd's connection lost, the store's
 * -ENOSPC) also ends the region's evictions (r->dead), so that a fault
 * needing room fails at once instead of evicting block after block in
 * vain; any other failure (hmmd's quota or budget full for a while:
 * region_short) only keeps the region out of reclaim for REGION_RETRY_S
 * (r->retry_at), and the fault that needs the room tries again then.
 * Writes a backend defers (r->todo) are done by the thread that needs
 * the room, without h->lock (hmm_region_drain).
 */
#include <errno.h>
#include <linux/userfaultfd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>

#include "chunk.h"
#include "err.h"
#include "region_int.h"

/*
 * Write one deferred eviction, if any region has one (h->lock held,
 * dropped meanwhile).  Returns 1 when it did, 0 when none waits.
 */
int hmm_region_drain(struct hmm *h)
{
	struct hmm_list *p;

	for (p = h->regions.next; p != &h->regions; p = p->next) {
		struct hmm_region *r = hmm_container_of(p, struct hmm_region,
							link);
		struct region_wb *wb = r->todo;

		if (!wb)
			continue;
		r->todo = wb->next;
		pthread_mutex_unlock(&h->lock);
		wb->req.io.result = r->ops->write_now(wb);
		hmm_region_wb_done(&wb->req);
		pthread_mutex_lock(&h->lock);
		return 1;
	}
	return 0;
}

/* Wait for an eviction to end, writing one ourselves if one waits. */
void hmm_region_wait(struct hmm *h)
{
	if (!hmm_region_drain(h))
		pthread_cond_wait(&h->cond, &h->lock);
}

/*
 * Block b's write failed with err; it is resident again (h->lock held).
 * Its backend gone, or the store full (the I/O thread fails a write
 * with -ENOSPC only when nothing in flight can free room): evict no
 * more, rather than write block after block in vain while a fault waits
 * for room.  Else try again later: quietly when the backend is only
 * short of room for now (hmmd's quota full: nothing is lost), said once
 * per failure otherwise (an I/O error).
 */
static void region_write_failed(struct hmm *h, struct hmm_region *r,
				uint32_t b, int err, const char *detail)
{
	if (r->ops->gone(err)) {
		if (!r->dead)
			r->dead = err;
		if (!r->quit)	/* its faults with no room give up */
			r->quit = err;
	} else {
		r->retry_at = hmm_now() + REGION_RETRY_S;
		r->again = err;
		if (region_short(err))
			return;
	}
	h->st.io_errors++;
	hmm_async_error(h, err, "region %u block %u: %s write failed: %s",
			r->id, b, r->ops->name, detail);
}

void hmm_region_wb_done(struct hmm_ioreq *q)
{
	struct region_wb *wb = hmm_container_of(q, struct region_wb, req);
	struct hmm_region *r = wb->r;
	struct hmm *h = r->h;
	int err = q->io.result;
	char detail[200];

	/* the backend's detail (the store's path and why), set on this
	 * thread by whoever failed the write */
	snprintf(detail, sizeof(detail), "%s", err ? hmm_last_error() : "");
	if (err) {
		struct uffdio_copy cp = {
			.dst = (uintptr_t)region_block_addr(r, wb->block),
			.src = (uintptr_t)wb->staging, .len = RBLOCK,
		};

		ioctl(r->uffd, UFFDIO_COPY, &cp);	/* put it back */
	}
	munmap(wb->staging, RBLOCK);
	pthread_mutex_lock(&h->lock);
	h->tier[HMM_TIER_HOST].pending_free -= RBLOCK;
	r->evicting--;
	if (err) {
		r->state[wb->block] = RB_RESIDENT;
		region_write_failed(h, r, wb->block, err, detail);
	} else {
		r->again = 0;
		r->state[wb->block] = RB_STORED;
		hmm_budget_give(h, HMM_TIER_HOST, RBLOCK);
		h->st.region_evictions++;
		h->tier[HMM_TIER_HOST].st.bytes_out += RBLOCK;
		h->tier[HMM_TIER_STORE].st.bytes_in += RBLOCK;
	}
	hmm_trace_event(h, "evict", "region write", "region", wb->block,
			RBLOCK, q->t0, hmm_now(), 4);
	/* a prefetch queued for this room is retried only here: nothing
	   else ends (fuzz_api: a flush then waited for it for ever) */
	hmm_chunk_want_retry(h);
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
	free(wb);
}

/* Start evicting resident block b (h->lock held).  0 or -errno. */
int hmm_region_evict_block(struct hmm *h, struct hmm_region *r, uint32_t b)
{
	struct region_wb *wb = calloc(1, sizeof(*wb));
	void *p;

	if (!wb)
		return -ENOMEM;
	p = mremap(region_block_addr(r, b), RBLOCK, RBLOCK,
		   MREMAP_MAYMOVE | MREMAP_DONTUNMAP, NULL);
	if (p == MAP_FAILED) {
		free(wb);
		return -errno;
	}
	wb->r = r;
	wb->block = b;
	wb->staging = p;
	wb->req.h = h;
	wb->req.done = hmm_region_wb_done;
	wb->req.t0 = hmm_now();
	r->state[b] = RB_EVICTING;
	r->evicting++;
	h->tier[HMM_TIER_HOST].pending_free += RBLOCK;
	r->ops->write(r, wb);
	return 0;
}

/*
 * The host budget needs bytes and no chunk can go: evict resident region
 * blocks, clock order over every region but those whose evictions ended
 * (r->dead) or failed a moment ago (r->retry_at).  Returns the number
 * started.
 */
static int region_reclaim_blocks(struct hmm *h, uint64_t bytes)
{
	struct hmm_list *p;
	double now = hmm_now();
	uint64_t got = 0;
	int n = 0;

	for (p = h->regions.next; p != &h->regions && got < bytes;
	     p = p->next) {
		struct hmm_region *r = hmm_container_of(p, struct hmm_region,
							link);
		uint32_t i;

		if (r->retry_at > now)
			continue;	/* a write failed just now */
		for (i = 0; !r->whole && !r->dead && i < r->nblocks &&
		     got < bytes; i++) {
			uint32_t b = r->hand;

			r->hand = (r->hand + 1) % r->nblocks;
			if (r->state[b] != RB_RESIDENT)
				continue;
			if (hmm_region_evict_block(h, r, b) == 0) {
				got += RBLOCK;
				n++;
			}
		}
	}
	return n;
}

/* The regions as a reclaimer (budget.h): only for the host, only when
 * anything may go (a prefetch's limited room never evicts blocks). */
static int region_reclaim(struct hmm *h, int tier, uint64_t bytes,
			  uint64_t limit)
{
	if (tier != HMM_TIER_HOST || limit != HMM_NO_LIMIT ||
	    region_reclaim_blocks(h, bytes) == 0)
		return HMM_NOTHING;
	return HMM_READY;
}

const struct hmm_reclaimer hmm_region_reclaimer = {
	.name = "regions",
	.reclaim = region_reclaim,
	.drain = hmm_region_drain,
};
