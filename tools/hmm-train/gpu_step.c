// SPDX-License-Identifier: MIT
/*
 * gpu_step.c — hmm-train's step on the GPU (gpu.h): model.c's forward
 * and backward and block.c's block, the same operations in the same
 * order, with device pointers: products through cuBLAS, the rest through
 * gpu_kern.cu, all on one stream (gpu_blas.c maps the row-major
 * products onto cuBLAS's column-major ones).
 *
 * Each parameter tensor is mapped at the device tier around its use and
 * the stream is synchronised before it is unmapped (libhmm may then
 * evict it and reuse its memory); the CPU AdamW of a layer runs once its
 * gradient is on the host, while the state prefetches the next layer.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/attn_args.h"
#include "gpu_priv.h"
#include "hk_attn.h"
#include "hmm.h"

#define TPB	256	/* threads per block of the elementwise kernels */
#define WPB	8	/* rows (warps) per block of the row kernels */

struct gpu {
	struct gpu_lib l;
	struct gpt *g;			/* not owned */
	struct gpu_plan plan;
	struct hmm *h;			/* the device context */
	struct hmm_tensor **p;		/* [layers + 1]: parameters */
	struct hmm_tensor *eg, *lg;	/* embeddings' and layers' gradient */
	CUdeviceptr base;		/* the arena's cuMemAlloc */
	struct gpu_arena a;
	float *loss;			/* [n] per-row losses, host */
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

const struct gpu_plan *gpu_plan(const struct gpu *x)
{
	return &x->plan;
}

/* ---- launches ----------------------------------------------------------- */

static int launch(struct gpu *x, CUfunction f, const char *name,
		  uint64_t gx, unsigned gy, unsigned threads, void **args)
{
	if (!gx)
		return 0;
	if (gx > 0x7fffffffu || gy > 65535)
		return gpu_fail(-EINVAL, "%s: grid of %llu x %u blocks",
				name, (unsigned long long)gx, gy);
	return gpu_cu(&x->l, x->l.cu.LaunchKernel(f, (unsigned)gx, gy, 1,
						  threads, 1, 1, 0,
						  x->l.stream, args, NULL),
		      name);
}

#define EW(n)	(((uint64_t)(n) + TPB - 1) / TPB)
#define ROWS(n)	(((uint64_t)(n) + WPB - 1) / WPB)
#define K(name, grid, threads, ...)					\
	({ void *args_[] = { __VA_ARGS__ };				\
	   launch(x, x->l.k.name, #name, grid, 1, threads, args_); })

/* Row-major C = alpha op(A) op(B) + beta C (blas.h), gpu_blas.c. */
static int gemm(struct gpu *x, int ta, int tb, int M, int N, int K,
		float alpha, CUdeviceptr A, int lda, CUdeviceptr B, int ldb,
		float beta, CUdeviceptr C, int ldc)
{
	return gpu_gemm(&x->l.blas, x->l.handle, ta, tb, M, N, K, alpha, A,
			lda, B, ldb, beta, C, ldc);
}

static int sync_stream(struct gpu *x)
{
	return gpu_cu(&x->l, x->l.cu.StreamSynchronize(x->l.stream),
		      "cuStreamSynchronize (a kernel or product failed)");
}

/* ---- layers (layers.c on the device) ------------------------------------ */

static int ln_fwd(struct gpu *x, CUdeviceptr y, CUdeviceptr mean,
		  CUdeviceptr rstd, CUdeviceptr in, CUdeviceptr g,
		  CUdeviceptr b, int n, int d)
{
	return K(ln_fwd, ROWS(n), 32 * WPB, &y, &mean, &rstd, &in, &g, &b,
		 &n, &d);
}

/* dx (+)= d(in); dg, db written (layers.c's ln_bwd on zeroed dg, db) */
static int ln_bwd(struct gpu *x, CUdeviceptr dx, CUdeviceptr dg,
		  CUdeviceptr db, CUdeviceptr dy, CUdeviceptr in,
		  CUdeviceptr mean, CUdeviceptr rstd, CUdeviceptr g, int n,
		  int d, int acc)
{
	return K(ln_bwd_dgdb, EW(d), TPB, &dg, &db, &dy, &in, &mean, &rstd,
		 &n, &d) ?:
	       K(ln_bwd_dx, ROWS(n), 32 * WPB, &dx, &dy, &in, &mean, &rstd,
		 &g, &n, &d, &acc);
}

static int rows_init(struct gpu *x, CUdeviceptr y, CUdeviceptr b,
		     CUdeviceptr res, int n, int d)
{
	return K(rows_init, EW((uint64_t)n * d), TPB, &y, &b, &res, &n, &d);
}

static int bias_grad(struct gpu *x, CUdeviceptr db, CUdeviceptr dy, int n,
		     int d)
{
	return K(bias_grad, EW(d), TPB, &db, &dy, &n, &d);
}

static int gelu(struct gpu *x, int bwd, CUdeviceptr y, CUdeviceptr in,
		CUdeviceptr dy, size_t n)
{
	return bwd ? K(gelu_bwd, EW(n), TPB, &y, &in, &dy, &n) :
		     K(gelu_fwd, EW(n), TPB, &y, &in, &n);
}

/* ---- attention (attn.c on the device) ----------------------------------- */

static struct args attn_args(const struct gpt_config *c)
{
	struct args a = { .B = c->batch, .H = c->heads, .Hkv = c->heads,
			  .Nq = c->ctx, .Nk = c->ctx, .d = c->d / c->heads,
			  .dtype = HK_F32, .causal = 1, .grp = 1, .off = 0 };

	a.scale = 1.0f / sqrtf((float)a.d);	/* hk_attn_resolve's */
	return a;
}

/* attn.c's work layout: q k v o dq dk dv dout, each n*d, then lse */
static CUdeviceptr slot(const struct gpu *x, CUdeviceptr w, int i)
{
	return w + (uint64_t)i * x->g->n * x->g->c.d * sizeof(float);
}

static int pack(struct gpu *x, CUdeviceptr dst, CUdeviceptr src, int ld,
		int off, int back)
{
	const struct gpt_config *c = &x->g->c;
	int B = c->batch, T = c->ctx, d = c->d, H = c->heads;

	return K(pack, EW((uint64_t)B * T * d), TPB, &dst, &src, &ld, &off,
		 &B, &T, &d, &H, &back);
}

static int attn_fwd(struct gpu *x, CUdeviceptr out, CUdeviceptr w,
		    CUdeviceptr qkv)
{
	const struct gpt_config *c = &x->g->c;
	struct args a = attn_args(c);
	CUdeviceptr q = slot(x, w, 0), k = slot(x, w, 1), v = slot(x, w, 2);
	CUdeviceptr o = slot(x, w, 3), lse = slot(x, w, 8);
	int d = c->d;
	void *args[] = { &a, &q, &k, &v, &o, &lse };

	return pack(x, q, qkv, 3 * d, 0, 0) ?: pack(x, k, qkv, 3 * d, d, 0) ?:
	       pack(x, v, qkv, 3 * d, 2 * d, 0) ?:
	       launch(x, x->l.k.attn_fwd, "fwd_simt",
		      (c->ctx + HK_ATTN_SIMT_ROWS - 1) / HK_ATTN_SIMT_ROWS,
		      c->batch * c->heads, 32 * HK_ATTN_SIMT_ROWS, args) ?:
	       pack(x, o, out, d, 0, 1);
}

static int attn_bwd(struct gpu *x, CUdeviceptr dqkv, CUdeviceptr w,
		    CUdeviceptr dout_rows)
{
	const struct gpt_config *c = &x->g->c;
	struct args a = attn_args(c);
	CUdeviceptr q = slot(x, w, 0), k = slot(x, w, 1), v = slot(x, w, 2);
	CUdeviceptr o = slot(x, w, 3), dq = slot(x, w, 4), dk = slot(x, w, 5);
	CUdeviceptr dv = slot(x, w, 6), dout = slot(x, w, 7);
	CUdeviceptr lse = slot(x, w, 8), D = x->a.D;
	uint64_t rows = (uint64_t)c->batch * c->heads * c->ctx;
	unsigned gq = (c->ctx + HK_ATTN_SIMT_ROWS - 1) / HK_ATTN_SIMT_ROWS;
	unsigned bh = c->batch * c->heads, thr = 32 * HK_ATTN_SIMT_ROWS;
	int d = c->d;
	void *ad[] = { &a, &o, &dout, &D };
	void *aq[] = { &a, &q, &k, &v, &lse, &dout, &D, &dq };
	void *ak[] = { &a, &q, &k, &v, &lse, &dout, &D, &dk, &dv };

	return pack(x, dout, dout_rows, d, 0, 0) ?:
	       launch(x, x->l.k.attn_drows, "d_rows",
		      (rows + HK_ATTN_SIMT_ROWS - 1) / HK_ATTN_SIMT_ROWS, 1,
		      thr, ad) ?:
	       launch(x, x->l.k.attn_dq, "bwd_dq", gq, bh, thr, aq) ?:
	       launch(x, x->l.k.attn_dkdv, "bwd_dkdv", gq, bh, thr, ak) ?:
	       pack(x, dq, dqkv, 3 * d, 0, 1) ?:
	       pack(x, dk, dqkv, 3 * d, d, 1) ?:
	       pack(x, dv, dqkv, 3 * d, 2 * d, 1);
}

/* ---- the block (block.c on the device) ---------------------------------- */

#define PF(p, field)	((p) + x->g->L.field * sizeof(float))

static int dblock_fwd(struct gpu *x, CUdeviceptr p, const struct gpu_acts *s,
		     CUdeviceptr in, CUdeviceptr out)
{
	int n = x->g->n, d = x->g->c.d, f = 4 * d;

	return ln_fwd(x, s->h1, s->mean1, s->rstd1, in, PF(p, ln1g),
		      PF(p, ln1b), n, d) ?:
	       rows_init(x, s->qkv, PF(p, bqkv), 0, n, 3 * d) ?:
	       gemm(x, 0, 0, n, 3 * d, d, 1, s->h1, d, PF(p, wqkv), 3 * d, 1,
		    s->qkv, 3 * d) ?:
	       attn_fwd(x, s->a, s->attw, s->qkv) ?:
	       rows_init(x, s->x1, PF(p, bo), in, n, d) ?:
	       gemm(x, 0, 0, n, d, d, 1, s->a, d, PF(p, wo), d, 1, s->x1, d) ?:
	       ln_fwd(x, s->h2, s->mean2, s->rstd2, s->x1, PF(p, ln2g),
		      PF(p, ln2b), n, d) ?:
	       rows_init(x, s->u, PF(p, b1), 0, n, f) ?:
	       gemm(x, 0, 0, n, f, d, 1, s->h2, d, PF(p, w1), f, 1, s->u, f) ?:
	       gelu(x, 0, s->g, s->u, 0, (size_t)n * f) ?:
	       rows_init(x, out, PF(p, b2), s->x1, n, d) ?:
	       gemm(x, 0, 0, n, d, f, 1, s->g, f, PF(p, w2), d, 1, out, d);
}

/* dx: d(out) in, d(in) out; every element of the gradient gr written */
static int dblock_bwd(struct gpu *x, CUdeviceptr p, CUdeviceptr gr,
		     const struct gpu_acts *s, CUdeviceptr in, CUdeviceptr dx)
{
	const struct gpu_arena *A = &x->a;
	int n = x->g->n, d = x->g->c.d, f = 4 * d;

	return gemm(x, 1, 0, f, d, n, 1, s->g, f, dx, d, 0, PF(gr, w2), d) ?:
	       bias_grad(x, PF(gr, b2), dx, n, d) ?:
	       gemm(x, 0, 1, n, f, d, 1, dx, d, PF(p, w2), d, 0, A->dbig, f) ?:
	       gelu(x, 1, A->dbig, s->u, A->dbig, (size_t)n * f) ?:
	       gemm(x, 1, 0, d, f, n, 1, s->h2, d, A->dbig, f, 0, PF(gr, w1),
		    f) ?:
	       bias_grad(x, PF(gr, b1), A->dbig, n, f) ?:
	       gemm(x, 0, 1, n, d, f, 1, A->dbig, f, PF(p, w1), f, 0, A->dh,
		    d) ?:
	       ln_bwd(x, dx, PF(gr, ln2g), PF(gr, ln2b), A->dh, s->x1,
		      s->mean2, s->rstd2, PF(p, ln2g), n, d, 1) ?:
	       gemm(x, 1, 0, d, d, n, 1, s->a, d, dx, d, 0, PF(gr, wo), d) ?:
	       bias_grad(x, PF(gr, bo), dx, n, d) ?:
	       gemm(x, 0, 1, n, d, d, 1, dx, d, PF(p, wo), d, 0, A->da, d) ?:
	       attn_bwd(x, A->dqkv, s->attw, A->da) ?:
	       gemm(x, 1, 0, d, 3 * d, n, 1, s->h1, d, A->dqkv, 3 * d, 0,
		    PF(gr, wqkv), 3 * d) ?:
	       bias_grad(x, PF(gr, bqkv), A->dqkv, n, 3 * d) ?:
	       gemm(x, 0, 1, n, d, 3 * d, 1, A->dqkv, 3 * d, PF(p, wqkv),
		    3 * d, 0, A->dh, d) ?:
	       ln_bwd(x, dx, PF(gr, ln1g), PF(gr, ln1b), A->dh, in, s->mean1,
		      s->rstd1, PF(p, ln1g), n, d, 1);
}

/* ---- device tensors ----------------------------------------------------- */

static int dmap(struct gpu *x, struct hmm_tensor *t, unsigned access,
		CUdeviceptr *p)
{
	void *v;
	int err = hmm_map(t, 0, HMM_ALL, HMM_TIER_DEVICE, access, &v);

	if (err)
		return gpu_fail(err, "device tensor %s: hmm_map: %s",
				hmm_tensor_name(t), hmm_last_error());
	*p = (CUdeviceptr)(uintptr_t)v;
	return 0;
}

static void dunmap(struct hmm_tensor *t, CUdeviceptr *p)
{
	if (*p)
		hmm_unmap(t, (void *)(uintptr_t)*p);
	*p = 0;
}

static size_t blk_floats(const struct gpu *x, int blk)
{
	return blk == x->g->c.layers ? x->g->E.total : x->g->L.total;
}

/* Block blk's parameters from the state up to its device tensor. */
static int upload_p(struct gpu *x, int blk, CUdeviceptr *dp)
{
	size_t bytes = blk_floats(x, blk) * sizeof(float);
	float *hp = state_map(x->g->st, blk, ST_P, SM_READ);
	int err;

	if (!hp)
		return gpu_fail(-EIO, "%s", state_error());
	err = dmap(x, x->p[blk], HMM_DISCARD, dp);
	if (!err)
		err = gpu_cu(&x->l, x->l.cu.MemcpyHtoDAsync(*dp, hp, bytes,
							    x->l.stream),
			     "cuMemcpyHtoDAsync of parameters");
	if (!err)
		err = sync_stream(x);	/* hp is unmapped next */
	state_unmap(x->g->st, blk, ST_P, hp);
	return err;
}

/* The gradient dg of block blk down to the state, then its AdamW. */
static int step_down(struct gpu *x, int blk, CUdeviceptr dg,
		     const struct optim_hp *hp)
{
	size_t bytes = blk_floats(x, blk) * sizeof(float);
	float *g = state_map(x->g->st, blk, ST_G, SM_DISCARD);
	int err;

	if (!g)
		return gpu_fail(-EIO, "%s", state_error());
	err = gpu_cu(&x->l, x->l.cu.MemcpyDtoHAsync(g, dg, bytes, x->l.stream),
		     "cuMemcpyDtoHAsync of a gradient");
	if (!err)
		err = sync_stream(x);
	if (!err) {
		err = gpt_adamw_block(x->g, blk, g, hp);
		if (err)
			gpu_fail(err, "%s", state_error());
	}
	state_unmap(x->g->st, blk, ST_G, g);
	return err;
}

/* ---- the step (model.c's forward and backward) -------------------------- */

static int forward(struct gpu *x, CUdeviceptr ep, double *loss)
{
	struct gpt *g = x->g;
	const struct gpu_arena *A = &x->a;
	int nl = g->c.layers, n = g->n, d = g->c.d, V = g->c.vocab;
	int T = g->c.ctx, err;
	CUdeviceptr wte = ep + g->E.wte * sizeof(float);
	CUdeviceptr wpe = ep + g->E.wpe * sizeof(float);
	CUdeviceptr lnfg = ep + g->E.lnfg * sizeof(float);
	CUdeviceptr lnfb = ep + g->E.lnfb * sizeof(float);
	double s = 0;

	err = K(embed_fwd, EW((uint64_t)n * d), TPB, (void *)&A->x[0], &wte,
		&wpe, (void *)&A->tok, &n, &T, &d);
	for (int l = 0; l < nl && !err; l++) {
		CUdeviceptr p = 0;

		if (l + 1 < nl)
			state_prefetch(g->st, l + 1, ST_P);
		err = upload_p(x, l, &p);
		if (!err)
			err = dblock_fwd(x, p, &A->acts[l], A->x[l], A->x[l + 1]);
		if (!err)
			err = sync_stream(x);	/* before p may be evicted */
		dunmap(x->p[l], &p);
	}
	if (err)
		return err;
	state_prefetch(g->st, nl - 1, ST_M);
	state_prefetch(g->st, nl - 1, ST_V);
	err = ln_fwd(x, A->y, A->meanf, A->rstdf, A->x[nl], lnfg, lnfb, n, d) ?:
	      gemm(x, 0, 1, n, V, d, 1, A->y, d, wte, d, 0, A->logits, V) ?:
	      K(xent, ROWS(n), 32 * WPB, (void *)&A->logits, (void *)&A->loss,
		(void *)&A->tgt, &n, &V) ?:
	      gpu_cu(&x->l, x->l.cu.MemcpyDtoHAsync(x->loss, A->loss,
						    n * sizeof(float),
						    x->l.stream),
		     "cuMemcpyDtoHAsync of the losses") ?:
	      sync_stream(x);
	if (err)
		return err;
	for (int r = 0; r < n; r++)	/* layers.c's order: row by row */
		s += (double)x->loss[r];
	*loss = s / n;
	return 0;
}

static int backward(struct gpu *x, CUdeviceptr ep, CUdeviceptr eg,
		    CUdeviceptr lg, const struct optim_hp *hp)
{
	struct gpt *g = x->g;
	const struct gpu_arena *A = &x->a;
	int nl = g->c.layers, n = g->n, d = g->c.d, V = g->c.vocab;
	int T = g->c.ctx, err;
	CUdeviceptr wte = ep + g->E.wte * sizeof(float);
	CUdeviceptr lnfg = ep + g->E.lnfg * sizeof(float);
	CUdeviceptr gte = eg + g->E.wte * sizeof(float);
	CUdeviceptr gpe = eg + g->E.wpe * sizeof(float);

	err = gemm(x, 1, 0, V, d, n, 1, A->logits, V, A->y, d, 0, gte, d) ?:
	      gemm(x, 0, 0, n, d, V, 1, A->logits, V, wte, d, 0, A->dh, d) ?:
	      ln_bwd(x, A->dx, eg + g->E.lnfg * sizeof(float),
		     eg + g->E.lnfb * sizeof(float), A->dh, A->x[nl], A->meanf,
		     A->rstdf, lnfg, n, d, 0);
	for (int l = nl - 1; l >= 0 && !err; l--) {
		CUdeviceptr p = 0;

		/* the store reads m and v while the GPU computes */
		state_prefetch(g->st, l, ST_M);
		state_prefetch(g->st, l, ST_V);
		err = dmap(x, x->p[l], HMM_READ, &p);
		if (!err)
			err = dblock_bwd(x, p, lg, &A->acts[l], A->x[l], A->dx);
		if (!err)
			err = step_down(x, l, lg, hp);	/* synchronises */
		else
			sync_stream(x);
		dunmap(x->p[l], &p);
	}
	if (err)
		return err;
	return K(wte_bwd, EW(d), TPB, &gte, (void *)&A->dx, (void *)&A->tok,
		 &n, &d) ?:
	       K(wpe_bwd, EW((uint64_t)T * d), TPB, &gpe, (void *)&A->dx, &n,
		 &T, &d) ?:
	       step_down(x, nl, eg, hp);
}

int gpu_step(struct gpu *x, const int *tok, const int *tgt,
	     const struct optim_hp *hp, double *loss)
{
	struct gpt *g = x->g;
	size_t ib = g->n * sizeof(int);
	CUdeviceptr ep = 0, eg = 0, lg = 0;
	double t0 = now(), t1, opt0 = g->t.opt;
	int err;

	if (!hp)
		return gpu_fail(-EINVAL, "gpu_step: no hyper-parameters");
	state_step(g->st, 1);
	err = gpu_cu(&x->l, x->l.cu.CtxSetCurrent(x->l.ctx), "cuCtxSetCurrent");
	if (!err)
		err = gpu_cu(&x->l, x->l.cu.MemcpyHtoDAsync(x->a.tok, tok, ib,
							    x->l.stream),
			     "cuMemcpyHtoDAsync of the tokens") ?:
		      gpu_cu(&x->l, x->l.cu.MemcpyHtoDAsync(x->a.tgt, tgt, ib,
							    x->l.stream),
			     "cuMemcpyHtoDAsync of the targets");
	if (!err)
		err = upload_p(x, g->c.layers, &ep);
	if (!err)
		err = forward(x, ep, loss);
	t1 = now();
	g->t.fwd += t1 - t0;
	if (!err)
		err = dmap(x, x->eg, HMM_DISCARD, &eg) ?:
		      dmap(x, x->lg, HMM_DISCARD, &lg) ?:
		      backward(x, ep, eg, lg, hp);
	sync_stream(x);		/* nothing in flight on what is unmapped */
	g->t.bwd += now() - t1 - (g->t.opt - opt0);
	dunmap(x->lg, &lg);
	dunmap(x->eg, &eg);
	dunmap(x->p[g->c.layers], &ep);
	state_step(g->st, 0);
	return err;
}

/* ---- open and close ----------------------------------------------------- */

static int dev_tensors(struct gpu *x)
{
	int nl = x->g->c.layers, err = 0;
	char name[32];

	x->p = calloc(nl + 1, sizeof(*x->p));
	if (!x->p)
		return gpu_fail(-ENOMEM, "device tensors: no memory");
	for (int i = 0; i <= nl && !err; i++) {
		int64_t shape[1] = { (int64_t)blk_floats(x, i) };

		snprintf(name, sizeof(name), i < nl ? "dev.layer%d.p" :
			 "dev.embed.p", i);
		err = hmm_tensor_new(x->h, name, HMM_DTYPE_F32, 1, shape,
				     &x->p[i]);
	}
	if (!err) {
		int64_t shape[1] = { (int64_t)x->g->E.total };

		snprintf(name, sizeof(name), "dev.embed.g");
		err = hmm_tensor_new(x->h, name, HMM_DTYPE_F32, 1, shape,
				     &x->eg);
	}
	if (!err) {
		int64_t shape[1] = { (int64_t)x->g->L.total };

		snprintf(name, sizeof(name), "dev.layers.g");
		err = hmm_tensor_new(x->h, name, HMM_DTYPE_F32, 1, shape,
				     &x->lg);
	}
	return err ? gpu_fail(err, "device tensor %s: %s", name,
			      hmm_last_error()) : 0;
}

int gpu_open(struct gpt *g, uint64_t budget, struct gpu **out)
{
	struct hmm_config cfg;
	struct gpu *x;
	char why[512];
	int err, nl = g->c.layers;

	*out = NULL;
	x = calloc(1, sizeof(*x));
	if (!x)
		return gpu_fail(-ENOMEM, "no memory");
	x->g = g;
	err = gpu_plan_make(&g->c, GPU_CHUNK, budget, &x->plan, why,
			    sizeof(why));
	if (err) {
		free(x);
		return gpu_fail(err, "%s", why);
	}
	err = gpu_lib_open(&x->l);
	if (err) {
		free(x);
		return err;
	}
	hmm_config_default(&cfg);
	cfg.device = "cuda";
	cfg.device_budget = x->plan.budget;
	cfg.chunk_bytes = (uint32_t)x->plan.chunk;
	/* no store: the host tier holds what the device budget does not */
	cfg.host_budget = x->plan.all_bytes + x->plan.chunk;
	err = hmm_open(&cfg, &x->h);
	if (err) {
		gpu_fail(err, "the device context (device cuda, device budget "
			 "%llu): %s", (unsigned long long)cfg.device_budget,
			 hmm_last_error());
		x->h = NULL;
		goto fail;
	}
	err = dev_tensors(x);
	if (err)
		goto fail;
	x->a.acts = calloc(nl, sizeof(*x->a.acts));
	x->a.x = calloc(nl + 1, sizeof(*x->a.x));
	x->loss = calloc(g->n, sizeof(*x->loss));
	if (!x->a.acts || !x->a.x || !x->loss) {
		err = gpu_fail(-ENOMEM, "no memory");
		goto fail;
	}
	err = gpu_cu(&x->l, x->l.cu.MemAlloc(&x->base, x->plan.act_bytes),
		     "cuMemAlloc of the activations");
	if (err) {
		x->base = 0;
		goto fail;
	}
	gpu_arena_carve(&g->c, x->base, &x->a);
	*out = x;
	return 0;
fail:
	gpu_close(x);
	return err;
}

void gpu_close(struct gpu *x)
{
	if (!x)
		return;
	if (x->base)
		x->l.cu.MemFree(x->base);
	free(x->loss);
	free(x->a.x);
	free(x->a.acts);
	if (x->p)
		for (int i = 0; i <= x->g->c.layers; i++)
			if (x->p[i])
				hmm_tensor_free(x->p[i]);
	if (x->eg)
		hmm_tensor_free(x->eg);
	if (x->lg)
		hmm_tensor_free(x->lg);
	free(x->p);
	if (x->h)
		hmm_close(x->h);
	gpu_lib_close(&x->l);
	free(x);
}
