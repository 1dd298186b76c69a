/* SPDX-License-Identifier: MIT */
/*
 * state_priv.h — struct state and what its four files share; the model
 * sees only state.h.
 *
 *   state.c         sizing (chunk, budget, the whole-layer plan), open,
 *                   close, errors
 *   state_store.c   the store file checked and reserved before libhmm
 *                   opens it
 *   state_arrays.c  the arrays as hmm tensors: open, map, prefetch,
 *                   counters, checkpoint flush and tag
 *   state_adamw.c   AdamW over a block: in memory, whole-layer, streamed
 *   state_acts.c    offloaded activations: the model's block inputs as
 *                   hmm tensors in the same context and store
 *
 * Allocated by state_open (state.c), freed by state_close; one thread.
 */
#ifndef HMM_TRAIN_STATE_PRIV_H
#define HMM_TRAIN_STATE_PRIV_H

#include <stdint.h>
#include <time.h>

#include "hmm.h"
#include "state.h"

#define CHUNK_MAX	(2ull << 20)
#define CHUNK_MIN	(16ull << 10)
#define ROUND(x)	(((x) + s->chunk - 1) / s->chunk * s->chunk)

struct state {
	int nblocks;
	size_t *floats;			/* [nblocks] */
	int shared_grad;		/* see state_config */
	size_t grad_floats;		/* the shared gradient's size */
	uint64_t bytes, budget, store_size;
	uint64_t chunk;		/* chunk bytes: a quarter of the largest array */
	uint32_t depth;		/* pieces the optimizer reads ahead */
	int whole;		/* 1: AdamW maps a layer's p, g, m, v whole */
	int keep_p;		/* layers below it keep p after AdamW */
	int pending[2];		/* blocks stepped last, write-back unchecked
				   (-1: none); [1] is the older */
	int offloaded, unlink_store;
	int has_store, reopen, format;	/* see state_config */
	char store_path[4096];
	double map_s;
	/* with a daemon, hmmd's counters are its own since its start, over
	   every client: this run's are those less what they were at open */
	uint64_t base_rd, base_wr;
	double base_stall;
	struct hmm *h;
	struct hmm_tensor **t;		/* [nblocks * ST_KINDS] */
	struct hmm_tensor *tag;		/* "train.ckpt", with a store */
	int act_count;			/* see state_config */
	size_t act_floats;
	struct hmm_tensor **act;	/* [act_count] or NULL */
};

/* Block inputs st_act_room() gives room for in DRAM (state_acts.c). */
#define ACT_ROOM	2

/* state.c: set state_error()'s text; returns err. */
int st_fail(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* state.c: b bytes as "12.3 MiB" into buf. */
void st_human(char *buf, size_t cap, uint64_t b);
/* state.c: the bytes that must be mapped at once (the smallest budget). */
uint64_t st_min_budget(const struct state *s);
/* The same pinned in whole chunks of c bytes (hmmd's, in shared mode). */
uint64_t st_min_budget_in(const struct state *s, uint64_t c);
/* state.c: every array mapped at once in whole chunks of c bytes (what
 * a run kept all in memory may pin). */
uint64_t st_all_in(const struct state *s, uint64_t c);

/* Is array (blk, kind) the shared layer gradient? */
static inline int st_shares_grad(const struct state *s, int blk, int kind)
{
	return s->shared_grad && kind == ST_G && blk < s->nblocks - 1;
}

static inline double st_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* state_store.c: a temporary store path (build/tmp, else $TMPDIR). */
void st_default_store(char *buf, size_t cap);
/* state_store.c: create or open s->store_path and reserve its size. */
int st_store_preflight(struct state *s);

/* state_arrays.c: open libhmm and make (or reopen) every array. */
int st_arrays_open(struct state *s, const struct state_config *cfg);
/* state_acts.c: DRAM the activations need beside the budget (0: none). */
uint64_t st_act_room(const struct state *s);
/* state_acts.c: make the activation tensors (after st_arrays_open). */
int st_acts_open(struct state *s);
/* state_arrays.c: close libhmm (with HMM_TRAIN_STATS, print its stats). */
void st_arrays_close(struct state *s);

#endif /* HMM_TRAIN_STATE_PRIV_H */
