// SPDX-License-Identifier: MIT
/*
 * policy.c — which chunk to evict, and what to prefetch.
 *
 * LRU: each tier keeps its resident chunks on a list, least recently
 * mapped first; the victim is the first one that can be evicted.
 *
 * Schedule-aware (HMM_POLICY_SCHEDULE), after Belady's MIN as used by
 * Gemini and Capuchin: the chunk accesses (maps, in order, from every
 * thread) of the first complete step between hmm_step_begin/end are
 * recorded.  In later steps a cursor follows the record: each access
 * advances it, chunks k places ahead are prefetched (wrapping into the
 * next step), and the victim is the evictable chunk whose next use is
 * farthest (chunks not in the record first).  A prefetch only evicts
 * chunks used later than the chunk it brings; one that finds no such
 * chunk is tried again at the next map or unmap.  A step with too many
 * accesses off the record is recorded anew at the next hmm_step_begin.
 *
 * Everything runs with h->lock held.
 */
#include <errno.h>
#include <stdlib.h>

#include "chunk.h"
#include "err.h"

#define POL_IDLE	0
#define POL_RECORD	1
#define POL_FOLLOW	2

#define POL_RESYNC	64	/* how far ahead a miss may resync */

void hmm_policy_touch(struct hmm *h, struct hmm_chunk *c, int tier)
{
	if (!(c->res & TB(tier)))
		return;
	hmm_list_del(&c->lru[tier]);
	hmm_list_add_tail(&h->tier[tier].lru, &c->lru[tier]);
}

static int following(struct hmm *h)
{
	return h->cfg.policy == HMM_POLICY_SCHEDULE &&
	       h->sched.state == POL_FOLLOW && h->sched.n;
}

/* Distance from the cursor to c's next use in the record; far for none. */
uint64_t hmm_policy_next_use(struct hmm *h, struct hmm_chunk *c)
{
	struct hmm_sched *s = &h->sched;
	uint32_t lo = 0, hi = c->npos;

	if (!following(h))
		return HMM_NO_LIMIT;
	if (!c->npos)
		return HMM_NO_LIMIT - 1;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (c->pos[mid] < s->cursor)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < c->npos)
		return c->pos[lo] - s->cursor;
	return (uint64_t)c->pos[0] + s->n - s->cursor;
}

struct hmm_chunk *hmm_policy_victim(struct hmm *h, int tier, uint64_t limit)
{
	struct hmm_list *l = &h->tier[tier].lru, *p;
	struct hmm_chunk *best = NULL;
	uint64_t far = 0;

	for (p = l->next; p != l; p = p->next) {
		struct hmm_chunk *c = hmm_container_of(p, struct hmm_chunk,
						       lru[tier]);
		uint64_t d;

		if (!hmm_chunk_evictable(h, c, tier))
			continue;
		if (!following(h))
			return c;
		d = hmm_policy_next_use(h, c);
		if (d > far || !best) {
			best = c;
			far = d;
		}
	}
	if (best && limit != HMM_NO_LIMIT && far <= limit)
		return NULL;	/* would evict something needed sooner */
	return best;
}

/* The tensor policy as a reclaimer (budget.h): evict its victim. */
static int policy_reclaim(struct hmm *h, int tier, uint64_t bytes,
			  uint64_t limit)
{
	struct hmm_chunk *v = hmm_policy_victim(h, tier, limit);
	int r;

	if (!v)
		return HMM_NOTHING;	/* ask the next reclaimer */
	r = hmm_chunk_evict(h, v, tier);
	if (r == HMM_READY || (r == HMM_AGAIN && v->busy))
		return HMM_READY;	/* dropped, or its copy-down started */
	return r;
}

const struct hmm_reclaimer hmm_policy_reclaimer = {
	.name = "tensors",
	.reclaim = policy_reclaim,
};

static struct hmm_chunk *sched_chunk(struct hmm *h, struct hmm_sched_ent *e)
{
	struct hmm_tensor *t = hmm_tensor_by_id(h, e->tensor_id);

	if (!t || e->chunk >= t->nchunks)
		return NULL;
	return &t->chunks[e->chunk];
}

static void sched_prefetch(struct hmm *h)
{
	struct hmm_sched *s = &h->sched;
	uint32_t k = h->cfg.prefetch_depth, j;

	for (j = 0; j < k && j < s->n; j++) {
		struct hmm_sched_ent *e = &s->seq[(s->cursor + j) % s->n];
		struct hmm_chunk *c = sched_chunk(h, e);

		if (!c || c->busy || c->want ||
		    ((c->res & TB(e->tier)) && (c->valid & TB(e->tier))))
			continue;
		if (e->tier == HMM_TIER_DEVICE && !h->dev)
			continue;
		h->st.prefetches++;
		c->prefetched = 1;
		hmm_chunk_want(h, c, e->tier);
	}
}

/*
 * Pins were dropped (hmm_unmap): chunks that were not evictable may be
 * now, so the prefetches k ahead that found no room at the last map are
 * tried again at once, not at the next map: between an unmap and the
 * next map a trainer may do other work, and the store would idle.
 */
