/* SPDX-License-Identifier: MIT */
/*
 * model.h — a small GPT: byte tokens, learned positions, `layers`
 * pre-LayerNorm blocks (causal self-attention, GELU MLP), a final
 * LayerNorm and an output head tied to the token embedding, trained
 * with cross-entropy and AdamW.
 *
 * Memory.  Parameters, gradients and AdamW moments live in a struct
 * state (state.h), one block per layer plus one for the embeddings; the
 * step maps each block around its use.  Activations are checkpointed per
 * block: only each block's input is kept through the forward (in DRAM,
 * or in the store with gpt_offload_activations()), and the block is
 * recomputed in the backward — unless gpt_keep_activations() was called
 * (hmm-train does when the state fits in its host budget).  The AdamW step of a layer runs
 * right after that layer's backward, while its gradient is mapped, so a
 * step touches each block's p, m, v once in the backward (the state
 * streams them, state_adamw); weight decay applies to every element.  (No global
 * gradient-norm clipping: that would need every gradient first; each
 * block's gradient is clipped to norm 1 instead.)
 *
 * Determinism: a step's results depend only on the state's bytes, the
 * tokens and the hyper-parameters — not on the host budget, on where the
 * bytes lived, or on timing.
 *
 * Ownership: gpt_new allocates the model's activations and scratch (not
 * the state); gpt_free frees them.  Threading: one thread at a time.
 */
#ifndef HMM_TRAIN_MODEL_H
#define HMM_TRAIN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "optim.h"
#include "state.h"

struct gpt_config {
	int vocab;	/* 256: bytes */
	int ctx;	/* T, tokens per sequence */
	int d;		/* model width */
	int heads;
	int layers;
	int batch;	/* B, sequences per step */
};

/* Offsets (in floats) of each array inside a layer block. */
struct gpt_layer_layout {
	size_t wqkv, wo, w1, w2;	/* the matrices: [0, decay_end) */
	size_t decay_end;
	size_t bqkv, bo, b1, b2, ln1g, ln1b, ln2g, ln2b;
	size_t total;
};

/* Offsets inside the embedding block. */
struct gpt_embed_layout {
	size_t wte, wpe, decay_end, lnfg, lnfb, total;
};

/* Seconds spent in each part of the steps so far (cumulative). */
struct gpt_times {
	double fwd, bwd, opt, map;
};

/* One block's intermediates, kept from its forward for its backward. */
struct gpt_acts {
	float *h1, *mean1, *rstd1, *qkv, *attw, *a, *x1;
	float *h2, *mean2, *rstd2, *u, *g;
};

struct gpt {
	struct gpt_config c;
	struct gpt_layer_layout L;
	struct gpt_embed_layout E;
	struct state *st;		/* not owned */
	int n;				/* rows per step: batch * ctx */
	float *acts;			/* [layers + 1][n][d] block inputs, or
					   NULL: offloaded (xp) */
	float **xp;			/* [layers + 1]: offloaded block inputs
					   mapped now (NULL: not) */
	/* the block being computed; block.c reads these */
	float *h1, *mean1, *rstd1, *qkv, *attw, *a, *x1;
	float *h2, *mean2, *rstd2, *u, *g;
	float *out;
	struct gpt_acts one;		/* the set when not keeping */
	struct gpt_acts *kept;		/* [layers] or NULL: recompute */
	float *dbig, *dh, *da, *dqkv, *dx;
	float *y, *meanf, *rstdf, *logits;
	struct gpt_times t;
	double weight_decay;
	double clip;			/* per-block gradient norm limit */
};

/* Parameter count of a config (all blocks' P). */
size_t gpt_params(const struct gpt_config *c);
/* Layout of a config's blocks: sizes[layers + 1] floats per array. */
void gpt_block_floats(const struct gpt_config *c, size_t *sizes);
/* Training FLOPs of one step (forward, recompute if set, backward). */
double gpt_step_flops(const struct gpt_config *c, int recompute);

int gpt_new(const struct gpt_config *c, struct state *st, struct gpt **out);
void gpt_free(struct gpt *g);

/*
 * Keep every block's intermediates from the forward for the backward
 * instead of recomputing the block there (gpt_keep_bytes() more memory):
 * a step then does three passes' work, not four.  The losses and the
 * state are bit-identical either way (the recompute gives the same bits).
 * 0 or -ENOMEM (the model then recomputes, as before).
 */
int gpt_keep_activations(struct gpt *g);
size_t gpt_keep_bytes(const struct gpt_config *c);

/*
 * Offload the checkpointed block inputs (layers + 1 of them, each
 * gpt_act_floats() floats) to the state's activation tensors, which the
 * state must have been opened with (state_config.act_count = layers + 1,
 * act_floats = gpt_act_floats()): the forward maps each as it writes it
 * and evicts it once read (all but the last block's input, which the
 * backward starts with), the backward maps them back in reverse order,
 * prefetching the next one down.  Same bits.  Not with
 * gpt_keep_activations (-EINVAL).  0, -EINVAL or -ENOMEM.
 * gpt_act_offloaded_bytes: what goes to the store per step, the
 * evicted inputs ((layers - 1) * gpt_act_floats() floats).
 */
int gpt_offload_activations(struct gpt *g);
size_t gpt_act_floats(const struct gpt_config *c);
uint64_t gpt_act_offloaded_bytes(const struct gpt_config *c);

/* Initialise P (GPT-2 style, from seed) and zero M and V.  0 or -errno. */
int gpt_init(struct gpt *g, uint64_t seed);

/*
 * One step on tok[n], tgt[n] (n = batch * ctx; row b*ctx + t).  Writes
 * the mean loss.  With hp != NULL, applies AdamW with hp; with hp NULL
 * leaves the gradients in the G arrays (tests).  0 or -errno (a state
 * error: state_error() says which).
 */
int gpt_step(struct gpt *g, const int *tok, const int *tgt,
	     const struct optim_hp *hp, double *loss);

/*
 * The AdamW step of block blk (0 .. layers; layers: the embeddings) from
 * its gradient gr, which the caller keeps mapped at the host: the block's
 * clip, then state_adamw (the step's own, exported for the GPU step,
 * gpu.h, which runs the same optimizer on the host).  0 or -errno.
 */
int gpt_adamw_block(struct gpt *g, int blk, const float *gr,
		    const struct optim_hp *hp);

/*
 * block.c, used by the step: one transformer block on the n rows of x
 * with parameters p.  block_fwd writes out and keeps its intermediates in
 * g's current set (g->h1 ...); block_bwd (right after block_fwd on the same x) turns dx,
 * the gradient of out, into the gradient of x in place and writes every
 * element of the block's gradient gr.  0 or -errno.
 */
int block_fwd(struct gpt *g, const float *p, const float *x, float *out);
int block_bwd(struct gpt *g, const float *p, float *gr, const float *x,
	      float *dx);

#endif /* HMM_TRAIN_MODEL_H */
