/* SPDX-License-Identifier: MIT */
/*
 * remote.h — shared mode's backend (backend.h) over hmmd's protocol:
 * what its files share.  A context opened with hmm_config.daemon =
 * "unix:PATH" gets h->be = &hmm_remote_backend and h->be_priv = a struct
 * hmm_remote_ctx; each of its tensors is an engine tensor shell
 * (hmm_tensor_shell: name, dtype, shape; no chunks) whose be_priv is
 * hmmd's tensor (rtensor.h).  "remote" names this backend in the code;
 * hmm.h and the docs call the mode it serves shared mode.
 */
#ifndef HMM_REMOTE_H
#define HMM_REMOTE_H

#include "chunk.h"
#include "rtensor.h"

/* Allocated by hmm_remote_backend.open, freed by its close. */
struct hmm_remote_ctx {
	struct hmm_client *c;	/* the connection, owned */
	struct hmm_list sdev;	/* device maps (dev_stage.c), h->lock */
	pthread_mutex_t open_lock; /* an open's check that h holds no shell
				   of hmmd's handle, and its shell's
				   listing, as one (backend.c) */
};

extern const struct hmm_backend hmm_remote_backend;

static inline struct hmm_remote_ctx *hmm_remote_ctx(struct hmm *h)
{
	return h->be_priv;
}

static inline struct hmm_client *hmm_remote_client(struct hmm *h)
{
	return hmm_remote_ctx(h)->c;
}

static inline struct hmm_remote_tensor *hmm_remote_of(struct hmm_tensor *t)
{
	return t->be_priv;
}

/*
 * dev_stage.c: the device tier in shared mode, staged through hmmd's
 * host tier (h->dev is this process's backend).  _map and _unmap are
 * hmm_map/hmm_unmap at the device; _unmap is -ENOENT when ptr is not a
 * device map of t.  _fini drops every device map (hmm_close, before the
 * tensors go); _residency adds t's device-mapped bytes to *bytes.
 */
int hmm_remote_dev_map(struct hmm_tensor *t, uint64_t off, uint64_t len,
		       unsigned access, void **ptr);
int hmm_remote_dev_unmap(struct hmm_tensor *t, void *ptr);
int hmm_remote_dev_sync(struct hmm *h);
void hmm_remote_dev_fini(struct hmm *h);
void hmm_remote_dev_residency(struct hmm_tensor *t, uint64_t *bytes);

/* Regions (backend.h): module regions (region_hmmk.c) and userfaultfd
 * regions' blocks in an hmmd tensor (region.c). */
struct hmm_region;
int hmm_remote_region_whole(struct hmm *h, struct hmm_region *r);
int hmm_remote_region_back(struct hmm *h, struct hmm_region *r);

#endif /* HMM_REMOTE_H */
