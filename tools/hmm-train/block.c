// SPDX-License-Identifier: MIT
/*
 * block.c — one pre-LayerNorm transformer block, forward and backward
 * (model.h):
 *
 *	h1 = ln1(x)	qkv = h1 Wqkv + bqkv	a = attn(qkv)
 *	x1 = x + a Wo + bo
 *	h2 = ln2(x1)	u = h2 W1 + b1	g = gelu(u)
 *	out = x1 + g W2 + b2
 *
 * Each bias (and residual) is written first (rows_init) and the gemm adds
 * its product to it (beta = 1): one pass over the output, not three.
 */
#include <string.h>

#include "attn.h"
#include "blas.h"
#include "layers.h"
#include "model.h"

int block_fwd(struct gpt *g, const float *p, const float *x, float *out)
{
	const struct gpt_layer_layout *L = &g->L;
	int n = g->n, d = g->c.d, f = 4 * d, err;

	ln_fwd(g->h1, g->mean1, g->rstd1, x, p + L->ln1g, p + L->ln1b, n, d);
	rows_init(g->qkv, p + L->bqkv, NULL, n, 3 * d);
	gemm(0, 0, n, 3 * d, d, 1, g->h1, d, p + L->wqkv, 3 * d, 1, g->qkv,
	     3 * d);
	err = attn_fwd(g->a, g->attw, g->qkv, g->c.batch, g->c.ctx, d,
		       g->c.heads);
	if (err)
		return err;
	rows_init(g->x1, p + L->bo, x, n, d);
	gemm(0, 0, n, d, d, 1, g->a, d, p + L->wo, d, 1, g->x1, d);
	ln_fwd(g->h2, g->mean2, g->rstd2, g->x1, p + L->ln2g, p + L->ln2b, n,
	       d);
	rows_init(g->u, p + L->b1, NULL, n, f);
	gemm(0, 0, n, f, d, 1, g->h2, d, p + L->w1, f, 1, g->u, f);
	gelu_fwd(g->g, g->u, (size_t)n * f);
	rows_init(out, p + L->b2, g->x1, n, d);
	gemm(0, 0, n, d, f, 1, g->g, f, p + L->w2, d, 1, out, d);
	return 0;
}

int block_bwd(struct gpt *g, const float *p, float *gr, const float *x,
	      float *dx)
{
	const struct gpt_layer_layout *L = &g->L;
	int n = g->n, d = g->c.d, f = 4 * d, err;

	/* MLP: dx is d(out) = d(g W2 + b2) and part of d(x1) */
	gemm(1, 0, f, d, n, 1, g->g, f, dx, d, 0, gr + L->w2, d);
	bias_grad(gr + L->b2, dx, n, d);
	gemm(0, 1, n, f, d, 1, dx, d, p + L->w2, d, 0, g->dbig, f);
	gelu_bwd(g->dbig, g->u, g->dbig, (size_t)n * f);
	gemm(1, 0, d, f, n, 1, g->h2, d, g->dbig, f, 0, gr + L->w1, f);
	bias_grad(gr + L->b1, g->dbig, n, f);
	gemm(0, 1, n, d, f, 1, g->dbig, f, p + L->w1, f, 0, g->dh, d);
	memset(gr + L->ln2g, 0, sizeof(float) * d);
	memset(gr + L->ln2b, 0, sizeof(float) * d);
	ln_bwd(dx, gr + L->ln2g, gr + L->ln2b, g->dh, g->x1, g->mean2,
	       g->rstd2, p + L->ln2g, n, d, 1);

	/* attention: dx is now d(x1) = d(a Wo + bo) and part of d(x) */
	gemm(1, 0, d, d, n, 1, g->a, d, dx, d, 0, gr + L->wo, d);
	bias_grad(gr + L->bo, dx, n, d);
	gemm(0, 1, n, d, d, 1, dx, d, p + L->wo, d, 0, g->da, d);
	err = attn_bwd(g->dqkv, g->attw, g->da, g->c.batch, g->c.ctx, d,
		       g->c.heads);
	if (err)
		return err;
	gemm(1, 0, d, 3 * d, n, 1, g->h1, d, g->dqkv, 3 * d, 0, gr + L->wqkv,
	     3 * d);
	bias_grad(gr + L->bqkv, g->dqkv, n, 3 * d);
	gemm(0, 1, n, d, 3 * d, 1, g->dqkv, 3 * d, p + L->wqkv, 3 * d, 0,
	     g->dh, d);
	memset(gr + L->ln1g, 0, sizeof(float) * d);
	memset(gr + L->ln1b, 0, sizeof(float) * d);
	ln_bwd(dx, gr + L->ln1g, gr + L->ln1b, g->dh, x, g->mean1, g->rstd1,
	       p + L->ln1g, n, d, 1);
	return 0;
}
