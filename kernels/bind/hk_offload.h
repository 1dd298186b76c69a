/* SPDX-License-Identifier: MIT */
/*
 * hk_offload.h — the offloaded optimizer step: AdamW over p, g, m, v that
 * are libhmm tensors (host memory or the NVMe store), streamed through
 * host memory piece by piece in a k-deep pipeline:
 *
 *	prefetch piece i + k  |  step piece i  |  write back piece i - 1
 *
 * Each piece is mapped at the host tier (p, m, v READ|WRITE, g READ, the
 * bf16 copy of p DISCARD: it is overwritten, never read in), stepped with
 * hk_adamw_step() (kernels/core/hk_adamw.h) and unmapped; then it is
 * evicted, so its write-back to the store runs while the next pieces are
 * stepped.  The grad's pieces are evicted too: clean ones are dropped, a
 * dirty one would be written back, so a caller that wants its gradient
 * to stay resident keeps it mapped during the step (evictions skip
 * pinned chunks, as they skip any range the caller has mapped).  AdamW is elementwise, so the result is bit-identical to one
 * in-memory hk_adamw_step() over the whole arrays (same ISA).
 *
 * Pieces are whole libhmm chunks of every tensor (a DISCARD map of part
 * of a chunk would lose the rest of it): a piece is chunk_bytes / 4
 * elements when all arrays are fp32, chunk_bytes / 2 when one is bf16.
 *
 * Errors leave no element half-stepped: pieces are stepped whole or not
 * at all, and `done` says how far the step got.  A failed read stops the
 * step at the piece that needed it (done < n); calling again with
 * start = done finishes it, and the result is the same as an undisturbed
 * step.  A failed write-back is reported after every piece was stepped
 * (done == n): the data stays dirty in host memory and libhmm writes it
 * again at the next eviction or hmm_flush(); do not step again.
 */
#ifndef HK_OFFLOAD_H
#define HK_OFFLOAD_H

#include <stdint.h>

#include "hk_adamw.h"
#include "hmm.h"

/*
 * One tensor's offloaded step; filled by the caller, who owns the tensors
 * (all of one context).  Only `done` is written by the call.
 */
struct hk_offload_adamw {
	struct hmm_tensor *param;	/* F32, n elements (the master) */
	struct hmm_tensor *param_bf16;	/* BF16, n elements, or NULL */
	struct hmm_tensor *grad;	/* F32 or BF16, n elements */
	struct hmm_tensor *exp_avg;	/* F32 or BF16, n elements */
	struct hmm_tensor *exp_avg_sq;	/* as exp_avg */
	/* lr, beta1, beta2, eps, weight_decay, step, grad_scale, flags,
	 * found_inf, name; n, the pointers and the dtypes are ignored (they
	 * come from the tensors) */
	struct hk_adamw_args hp;
	uint32_t chunk_bytes;	/* the context's hmm_config.chunk_bytes;
				   0 = libhmm's default, 2 MiB */
	uint32_t depth;		/* k: pieces read ahead; 0 = as many as
				   fill the context's io_depth with
				   reads, at least 2 (2 at libhmm's
				   default io_depth); at most what lets
				   k + 2 pieces fit in the host budget */
	uint64_t start;		/* first element: 0, or a `done` to resume */
	uint64_t done;		/* (out) elements [0, done) are stepped */
	/*
	 * The caller's own fp32 memory of host_n elements in place of the
	 * param tensor (param_host; param then NULL) and of the grad tensor
	 * (grad_host, F32; grad then NULL): a model's weights, which are
	 * the fp32 master, and its gradient, stepped where they are, with
	 * no copy and no store traffic for them; only exp_avg and
	 * exp_avg_sq stream.  Both NULL: the tensors, as above.
	 */
	float *param_host;
	const float *grad_host;
	uint64_t host_n;
};

/*
 * hk_offload_adamw_step(h, o): one AdamW step over o's tensors.
 * With HK_ADAMW_CHECK_FINITE in o->hp.flags the grads are read once
 * first (an extra 4 or 2 bytes per element of I/O); a non-finite one, or
 * o->hp.found_inf, skips the step: nothing is mapped for writing.
 * Returns 0, HK_ADAMW_SKIPPED, -EINVAL (tensors of other sizes or
 * dtypes, a bad hyperparameter, start not a piece boundary), or the
 * error of libhmm's map or write-back (-EIO, -ENOSPC, -ENOMEM ...).
 * The detail of any failure is in hk_offload_error().  Any thread; the
 * step's maps come from this thread, its I/O runs on libhmm's threads.
 */
int hk_offload_adamw_step(struct hmm *h, struct hk_offload_adamw *o);

/* The calling thread's detail of its latest failure ("" if none). */
const char *hk_offload_error(void);

#endif /* HK_OFFLOAD_H */
