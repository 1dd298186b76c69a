/* SPDX-License-Identifier: MIT */
/*
 * layers.h — the elementwise and row-wise pieces of the GPT, forward and
 * backward, over plain float arrays of `n` rows by `d` columns.
 *
 * Determinism: every function gives bit-identical results run after run
 * and for any thread count: rows are split among hk_parallel() parts,
 * and every sum over rows (parameter gradients) is done by one thread in
 * row order.  Callers own all buffers; nothing here allocates.
 *
 * Threading: call from one thread at a time (they use hk_parallel).
 */
#ifndef HMM_TRAIN_LAYERS_H
#define HMM_TRAIN_LAYERS_H

#include <stddef.h>

/* y = layernorm(x) * g + b; mean[n], rstd[n] kept for the backward. */
void ln_fwd(float *y, float *mean, float *rstd, const float *x,
	    const float *g, const float *b, int n, int d);
/*
 * dx (+)= d layernorm; dg, db are ADDED to (zero them first).  With
 * accumulate != 0 dx is added to, else written.
 */
void ln_bwd(float *dx, float *dg, float *db, const float *dy,
	    const float *x, const float *mean, const float *rstd,
	    const float *g, int n, int d, int accumulate);

/* y = gelu(x) (tanh form), n elements (layers.c says how). */
void gelu_fwd(float *y, const float *x, size_t n);
/* dx = gelu'(x) * dy, n elements (dx may be dy). */
void gelu_bwd(float *dx, const float *x, const float *dy, size_t n);

/*
 * y[r][c] = b[c] + res[r][c] (res may be NULL: y[r][c] = b[c]), n rows
 * of d: the start of a bias (and residual) that a gemm with beta = 1
 * then adds its product to, so that neither needs a pass of its own.
 */
void rows_init(float *y, const float *b, const float *res, int n, int d);
/* db[c] = sum over rows of dy[r][c] (written, not added). */
void bias_grad(float *db, const float *dy, int n, int d);

/*
 * Softmax cross-entropy over n rows of v logits with targets tgt[n].
 * Returns the mean loss (summed in double, row order).  With dlogits
 * != NULL also writes d(mean loss)/d logits (may be `logits` itself).
 */
double xent_fwd_bwd(float *dlogits, const float *logits, const int *tgt,
		    int n, int v);

#endif /* HMM_TRAIN_LAYERS_H */
