// SPDX-License-Identifier: MIT
/*
 * state_adamw.c — AdamW over one block of the state (state_adamw in
 * state.h): in memory, over a whole mapped layer with its write-back
 * overlapped, or kernels/bind's streamed step (hk_offload.h).
 */
#include <errno.h>
#include <string.h>

#include "hk_offload.h"
#include "optim.h"
#include "state_priv.h"

/*
 * The budget holds the whole state: one in-memory AdamW over the mapped
 * arrays (the offloaded step would evict behind itself and, with a
 * checkpoint store, write the state back every step).  Same bits.
 */
static int adamw_resident(struct state *s, int blk, const struct optim_hp *hp,
			  double wd)
{
	static const unsigned acc[ST_KINDS] = {
		[ST_P] = SM_READ | SM_WRITE, [ST_G] = SM_READ,
		[ST_M] = SM_READ | SM_WRITE, [ST_V] = SM_READ | SM_WRITE,
	};
	float *a[ST_KINDS] = { 0 };
	int err = -EIO;

	for (int k = 0; k < ST_KINDS; k++)
		if (!(a[k] = state_map(s, blk, k, acc[k])))
			goto out;
	err = optim_adamw(hp, wd, a[ST_P], a[ST_G], a[ST_M], a[ST_V],
			  s->floats[blk], hmm_tensor_name(s->t[blk * ST_KINDS]));
	if (err)
		st_fail(err, "AdamW on %s: %s",
		     hmm_tensor_name(s->t[blk * ST_KINDS]), strerror(-err));
out:
	for (int k = ST_KINDS - 1; k >= 0; k--)
		state_unmap(s, blk, k, a[k]);
	return err;
}

/* Wait for the write-backs of block blk's p, m and v; 0 or the error. */
static int wait_block(struct state *s, int blk)
{
	for (int k = ST_P; k <= ST_V; k++) {
		struct hmm_tensor *t = s->t[blk * ST_KINDS + k];
		int err;

		if (k == ST_G)
			continue;
		err = hmm_wait(s->h, t);
		if (err)
			return st_fail(err, "store %s: write-back of %s: %s: %s",
				    s->store_path, hmm_tensor_name(t),
				    hmm_strerror(err), hmm_last_error());
	}
	return 0;
}

/*
 * The budget holds one layer's p, g, m and v at once (next to the
 * embeddings' p and g): AdamW over the whole mapped arrays, whose m and
 * v the model prefetched during the layer's backward (state_prefetch),
 * then evict m, v and p without waiting, so their write-back overlaps
 * the next layer's backward.  Write-back errors are collected two steps
 * later (by then the writes are done: the wait costs nothing) and by
 * the checkpoint's flush.  Layer 0's p stays: the next forward starts
 * with it (keeping more measured no better: they crowd out the reads).  Same kernel, same bits as in memory.
 */
static int adamw_async(struct state *s, int blk, const struct optim_hp *hp,
		       double wd)
{
	struct hmm_tensor **t = &s->t[blk * ST_KINDS];
	int err = 0;

	if (s->pending[1] >= 0)
		err = wait_block(s, s->pending[1]);
	s->pending[1] = s->pending[0];
	s->pending[0] = blk;
	if (err)
		return err;
	err = adamw_resident(s, blk, hp, wd);
	if (err)
		return err;
	hmm_evict(t[ST_M], 0, HMM_ALL, HMM_TIER_HOST);
	hmm_evict(t[ST_V], 0, HMM_ALL, HMM_TIER_HOST);
	if (blk >= s->keep_p && blk + 1 < s->nblocks)
		hmm_evict(t[ST_P], 0, HMM_ALL, HMM_TIER_HOST);
	return 0;
}

int state_adamw(struct state *s, int blk, const struct optim_hp *hp,
		double wd)
{
	struct hmm_tensor **t = &s->t[blk * ST_KINDS];
	struct hk_offload_adamw o = {
		.param = t[ST_P], .grad = t[ST_G], .exp_avg = t[ST_M],
		.exp_avg_sq = t[ST_V], .chunk_bytes = s->chunk,
		.depth = s->depth,
		.hp = { .lr = hp->lr, .beta1 = hp->beta1, .beta2 = hp->beta2,
			.eps = hp->eps, .weight_decay = wd, .step = hp->step,
			.grad_scale = hp->grad_scale,
			.name = hmm_tensor_name(t[ST_P]) },
	};
	double t0 = st_now();
	int err;

	if (!s->offloaded)
		return adamw_resident(s, blk, hp, wd);
	if (s->whole) {
		err = adamw_async(s, blk, hp, wd);
		s->map_s += st_now() - t0;
		return err;
	}
	err = hk_offload_adamw_step(s->h, &o);

	s->map_s += st_now() - t0;
	if (err < 0)
		return st_fail(err, "AdamW on %s: %s", hmm_tensor_name(t[ST_P]),
			    hk_offload_error());
	return 0;
}
