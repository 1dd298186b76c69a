/* SPDX-License-Identifier: MIT */
/*
 * rtensor.h — hmmd's tensors shaped like hmm.h, over the protocol client
 * (client.h): what shared mode's backend (backend.c) calls, and what
 * test_hmm_remote drives directly.  A remote tensor carries what hmm.h's
 * accessors return.  Differences from embedded mode, by design of hmmd:
 * maps are of the host tier only (device maps -ENOTSUP here; hmm_map
 * stages them in this process: dev_stage.c); a
 * tensor is kept in the store by a flush only when made with
 * HMM_PROTO_TENSOR_PERSIST, and hmm_remote_tensor_open() finds those (by
 * name, per uid), not what an embedded context saved.
 */
#ifndef HMM_RTENSOR_H
#define HMM_RTENSOR_H

#include "client.h"

struct hmm_remote_tensor {
	struct hmm_client *c;		/* not owned */
	struct hmm_proto_tensor t;	/* id, bytes, dtype, ndim, shape, name */
	int freeing;			/* its free is under way (backend.c,
					   under its context's h->lock) */
};

/* Connect as cfg says: cfg->daemon "unix:PATH"; quotas device_budget,
 * host_budget, store_size (0 = hmmd's default). */
int hmm_remote_open(const struct hmm_config *cfg, struct hmm_client **out);

/* Allocated here, freed by hmm_remote_tensor_free (even when it fails:
 * the daemon then still holds the tensor until the client goes). */
int hmm_remote_tensor_new(struct hmm_client *c, const char *name,
			  uint32_t dtype, unsigned ndim, const int64_t *shape,
			  uint32_t flags, struct hmm_remote_tensor **out);
int hmm_remote_tensor_open(struct hmm_client *c, const char *name,
			   struct hmm_remote_tensor **out);
int hmm_remote_tensor_free(struct hmm_remote_tensor *t);
int hmm_remote_map(struct hmm_remote_tensor *t, uint64_t off, uint64_t len,
		   int tier, unsigned access, void **ptr);
int hmm_remote_unmap(struct hmm_remote_tensor *t, void *ptr);
/* hmm_tensor_residency in shared mode: hmmd's LIST of t. */
int hmm_remote_residency(struct hmm_remote_tensor *t, uint64_t bytes[]);
/* hmm_wait in shared mode: t's I/O in hmmd (t NULL: all of c's). */
int hmm_remote_wait(struct hmm_client *c, struct hmm_remote_tensor *t);
/* hmmd's engine counters in hmm.h's form (the device/host/store tiers;
 * with a version-1 hmmd the counters outside the tiers but tensors,
 * chunks and io_errors read 0).  steps, region_faults and
 * region_evictions are left 0: they are the client's own. */
int hmm_remote_stats(struct hmm_client *c, struct hmm_stats *st);

#endif /* HMM_RTENSOR_H */
