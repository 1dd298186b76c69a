/* SPDX-License-Identifier: MIT */
/*
 * request.h — what hmmd's request files share.  hmmd_request (hmmd.h,
 * request.c) decodes nothing itself: conn.c hands it a decoded message,
 * and it calls the file that holds that request:
 *
 *   client.c   hello (hmmd_client_new), goodbye, QUOTA_SET
 *   tensor.c   TENSOR_NEW, TENSOR_FREE, SAVE, a tensor's last reference
 *   share.c    SHARE, ATTACH
 *   map.c      MAP, UNMAP
 *   move.c     PREFETCH, EVICT, WRITEBACK, WAIT, FLUSH
 *   stats.c    STATS, STATS2, LIST
 *
 * with handle.c (a client's handles on tensors) and request.c (the
 * replies).  Each request function runs on the client's thread (conn.c),
 * takes e->lock itself around the tables (engine.h) and drops it around
 * the engine's calls, and returns the reply's length: a failure is an
 * ERROR reply, not a return.
 */
#ifndef HMMD_REQUEST_H
#define HMMD_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "proto.h"

/* One request being served: on the stack of hmmd_request_nowait. */
struct hmmd_req {
	struct hmmd_engine *e;
	struct hmmd_client *cl;		/* who asked */
	const struct hmm_proto_msg *m;	/* the request, decoded */
	void *out;			/* the reply goes here (cap bytes) */
	size_t cap;
	int *fd;			/* a descriptor to send with it, or -1 */
	int nowait;			/* a map that must wait returns 0 instead */
};

/* ---- replies (request.c) --------------------------------------------- */

/* An ERROR reply of err with a detail; the detail also goes to the log
 * when verbose.  Returns its length. */
int hmmd_reply_err(struct hmmd_req *q, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int hmmd_reply_ok(struct hmmd_req *q);
/* A TENSOR reply describing dt. */
int hmmd_reply_tensor(struct hmmd_req *q, struct hmmd_tensor *dt);

/* ---- handles (handle.c); lock held unless said ----------------------- */

/* cl's handle on tensor id, or NULL. */
struct hmmd_handle *hmmd_handle_of(struct hmmd_client *cl, uint64_t id);
/* Give cl a handle on dt (a ref); 0 (also when it has one) or -ENOMEM. */
int hmmd_handle_add(struct hmmd_client *cl, struct hmmd_tensor *dt,
		    unsigned access);
/* Take back cl's handle on dt (its ref: hmmd_tensor_put). */
void hmmd_handle_drop(struct hmmd_engine *e, struct hmmd_client *cl,
		      struct hmmd_tensor *dt);
/* May cl see (list, evict, prefetch, write back, wait for) dt: an
 * administrator any, anyone else the tensors its uid made and those it
 * holds?  Lock held. */
int hmmd_tensor_seen(struct hmmd_client *cl, struct hmmd_tensor *dt);
/* Lock not held: the tensor of id for q's client if it may see it
 * (hmmd_tensor_seen), with a ref for the call; NULL when not.  Give it
 * back with hmmd_tensor_drop. */
struct hmmd_tensor *hmmd_tensor_get(struct hmmd_req *q, uint64_t id);
void hmmd_tensor_drop(struct hmmd_req *q, struct hmmd_tensor *dt);
/* The -ENOENT reply for an id hmmd_tensor_get did not give: "no such
 * tensor" to an administrator, who sees all; to anyone else, without
 * telling whether another uid has one of that id. */
int hmmd_tensor_miss(struct hmmd_req *q, const char *what, uint64_t id);

/* fn(q) under e->open_lock: the requests that open, make, save or
 * delete a uid's persistent tensor by name (TENSOR_NEW's PERSIST,
 * ATTACH, SAVE, TENSOR_RM), so that nobody opens or makes that name
 * meanwhile.  (request.c) */
int hmmd_open_locked(struct hmmd_req *q, int (*fn)(struct hmmd_req *q));

/* ---- tensors (tensor.c) ---------------------------------------------- */

/* Open the persistent tensor of q's client named name; lock held
 * (dropped around the engine).  Returns it with a handle for the
 * client, or NULL and *err. */
struct hmmd_tensor *hmmd_tensor_open_kept(struct hmmd_req *q,
					  const char *name, int *err);

/* ---- maps (map.c) ---------------------------------------------------- */

/* Undo map mp of cl (off every list): unpin, release its charge.  Lock
 * held; dropped around the engine's unmap. */
void hmmd_map_undo(struct hmmd_engine *e, struct hmmd_client *cl,
		   struct hmmd_map *mp);

/* ---- the requests, one per message type ------------------------------ */

int hmmd_req_tensor_new(struct hmmd_req *q);	/* tensor.c */
int hmmd_req_tensor_free(struct hmmd_req *q);
int hmmd_req_save(struct hmmd_req *q);
int hmmd_req_tensor_rm(struct hmmd_req *q);
int hmmd_req_share(struct hmmd_req *q);		/* share.c */
int hmmd_req_attach(struct hmmd_req *q);
int hmmd_req_map(struct hmmd_req *q);		/* map.c */
int hmmd_req_unmap(struct hmmd_req *q);
int hmmd_req_move(struct hmmd_req *q);	/* move.c: PREFETCH, EVICT,
						   WRITEBACK */
int hmmd_req_wait(struct hmmd_req *q);
int hmmd_req_flush(struct hmmd_req *q);
int hmmd_req_stats(struct hmmd_req *q);		/* stats.c: STATS, STATS2 */
int hmmd_req_list(struct hmmd_req *q);
int hmmd_req_quota_set(struct hmmd_req *q);	/* client.c */

#endif /* HMMD_REQUEST_H */
