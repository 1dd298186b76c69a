/* SPDX-License-Identifier: MIT */
/*
 * backend.h — the operations behind hmm.h.
 *
 * api.c checks every call's arguments once and then calls the context's
 * table, h->be, picked at hmm_open (open.c) from config.daemon the way
 * dev.h's table is picked from config.device:
 *   hmm_engine_backend (engine/): the embedded engine: chunks, budgets,
 *	policy, the I/O thread and the store, all in this process;
 *   shared mode's backend, in the layer above the engine:
 *	the same calls answered by hmmd over its protocol.
 * The engine knows only this table, never the other backend, whose state
 * hangs off h->be_priv and t->be_priv.
 *
 * What api.c has checked before an op runs: the context and tensor are
 * there; a range is inside the tensor with HMM_ALL resolved (len > 0);
 * a tier is device or host (store too for evict) and the device tier
 * has a backend (h->dev); map's access is READ/WRITE/DISCARD and ptr is
 * there; out pointers are there; a new tensor's name, dtype and shape
 * are valid (*bytes computed).  Ops return 0 or -errno with
 * hmm_last_error() set; threading as hmm.h says of each call.
 */
#ifndef HMM_BACKEND_H
#define HMM_BACKEND_H

#include <stdint.h>

#include "hmm.h"

struct hmm_region;

struct hmm_backend {
	const char *name;	/* "embedded", "shared" */
	/* hmm_open: cfg is checked (hmm_ctx_new) and h->be set here */
	int (*open)(const struct hmm_config *cfg, struct hmm **out);
	void (*close)(struct hmm *h);

	int (*tensor_new)(struct hmm *h, const char *name, uint32_t dtype,
			  unsigned ndim, const int64_t *shape,
			  struct hmm_tensor **out);
	int (*tensor_open)(struct hmm *h, const char *name,
			   struct hmm_tensor **out);
	int (*tensor_free)(struct hmm_tensor *t);
	int (*residency)(struct hmm_tensor *t, uint64_t bytes[HMM_TIERS]);
	int (*host_fd)(struct hmm_tensor *t, int *fd, uint64_t *off);

	int (*map)(struct hmm_tensor *t, uint64_t off, uint64_t len, int tier,
		   unsigned access, void **ptr);
	int (*unmap)(struct hmm_tensor *t, void *ptr);
	int (*prefetch)(struct hmm_tensor *t, uint64_t off, uint64_t len,
			int tier);
	int (*evict)(struct hmm_tensor *t, uint64_t off, uint64_t len,
		     int tier);
	/* hmm_writeback: the range checked as a host range (no tier) */
	int (*writeback)(struct hmm_tensor *t, uint64_t off, uint64_t len);
	int (*wait)(struct hmm *h, struct hmm_tensor *t);
	int (*flush)(struct hmm *h);
	int (*stats)(struct hmm *h, struct hmm_stats *st);

	/*
	 * Regions (engine/region.c runs them in both modes).  region_whole:
	 * serve r (r->bytes set) whole elsewhere, setting r->base and
	 * r->whole; -ENODEV = make a userfaultfd region here (NULL: always).
	 * region_back: where that region's evicted blocks go: set r->ops
	 * and the backend's state of r.  Both 0 or -errno with the detail.
	 */
	int (*region_whole)(struct hmm *h, struct hmm_region *r);
	int (*region_back)(struct hmm *h, struct hmm_region *r);
};

extern const struct hmm_backend hmm_engine_backend;

/*
 * The context both backends start from (ctx.c): cfg checked, counters,
 * lists and locks set up, the trace opened and the device backend
 * (config.device) opened.  hmm_ctx_free undoes it after the backend's
 * close.  hmm_engine_open is the embedded engine's open: what hmm_open
 * calls without config.daemon, and what hmmd calls (it never connects
 * to another hmmd).
 */
int hmm_ctx_new(const struct hmm_config *cfg, struct hmm **out);
void hmm_ctx_free(struct hmm *h);
int hmm_engine_open(const struct hmm_config *cfg, struct hmm **out);

/*
 * hmmd's: one engine context serves many clients, so what belongs to one
 * client's tensor must not reach another.
 * hmm_engine_async_by_tensor (right after open): a chunk's failed copy
 * down (a write-back or eviction nobody waits for) is kept as its
 * tensor's first asynchronous error, not the context's: hmm_wait and
 * hmm_flush no longer return it (a flush fails, without naming it, while
 * a write it made failed), nor does a starved map's detail name it;
 * hmm_tensor_async_take(t, peek) returns t's (0 when none) with its
 * detail made this thread's, and forgets it unless peek (chunk.c).
 * hmm_tensor_rename: the name the engine shows and saves in the store's
 * table at the next flush (hmm.h's accessor says constant: hmmd's
 * engine tensors alone are renamed); -EINVAL when not 1..63 bytes
 * (tensor.c).
 */
void hmm_engine_async_by_tensor(struct hmm *h);
/* hmmd's unmap of its map of [ptr, +len) with access: that one, not
 * another client's at the same pointer (hmm_unmap's choice; map.c). */
int hmm_engine_unmap_exact(struct hmm_tensor *t, void *ptr, uint64_t len,
			   unsigned access);
int hmm_tensor_async_take(struct hmm_tensor *t, int peek);
int hmm_tensor_rename(struct hmm_tensor *t, const char *name);
/* The name of the i-th tensor found in the store and not opened (0), or
 * -ENOENT past the last; hmmd sweeps what no client can open (persist.c). */
int hmm_persist_saved_name(struct hmm *h, uint32_t i, char *name,
			   size_t cap);

/* Step markers, the same in both modes (ctx.c); begin = 1 or 0. */
int hmm_ctx_step(struct hmm *h, int begin);

/* Regions (region.c), called by api.c for both backends. */
int hmm_region_create(struct hmm *h, uint64_t bytes, void **ptr);
int hmm_region_advise_range(struct hmm *h, void *ptr, uint64_t len,
			    int advice);
int hmm_region_destroy_at(struct hmm *h, void *ptr);

#endif /* HMM_BACKEND_H */
