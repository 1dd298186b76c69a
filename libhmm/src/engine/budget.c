// SPDX-License-Identifier: MIT
/*
 * budget.c — byte-exact budgets per tier and the one admission function
 * (budget.h).
 *
 * A tier's "used" counts the 4 KiB-rounded bytes of every chunk resident
 * there (and of region blocks, on the host): exactly what is allocated,
 * never rounded to a power of two, never above "cap".  Making room asks
 * the registered reclaimers in turn; bytes whose eviction is in flight
 * are "pending_free" so that a second caller does not evict more than is
 * needed.  Everything here runs with h->lock held unless it says so.
 */
#include <errno.h>
#include <string.h>

#include "budget.h"
#include "chunk.h"
#include "err.h"

static const char *const tier_names[] = { "device", "host", "store" };

void hmm_budget_register(struct hmm *h, const struct hmm_reclaimer *rc)
{
	if (h->nreclaimers < HMM_RECLAIMERS)
		h->reclaimers[h->nreclaimers++] = rc;
}

/*
 * Will bytes fit at tier once the copies in flight end?  Evictions in
 * flight (pending_free) free their bytes; unpinned chunks another call
 * is copying (a prefetch, an evict's copy down, a write-back) are no
 * victims while they are busy, but they are once it ends.  Counted only
 * for an admission that may evict anything (limit HMM_NO_LIMIT).  With
 * the host full of such chunks a map found nothing to evict, starved,
 * and failed with -ENOMEM after wait_ms while the copies still ran.
 */
static int room_to_come(struct hmm *h, int tier, uint64_t bytes,
			uint64_t limit)
{
	struct hmm_tier *T = &h->tier[tier];
	uint64_t going = T->pending_free;

	if (limit == HMM_NO_LIMIT)
		going += hmm_chunk_busy_bytes(h, tier);
	return going && T->used - going + bytes <= T->cap;
}

/*
 * Make room for bytes at tier: HMM_READY when they fit now, HMM_AGAIN
 * when evictions are in flight or copies hold room that will come
 * (room_to_come: wait on h->cond), HMM_STARVED when nothing can be
 * evicted.  limit: evict only what is next used farther than limit
 * (HMM_NO_LIMIT: any).
 */
