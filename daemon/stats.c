// SPDX-License-Identifier: MIT
/*
 * stats.c — what a client may learn: STATS and STATS2 (the engine's
 * counters and its own quota), LIST (clients, or tensors, one per call
 * from a cursor): an administrator sees all; anyone else its own uid's
 * clients (every connection of the uid, such as the jobs hmmctl looks
 * at) and the tensors its uid made or it holds (hmmd_tensor_seen), and
 * nothing of other uids.
 */
#include <string.h>

#include "request.h"

static void tier_out(struct hmm_proto_tier_stats *o,
		     const struct hmm_tier_stats *t)
{
	o->capacity = t->capacity;
	o->resident = t->resident;
	o->peak = t->peak;
	o->pinned = t->pinned;
	o->bytes_in = t->bytes_in;
	o->bytes_out = t->bytes_out;
	o->hits = t->hits;
	o->misses = t->misses;
	o->evictions = t->evictions;
	o->io_ops = t->io_ops;
	o->stall_ns = (uint64_t)(t->stall_s * 1e9);
	o->io_ns = (uint64_t)(t->io_s * 1e9);
}

/* STATS, and STATS2 (version 2): the engine's counters and cl's quota. */
int hmmd_req_stats(struct hmmd_req *q)
{
	struct hmm_proto_stats2_reply r2;
	struct hmm_proto_stats_reply *r = &r2.s;
	struct hmm_stats st;
	int i;

	memset(&r2, 0, sizeof(r2));
	hmm_stats(q->e->h, &st);
	for (i = 0; i < HMM_TIERS; i++)
		tier_out(&r->tier[i], &st.tier[i]);
	r->tensors = st.tensors;
	r->chunks = st.chunks;
	r->io_errors = st.io_errors;
	r2.discard_skips = st.discard_skips;
	r2.prefetches = st.prefetches;
	r2.prefetch_hits = st.prefetch_hits;
	r2.recordings = st.recordings;
	r2.divergences = st.divergences;
	r2.region_faults = st.region_faults;
	r2.region_evictions = st.region_evictions;
	r2.store_direct = st.store_direct;
	pthread_mutex_lock(&q->e->lock);
	/* maps waiting in hmmd for host room stalled as the engine's own
	   waits do: count them in the host tier's stall time */
	r->tier[HMM_TIER_HOST].stall_ns += q->e->wait_ns;
	r->clients = q->e->nclients;
	memcpy(r->quota, q->cl->quota, sizeof(r->quota));
	memcpy(r->used, q->cl->used, sizeof(r->used));
	pthread_mutex_unlock(&q->e->lock);
	if (q->m->hdr.type == HMM_PROTO_STATS2)
		return hmm_proto_stats2_reply_encode(q->out, q->cap,
						     q->m->hdr.seq, &r2);
	return hmm_proto_stats_reply_encode(q->out, q->cap, q->m->hdr.seq,
					    r);
}

static void list_client(struct hmm_proto_list_reply *r,
			const struct hmmd_client *cl)
{
	r->id = cl->id;
	r->uid = cl->uid;
	r->pid = cl->pid;
	memcpy(r->a, cl->quota, sizeof(r->a));
	memcpy(r->b, cl->used, sizeof(r->b));
	r->bytes = cl->nhandles;
	memcpy(r->name, cl->name, sizeof(r->name));
}

/* The first entry with id >= cursor that cl may see, into r (lock held). */
static void list_find(struct hmmd_req *q, struct hmm_proto_list_reply *r)
{
	const struct hmm_proto_list *m = &q->m->u.list;
	const struct hmmd_client *cl, *best = NULL;
	struct hmmd_tensor *dt, *bdt = NULL;

	if (m->what == HMM_PROTO_LIST_CLIENTS) {
		for (cl = q->e->clients; cl; cl = cl->next)
			if (cl->id >= m->cursor && (!best || cl->id < best->id)
			    && (q->cl->admin || cl->uid == q->cl->uid))
				best = cl;
		if (best)
			list_client(r, best);
		return;
	}
	for (dt = q->e->tensors; dt; dt = dt->next)
		if (dt->id >= m->cursor && (!bdt || dt->id < bdt->id) &&
		    hmmd_tensor_seen(q->cl, dt))
			bdt = dt;
	if (!bdt)
		return;
	r->id = bdt->id;
	if (hmm_tensor_residency(bdt->t, r->a))
		memset(r->a, 0, sizeof(r->a));
	r->owner = bdt->owner;
	r->uid = bdt->owner_uid;
	r->b[0] = bdt->pinned;
	r->b[1] = bdt->refs;
	r->bytes = hmm_tensor_bytes(bdt->t);
	r->flags = bdt->flags | (bdt->share_name[0] ? 1u << 31 : 0);
	memcpy(r->name, bdt->name, sizeof(r->name));
}

int hmmd_req_list(struct hmmd_req *q)
{
	struct hmm_proto_list_reply r;

	memset(&r, 0, sizeof(r));
	r.what = q->m->u.list.what;
	pthread_mutex_lock(&q->e->lock);
	list_find(q, &r);
	pthread_mutex_unlock(&q->e->lock);
	return hmm_proto_list_reply_encode(q->out, q->cap, q->m->hdr.seq,
					   &r);
}
