/* SPDX-License-Identifier: MIT */
/*
 * client.h — the client side of hmmd's protocol, one call per message:
 * what shared mode (rtensor.h, backend.c) is built on, and what hmmctl,
 * hmm-bench shared and the daemon tests use.  A host map returns a
 * pointer into shared memory (a memfd from hmmd).
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

/* The same, asking for features (HMM_PROTO_FEAT_*) besides MEMFD:
 * hmmctl asks for HMM_PROTO_FEAT_CONTROL. */
int hmm_client_open_feat(const char *addr, const uint64_t quota[HMM_TIERS],
			 const char *name, uint32_t features,
			 struct hmm_client **out,
			 struct hmm_proto_hello_reply *rep);

/* Unmaps what is still mapped here and closes; hmmd releases the rest. */
void hmm_client_close(struct hmm_client *c);

/* The socket (for tests that need to watch it). */
int hmm_client_fd(const struct hmm_client *c);

/* hmmd's chunk bytes (its hello reply): every host map pins whole chunks
 * of the client's host quota. */
uint32_t hmm_client_chunk_bytes(const struct hmm_client *c);

/* TENSOR_NEW (flags HMM_PROTO_TENSOR_PERSIST: open the saved one of that
 * name, or make it); *out gets the reply (id, bytes, shape). */
int hmm_client_tensor_new(struct hmm_client *c, const char *name,
			  uint32_t dtype, unsigned ndim, const int64_t *shape,
			  uint32_t flags, struct hmm_proto_tensor *out);
int hmm_client_tensor_free(struct hmm_client *c, uint64_t id);

/* Map [off, off + len) of tensor id at the host tier: *ptr points into
 * a shared memfd mapping.  hmm_client_unmap(c, ptr) ends, of c's maps
 * that returned ptr, of whichever tensor, the one that pins least (the
 * shortest, a read-only one first, the latest of equals), as the
 * embedded hmm_unmap chooses; hmm_client_unmap_tensor only one of
 * tensor t (-EINVAL naming t otherwise): hmm_unmap's.  With hmmd of
 * protocol 6 or later hmmd ends that very map (UNMAP_EXACT). */
int hmm_client_map(struct hmm_client *c, uint64_t id, uint64_t off,
		   uint64_t len, unsigned access, void **ptr);
int hmm_client_unmap(struct hmm_client *c, void *ptr);
int hmm_client_unmap_tensor(struct hmm_client *c,
			    const struct hmm_proto_tensor *t, void *ptr);

/* A map that only its handle *own ends (hmm_client_unmap_own), never
 * an unmap by pointer: shared mode's device staging (dev_stage.c),
 * whose host map has the pointer of a user's host map of its offset.
 * hmm_client_close still ends it. */
struct hmm_cmap;
int hmm_client_map_own(struct hmm_client *c, uint64_t id, uint64_t off,
		       uint64_t len, unsigned access, void **ptr,
		       struct hmm_cmap **own);
int hmm_client_unmap_own(struct hmm_client *c, struct hmm_cmap *own);

int hmm_client_prefetch(struct hmm_client *c, uint64_t id, uint64_t off,
			uint64_t len, int tier);
int hmm_client_evict(struct hmm_client *c, uint64_t id, uint64_t off,
		     uint64_t len, int tier);
/* WRITEBACK (protocol version 3): hmmd writes the range's dirty host
 * chunks to its store, keeps them resident and answers when the writes
 * are done (0, or the first I/O error); -EOPNOTSUPP with an older hmmd. */
int hmm_client_writeback(struct hmm_client *c, uint64_t id, uint64_t off,
			 uint64_t len);
/* SAVE (protocol version 4): t (TENSOR_REPLY's) becomes its uid's
 * persistent tensor under its name, replacing one saved before; durable
 * at the next FLUSH.  With an older hmmd: 0 for a tensor already
 * persistent (its FLUSH saves it), else -EOPNOTSUPP naming both versions,
 * nothing sent. */
int hmm_client_save(struct hmm_client *c, const struct hmm_proto_tensor *t);
/* TENSOR_RM (protocol version 5): delete persistent tensor id (hmmctl
 * rm); durable when it returns 0.  -EOPNOTSUPP naming both versions with
 * an older hmmd, nothing sent. */
int hmm_client_tensor_rm(struct hmm_client *c, uint64_t id);
int hmm_client_flush(struct hmm_client *c);
/* WAIT (protocol version 2): until the prefetches and evictions hmmd
 * runs for tensor id (0: every tensor this client holds) are done; 0, or
 * the first I/O error they met.  With a version-1 hmmd: 0 at once. */
int hmm_client_wait(struct hmm_client *c, uint64_t id);
int hmm_client_stats(struct hmm_client *c, struct hmm_proto_stats_reply *st);
/* STATS2 (protocol 2): every counter of hmmd's engine; with a version-1
 * hmmd, STATS into r->s and the rest 0. */
int hmm_client_stats2(struct hmm_client *c, struct hmm_proto_stats2_reply *r);
int hmm_client_share(struct hmm_client *c, uint64_t id, uint32_t uid,
		     unsigned access, const char *name);
int hmm_client_attach(struct hmm_client *c, uint32_t owner_uid,
		      const char *name, struct hmm_proto_tensor *out);
int hmm_client_quota_set(struct hmm_client *c, uint64_t client_id,
			 const uint64_t quota[HMM_TIERS]);
/* One LIST entry at or after cursor (id 0 in *out: none left). */
int hmm_client_list(struct hmm_client *c, uint32_t what, uint64_t cursor,
		    struct hmm_proto_list_reply *out);

#endif /* HMM_CLIENT_H */
