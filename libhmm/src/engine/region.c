// SPDX-License-Identifier: MIT
/*
 * region.c — transparent regions: a plain pointer whose pages live in
 * host memory under the host budget and, beyond it, in a backing store.
 *
 * The context's backend may serve a region whole (backend.h
 * region_whole: shared mode's hmmk.ko regions, the uvm device's managed
 * regions, region_uvm.c); otherwise it is a
 * userfaultfd region here (region_fault.c, region_evict.c) whose evicted
 * blocks go where the backend's region_back says (the store:
 * region_store.c; in shared mode an hmmd tensor).  Resident bytes of
 * all the context's regions count against config.host_budget.  This
 * file: making, finding, advising and freeing regions, and their
 * counters.  Locking: region_int.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "err.h"
#include "region_int.h"

static uint32_t region_ids;

int hmm_region_fits(struct hmm_region *r, const char *whose,
		    const uint64_t cap[HMM_TIERS])
{
	char what[48], tab[64];

	snprintf(what, sizeof(what), "hmm_region_new: region %u", r->id);
	snprintf(tab, sizeof(tab), "block table (%llu blocks of %u bytes)",
		 (unsigned long long)(r->bytes / RBLOCK), RBLOCK);
	return hmm_fits(what, whose, r->bytes, cap, 1, tab, r->bytes / RBLOCK);
}

/*
 * A userfaultfd region of r->bytes, mapped here at r->base.  0 or -errno
 * with the detail set, nothing left on failure.  The backend first: it
 * refuses a region larger than where its blocks go can ever hold
 * (hmm_region_fits) before anything is mapped or allocated (a mmap of
 * 2^45 bytes fails under TSan with a detail that names nothing), and
 * its fini needs no block (r->nblocks stays 0 until the table is there).
 */
static int region_uffd_new(struct hmm *h, struct hmm_region *r)
{
	int err;

	r->uffd = r->stopfd = r->busfd = -1;
	err = h->be->region_back(h, r);
	if (err)
		return err;
	r->base = mmap(NULL, r->bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r->base == MAP_FAILED) {
		err = hmm_err(-errno, "hmm_region_new: region %u: mmap %llu "
			      "bytes: %s", r->id, (unsigned long long)r->bytes,
			      strerror(errno));
		goto out_back;
	}
	r->state = calloc(r->bytes / RBLOCK, 1);
	if (!r->state) {
		err = hmm_err(-ENOMEM, "hmm_region_new: region %u: no memory "
			      "for its %llu blocks", r->id,
			      (unsigned long long)(r->bytes / RBLOCK));
		goto out_unmap;
	}
	r->nblocks = r->bytes / RBLOCK;
	err = hmm_region_uffd_start(r);
	if (err)
		goto out_free;
	return 0;

out_free:
	free(r->state);
	r->state = NULL;
	r->nblocks = 0;
out_unmap:
	munmap(r->base, r->bytes);
out_back:
	r->ops->fini(r);
	return err;
}

uint64_t hmm_region_keep(struct hmm *h)
{
	struct hmm_list *l;

	for (l = h->regions.next; l != &h->regions; l = l->next)
		if (!hmm_container_of(l, struct hmm_region, link)->whole)
			return REGION_KEEP;
	return 0;
}

/* Put r on the regions' list, unless pins leave it less than two blocks
 * of the host budget (its faults could wait for ever).  0 or -ENOMEM. */
static int region_add(struct hmm *h, struct hmm_region *r)
{
	const struct hmm_tier *T = &h->tier[HMM_TIER_HOST];
	uint64_t cap, pinned;

	pthread_mutex_lock(&h->lock);
	cap = T->cap;
	pinned = T->pinned;
	if (pinned + REGION_KEEP <= cap)
		hmm_list_add_tail(&h->regions, &r->link);
	pthread_mutex_unlock(&h->lock);
	if (pinned + REGION_KEEP <= cap)
		return 0;
	return hmm_err(-ENOMEM, "hmm_region_new: pinned chunks hold %llu "
		       "of the host budget's %llu bytes: regions need %u "
		       "free of pins (two blocks: one access may touch "
		       "two)", (unsigned long long)pinned,
		       (unsigned long long)cap, REGION_KEEP);
}