void hmm_policy_unpinned(struct hmm *h)
{
	if (following(h) && h->sched.in_step)
		sched_prefetch(h);
}

static int sched_append(struct hmm_sched *s, struct hmm_chunk *c, int tier)
{
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 1024;
		void *p = realloc(s->seq, cap * sizeof(*s->seq));

		if (!p)
			return -ENOMEM;
		s->seq = p;
		s->cap = cap;
	}
	s->seq[s->n].tensor_id = c->t->id;
	s->seq[s->n].chunk = c->idx;
	s->seq[s->n].tier = tier;
	s->n++;
	return 0;
}

/* A map touched c at tier: record or follow, then prefetch ahead. */
void hmm_policy_access(struct hmm *h, struct hmm_chunk *c, int tier)
{
	struct hmm_sched *s = &h->sched;
	struct hmm_sched_ent *e;

	if (h->cfg.policy != HMM_POLICY_SCHEDULE || !s->in_step)
		return;
	if (s->state == POL_RECORD) {
		if (sched_append(s, c, tier) < 0)
			s->state = POL_IDLE;	/* no memory: plain LRU */
		return;
	}
	if (!following(h))
		return;
	e = s->cursor < s->n ? &s->seq[s->cursor] : NULL;
	if (e && e->tensor_id == c->t->id && e->chunk == c->idx) {
		s->cursor++;
	} else {
		uint64_t d = hmm_policy_next_use(h, c);

		s->misses++;
		if (d < POL_RESYNC && s->cursor + d < s->n)
			s->cursor += d + 1;
		if (s->misses > 4 + s->n / 16)
			s->rerecord = 1;
	}
	sched_prefetch(h);
}

static void sched_clear_pos(struct hmm *h)
{
	uint32_t i, j;

	for (i = 0; i < h->ntensors; i++) {
		struct hmm_tensor *t = h->tensors[i];

		for (j = 0; j < t->nchunks; j++) {
			free(t->chunks[j].pos);
			t->chunks[j].pos = NULL;
			t->chunks[j].npos = 0;
		}
	}
}

/* The record is complete: give every chunk its positions in it. */
static int sched_index(struct hmm *h)
{
	struct hmm_sched *s = &h->sched;
	uint32_t i;

	sched_clear_pos(h);
	for (i = 0; i < s->n; i++) {
		struct hmm_chunk *c = sched_chunk(h, &s->seq[i]);

		if (c)
			c->npos++;
	}
	for (i = 0; i < s->n; i++) {
		struct hmm_chunk *c = sched_chunk(h, &s->seq[i]);

		if (!c)
			continue;
		if (!c->pos) {
			c->pos = malloc(c->npos * sizeof(*c->pos));
			if (!c->pos) {
				sched_clear_pos(h);
				return -ENOMEM;
			}
			c->npos = 0;
		}
		c->pos[c->npos++] = i;
	}
	return 0;
}

int hmm_policy_step_begin(struct hmm *h)
{
	struct hmm_sched *s = &h->sched;

	if (s->in_step)
		return hmm_err(-EINVAL, "hmm_step_begin: a step is already "
			       "open (step %llu)",
			       (unsigned long long)h->st.steps);
	s->in_step = 1;
	h->st.steps++;
	if (h->cfg.policy != HMM_POLICY_SCHEDULE)
		return 0;
	if (s->state == POL_IDLE || s->rerecord) {
		s->state = POL_RECORD;
		s->n = 0;
		s->rerecord = 0;
		sched_clear_pos(h);
		return 0;
	}
	s->cursor = 0;
	s->misses = 0;
	return 0;
}

int hmm_policy_step_end(struct hmm *h)
{
	struct hmm_sched *s = &h->sched;

	if (!s->in_step)
		return hmm_err(-EINVAL, "hmm_step_end: no step is open");
	s->in_step = 0;
	if (h->cfg.policy != HMM_POLICY_SCHEDULE)
		return 0;
	if (s->state == POL_RECORD) {
		if (!s->n || sched_index(h) < 0) {
			s->state = POL_IDLE;
			return 0;
		}
		h->st.recordings++;
		s->state = POL_FOLLOW;
	} else if (s->state == POL_FOLLOW) {
		if (s->cursor + s->n / 8 < s->n)
			s->misses += s->n - s->cursor;	/* ended early */
		if (s->misses > 4 + s->n / 16) {
			h->st.divergences++;
			s->rerecord = 1;
		}
	}
	s->cursor = 0;
	sched_prefetch(h);	/* the next step's first chunks */
	return 0;
}

/* t is being freed: drop its positions (the record skips freed ids),
 * and its chunks' share of the split VMAs (chunk.c's page recycling). */
void hmm_policy_forget(struct hmm *h, struct hmm_tensor *t)
{
	uint32_t j;

	hmm_chunk_forget_vmas(t);

	for (j = 0; j < t->nchunks; j++) {
		free(t->chunks[j].pos);
		t->chunks[j].pos = NULL;
		t->chunks[j].npos = 0;
	}
}

void hmm_policy_fini(struct hmm *h)
{
	free(h->sched.seq);
	h->sched.seq = NULL;
}
