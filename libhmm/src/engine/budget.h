/* SPDX-License-Identifier: MIT */
/*
 * budget.h — the tiers' budgets: one ledger per tier (struct hmm_tier in
 * ctx.h) and one admission function, hmm_budget_admit, through which
 * every caller that needs room waits: tensor maps (map.c), region faults
 * (region_fault.c), shared mode's device staging (dev_stage.c) and
 * hmmd's per-client quotas (daemon/engine.c).
 *
 * A tier's ledger counts, byte-exact: used (resident: chunks, region
 * blocks, staged device maps), pending_free (evictions in flight),
 * pinned, and admitted (bytes owners with quotas of their own, hmmd's
 * clients, may pin: never above cap, so the engine can always evict an
 * unpinned chunk for a map they were admitted for).
 *
 * Room is made by reclaimers registered with the context (like the
 * kernel's shrinkers): the tensor policy's (policy.c: evict a victim
 * chunk) and the regions' (region_evict.c: evict blocks, clock order).
 * budget.c knows nothing of what they evict.
 *
 * Everything here runs with h->lock held, but hmm_budget_owner_* and
 * hmm_budget_admit_locked, which take it.
 */
#ifndef HMM_BUDGET_H
#define HMM_BUDGET_H

#include <stdint.h>

#include "hmm.h"

struct hmm;

/* Results of steps (chunk.c, budget.c, reclaimers). */
#define HMM_READY	0	/* done */
#define HMM_AGAIN	1	/* an I/O or eviction in flight: wait */
#define HMM_STARVED	2	/* no space and nothing evictable */
#define HMM_NOTHING	3	/* a reclaimer has nothing: ask the next */

#define HMM_NO_LIMIT	UINT64_MAX
#define HMM_FOREVER	1e30	/* a wait that never times out */

/*
 * Something that gives bytes back to a tier's budget.  reclaim: start
 * freeing about bytes at tier (h->lock held) evicting only what is next
 * used farther than limit (HMM_NO_LIMIT: anything); HMM_READY when it
 * freed or started freeing some (look again), HMM_AGAIN when what it
 * started waits for room elsewhere (or HMM_STARVED), HMM_NOTHING when it
 * has nothing, or -errno.  drain (may be NULL): finish one deferred
 * reclaim, dropping h->lock meanwhile; 1 when it did one.  Static tables, registered at
 * hmm_ctx_new and never removed.
 */
struct hmm_reclaimer {
	const char *name;
	int (*reclaim)(struct hmm *h, int tier, uint64_t bytes,
		       uint64_t limit);
	int (*drain)(struct hmm *h);
};
#define HMM_RECLAIMERS	4
void hmm_budget_register(struct hmm *h, const struct hmm_reclaimer *rc);

/*
 * An owner with quotas of its own (an hmmd client), embedded in its
 * holder and zeroed there; all fields under h->lock: set and read them
 * with hmm_budget_owner_*.
 */
struct hmm_owner {
	uint64_t quota[HMM_TIERS];	/* what it may hold at each tier */
	uint64_t used[HMM_TIERS];	/* admitted and not released */
	int gone;			/* -errno: its waits end with it */
};

/*
 * One admission, on the caller's stack.  The caller fills tier, bytes,
 * wait_s (how long it may stay starved: config.wait_ms, HMM_FOREVER or
 * 0) and optionally owner, step and cancel; budget.c the rest.
 *  - owner NULL, step NULL: take bytes of the tier's used (making room
 *    with the reclaimers);
 *  - owner: charge bytes to the tier's admitted and owner's used, in
 *    fair order among waiting owners (the one furthest below its quota
 *    first, then arrival; one that cannot fit yet is passed until it
 *    has waited a quarter of wait_s, then the room is kept for it);
 *  - step: the caller's own (a map's chunk steps): HMM_READY when done,
 *    HMM_AGAIN, HMM_STARVED or -errno, with h->lock held.
 * cancel: while *cancel is nonzero, give up with it (a region whose
 * backend is gone).  Out: waited_s, the time it waited; starved, set
 * when it failed because it stayed starved for wait_s.
 */
struct hmm_admit {
	int tier;
	uint64_t bytes;
	double wait_s;
	struct hmm_owner *owner;
	int (*step)(struct hmm *h, void *arg);
	void *arg;
	const int *cancel;
	double waited_s;		/* out */
	int starved;			/* out */
	/* budget.c: on the tier's waiters while an owner waits */
	struct hmm_admit *next;
	uint64_t ticket;
	double since;
};

/*
 * Admit a (see above); h->lock held, dropped while waiting.  0, or
 * -ENOMEM (more than the tier's budget; still starved after wait_s),
 * -EDQUOT (more than the owner's quota; the owner's own use left no room
 * for wait_s), the owner's gone or *cancel, or the step's -errno; the
 * detail names the tier and the numbers.
 */
int hmm_budget_admit(struct hmm *h, struct hmm_admit *a);
/* The same, taking h->lock (hmmd). */
int hmm_budget_admit_locked(struct hmm *h, struct hmm_admit *a);

/* Make room for bytes at tier now (a step; see HMM_READY ...). */
int hmm_budget_room(struct hmm *h, int tier, uint64_t bytes,
		    uint64_t limit);
void hmm_budget_take(struct hmm *h, int tier, uint64_t bytes);
void hmm_budget_give(struct hmm *h, int tier, uint64_t bytes);

/* Owners (hmmd), taking h->lock: release what an admission charged;
 * set a quota; mark gone (its waits end with err); read used; read the
 * tier's admitted bytes, their peak and how many owners' admissions
 * waited (counted when the wait begins). */
void hmm_budget_owner_release(struct hmm *h, struct hmm_owner *o, int tier,
			      uint64_t bytes);
void hmm_budget_owner_quota(struct hmm *h, struct hmm_owner *o, int tier,
			    uint64_t quota);
void hmm_budget_owner_gone(struct hmm *h, struct hmm_owner *o, int err);
uint64_t hmm_budget_owner_used(struct hmm *h, struct hmm_owner *o,
			       int tier);
/* Set *cancel (an admission's, see struct hmm_admit) to err and wake the
 * waiters, taking h->lock: one caller's waits end (hmmd: a connection's,
 * whose uid's other connections go on waiting as the same owner). */
void hmm_budget_cancel(struct hmm *h, int *cancel, int err);
void hmm_budget_owners(struct hmm *h, int tier, uint64_t *admitted,
		       uint64_t *peak, uint64_t *waits);

#endif /* HMM_BUDGET_H */