static void region_uffd_free(struct hmm_region *r)
{
	hmm_region_uffd_stop(r);
	r->ops->fini(r);
	free(r->state);
}

int hmm_region_create(struct hmm *h, uint64_t bytes, void **ptr)
{
	struct hmm_region *r;
	int err;

	/* two blocks: one access may straddle two, and with room for one
	 * the fault of each evicted the other, for ever */
	if (h->tier[HMM_TIER_HOST].cap < 2 * RBLOCK)
		return hmm_err(-EINVAL, "hmm_region_new: config.host_budget "
			       "%llu: regions need at least %u bytes (two "
			       "blocks: one access may touch two)",
			       (unsigned long long)h->tier[HMM_TIER_HOST].cap,
			       2 * RBLOCK);
	r = calloc(1, sizeof(*r));
	if (!r)
		return hmm_err(-ENOMEM, "hmm_region_new: no memory");
	r->h = h;
	r->bytes = HMM_ROUND_UP(bytes, RBLOCK);
	r->id = __atomic_fetch_add(&region_ids, 1, __ATOMIC_RELAXED) &
		0x7fffffff;
	err = h->be->region_whole ? h->be->region_whole(h, r) : -ENODEV;
	if (err == -ENODEV) {	/* nobody serves it whole: userfaultfd */
		err = region_uffd_new(h, r);
		if (err)
			goto out_free;
		err = region_add(h, r);
		if (err)
			goto out_uffd;
	} else if (err) {
		goto out_free;
	}
	/* region_whole put a whole region on the list itself */
	*ptr = r->base;
	return 0;

out_uffd:
	region_uffd_free(r);
	munmap(r->base, r->bytes);
out_free:
	free(r);
	return err;	/* the detail says which step */
}

/* The region holding [p, p + len) (h->lock held), or NULL. */
static struct hmm_region *region_find(struct hmm *h, const void *p,
				      uint64_t len)
{
	struct hmm_list *l;

	for (l = h->regions.next; l != &h->regions; l = l->next) {
		struct hmm_region *r = hmm_container_of(l, struct hmm_region,
							link);
		uintptr_t a = (uintptr_t)p, b = (uintptr_t)r->base;

		if (a >= b && a - b < r->bytes && len <= r->bytes - (a - b))
			return r;
	}
	return NULL;
}

/* COLD on blocks first..last of a userfaultfd region: evict them now. */
static int region_cold(struct hmm *h, struct hmm_region *r, uint32_t first,
		       uint32_t last)
{
	uint32_t b;
	int err, dead;

	pthread_mutex_lock(&h->lock);
	r->again = 0;	/* what this advice's writes meet */
	for (b = first; b <= last; b++)
		if (r->state[b] == RB_RESIDENT)
			hmm_region_evict_block(h, r, b);
	while (hmm_region_drain(h))
		;
	dead = r->dead;
	err = dead ? dead : r->again;
	pthread_mutex_unlock(&h->lock);
	if (dead)
		return hmm_err(err, "hmm_region_advise: region %u: its %s "
			       "is gone: %s", r->id, r->ops->name,
			       strerror(-err));
	if (err)	/* short of room for now: the blocks stay resident */
		return hmm_err(err, "hmm_region_advise: region %u: %s did "
			       "not take every block (%s): they stay "
			       "resident", r->id, r->ops->name,
			       strerror(-err));
	return 0;
}

