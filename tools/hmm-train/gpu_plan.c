// SPDX-License-Identifier: MIT
/*
 * gpu_plan.c — the device side's sizes, from the model alone (gpu.h,
 * gpu_priv.h): the device tensors under the budget, and the arena of
 * activations beside it.  No GPU needed: test_gpu_plan checks it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "attn.h"
#include "gpu_priv.h"

static uint64_t up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

int gpu_plan_make(const struct gpt_config *c, uint64_t chunk,
		  uint64_t budget, struct gpu_plan *p, char *why,
		  size_t why_n)
{
	int nl = c->layers;
	struct gpu_arena a;
	size_t f[2];

	memset(p, 0, sizeof(*p));
	if (!chunk || chunk % 4096 || nl < 1) {
		snprintf(why, why_n, "device plan: chunk %llu, %d layers",
			 (unsigned long long)chunk, nl);
		return -EINVAL;
	}
	/* what the kernels can take: attn_simt.cuh keeps a head's row in
	 * 256 floats of shared memory, its grids put batch x heads in y
	 * (at most 65535), and the element kernels index in int */
	if (c->heads < 1 || c->d % c->heads || c->d / c->heads > GPU_HEAD_MAX) {
		snprintf(why, why_n, "device plan: width %d in %d heads: "
			 "the CUDA attention needs heads dividing the width "
			 "and at most %d per head", c->d, c->heads,
			 GPU_HEAD_MAX);
		return -EINVAL;
	}
	if ((uint64_t)c->batch * c->heads > 65535) {
		snprintf(why, why_n, "device plan: batch %d x %d heads = "
			 "%llu attention blocks in y: at most 65535",
			 c->batch, c->heads,
			 (unsigned long long)c->batch * c->heads);
		return -EINVAL;
	}
	{
		uint64_t n = (uint64_t)c->batch * c->ctx;
		uint64_t big = n * (uint64_t)(c->vocab > 4 * c->d ?
					      c->vocab : 4 * c->d);

		if (big >= 1ull << 31) {
			snprintf(why, why_n, "device plan: batch %d x context "
				 "%d makes an array of %llu floats: the "
				 "kernels index under 2^31", c->batch, c->ctx,
				 (unsigned long long)big);
			return -EINVAL;
		}
	}
	/* layer 0's and the embeddings' sizes (every layer is alike) */
	{
		struct gpt_config one = *c;

		one.layers = 1;
		gpt_block_floats(&one, f);
	}
	p->chunk = chunk;
	p->layers = nl;
	p->layer_p = p->layer_g = up(f[0] * sizeof(float), chunk);
	p->embed_p = p->embed_g = up(f[1] * sizeof(float), chunk);
	p->min_bytes = p->embed_p + p->embed_g + p->layer_p + p->layer_g;
	p->all_bytes = p->min_bytes + (uint64_t)(nl - 1) * p->layer_p;
	p->budget = budget ? budget : p->all_bytes;
	if (p->budget < p->min_bytes) {
		snprintf(why, why_n, "%llu bytes is too small: one "
			 "layer's backward pins %llu bytes on the device (the "
			 "embeddings' parameters and gradient, a layer's "
			 "parameters and the layer gradient, in %llu-byte "
			 "chunks); %llu holds everything",
			 (unsigned long long)p->budget,
			 (unsigned long long)p->min_bytes,
			 (unsigned long long)chunk,
			 (unsigned long long)p->all_bytes);
		return -EINVAL;
	}
	if (p->budget > p->all_bytes)
		p->budget = p->all_bytes;
	p->budget -= p->budget % chunk;	/* whole chunks: >= min_bytes */
	p->resident_layers = 1 + (int)((p->budget - p->min_bytes) /
				       p->layer_p);
	if (p->resident_layers > nl)
		p->resident_layers = nl;
	/* the arena's size: a count-only carve */
	memset(&a, 0, sizeof(a));
	gpu_arena_carve(c, 0, &a);
	p->act_bytes = a.bytes;
	return 0;
}

/* 256-byte aligned pieces, in a fixed order: the same layout each run. */
static CUdeviceptr take(CUdeviceptr *at, uint64_t bytes)
{
	CUdeviceptr p = *at;

	*at += up(bytes ? bytes : 1, 256);
	return p;
}

void gpu_arena_carve(const struct gpt_config *c, CUdeviceptr base,
		     struct gpu_arena *a)
{
	uint64_t n = (uint64_t)c->batch * c->ctx, d = c->d, F = 4;
	uint64_t nd = n * d * F, nf = n * F;
	uint64_t attw = attn_work_floats(c->batch, c->ctx, c->d, c->heads) * F;
	CUdeviceptr at = base;

	for (int l = 0; l < c->layers; l++) {
		struct gpu_acts one, *s = a->acts ? &a->acts[l] : &one;

		s->h1 = take(&at, nd), s->mean1 = take(&at, nf);
		s->rstd1 = take(&at, nf), s->qkv = take(&at, 3 * nd);
		s->attw = take(&at, attw), s->a = take(&at, nd);
		s->x1 = take(&at, nd), s->h2 = take(&at, nd);
		s->mean2 = take(&at, nf), s->rstd2 = take(&at, nf);
		s->u = take(&at, 4 * nd), s->g = take(&at, 4 * nd);
	}
	for (int l = 0; l <= c->layers; l++) {
		CUdeviceptr x = take(&at, nd);

		if (a->x)
			a->x[l] = x;
	}
	a->dbig = take(&at, 4 * nd), a->dh = take(&at, nd);
	a->da = take(&at, nd), a->dqkv = take(&at, 3 * nd);
	a->dx = take(&at, nd), a->y = take(&at, nd);
	a->meanf = take(&at, nf), a->rstdf = take(&at, nf);
	a->logits = take(&at, nf * c->vocab), a->loss = take(&at, nf);
	a->D = take(&at, (uint64_t)c->batch * c->heads * c->ctx * F);
	a->tok = take(&at, n * sizeof(int)), a->tgt = take(&at, n * sizeof(int));
	a->bytes = at - base;
}
