/* SPDX-License-Identifier: MIT */
/*
 * engine.h — hmmd's state around the embedded libhmm engine, shared by
 * engine.c (open, close, quotas and back-pressure, metrics) and the
 * request files (request.h).  Everything below is protected by
 * engine->lock unless a field says otherwise.
 */
#ifndef HMMD_ENGINE_H
#define HMMD_ENGINE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "budget.h"
#include "hmm.h"
#include "hmmd.h"
#include "log.h"

/*
 * A tensor hmmd holds in the engine.  Allocated by tensor.c when a client
 * makes or opens it, freed (with the engine's tensor) when refs drops to
 * 0 and it is not kept: a persistent tensor stays until its owner frees
 * it or the daemon stops.
 */
#define HMMD_REACHED_MAX	8	/* uids sent one tensor's memfd; the
					   rest get copies (map.c) */
struct hmmd_tensor {
	struct hmmd_tensor *next;
	uint64_t id;			/* nonzero, never reused in a run */
	struct hmm_tensor *t;		/* the engine's; immutable */
	uid_t owner_uid;
	uint64_t owner;			/* the client that made it; 0: gone */
	uint32_t flags;			/* HMM_PROTO_TENSOR_* */
	int freed;			/* its owner freed it: goes at refs 0 */
	unsigned refs;			/* handles + calls in flight */
	uint64_t pinned;		/* host bytes charged by maps of it */
	char name[HMM_PROTO_NAME_MAX];	/* as the client named it */
	/* one share at a time (SHARE): share_name[0] == 0 = none */
	char share_name[HMM_PROTO_NAME_MAX];
	uid_t share_uid;
	unsigned share_access;		/* HMM_READ [| HMM_WRITE] */
	int guard;			/* guard.c's slot of its host file;
					   0 = none (sealed, or not sent) */
	/* the uids its memfd was sent to, charged its bytes (map.c) */
	struct hmmd_uid *reached[HMMD_REACHED_MAX];
	unsigned nreached;
};

/* A client's right to use a tensor (its own, or attached). */
struct hmmd_handle {
	struct hmmd_tensor *dt;
	unsigned access;		/* HMM_READ | HMM_WRITE */
};

/*
 * One host (or device) map of a client: the engine's pin, and the memfd
 * the client sees.  Allocated at MAP, freed at UNMAP or client exit.
 */
struct hmmd_map {
	struct hmmd_map *next;
	struct hmmd_tensor *dt;
	uint64_t off, len;		/* the range (len resolved) */
	uint32_t tier;
	unsigned access;
	uint64_t charge;		/* host bytes admitted (chunk-rounded) */
	void *eptr;			/* the engine's pointer to byte off
					   (the client maps the same pages) */
	int wfd;			/* a copy's window memfd (copied back
					   at unmap); -1: the tensor's own */
	uint64_t woff;			/* byte off's offset in the window */
	uint8_t *snap;			/* a write copy's bytes as sent (len,
					   malloc'd): only the bytes the
					   client changed come back */
};

/*
 * One uid's share of the host budget: every connection of the uid pins
 * against one quota.  Allocated by the uid's first hello (client.c),
 * freed when its last connection and its last reach go.  An
 * administrator's connection (uid 0, hmmd's own) has one of its own
 * (solo).
 */
struct hmmd_uid {
	struct hmmd_uid *next;
	uid_t uid;
	int solo;			/* one connection's, not shared */
	unsigned conns;			/* its clients */
	uint64_t quota;			/* host bytes its maps may pin: the
					   most its connected clients asked
					   (->asked; 0 with none), until a
					   QUOTA_SET fixes it; may be below
					   pinned (client.c) */
	int set;			/* a QUOTA_SET fixed quota */
	struct hmm_owner own;		/* the host bytes its connections'
					   maps pin, in the engine's ledger
					   (budget.h), with quota as its
					   quota: admitted by eng_admit,
					   ranked among waiters by this
					   share; h->lock */
	uint64_t reach;			/* bytes of the tensors whose whole
					   memfd it was sent (alive), at most
					   quota; kept while > 0 (map.c) */
};

/* Allocated by hmmd_client_new, freed by hmmd_client_free. */
struct hmmd_client {
	struct hmmd_client *next;
	uint64_t id;
	pid_t pid;
	uid_t uid;
	int admin;			/* uid 0 or hmmd's own uid */
	int control;			/* an admin's hmmctl: may hold the
					   slots kept back (hmmd.h) */
	char name[HMM_PROTO_NAME_MAX];
	struct hmmd_uid *u;		/* its uid's host quota */
	uint64_t asked;			/* host quota its hello asked,
					   capped: u->quota is the most of
					   these */
	uint64_t quota[HMM_TIERS];	/* granted; host: u->quota's copy */
	uint64_t used[HMM_TIERS];	/* host: bytes its maps pin (its
					   part of u->own); store: bytes of
					   tensors made */
	int cancel;			/* -errno: its waits for room end
					   (hmm_budget_cancel; h->lock) */
	struct hmmd_handle *handles;	/* [nhandles], grown by doubling */
	unsigned nhandles, cap;
	struct hmmd_map *maps;		/* newest first */
	int gone;			/* its connection ended: waits end */
	uint64_t maps_done, waits;	/* counters for metrics */
};

