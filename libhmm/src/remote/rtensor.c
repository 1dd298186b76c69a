// SPDX-License-Identifier: MIT
/*
 * rtensor.c — hmmd's tensors shaped like hmm.h (rtensor.h) over the
 * protocol client (client.c): what shared mode's backend (backend.c) and
 * its regions (region.c) call.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "rtensor.h"

int hmm_remote_open(const struct hmm_config *cfg, struct hmm_client **out)
{
	uint64_t q[HMM_TIERS];
	char name[32];

	if (!cfg || !cfg->daemon || !*cfg->daemon)
		return hmm_err(-EINVAL, "shared mode: hmm_config.daemon unset");
	q[HMM_TIER_DEVICE] = cfg->device_budget;
	q[HMM_TIER_HOST] = cfg->host_budget;
	q[HMM_TIER_STORE] = cfg->store_size;
	snprintf(name, sizeof(name), "libhmm pid %d", (int)getpid());
	return hmm_client_open(cfg->daemon, q, name, out, NULL);
}

/* A remote tensor of c filled by TENSOR_NEW (dtype, ndim, shape, flags)
 * or, without shape, by ATTACH of the caller's uid's tensor name. */
static int rtensor_get(struct hmm_client *c, const char *name,
		       uint32_t dtype, unsigned ndim, const int64_t *shape,
		       uint32_t flags, struct hmm_remote_tensor **out)
{
	struct hmm_remote_tensor *t = calloc(1, sizeof(*t));
	int ret;

	if (!t)
		return hmm_err(-ENOMEM, "tensor %s: no memory", name);
	t->c = c;
	ret = shape ? hmm_client_tensor_new(c, name, dtype, ndim, shape, flags,
					    &t->t) :
		      hmm_client_attach(c, getuid(), name, &t->t);
	if (ret) {
		free(t);
		return ret;
	}
	*out = t;
	return 0;
}

int hmm_remote_tensor_new(struct hmm_client *c, const char *name,
			  uint32_t dtype, unsigned ndim, const int64_t *shape,
			  uint32_t flags, struct hmm_remote_tensor **out)
{
	if (!name || ndim < 1 || ndim > HMM_MAX_DIMS || !shape)
		return hmm_err(-EINVAL, "tensor %s: name, ndim 1..%d and "
			       "shape are required", name ? name : "(null)",
			       HMM_MAX_DIMS);
	return rtensor_get(c, name, dtype, ndim, shape, flags, out);
}

int hmm_remote_tensor_open(struct hmm_client *c, const char *name,
			   struct hmm_remote_tensor **out)
{
	return rtensor_get(c, name, 0, 0, NULL, 0, out);
}

int hmm_remote_tensor_free(struct hmm_remote_tensor *t)
{
	int ret = hmm_client_tensor_free(t->c, t->t.id);

	if (ret != -EBUSY)
		free(t);
	return ret;
}

int hmm_remote_map(struct hmm_remote_tensor *t, uint64_t off, uint64_t len,
		   int tier, unsigned access, void **ptr)
{
	if (tier != HMM_TIER_HOST)
		return hmm_err(-ENOTSUP, "tensor %s: shared mode maps the "
			       "host tier only", t->t.name);
	return hmm_client_map(t->c, t->t.id, off, len, access, ptr);
}

int hmm_remote_residency(struct hmm_remote_tensor *t, uint64_t bytes[])
{
	struct hmm_proto_list_reply r;
	int ret = hmm_client_list(t->c, HMM_PROTO_LIST_TENSORS, t->t.id, &r);

	if (ret)
		return ret;
	if (r.id != t->t.id)
		return hmm_err(-ENOENT, "tensor %s: hmmd does not list it "
			       "(id %llu)", t->t.name,
			       (unsigned long long)t->t.id);
	memcpy(bytes, r.a, sizeof(r.a));
	return 0;
}

int hmm_remote_wait(struct hmm_client *c, struct hmm_remote_tensor *t)
{
	return hmm_client_wait(c, t ? t->t.id : 0);
}

int hmm_remote_unmap(struct hmm_remote_tensor *t, void *ptr)
{
	return hmm_client_unmap_tensor(t->c, &t->t, ptr);
}

int hmm_remote_stats(struct hmm_client *c, struct hmm_stats *st)
{
	struct hmm_proto_stats2_reply r2;
	struct hmm_proto_stats_reply *r = &r2.s;
	int i, ret;

	ret = hmm_client_stats2(c, &r2);
	if (ret)
		return ret;
	memset(st, 0, sizeof(*st));
	for (i = 0; i < HMM_TIERS; i++) {
		const struct hmm_proto_tier_stats *p = &r->tier[i];
		struct hmm_tier_stats *o = &st->tier[i];

		o->capacity = p->capacity;
		o->resident = p->resident;
		o->peak = p->peak;
		o->pinned = p->pinned;
		o->bytes_in = p->bytes_in;
		o->bytes_out = p->bytes_out;
		o->hits = p->hits;
		o->misses = p->misses;
		o->evictions = p->evictions;
		o->io_ops = p->io_ops;
		o->stall_s = p->stall_ns / 1e9;
		o->io_s = p->io_ns / 1e9;
	}
	st->tensors = r->tensors;
	st->chunks = r->chunks;
	st->io_errors = r->io_errors;
	st->discard_skips = r2.discard_skips;
	st->prefetches = r2.prefetches;
	st->prefetch_hits = r2.prefetch_hits;
	st->recordings = r2.recordings;
	st->divergences = r2.divergences;
	/* region_faults, region_evictions stay 0: a client's regions are
	   its own (userfaultfd or hmmk.ko), never hmmd's engine's */
	st->store_direct = r2.store_direct;
	return 0;
}
