/* SPDX-License-Identifier: MIT */
/*
 * gpu.h — hmm-train --device cuda: the GPT's step on the GPU.
 *
 * What runs where.  The matrix products go through cuBLAS (cublasSgemm_v2,
 * fp32, default math: no TF32), everything else through gpu_kern.cu's
 * kernels (and kernels/core's SIMT attention), loaded from the fatbin
 * embedded in hmm-train through the driver; driver and cuBLAS are
 * dlopen'ed (gpu_lib.c), so hmm-train links neither.
 *
 * Memory.  The training state stays where --device cpu keeps it: P, G, M
 * and V in the host/store context of state.h.  On the GPU, in a second
 * libhmm context with device "cuda" and --device-budget as its device
 * budget, are hmm tensors for the parameters (one per block, "dev.layerN.p",
 * "dev.embed.p") and the gradients (the embeddings' own, "dev.embed.g",
 * and one "dev.layers.g" that every layer's backward writes in turn, as
 * state.h's shared gradient): each is mapped at HMM_TIER_DEVICE around its
 * use, and libhmm evicts parameters to its host tier (and brings them
 * back for the backward) when the budget does not hold them all.  The
 * activations of every block are kept on the device (plain cuMemAlloc,
 * outside the budget: gpu_plan's act_bytes), so there is no recompute.
 *
 * Optimizer: the CPU AdamW over the state, as --device cpu runs it
 * (gpt_adamw_block: the per-block clip and state_adamw streaming m and v
 * from the store).  After a layer's backward its gradient comes to the
 * host (4 bytes a parameter) and the next step's forward takes its
 * parameters up (4 bytes): 8 bytes a parameter over PCIe per step, where
 * a GPU AdamW with the moments streamed in and out would move m and v
 * both ways (16) — and the moments would still have to come from the
 * store through the host.  ZeRO-Offload's choice, for the same reason.
 *
 * Determinism: cuBLAS gives the same bits run to run on one GPU model
 * with one stream (its documented reproducibility), the kernels use no
 * atomics, the loss is summed on the host in row order: the losses do
 * not depend on the device budget, only on which GPU.  Against --device
 * cpu they differ by rounding (other summation orders, expf): see
 * man/hmm-train.1 for the tolerance.
 *
 * Ownership: gpu_open allocates, gpu_close frees; struct gpt and its
 * state stay the caller's and must outlive it.  Threading: one thread.
 * Errors: 0 or -errno; gpu_error() says what failed (the call, the
 * tensor, the driver's or cuBLAS's own words).
 */
#ifndef HMM_TRAIN_GPU_H
#define HMM_TRAIN_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/*
 * The device tier's plan, from the model alone (no GPU): bytes of each
 * device tensor rounded up to chunk (libhmm's device chunk), what the
 * budget must hold at least (the embeddings' p and g, one layer's p and
 * the shared layer gradient: what one layer's backward pins at once),
 * what holds every tensor resident, and how many layers' parameters the
 * budget keeps resident besides (the rest go back and forth).  budget 0
 * means all.  0, or -EINVAL with why (the budget, and the least it could
 * be).
 */
#define GPU_CHUNK	(2u << 20)	/* the device context's chunk */

struct gpu_plan {
	uint64_t chunk;
	uint64_t layer_p, layer_g, embed_p, embed_g;	/* rounded bytes */
	uint64_t min_bytes, all_bytes, budget;
	int layers, resident_layers;
	uint64_t act_bytes;	/* device activations, outside the budget */
};

int gpu_plan_make(const struct gpt_config *c, uint64_t chunk,
		  uint64_t budget, struct gpu_plan *out, char *why,
		  size_t why_n);

struct gpu;

int gpu_open(struct gpt *g, uint64_t budget, struct gpu **out);
void gpu_close(struct gpu *x);
const struct gpu_plan *gpu_plan(const struct gpu *x);
/* gpt_step's contract (model.h), on the GPU: hp NULL is refused. */
int gpu_step(struct gpu *x, const int *tok, const int *tgt,
	     const struct optim_hp *hp, double *loss);
const char *gpu_error(void);

#endif /* HMM_TRAIN_GPU_H */