/* A store file this start created: removed if the start fails
 * (hmmd_engine_discard), where it is still that file (dev, ino).  An
 * array of them in the engine, freed with it. */
struct hmmd_made {
	char *path;
	dev_t dev;
	ino_t ino;
};

/* Allocated by hmmd_engine_open, freed by hmmd_engine_close. */
struct hmmd_engine {
	struct hmm *h;			/* immutable after open */
	const struct hmmd_config *cfg;
	struct hmmd_bridge *bridge;	/* or NULL: immutable once serving */
	uint32_t chunk;			/* the engine's chunk bytes */
	uint64_t budget;		/* global host budget for pins */
	unsigned wait_ms;
	struct hmmd_made *made;		/* [nmade]: main thread, start */
	unsigned nmade;
	pthread_mutex_t open_lock;	/* serialises opening and making
					   persistent tensors; taken before
					   lock */
	pthread_mutex_t lock;		/* protects all below */
	int stopping;
	struct hmmd_tensor *tensors;
	struct hmmd_client *clients;
	struct hmmd_uid *uids;
	uint64_t next_tid;
	uint64_t nclients;
	uint64_t ncontrol;		/* of them, control (hmmctl) */
	/* counters, for stats and metrics */
	uint64_t wait_ns, maps, unmaps, copy_bytes;
};

/*
 * Admit charge host bytes for cl through the engine's admission
 * (hmm_budget_admit, its uid's u->own as the owner): against the uid's
 * quota (all the uid's connections together: waits while their pins
 * leave no room; their unmaps make room) and the global budget (waits
 * while it is full, serving the waiter whose uid is furthest below its
 * share first), up to wait_ms.  Counted in cl->used[host] too.  nowait:
 * return -EAGAIN instead of waiting.  Called and returns with e->lock
 * held; drops it while waiting.  0;
 * -EDQUOT: more than the uid's quota (never fits), or the uid's pins
 * stayed too many for wait_ms;
 * -ENOMEM: more than the budget, or the budget stayed full for wait_ms;
 * -EAGAIN (nowait); -ESHUTDOWN (hmmd stops); -ECONNRESET (cl is gone).
 */
int eng_admit(struct hmmd_engine *e, struct hmmd_client *cl, uint64_t charge,
	      int nowait);

/* cl's connection ended: its waiting maps give up.  Lock not held. */
void eng_client_gone(struct hmmd_engine *e, struct hmmd_client *cl);
/* u's quota changed (hello, a client gone, quota_set): its clients'
 * copies and the engine's ledger take it.  e->lock held. */
void eng_quota_sync(struct hmmd_engine *e, struct hmmd_uid *u);
/* Host bytes admitted: all clients', and u's (all its connections).
 * A client's own are cl->used[HMM_TIER_HOST] (e->lock). */
uint64_t eng_pinned(struct hmmd_engine *e);
uint64_t eng_uid_pinned(struct hmmd_engine *e, struct hmmd_uid *u);

/*
 * hmmd_request (hmmd.h) in two steps: with nowait, a MAP that would wait
 * for room is not served and 0 is returned; the caller serves it again
 * without nowait on a thread that may block (conn.c), so that the
 * connection's other requests (its unmaps) go on meanwhile.
 */
int hmmd_request_nowait(struct hmmd_engine *e, struct hmmd_client *cl,
			const struct hmm_proto_msg *m, void *out, size_t cap,
			int *fd, int nowait);

/* Give back charge host bytes of cl (and its uid) and wake the
 * waiters.  e->lock held. */
void eng_release(struct hmmd_engine *e, struct hmmd_client *cl,
		 uint64_t charge);

/* dt goes: the uids it reached get its bytes back; e->lock held. */
void hmmd_map_reach_drop(struct hmmd_engine *e, struct hmmd_tensor *dt);

/* u lost a connection, or its reach: freed when it has neither. */
void hmmd_uid_put(struct hmmd_engine *e, struct hmmd_uid *u);

/* Drop one ref of dt; frees it (engine tensor too) at 0 when it is not
 * kept.  Lock held; may drop and retake it around the engine call.
 * (tensor.c) */
void hmmd_tensor_put(struct hmmd_engine *e, struct hmmd_tensor *dt);

/* Keep saved tensor t ("uU/N"), opened at the start, as uid U's
 * persistent tensor N that nobody holds.  0, -EINVAL, -ENOMEM.
 * (tensor.c) */
int hmmd_tensor_adopt(struct hmmd_engine *e, struct hmm_tensor *t);


#endif /* HMMD_ENGINE_H */
