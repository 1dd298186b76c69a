// SPDX-License-Identifier: MIT
/*
 * client.c — a client of hmmd: registered at hello with its quotas
 * (hmmd_client_new), released when its connection ends
 * (hmmd_client_free), and its quotas changed by QUOTA_SET.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "request.h"

static uint64_t cap_quota(uint64_t asked, uint64_t max)
{
	return asked && asked < max ? asked : max;
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
	hmax = e->cfg->client_quota && e->cfg->client_quota < e->budget ?
	       e->cfg->client_quota : e->budget;
	cl->id = id;
	cl->pid = pid;
	cl->uid = uid;
	cl->admin = uid == 0 || uid == getuid();
	memcpy(cl->name, h->name, sizeof(cl->name));
	cl->quota[HMM_TIER_HOST] = cap_quota(h->quota[HMM_TIER_HOST], hmax);
	cl->quota[HMM_TIER_DEVICE] = cap_quota(h->quota[HMM_TIER_DEVICE],
				st.tier[HMM_TIER_DEVICE].capacity);
	cl->quota[HMM_TIER_STORE] = cap_quota(h->quota[HMM_TIER_STORE],
		st.tier[HMM_TIER_STORE].capacity ?
		st.tier[HMM_TIER_STORE].capacity : UINT64_MAX);
	eng_quota_sync(e, cl);
	pthread_mutex_lock(&e->lock);
	cl->next = e->clients;
	e->clients = cl;
	e->nclients++;
	pthread_mutex_unlock(&e->lock);
	memset(rep, 0, sizeof(*rep));
	rep->version = 1;
	rep->features = h->features & HMM_PROTO_FEAT_MEMFD;
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
	unsigned i;

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
	pthread_mutex_unlock(&e->lock);
	free(cl->handles);
	free(cl);
}

int hmmd_req_quota_set(struct hmmd_req *q)
{
	const struct hmm_proto_quota_set *m = &q->m->u.quota_set;
	struct hmmd_engine *e = q->e;
	struct hmmd_client *cl;
	int i;

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
	for (i = 0; i < HMM_TIERS; i++) {
		uint64_t max = cl->quota[i];

		if (q->cl->admin)	/* administrators may raise it */
			max = i == HMM_TIER_HOST ? e->budget : UINT64_MAX;
		if (m->quota[i])
			cl->quota[i] = m->quota[i] < max ? m->quota[i] : max;
	}
	eng_quota_sync(e, cl);
	pthread_mutex_unlock(&e->lock);
	hmmd_log("client %llu: quota set by client %llu: host %llu bytes",
		 (unsigned long long)cl->id, (unsigned long long)q->cl->id,
		 (unsigned long long)cl->quota[HMM_TIER_HOST]);
	return hmmd_reply_ok(q);
}
