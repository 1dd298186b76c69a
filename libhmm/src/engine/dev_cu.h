/* SPDX-License-Identifier: MIT */
/*
 * dev_cu.h — what the two CUDA devices share (dev_cuda.c holds it):
 * the driver loaded with dlopen, the device and its primary context,
 * the copy thread's stream, events and pinned staging buffers, and the
 * staged copies themselves.  "cuda" (dev_cuda.c) backs a tensor's
 * device range with cuMemCreate'd chunks mapped into a reservation;
 * "uvm" (dev_uvm.c) with one cuMemAllocManaged range that hmm's policy
 * moves with cuMemPrefetchAsync.  Engine-internal.
 */
#ifndef HMM_DEV_CU_H
#define HMM_DEV_CU_H

#include <stddef.h>

#include "cuda_abi.h"
#include "dev.h"

#define CU_STAGE_BYTES		(4u << 20)

/* The driver's entry points, resolved by dlsym (cuda_abi.h); the
 * managed ones only for "uvm", the discards where the driver has them
 * (else NULL). */
struct cu_api {
#define CU_FIELD(field, name, sym, params)	CUresult (*field) params;
	HMM_CU_CALLS(CU_FIELD)
	HMM_CU_MANAGED_CALLS(CU_FIELD)
	HMM_CU_DISCARD_CALLS(CU_FIELD)
#undef CU_FIELD
};

/* Allocated by hmm_cu_open, freed by hmm_cu_close. */
struct cu {
	struct hmm_dev_queue q;		/* first (hmm_dev_queue_copy): the
					   copy thread and its queue */
	struct cu_api api;
	const char *name;		/* "cuda" or "uvm", for the details */
	int managed;			/* "uvm": managed memory, no VMM */
	int no_discard;			/* "uvm": the driver said its
					   discards are not supported */
	CUevent discarded;		/* "uvm": recorded after each discard */
	int discard_queued;		/* one may not have run yet */
	void *lib;
	CUdevice dev;
	CUcontext ctx;
	size_t gran;
	CUmemAllocationProp prop;
	CUstream stream;		/* the copy thread's; "uvm" also
					   queues its prefetches on it */
	CUevent ev[2];
	void *stage[2];			/* CU_STAGE_BYTES each */
	int registered[2];		/* stage[i] is cuMemHostRegister'ed */
};

const char *hmm_cu_str(struct cu *c, CUresult r);
/* A driver error as -errno: out of memory is -ENOMEM, the rest -EIO. */
int hmm_cu_errno(CUresult r);
/* c's context current on the calling thread for a few driver calls;
 * hmm_cu_out puts back what the thread had.  0 or -EIO. */
int hmm_cu_in(struct cu *c);
void hmm_cu_out(struct cu *c);
/* The devices' open and close (struct hmm_dev_ops): managed 0 for
 * "cuda" (needs VMM, the granularity from the driver), 1 for "uvm"
 * (needs managed memory with concurrent access; 4 KiB pages). */
int hmm_cu_open(const struct hmm_config *cfg, int managed, void **priv,
		uint64_t *capacity, uint64_t *granularity);
void hmm_cu_close(void *priv);

/* Returns from the caller with -errno and the driver's words. */
#define CU_TRY_AS(c, e, call, what)                                        \
	do {                                                               \
		CUresult r_ = (call);                                      \
		if (r_)                                                    \
			return hmm_err((e) ? (e) : hmm_cu_errno(r_),       \
				       "device %s: %s: %s (%d)", (c)->name, \
				       what, hmm_cu_str(c, r_), r_);       \
	} while (0)
#define CU_TRY(c, call, what)	CU_TRY_AS(c, 0, call, what)
#define CU_NODEV(c, call, what)	CU_TRY_AS(c, -ENODEV, call, what)

#endif /* HMM_DEV_CU_H */
