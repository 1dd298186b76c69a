// SPDX-License-Identifier: MIT
/*
 * client.c — a client of hmmd: registered at hello with its quotas
 * (hmmd_client_new), released when its connection ends
 * (hmmd_client_free), and its quotas changed by QUOTA_SET.  The host
 * quota is its uid's (struct hmmd_uid): every connection of one uid
 * pins against the one quota: the most its connected clients' hellos
 * asked, each capped by client_quota (by default a quarter of the host
 * budget, so one user cannot pin it all).  So a tool asking for nothing
 * (hmmctl asks 1 byte) never shrinks the quota of the user's jobs, and a
 * job that asked for much takes its quota with it when it goes
 * (uid_quota_fall), until a QUOTA_SET fixes it for all of them.  An
 * administrator's connections (uid 0, hmmd's own) each have their own,
 * capped by client_quota or else the budget.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "request.h"

static uint64_t cap_quota(uint64_t asked, uint64_t max)
{
	return asked && asked < max ? asked : max;
}

#define QUOTA_DEF_DIV	4	/* client_quota unset: budget / this */

/* The host quota a uid may have at most: client_quota, or else a
 * quarter of the budget (the whole budget for an administrator) but one
 * chunk at least, never more than the budget.  hmmd_config_check made
 * the budget and client_quota a chunk at least: every map pins whole
 * chunks, and a quarter of a small budget (4M, with 2M chunks) once
 * granted a quota that admitted no map and made a region's evictions
 * fail. */
static uint64_t host_max(struct hmmd_engine *e, int admin)
{
	uint64_t q = e->cfg->client_quota;

	if (!q) {
		q = admin ? e->budget : e->budget / QUOTA_DEF_DIV;
		q = q > e->chunk ? q : e->chunk;
	}
	return q < e->budget ? q : e->budget;
}

/* uid's entry, made (with quota) for its first client, its quota raised
 * to a later client's unless QUOTA_SET fixed it (an entry kept for its
 * reach alone has quota 0: uid_quota_fall); e->lock held.  An
 * administrator (uid 0, hmmd's own: trusted, and able to set any quota
 * anyway) gets one per connection.  NULL when out of memory. */
static struct hmmd_uid *uid_get(struct hmmd_engine *e, uid_t uid, int admin,
				uint64_t quota)
{
	struct hmmd_uid *u = NULL;

	if (!admin)
		for (u = e->uids; u && (u->uid != uid || u->solo);
		     u = u->next)
			;
	if (!u) {
		u = calloc(1, sizeof(*u));
		if (!u)
			return NULL;
		u->uid = uid;
		u->solo = admin;
		u->quota = quota;
		u->next = e->uids;
		e->uids = u;
	} else if (!u->set && quota > u->quota) {
		u->quota = quota;
	}
	u->conns++;
	return u;
}

/*
 * A client of u went (off e->clients, u->conns counted down): unless a
 * QUOTA_SET fixed it, u's quota falls to the most its remaining clients
 * asked, 0 when none remains (the next hello sets it as a new uid's).
 * Left where the client that asked most put it, a job's quota outlived
 * the job: the uid's tools then got the whole of it for its whole
 * memfds (map.c's reach) and pinned that much of the shared budget, and
 * their waits for it ranked by a share of that quota, ahead of other
 * uids'.  As with a QUOTA_SET below use, the quota may fall below what
 * the remaining clients pin: their maps stay (nothing is unpinned or
 * lost), a new map waits (up to wait_ms) for their unmaps to bring the
 * uid within it, and one larger than the whole quota fails at once.  A
 * floor at what they pin would admit no more and only fail those later.
 * e->lock held.  Returns the quota before.
 */
static uint64_t uid_quota_fall(struct hmmd_engine *e, struct hmmd_uid *u)
{
	struct hmmd_client *c;
	uint64_t q = 0, old = u->quota;

	if (u->set || u->solo)
		return old;
	for (c = e->clients; c; c = c->next)
		if (c->u == u && c->asked > q)
			q = c->asked;
	if (q < old) {
		u->quota = q;
		eng_quota_sync(e, u);
	}
	return old;
}

