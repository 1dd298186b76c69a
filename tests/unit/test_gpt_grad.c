// SPDX-License-Identifier: MIT
/*
 * test_gpt_grad — hmm-train's GPT backward against finite differences.
 *
 * The model is hmm-train's own archive ($(B)/lib/libhmmtrain.a: the
 * model, its layers, attention, AdamW and the state), linked with a plain
 * double-accumulating gemm() here in place of OpenBLAS (blas.c).  For each block (every layer, the embeddings) the analytic
 * gradient's directional derivative g.u along a random direction u is
 * compared with (L(p + h u) - L(p - h u)) / 2h, and so are a few single
 * elements of every array in a layer (weights, biases, LayerNorm).
 * GELU (forward and derivative, on the path hk_isa() picks: HK_ISA=scalar
 * forces the plain one) against the fp64 tanh formula, tails included.
 * Keeping the activations (gpt_keep_activations) instead of recomputing
 * each block must give the same loss and gradients, bit for bit.
 * Then 30 AdamW steps on one batch must drive the loss down (the
 * optimizer is wired to the gradients), and two runs from the same seed
 * must give bit-identical losses.
 */
#include <math.h>

#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "hk.h"
#include "layers.h"
#include "model.h"
#include "state.h"
#include "t.h"

void gemm(int ta, int tb, int M, int N, int K, float alpha,
	  const float *A, int lda, const float *B, int ldb, float beta,
	  float *C, int ldc)
{
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			double s = 0;

			for (int k = 0; k < K; k++)
				s += (double)(ta ? A[k * lda + i] : A[i * lda + k]) *
				     (tb ? B[j * ldb + k] : B[k * ldb + j]);
			C[i * ldc + j] = alpha * s +
					 (beta ? beta * C[i * ldc + j] : 0);
		}
}

static const struct gpt_config cfg = { .vocab = 256, .ctx = 8, .d = 16,
				       .heads = 2, .layers = 2, .batch = 2 };
static int tok[16], tgt[16];

static double loss_of(struct gpt *g)
{
	double l;

	if (gpt_step(g, tok, tgt, NULL, &l))
		t_fail_all("gpt_step failed: %s", state_error());
	return l;
}

static struct state *open_mem(void)
{
	size_t sizes[3];
	const char *names[3] = { "layer0", "layer1", "embed" };
	struct state_config sc = { .host_budget = 1ull << 40, .nblocks = 3,
				   .floats = sizes, .names = names };
	struct state *st;

	gpt_block_floats(&cfg, sizes);
	if (state_open(&sc, &st))
		t_fail_all("state_open: %s", state_error());
	return st;
}

/* Directional check on block blk; returns relative error. */
static double check_dir(struct gpt *g, int blk, uint64_t seed)
{
	size_t n = blk == cfg.layers ? g->E.total : g->L.total;
	float *p = state_map(g->st, blk, ST_P, SM_READ | SM_WRITE);
	float *gr = state_map(g->st, blk, ST_G, SM_READ);
	float *save = malloc(n * 4), *u = malloc(n * 4);
	double dot = 0, h = 1e-3, lp, lm, fd;

	memcpy(save, p, n * 4);
	for (size_t i = 0; i < n; i++) {
		u[i] = (t_rand(&seed) >> 11) * 0x1.0p-53 * 2 - 1;
		dot += (double)gr[i] * u[i];
	}
	for (size_t i = 0; i < n; i++)
		p[i] = save[i] + h * u[i];
	lp = loss_of(g);
	for (size_t i = 0; i < n; i++)
		p[i] = save[i] - h * u[i];
	lm = loss_of(g);
	memcpy(p, save, n * 4);
	loss_of(g);	/* gradients back to those of save */
	fd = (lp - lm) / (2 * h);
	t_diag("block %d: analytic %.6g, finite difference %.6g", blk, dot, fd);
	free(save);
	free(u);
	return fabs(dot - fd) / (fabs(fd) + 0.1);
}

/* Single element i of block blk: |analytic - fd| small. */
static int check_one(struct gpt *g, int blk, size_t i, const char *what)
{
	float *p = state_map(g->st, blk, ST_P, SM_READ | SM_WRITE);
	float *gr = state_map(g->st, blk, ST_G, SM_READ);
	float save = p[i], an = gr[i];
	double h = 1e-2, lp, lm, fd;

	p[i] = save + h;
	lp = loss_of(g);
	p[i] = save - h;
	lm = loss_of(g);
	p[i] = save;
	loss_of(g);
	fd = (lp - lm) / (2 * h);
	return t_ok(fabs(an - fd) <= 2e-3 + 0.05 * fabs(fd),
		    "%s[%zu]: analytic %.6g vs finite difference %.6g", what, i,
		    an, fd);
}

