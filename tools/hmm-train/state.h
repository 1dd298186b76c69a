/* SPDX-License-Identifier: MIT */
/*
 * state.h — where hmm-train keeps its training state: for each block
 * (one per transformer layer, plus the embeddings) four float arrays,
 * the parameters P, gradients G and AdamW moments M and V.
 *
 * Each array is an hmm tensor ("layer3.m", "embed.p") in one libhmm
 * context whose host budget is the run's --host-budget and whose store
 * is --store: the model maps a block's arrays around their use and
 * unmaps them after, and libhmm moves chunks between DRAM and the store
 * to stay within the budget.  When the budget holds the whole state no
 * store is opened, unless cfg->persist asks for one (checkpoints).
 *
 * Checkpoints are flushes, not copies: state_flush() writes the dirty
 * chunks and libhmm's table of named tensors into the store and makes it
 * durable; a later state_open with cfg->reopen opens that store with
 * HMM_CONFIG_STORE_KEEP and hmm_tensor_open()s every array by name
 * (shapes checked).  The store is copy-on-write until the next flush, so
 * training on after a flush (and closing without one) leaves the flushed
 * checkpoint intact; the next flush replaces it.  A small tensor
 * "train.ckpt" holds a tag (state_tag) that ties the store's checkpoint
 * to the checkpoint file that describes it.
 *
 * Ownership: state_open allocates, state_close frees (and removes a store
 * file it created).  Pointers from state_map are valid until the matching
 * state_unmap.  Threading: one thread (the training loop).
 * Errors: 0 or -errno; state_error() says what failed, naming the path,
 * block and array.
 */
#ifndef HMM_TRAIN_STATE_H
#define HMM_TRAIN_STATE_H

#include <stddef.h>
#include <stdint.h>

#define ST_P	0
#define ST_G	1
#define ST_M	2
#define ST_V	3
#define ST_KINDS 4

/* state_map access (the values of HMM_READ / HMM_WRITE / HMM_DISCARD) */
#define SM_READ		(1u << 0)
#define SM_WRITE	(1u << 1)
#define SM_DISCARD	(1u << 2)

struct state_config {
	uint64_t host_budget;	/* bytes; 0: the state / budget_div;
				   >= state bytes: all in memory */
	int budget_div;		/* with host_budget 0; 0 = 4 */
	const char *store_path;	/* NULL: a temporary file, removed at close
				   (only without persist/reopen) */
	int persist;		/* 1: always use a store (store_path), even
				   when the budget holds everything */
	int reopen;		/* 1: open store_path's saved arrays (it
				   must exist) instead of making new ones */
	int format;		/* 1: format store_path whatever it holds
				   (HMM_CONFIG_STORE_FORMAT); 0: refuse
				   foreign data and named tensors */
	const char *daemon;	/* hmmd socket or NULL */
	int nblocks;
	const size_t *floats;	/* [nblocks]: floats per array of block i */
	const char *const *names;	/* [nblocks]: "layer0", "embed" */
	/*
	 * 1: the layers (blocks 0 .. nblocks-2) share one gradient tensor
	 * "layers.g", sized for the largest: a layer's gradient is written
	 * in its backward and consumed by its AdamW step right after, so
	 * one buffer serves all, stays hot in DRAM and is never written
	 * back to the store.  0: one G per block (tests read them all).
	 */
	int shared_grad;
	/* struct hmm_config's I/O and thread knobs; 0 = libhmm's default */
	uint32_t pool_bytes, io_depth, queue_depth, kernel_threads;
	/*
	 * Offloaded activations: act_count tensors of act_floats floats
	 * each (the model's block inputs), in this context and its store
	 * (a store is opened for them even when the state fits in the
	 * budget).  The host budget gets room for ACT_ROOM of them on top,
	 * so the state's own plan is unchanged.  0: none.
	 */
	int act_count;
	size_t act_floats;
};

/* Counters for progress and the report; cumulative since state_open. */
struct state_sample {
	uint64_t host_resident;		/* bytes of state in DRAM now */
	uint64_t host_peak;
	uint64_t store_resident;	/* bytes of state held by the store */
	uint64_t store_read_bytes, store_write_bytes;
	double stall_s;			/* maps waiting for the store */
	double map_s;			/* wall time inside state_map */
	/* the knobs in force (hmm_stats): kernel threads, and the store's
	   pool, ring and I/O depth (0 without a store) */
	uint32_t kernel_threads, queue_depth, io_depth;
	uint64_t pool_bytes;
};

struct state;

int state_open(const struct state_config *cfg, struct state **out);
void state_close(struct state *s);

uint64_t state_bytes(const struct state *s);	/* all arrays, exact */
uint64_t state_budget(const struct state *s);	/* host budget in force */
int state_offloaded(const struct state *s);	/* 1: budget < state */
int state_has_store(const struct state *s);	/* 1: a store is in use */
const char *state_store_path(const struct state *s);

float *state_map(struct state *s, int blk, int kind, unsigned access);
/* Floats [off, off + n) of an array; unmap with state_unmap. */
float *state_map_range(struct state *s, int blk, int kind, size_t off,
		       size_t n, unsigned access);
size_t state_chunk_floats(const struct state *s);	/* libhmm's chunk */
void state_unmap(struct state *s, int blk, int kind, float *p);
void state_sample(struct state *s, struct state_sample *out);

/*
 * AdamW on block blk (p, its g, m, v), weight decay wd on every element.
 * In memory: one AdamW over the mapped arrays.  Offloaded, when the
 * budget holds a layer's four arrays beside the embeddings' p and g: the
 * same over the whole mapped arrays (m and v should have been
 * state_prefetch'ed during the block's backward), then m, v and p (not
 * layer 0's nor the embeddings') are evicted without waiting; a
 * write-back error is returned by the call two later, or by the flush.
 * Otherwise kernels/bind's streamed step (hk_offload.h), piece by piece.
 * Same bits every way.
 */
struct optim_hp;
int state_adamw(struct state *s, int blk, const struct optim_hp *hp,
		double wd);
/*
 * Start reading array (blk, kind) into DRAM without waiting (no-op in
 * memory, and for the shared gradient); chunks with no room are skipped.
 */
void state_prefetch(struct state *s, int blk, int kind);
/*
 * Activation i (0 .. act_count-1; state_config): map it whole at the
 * host (SM_DISCARD to overwrite it, SM_READ to read it back), unmap it
 * and with evict start writing it to the store and dropping it from
 * DRAM without waiting; prefetch starts reading it back (out-of-range i:
 * no-op).  A failed
 * write-back leaves the chunk in DRAM, dirty: the next map reads it
 * there; a failed read-in fails the map (NULL, state_error()).
 */
float *state_act_map(struct state *s, int i, unsigned access);
void state_act_unmap(struct state *s, int i, float *p, int evict);
void state_act_prefetch(struct state *s, int i);
/* Mark a training step for libhmm's schedule-aware policy. */
void state_step(struct state *s, int begin);

/*
 * Checkpoint: write every dirty chunk and the table of tensors to the
 * store and make it durable (hmm_flush).  *flush_bytes (may be NULL)
 * gets the bytes the flush wrote to the store.  -ENODEV without a store.
 */
int state_flush(struct state *s, uint64_t *flush_bytes);
/* Read (write = 0) or write the store's 4-word checkpoint tag. */
int state_tag(struct state *s, uint64_t tag[4], int write);

const char *state_error(void);
/* The -errno of that failure (0 before any). */
int state_errno(void);

#endif /* HMM_TRAIN_STATE_H */