/* The entry goes with the uid's last client and last reach (a client
 * gone may have left a mapping of a memfd behind).  e->lock held. */
void hmmd_uid_put(struct hmmd_engine *e, struct hmmd_uid *u)
{
	struct hmmd_uid **pp;

	if (u->conns || u->reach)
		return;
	for (pp = &e->uids; *pp != u; pp = &(*pp)->next)
		;
	*pp = u->next;
	free(u);
}

int hmmd_client_new(struct hmmd_engine *e, uint64_t id, pid_t pid,
		    uid_t uid, const struct hmm_proto_hello *h,
		    struct hmmd_client **out,
		    struct hmm_proto_hello_reply *rep)
{
	struct hmmd_client *cl = calloc(1, sizeof(*cl));
	uint64_t hmax;
	struct hmm_stats st;

	if (!cl)
		return hmm_err(-ENOMEM, "hello: no memory for a client");
	hmm_stats(e->h, &st);
	cl->admin = uid == 0 || uid == getuid();
	hmax = host_max(e, cl->admin);
	cl->id = id;
	cl->pid = pid;
	cl->uid = uid;
	memcpy(cl->name, h->name, sizeof(cl->name));
	cl->asked = cap_quota(h->quota[HMM_TIER_HOST], hmax);
	cl->quota[HMM_TIER_HOST] = cl->asked;
	cl->quota[HMM_TIER_DEVICE] = cap_quota(h->quota[HMM_TIER_DEVICE],
				st.tier[HMM_TIER_DEVICE].capacity);
	cl->quota[HMM_TIER_STORE] = cap_quota(h->quota[HMM_TIER_STORE],
		st.tier[HMM_TIER_STORE].capacity ?
		st.tier[HMM_TIER_STORE].capacity : UINT64_MAX);
	cl->control = cl->admin && (h->features & HMM_PROTO_FEAT_CONTROL);
	pthread_mutex_lock(&e->lock);
	/* accept let an admin take any free slot, not knowing what it
	   is: any but hmmctl stays out of the kept ones */
	if (!cl->control && e->nclients - e->ncontrol >=
	    hmmd_open_slots(e->cfg->max_clients)) {
		unsigned max = e->cfg->max_clients;

		pthread_mutex_unlock(&e->lock);
		free(cl);
		return hmm_err(-EUSERS, "too many clients (%u connected; "
			       "the last %u of max_clients %u are kept for "
			       "hmmctl)", (unsigned)e->nclients,
			       max - hmmd_open_slots(max), max);
	}
	cl->u = uid_get(e, uid, cl->admin, cl->quota[HMM_TIER_HOST]);
	if (!cl->u) {
		pthread_mutex_unlock(&e->lock);
		free(cl);
		return hmm_err(-ENOMEM, "hello: no memory for a client");
	}
	cl->next = e->clients;
	e->clients = cl;
	e->nclients++;
	e->ncontrol += cl->control;
	eng_quota_sync(e, cl->u);	/* the uid's, if it had one */
	pthread_mutex_unlock(&e->lock);
	memset(rep, 0, sizeof(*rep));
	rep->version = 1;
	rep->features = h->features & (HMM_PROTO_FEAT_MEMFD |
				       (cl->control ? HMM_PROTO_FEAT_CONTROL : 0));
	rep->client_id = id;
	memcpy(rep->quota, cl->quota, sizeof(rep->quota));
	rep->chunk_bytes = e->chunk;
	*out = cl;
	return 0;
}