/* gelu_fwd / gelu_bwd against fp64 over [-12, 12] and far tails. */
static void check_gelu(void)
{
	enum { N = 4096 };
	static float x[N], y[N], dy[N], dx[N];
	const double k = 0.7978845608028654, c = 0.044715;
	double worst = 0, worst_d = 0;

	for (int i = 0; i < N; i++) {
		x[i] = -12 + 24.0f * i / N;
		dy[i] = 1;
	}
	x[0] = -1e4f, x[1] = 1e4f, x[2] = -90, x[3] = 90, x[4] = 0;
	gelu_fwd(y, x, N);
	gelu_bwd(dx, x, dy, N);
	for (int i = 0; i < N; i++) {
		double v = x[i], t = tanh(k * (v + c * v * v * v));
		double ref = 0.5 * v * (1 + t);
		double dref = 0.5 * (1 + t) +
			      0.5 * v * (1 - t * t) * k * (1 + 3 * c * v * v);
		double e = fabs(y[i] - ref) / (1e-6 + fabs(ref));
		double ed = fabs(dx[i] - dref) / (1 + fabs(dref));

		worst = e > worst ? e : worst;
		worst_d = ed > worst_d ? ed : worst_d;
	}
	t_ok(worst < 1e-5, "gelu (%s path) vs fp64: worst relative error %.2g",
	     hk_isa_name(hk_isa()), worst);
	t_ok(worst_d < 2e-6, "gelu derivative vs fp64: worst error / (1 + |d|) "
	     "%.2g", worst_d);
}

/* Every block's gradient, concatenated, into a new buffer. */
static float *grads(struct gpt *g, size_t *len)
{
	size_t n = g->L.total * cfg.layers + g->E.total, o = 0;
	float *all = malloc(n * sizeof(float));

	for (int b = 0; b <= cfg.layers; b++) {
		size_t k = b == cfg.layers ? g->E.total : g->L.total;
		float *gr = state_map(g->st, b, ST_G, SM_READ);

		memcpy(all + o, gr, k * sizeof(float));
		state_unmap(g->st, b, ST_G, gr);
		o += k;
	}
	*len = n;
	return all;
}

/* Kept activations: the recomputing step's loss and gradients exactly. */
static void check_keep(struct gpt *g)
{
	double l0 = loss_of(g), l1;
	size_t n;
	float *g0 = grads(g, &n), *g1;

	t_eq(gpt_keep_activations(g), 0, "gpt_keep_activations");
	l1 = loss_of(g);
	g1 = grads(g, &n);
	t_ok(l0 == l1 && !memcmp(g0, g1, n * sizeof(float)),
	     "kept activations: loss and all %zu gradients bit-identical "
	     "to the recomputing step", n);
	free(g0);
	free(g1);
}

int main(void)
{
	struct state *st = open_mem();
	struct gpt *g;
	uint64_t s = 7;
	double l0, l1, la[5], lb[5];
	const struct gpt_layer_layout *L;

	for (int i = 0; i < 16; i++) {
		tok[i] = 'a' + t_rand(&s) % 8;
		tgt[i] = 'a' + (tok[i] - 'a' + 1) % 8;
	}
	check_gelu();
	t_eq(gpt_new(&cfg, st, &g), 0, "gpt_new");
	t_eq(gpt_init(g, 3), 0, "gpt_init");
	L = &g->L;
	loss_of(g);
	for (int b = 0; b <= cfg.layers; b++)
		t_ok(check_dir(g, b, 100 + b) < 0.02,	/* float noise */
		     "block %d: directional derivative matches", b);
	check_one(g, 1, L->wqkv + 5, "wqkv");
	check_one(g, 1, L->wqkv + 16 * 48 - 3, "wqkv(v part)");
	check_one(g, 1, L->wo + 17, "wo");
	check_one(g, 0, L->w1 + 40, "w1");
	check_one(g, 0, L->w2 + 300, "w2");
	check_one(g, 0, L->bqkv + 20, "bqkv");
	check_one(g, 0, L->b1 + 3, "b1");
	check_one(g, 1, L->ln1g + 2, "ln1 gain");
	check_one(g, 1, L->ln2b + 9, "ln2 bias");
	check_one(g, 2, g->E.wte + tok[3] * 16 + 4, "wte");
	check_one(g, 2, g->E.wpe + 2 * 16 + 1, "wpe");
	check_one(g, 2, g->E.lnfg + 7, "lnf gain");
	check_keep(g);

	/* the optimizer is wired: overfitting one batch lowers the loss */
	{
		struct optim_hp hp = { .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95,
				       .eps = 1e-8 };

		l0 = loss_of(g);
		for (int i = 1; i <= 30; i++) {
			hp.step = i;
			gpt_step(g, tok, tgt, &hp, &l1);
			if (i <= 5)
				la[i - 1] = l1;
		}
		l1 = loss_of(g);
		t_ok(l1 < 0.5 * l0, "30 AdamW steps: loss %.4f -> %.4f", l0, l1);
	}
	/* same seed, same steps: the same bits */
	gpt_init(g, 3);
	for (int i = 1; i <= 5; i++) {
		struct optim_hp hp = { .lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95,
				       .eps = 1e-8, .step = i };

		gpt_step(g, tok, tgt, &hp, &lb[i - 1]);
	}
	t_ok(!memcmp(la, lb, sizeof(la)), "re-run from the same seed: "
	     "bit-identical losses");
	gpt_free(g);
	state_close(st);
	return t_done();
}
