/* SPDX-License-Identifier: MIT */
/*
 * client.h — the client side of hmmd's protocol: what libhmm's shared
 * mode (hmm_config.daemon = "unix:PATH") is to be built on, and what
 * hmmctl, hmm-bench and the daemon tests use today.
 *
 * Hook for the engine owner (ctx.c): in hmm_open(), when cfg->daemon is
 * set, call hmm_client_open(cfg->daemon, quotas, name, &c) and route
 * hmm_tensor_new/open/free, hmm_map/unmap, hmm_prefetch/evict, hmm_flush
 * and hmm_stats of that context to the hmm_client_* calls below (same
 * arguments, a hmm_client_tensor in place of the engine's tensor); map
 * returns a pointer into shared memory (a memfd from hmmd).
 *
 * Every call is one round trip with a time limit (HMM_CLIENT_TIMEOUT_MS
 * for most, the daemon's back-pressure bound plus a margin for map and
 * wait); when hmmd is gone calls fail with -ENOTCONN / -EPIPE /
 * -ECONNRESET.  Returns 0 or -errno with hmm_last_error() naming the
 * thing.
 * Threading: any thread, at the same time: calls of one client share its
 * socket (replies are matched to calls by seq), so a thread's unmap goes
 * through while another thread's map waits in hmmd for that room.
 */
#ifndef HMM_CLIENT_H
#define HMM_CLIENT_H

#include <stdint.h>

#include "proto.h"

#define HMM_CLIENT_TIMEOUT_MS	30000
#define HMM_CLIENT_MAP_TIMEOUT_MS 120000

struct hmm_client;	/* hmm_client_open / hmm_client_close */

/*
 * Connect to addr ("unix:PATH" or a PATH), say hello with quota[3]
 * (bytes per tier; 0 = the daemon's default) and name.  Fills *rep with
 * what the daemon granted when rep is not NULL.
 */
int hmm_client_open(const char *addr, const uint64_t quota[HMM_TIERS],
		    const char *name, struct hmm_client **out,
		    struct hmm_proto_hello_reply *rep);

/* Unmaps what is still mapped here and closes; hmmd releases the rest. */
void hmm_client_close(struct hmm_client *c);

/* The socket (for tests that need to watch it). */
int hmm_client_fd(const struct hmm_client *c);

/* TENSOR_NEW (flags HMM_PROTO_TENSOR_PERSIST: open the saved one of that
 * name, or make it); *out gets the reply (id, bytes, shape). */
int hmm_client_tensor_new(struct hmm_client *c, const char *name,
			  uint32_t dtype, unsigned ndim, const int64_t *shape,
			  uint32_t flags, struct hmm_proto_tensor *out);
int hmm_client_tensor_free(struct hmm_client *c, uint64_t id);

/* Map [off, off + len) of tensor id at the host tier: *ptr points into
 * a shared memfd mapping.  hmm_client_unmap(c, ptr) ends it. */
int hmm_client_map(struct hmm_client *c, uint64_t id, uint64_t off,
		   uint64_t len, unsigned access, void **ptr);
int hmm_client_unmap(struct hmm_client *c, void *ptr);

int hmm_client_prefetch(struct hmm_client *c, uint64_t id, uint64_t off,
			uint64_t len, int tier);
int hmm_client_evict(struct hmm_client *c, uint64_t id, uint64_t off,
		     uint64_t len, int tier);
int hmm_client_flush(struct hmm_client *c);
/* WAIT (protocol version 2): until the prefetches and evictions hmmd
 * runs for tensor id (0: every tensor this client holds) are done; 0, or
 * the first I/O error they met.  With a version-1 hmmd: 0 at once. */
int hmm_client_wait(struct hmm_client *c, uint64_t id);
int hmm_client_stats(struct hmm_client *c, struct hmm_proto_stats_reply *st);
int hmm_client_share(struct hmm_client *c, uint64_t id, uint32_t uid,
		     unsigned access, const char *name);
int hmm_client_attach(struct hmm_client *c, uint32_t owner_uid,
		      const char *name, struct hmm_proto_tensor *out);
int hmm_client_quota_set(struct hmm_client *c, uint64_t client_id,
			 const uint64_t quota[HMM_TIERS]);
/* One LIST entry at or after cursor (id 0 in *out: none left). */
int hmm_client_list(struct hmm_client *c, uint32_t what, uint64_t cursor,
		    struct hmm_proto_list_reply *out);

/* ---- shared mode, shaped like hmm.h ----------------------------------------
 *
 * What ctx.c forwards to when hmm_config.daemon is set.  A remote tensor
 * carries what hmm.h's accessors return.  Differences from embedded
 * mode, by design of hmmd: maps are of the host tier only (device maps
 * -ENOTSUP here; hmm_map stages them in this process: shared_dev.c);
 * two maps of one range return two pointers (two mappings
 * of the tensor's pages in hmmd);
 * a tensor is kept in the store by hmm_remote_flush() only when made with
 * HMM_PROTO_TENSOR_PERSIST, and hmm_remote_tensor_open() finds those
 * (by name, per uid), not what an embedded context saved.
 */
struct hmm_remote_tensor {
	struct hmm_client *c;		/* not owned */
	struct hmm_proto_tensor t;	/* id, bytes, dtype, ndim, shape, name */
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

#endif /* HMM_CLIENT_H */