void hmmd_client_free(struct hmmd_engine *e, struct hmmd_client *cl)
{
	struct hmmd_client **pp;
	struct hmmd_map *mp;
	uint64_t was, now, pinned;
	unsigned i, left;
	uid_t uid;

	pthread_mutex_lock(&e->lock);
	while ((mp = cl->maps)) {
		cl->maps = mp->next;
		hmmd_map_undo(e, cl, mp);
		hmmd_tensor_put(e, mp->dt);
		free(mp);
	}
	for (i = 0; i < cl->nhandles; i++) {
		struct hmmd_tensor *dt = cl->handles[i].dt;

		if (dt->owner == cl->id)
			dt->owner = 0;
		hmmd_tensor_put(e, dt);
	}
	for (pp = &e->clients; *pp != cl; pp = &(*pp)->next)
		;
	*pp = cl->next;
	e->nclients--;
	e->ncontrol -= cl->control;
	cl->u->conns--;
	was = uid_quota_fall(e, cl->u);
	now = cl->u->quota;
	pinned = eng_uid_pinned(e, cl->u);
	left = cl->u->conns;
	uid = cl->u->uid;
	hmmd_uid_put(e, cl->u);
	pthread_mutex_unlock(&e->lock);
	if (now < was && left)
		hmmd_log("client %llu: gone: uid %u's host quota falls from "
			 "%llu to %llu bytes, the most its %u other "
			 "client(s) asked (they pin %llu)",
			 (unsigned long long)cl->id, (unsigned)uid,
			 (unsigned long long)was, (unsigned long long)now,
			 left, (unsigned long long)pinned);
	free(cl->handles);
	free(cl);
}

int hmmd_req_quota_set(struct hmmd_req *q)
{
	const struct hmm_proto_quota_set *m = &q->m->u.quota_set;
	struct hmmd_engine *e = q->e;
	struct hmmd_client *cl;
	char msg[256];
	int i, n;

	pthread_mutex_lock(&e->lock);
	for (cl = e->clients; cl; cl = cl->next)
		if (cl->id == (m->client_id ? m->client_id : q->cl->id))
			break;
	if (!cl || (cl != q->cl && !q->cl->admin)) {
		pthread_mutex_unlock(&e->lock);
		return hmmd_reply_err(q, cl ? -EPERM : -ENOENT, "quota_set: client "
				 "%llu: %s", (unsigned long long)m->client_id,
				 cl ? "not yours (administrators only)" :
				 "no such client");
	}
	if (m->quota[HMM_TIER_HOST] && m->quota[HMM_TIER_HOST] < e->chunk) {
		pthread_mutex_unlock(&e->lock);
		return hmmd_reply_err(q, -EINVAL, "quota_set: client %llu: "
				 "host quota %llu bytes is less than one chunk "
				 "(chunk_bytes %u): every map pins whole "
				 "chunks, so none could be admitted; quotas "
				 "unchanged", (unsigned long long)cl->id,
				 (unsigned long long)m->quota[HMM_TIER_HOST],
				 e->chunk);
	}
	for (i = 0; i < HMM_TIERS; i++) {
		uint64_t max = cl->quota[i];

		if (q->cl->admin)	/* administrators may raise it */
			max = i == HMM_TIER_HOST ? e->budget : UINT64_MAX;
		if (m->quota[i])
			cl->quota[i] = m->quota[i] < max ? m->quota[i] : max;
	}
	cl->u->quota = cl->quota[HMM_TIER_HOST];	/* the uid's */
	cl->u->set = 1;
	eng_quota_sync(e, cl->u);
	/* what was set, read while cl cannot go */
	n = snprintf(msg, sizeof(msg), "client %llu: quota set by client "
		     "%llu: host %llu bytes for uid %u",
		     (unsigned long long)cl->id, (unsigned long long)q->cl->id,
		     (unsigned long long)cl->quota[HMM_TIER_HOST],
		     (unsigned)cl->uid);
	if (m->quota[HMM_TIER_DEVICE])
		n += snprintf(msg + n, sizeof(msg) - n, ", device %llu bytes",
			      (unsigned long long)cl->quota[HMM_TIER_DEVICE]);
	if (m->quota[HMM_TIER_STORE])
		snprintf(msg + n, sizeof(msg) - n, ", store %llu bytes for "
			 "the client's tensors",
			 (unsigned long long)cl->quota[HMM_TIER_STORE]);
	pthread_mutex_unlock(&e->lock);
	hmmd_log("%s", msg);
	return hmmd_reply_ok(q);
}