int hmm_budget_room(struct hmm *h, int tier, uint64_t bytes, uint64_t limit)
{
	struct hmm_tier *T = &h->tier[tier];

	if (bytes > T->cap)
		return HMM_STARVED;
	for (;;) {
		int r = HMM_NOTHING;
		unsigned i;

		if (T->used + bytes <= T->cap)
			return HMM_READY;
		if (T->used - T->pending_free + bytes <= T->cap)
			return HMM_AGAIN;
		h->in_reclaim++;	/* what they drop is not parked */
		for (i = 0; i < h->nreclaimers && r == HMM_NOTHING; i++)
			r = h->reclaimers[i]->reclaim(h, tier, bytes, limit);
		h->in_reclaim--;
		if (r == HMM_READY)
			continue;	/* something went, or is going */
		if (r == HMM_NOTHING)
			return T->pending_free ||
			       room_to_come(h, tier, bytes, limit) ?
			       HMM_AGAIN : HMM_STARVED;
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

/* ---- admission ------------------------------------------------------------ */

/* The default step: take a->bytes of the tier's used. */
static int take_step(struct hmm *h, struct hmm_admit *a)
{
	int r = hmm_budget_room(h, a->tier, a->bytes, HMM_NO_LIMIT);

	if (r == HMM_READY)
		hmm_budget_take(h, a->tier, a->bytes);
	return r;
}

static int owner_fits(const struct hmm_admit *a)
{
	const struct hmm_owner *o = a->owner;

	return o->used[a->tier] + a->bytes <= o->quota[a->tier];
}

static int admitted_fits(struct hmm *h, const struct hmm_admit *a)
{
	const struct hmm_tier *T = &h->tier[a->tier];

	return T->admitted + a->bytes <= T->cap;
}

/* An owner's use as a fraction of its quota, scaled (no floating point). */
static uint64_t share_of(const struct hmm_owner *o, int tier)
{
	uint64_t q = o->quota[tier] ? o->quota[tier] : 1;

	return (o->used[tier] << 10) / q;
}

/* Is waiter o ahead of a (queued: a waits too; else a is behind all)? */
static int ahead(const struct hmm_admit *o, const struct hmm_admit *a,
		 int queued)
{
	uint64_t so = share_of(o->owner, o->tier);
	uint64_t sa = share_of(a->owner, a->tier);

	if (so != sa)
		return so < sa;
	return !queued || o->ticket < a->ticket;
}

/*
 * May a go now: it fits its owner's quota and the tier, and no waiter
 * ahead of it fits or starves.  A waiter held back by its own quota
 * holds nobody back: the budget would idle.
 */
static int my_turn(struct hmm *h, const struct hmm_admit *a, int queued)
{
	const struct hmm_admit *o;
	double now = 0;

	if (!owner_fits(a) || !admitted_fits(h, a))
		return 0;
	for (o = h->tier[a->tier].waiters; o; o = o->next) {
		if (o == a || !ahead(o, a, queued) || !owner_fits(o))
			continue;
		if (admitted_fits(h, o))
			return 0;
		if (!now)
			now = hmm_now();
		if (now - o->since > o->wait_s / 4)
			return 0;
	}
	return 1;
}

/* The owner's step: charge a->bytes when it is a's turn. */
static int owner_step(struct hmm *h, struct hmm_admit *a, int queued)
{
	struct hmm_tier *T = &h->tier[a->tier];

	if (!my_turn(h, a, queued))
		return HMM_STARVED;
	a->owner->used[a->tier] += a->bytes;
	T->admitted += a->bytes;
	if (T->admitted > T->admitted_peak)
		T->admitted_peak = T->admitted;
	return HMM_READY;
}

/* Wait for a change, finishing a deferred reclaim first if one waits. */
static void admit_wait(struct hmm *h, double until)
{
	unsigned i;

	for (i = 0; i < h->nreclaimers; i++)
		if (h->reclaimers[i]->drain && h->reclaimers[i]->drain(h))
			return;
	if (until >= HMM_FOREVER)
		pthread_cond_wait(&h->cond, &h->lock);
	else
		hmm_cond_wait_until(h, until);
}

static void admit_queue(struct hmm *h, struct hmm_admit *a, int on)
{
	struct hmm_tier *T = &h->tier[a->tier];
	struct hmm_admit **pp;

	if (on) {
		a->since = hmm_now();
		a->ticket = ++T->next_ticket;
		a->next = T->waiters;
		T->waiters = a;
		return;
	}
	for (pp = &T->waiters; *pp != a; pp = &(*pp)->next)
		;
	*pp = a->next;
	/* others may have been held back for a: let them look again */
	pthread_cond_broadcast(&h->cond);
}

static int starved_err(struct hmm *h, const struct hmm_admit *a)
{
	const struct hmm_tier *T = &h->tier[a->tier];
	const char *tn = tier_names[a->tier];

	if (a->owner && !owner_fits(a))
		return hmm_err(-EDQUOT, "%s tier: %llu bytes: the owner's own "
			       "use (%llu of its quota %llu) left no room for "
			       "%.0f ms", tn, (unsigned long long)a->bytes,
			       (unsigned long long)a->owner->used[a->tier],
			       (unsigned long long)a->owner->quota[a->tier],
			       a->wait_s * 1e3);
	return hmm_err(-ENOMEM, "%s tier full for %.0f ms (budget %llu, used "
		       "%llu, admitted %llu, pinned %llu bytes; %llu wanted)",
		       tn, a->wait_s * 1e3, (unsigned long long)T->cap,
		       (unsigned long long)T->used,
		       (unsigned long long)T->admitted,
		       (unsigned long long)T->pinned,
		       (unsigned long long)a->bytes);
}

int hmm_budget_admit(struct hmm *h, struct hmm_admit *a)
{
	const struct hmm_tier *T = &h->tier[a->tier];
	double t0 = hmm_now(), starved_at = 0;
	int queued = 0, waited = 0, r;

	a->waited_s = 0;
	a->starved = 0;
	if (a->owner && a->bytes > a->owner->quota[a->tier])
		return hmm_err(-EDQUOT, "%s tier: %llu bytes: more than the "
			       "owner's quota (%llu)", tier_names[a->tier],
			       (unsigned long long)a->bytes,
			       (unsigned long long)a->owner->quota[a->tier]);
	if (a->bytes > T->cap)
		return hmm_err(-ENOMEM, "%s tier: %llu bytes do not fit its "
			       "budget (%llu)", tier_names[a->tier],
			       (unsigned long long)a->bytes,
			       (unsigned long long)T->cap);
	for (;;) {
		double now;

		if (a->owner && a->owner->gone) {
			r = a->owner->gone;
			break;
		}
		r = a->step ? a->step(h, a->arg) :
		    a->owner ? owner_step(h, a, queued) : take_step(h, a);
		if (r == HMM_READY || r < 0)
			break;
		if (a->cancel && *a->cancel) {
			r = *a->cancel;
			break;
		}
		if (a->wait_s <= 0) {
			r = -EAGAIN;	/* it would wait: no detail */
			break;
		}
		waited = 1;
		if (r == HMM_AGAIN) {	/* copies in flight: they end */
			starved_at = 0;
			admit_wait(h, HMM_FOREVER);
			continue;
		}
		now = hmm_now();
		if (!starved_at)
			starved_at = now;
		if (now - starved_at > a->wait_s) {
			a->starved = 1;
			r = starved_err(h, a);
			break;
		}
		if (a->owner && !queued) {
			admit_queue(h, a, 1);
			queued = 1;
			h->tier[a->tier].owner_waits++;
		}
		admit_wait(h, starved_at + a->wait_s + 0.001);
	}
	if (queued)
		admit_queue(h, a, 0);
	if (waited)
		a->waited_s = hmm_now() - t0;
	return r;
}

int hmm_budget_admit_locked(struct hmm *h, struct hmm_admit *a)
{
	int r;

	pthread_mutex_lock(&h->lock);
	r = hmm_budget_admit(h, a);
	pthread_mutex_unlock(&h->lock);
	return r;
}

/* ---- owners (hmmd's clients), taking h->lock ---------------------------- */

void hmm_budget_owner_release(struct hmm *h, struct hmm_owner *o, int tier,
			      uint64_t bytes)
{
	pthread_mutex_lock(&h->lock);
	o->used[tier] -= bytes;
	h->tier[tier].admitted -= bytes;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

void hmm_budget_owner_quota(struct hmm *h, struct hmm_owner *o, int tier,
			    uint64_t quota)
{
	pthread_mutex_lock(&h->lock);
	o->quota[tier] = quota;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

void hmm_budget_owner_gone(struct hmm *h, struct hmm_owner *o, int err)
{
	pthread_mutex_lock(&h->lock);
	o->gone = err;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

void hmm_budget_cancel(struct hmm *h, int *cancel, int err)
{
	pthread_mutex_lock(&h->lock);
	if (!*cancel)
		*cancel = err;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

uint64_t hmm_budget_owner_used(struct hmm *h, struct hmm_owner *o, int tier)
{
	uint64_t u;

	pthread_mutex_lock(&h->lock);
	u = o->used[tier];
	pthread_mutex_unlock(&h->lock);
	return u;
}

void hmm_budget_owners(struct hmm *h, int tier, uint64_t *admitted,
		       uint64_t *peak, uint64_t *waits)
{
	pthread_mutex_lock(&h->lock);
	*admitted = h->tier[tier].admitted;
	*peak = h->tier[tier].admitted_peak;
	*waits = h->tier[tier].owner_waits;
	pthread_mutex_unlock(&h->lock);
}