/*
 * WILLNEED on blocks first..last: each brought in as its fault would
 * (hmm_region_bring), never touched here: an access that found no room
 * would get SIGBUS inside this call.  Blocks whose bytes are lost, or
 * that starved (SIGBUS until room returns), are left as they are; the
 * first that gets no room for wait_ms, or fails to read, ends the call
 * with its error (-ENOMEM, -EIO, ...): the blocks after it keep theirs.
 */
static int region_willneed(struct hmm *h, struct hmm_region *r,
			   uint32_t first, uint32_t last)
{
	char detail[512];
	uint32_t b;
	int err = 0;

	pthread_mutex_lock(&h->lock);
	for (b = first; b <= last && err >= 0; b++)
		err = hmm_region_bring(h, r, b);
	pthread_mutex_unlock(&h->lock);
	if (err >= 0)
		return 0;
	snprintf(detail, sizeof(detail), "%s", hmm_last_error());
	return hmm_err(err, "hmm_region_advise: %s", detail);
}

int hmm_region_advise_range(struct hmm *h, void *ptr, uint64_t len,
			    int advice)
{
	struct hmm_region *r;
	uint64_t off;

	pthread_mutex_lock(&h->lock);
	r = region_find(h, ptr, len);
	pthread_mutex_unlock(&h->lock);
	if (!r)
		return hmm_err(-EINVAL, "hmm_region_advise: %p +%llu: not "
			       "inside one region", ptr,
			       (unsigned long long)len);
	/* r stays: no thread may free a region while advising it */
	off = (char *)ptr - r->base;
	if (r->whole)
		return r->whole->advise(r, off, len, advice);
	if (advice == HMM_ADVISE_COLD)
		return region_cold(h, r, off / RBLOCK,
				   (off + len - 1) / RBLOCK);
	if (advice == HMM_ADVISE_WILLNEED)
		return region_willneed(h, r, off / RBLOCK,
				       (off + len - 1) / RBLOCK);
	return 0;
}

static void region_destroy(struct hmm *h, struct hmm_region *r)
{
	uint32_t b;

	if (r->whole) {
		pthread_mutex_lock(&h->lock);
		hmm_list_del(&r->link);
		pthread_mutex_unlock(&h->lock);
		r->whole->free(r);
		free(r);
		return;
	}
	hmm_region_uffd_stop(r);
	pthread_mutex_lock(&h->lock);
	while (r->evicting)
		hmm_region_wait(h);
	hmm_list_del(&r->link);
	for (b = 0; b < r->nblocks; b++)
		if (r->state[b] == RB_RESIDENT || r->state[b] == RB_FILLING)
			hmm_budget_give(h, HMM_TIER_HOST, RBLOCK);
	pthread_mutex_unlock(&h->lock);
	r->ops->fini(r);
	munmap(r->base, r->bytes);
	free(r->state);
	free(r);
}

int hmm_region_destroy_at(struct hmm *h, void *ptr)
{
	struct hmm_region *r;

	pthread_mutex_lock(&h->lock);
	r = region_find(h, ptr, 1);
	if (r && r->base != (char *)ptr)
		r = NULL;
	pthread_mutex_unlock(&h->lock);
	if (!r)
		return hmm_err(-EINVAL, "hmm_region_free: %p is not a region",
			       ptr);
	region_destroy(h, r);
	return 0;
}

void hmm_region_stats(struct hmm *h, struct hmm_stats *st)
{
	struct hmm_list *l;

	pthread_mutex_lock(&h->lock);
	st->region_faults = h->st.region_faults;
	st->region_evictions = h->st.region_evictions;
	for (l = h->regions.next; l != &h->regions; l = l->next) {
		struct hmm_region *r = hmm_container_of(l, struct hmm_region,
							link);

		if (r->whole)
			r->whole->stats(r, &st->region_faults,
					&st->region_evictions);
	}
	pthread_mutex_unlock(&h->lock);
}

void hmm_region_fini(struct hmm *h)
{
	while (!hmm_list_empty(&h->regions))
		region_destroy(h, hmm_container_of(h->regions.next,
						   struct hmm_region, link));
}
