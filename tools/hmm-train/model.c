// SPDX-License-Identifier: MIT
/*
 * model.c — the GPT's layout, initialisation and training step
 * (model.h).  Rows are tokens: n = batch * ctx rows of d floats,
 * row-major; weights are [in][out] so that y = x W is gemm(x, W).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attn.h"
#include "blas.h"
#include "layers.h"
#include "model.h"

static double gpt_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void layer_layout(const struct gpt_config *c, struct gpt_layer_layout *L)
{
	size_t d = c->d, f = 4 * d, o = 0;

	L->wqkv = o, o += d * 3 * d;
	L->wo = o, o += d * d;
	L->w1 = o, o += d * f;
	L->w2 = o, o += f * d;
	L->decay_end = o;
	L->bqkv = o, o += 3 * d;
	L->bo = o, o += d;
	L->b1 = o, o += f;
	L->b2 = o, o += d;
	L->ln1g = o, o += d;
	L->ln1b = o, o += d;
	L->ln2g = o, o += d;
	L->ln2b = o, o += d;
	L->total = o;
}

static void embed_layout(const struct gpt_config *c, struct gpt_embed_layout *E)
{
	size_t o = 0;

	E->wte = o, o += (size_t)c->vocab * c->d;
	E->wpe = o, o += (size_t)c->ctx * c->d;
	E->decay_end = o;
	E->lnfg = o, o += c->d;
	E->lnfb = o, o += c->d;
	E->total = o;
}

void gpt_block_floats(const struct gpt_config *c, size_t *sizes)
{
	struct gpt_layer_layout L;
	struct gpt_embed_layout E;

	layer_layout(c, &L);
	embed_layout(c, &E);
	for (int i = 0; i < c->layers; i++)
		sizes[i] = L.total;
	sizes[c->layers] = E.total;
}

size_t gpt_params(const struct gpt_config *c)
{
	struct gpt_layer_layout L;
	struct gpt_embed_layout E;

	layer_layout(c, &L);
	embed_layout(c, &E);
	return L.total * c->layers + E.total;
}

double gpt_step_flops(const struct gpt_config *c, int recompute)
{
	double n = (double)c->batch * c->ctx, d = c->d, T = c->ctx;
	double mm = 2 * n * 12 * d * d * c->layers;	/* one pass, blocks */
	double at = 2 * 2 * n * T / 2 * d * c->layers;	/* causal: half */
	double head = 2 * n * d * c->vocab;

	/* forward, forward again (recompute), backward = 2x forward */
	return (recompute ? 4 : 3) * (mm + at) + 3 * head;
}

static float *get(float **buf, size_t n, int *fail)
{
	*buf = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
	if (!*buf)
		*fail = 1;
	return *buf;
}

/* The arrays of one set, in floats, in gpt_acts order. */
static void acts_floats(const struct gpt_config *c, size_t f[12])
{
	size_t n = (size_t)c->batch * c->ctx, d = c->d;
	size_t v[12] = { n * d, n, n, n * 3 * d,
			 attn_work_floats(c->batch, c->ctx, d, c->heads),
			 n * d, n * d, n * d, n, n, n * 4 * d, n * 4 * d };

	memcpy(f, v, sizeof(v));
}

static float **acts_slot(struct gpt_acts *a, int i)
{
	float **s[12] = { &a->h1, &a->mean1, &a->rstd1, &a->qkv, &a->attw,
			  &a->a, &a->x1, &a->h2, &a->mean2, &a->rstd2, &a->u,
			  &a->g };

	return s[i];
}

static void acts_new(const struct gpt_config *c, struct gpt_acts *a,
		     int *fail)
{
	size_t f[12];

	acts_floats(c, f);
	for (int i = 0; i < 12; i++)
		get(acts_slot(a, i), f[i], fail);
}

static void acts_free(struct gpt_acts *a)
{
	for (int i = 0; i < 12; i++)
		free(*acts_slot(a, i));
}

/* Point the block's working arrays at set a. */
static void use_acts(struct gpt *g, const struct gpt_acts *a)
{
	g->h1 = a->h1, g->mean1 = a->mean1, g->rstd1 = a->rstd1;
	g->qkv = a->qkv, g->attw = a->attw, g->a = a->a, g->x1 = a->x1;
	g->h2 = a->h2, g->mean2 = a->mean2, g->rstd2 = a->rstd2;
	g->u = a->u, g->g = a->g;
}

size_t gpt_keep_bytes(const struct gpt_config *c)
{
	size_t f[12], s = 0;

	acts_floats(c, f);
	for (int i = 0; i < 12; i++)
		s += f[i];
	return s * sizeof(float) * (c->layers - 1);	/* set 0 is g->one */
}

int gpt_keep_activations(struct gpt *g)
{
	int fail = 0, nl = g->c.layers;

	if (g->kept)
		return 0;
	if (g->xp)
		return -EINVAL;
	g->kept = calloc(nl, sizeof(*g->kept));
	if (!g->kept)
		return -ENOMEM;
	g->kept[0] = g->one;
	for (int l = 1; l < nl; l++)
		acts_new(&g->c, &g->kept[l], &fail);
	if (fail) {
		for (int l = 1; l < nl; l++)
			acts_free(&g->kept[l]);
		free(g->kept);
		g->kept = NULL;
		return -ENOMEM;
	}
	return 0;
}

size_t gpt_act_floats(const struct gpt_config *c)
{
	return (size_t)c->batch * c->ctx * c->d;
}

uint64_t gpt_act_offloaded_bytes(const struct gpt_config *c)
{
	return (uint64_t)(c->layers - 1) * gpt_act_floats(c) * sizeof(float);
}

int gpt_offload_activations(struct gpt *g)
{
	if (g->kept || g->xp)
		return -EINVAL;
	g->xp = calloc(g->c.layers + 1, sizeof(*g->xp));
	if (!g->xp)
		return -ENOMEM;
	free(g->acts);
	g->acts = NULL;
	return 0;
}

int gpt_new(const struct gpt_config *c, struct state *st, struct gpt **out)
{
	struct gpt *g;
	size_t n, d = c->d, f = 4 * c->d;
	int fail = 0;

	*out = NULL;
	if (c->d % c->heads || c->vocab < 2 || c->ctx < 1 || c->batch < 1 ||
	    c->layers < 1)
		return -EINVAL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->c = *c;
	g->st = st;
	g->n = n = (size_t)c->batch * c->ctx;
	g->weight_decay = 0.1;
	g->clip = 1.0;
	layer_layout(c, &g->L);
	embed_layout(c, &g->E);
	get(&g->acts, (c->layers + 1) * n * d, &fail);
	acts_new(c, &g->one, &fail);
	use_acts(g, &g->one);
	get(&g->out, n * d, &fail);
	get(&g->dbig, n * f, &fail);
	get(&g->dh, n * d, &fail);
	get(&g->da, n * d, &fail);
	get(&g->dqkv, n * 3 * d, &fail);
	get(&g->dx, n * d, &fail);
	get(&g->y, n * d, &fail);
	get(&g->meanf, n, &fail);
	get(&g->rstdf, n, &fail);
	get(&g->logits, n * c->vocab, &fail);
	if (fail) {
		gpt_free(g);
		return -ENOMEM;
	}
	*out = g;
	return 0;
}

void gpt_free(struct gpt *g)
{
	if (!g)
		return;
	free(g->acts);
	free(g->xp);
	if (g->kept)
		for (int l = 1; l < g->c.layers; l++)
			acts_free(&g->kept[l]);
	free(g->kept);
	acts_free(&g->one);
	free(g->out);
	free(g->dbig), free(g->dh), free(g->da), free(g->dqkv), free(g->dx);
	free(g->y), free(g->meanf), free(g->rstdf), free(g->logits);
	free(g);
}

/* ---- initialisation --------------------------------------------------- */

static uint64_t mix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void normal(float *p, size_t n, float std, uint64_t *s)
{
	for (size_t i = 0; i < n; i += 2) {
		double u1 = ((mix(s) >> 11) + 1) * 0x1.0p-53;
		double u2 = (mix(s) >> 11) * 0x1.0p-53;
		double r = sqrt(-2 * log(u1));

		p[i] = std * r * cos(2 * M_PI * u2);
		if (i + 1 < n)
			p[i + 1] = std * r * sin(2 * M_PI * u2);
	}
}

static void fill(float *p, size_t n, float v)
{
	for (size_t i = 0; i < n; i++)
		p[i] = v;
}

static int zero_moments(struct gpt *g, int blk, size_t n)
{
	for (int k = ST_G; k <= ST_V; k++) {
		float *p = state_map(g->st, blk, k, SM_DISCARD);

		if (!p)
			return -EIO;
		memset(p, 0, n * sizeof(float));
		state_unmap(g->st, blk, k, p);
	}
	return 0;
}

int gpt_init(struct gpt *g, uint64_t seed)
{
	const struct gpt_layer_layout *L = &g->L;
	const struct gpt_embed_layout *E = &g->E;
	size_t d = g->c.d, f = 4 * d;
	float res = 0.02f / sqrtf(2.0f * g->c.layers);
	float *p;

	for (int l = 0; l <= g->c.layers; l++) {
		uint64_t s = seed * 1000003u + l;

		p = state_map(g->st, l, ST_P, SM_DISCARD);
		if (!p)
			return -EIO;
		if (l == g->c.layers) {
			normal(p + E->wte, E->wpe - E->wte, 0.02f, &s);
			normal(p + E->wpe, E->decay_end - E->wpe, 0.01f, &s);
			fill(p + E->lnfg, d, 1);
			fill(p + E->lnfb, d, 0);
		} else {
			normal(p + L->wqkv, d * 3 * d, 0.02f, &s);
			normal(p + L->wo, d * d, res, &s);
			normal(p + L->w1, d * f, 0.02f, &s);
			normal(p + L->w2, f * d, res, &s);
			fill(p + L->decay_end, L->total - L->decay_end, 0);
			fill(p + L->ln1g, d, 1);
			fill(p + L->ln2g, d, 1);
		}
		state_unmap(g->st, l, ST_P, p);
		if (zero_moments(g, l, l == g->c.layers ? E->total : L->total))
			return -EIO;
	}
	return 0;
}

/* ---- the step ---------------------------------------------------------- */

/*
 * AdamW on block blk, whose gradient gr is mapped; decay on matrices only.
 * Streams the block in libhmm-chunk pieces, mapping p, m and v one piece
 * at a time, so the moments never need to be resident whole (libhmm's
 * schedule-aware policy prefetches the pieces ahead).  AdamW is
 * elementwise: the pieces give the same bits as one call.
 */
/*
 * Per-block gradient clipping: the block's gradient is divided by
 * norm / clip when its norm is larger (a global norm would need every
 * gradient before any step; this keeps the step inside the backward).
 * The norm is summed in double in a fixed order: deterministic.
 */
static double clip_scale(const float *gr, size_t n, double clip)
{
	double s[8] = { 0 }, ss = 0, norm;
	size_t i = 0;

	/* eight fixed partial sums (element i into s[i % 8]), then added in
	 * order: the same bits every run, without one long add chain */
	for (; i + 8 <= n; i += 8)
		for (int k = 0; k < 8; k++)
			s[k] += (double)gr[i + k] * gr[i + k];
	for (int k = 0; k < 8; k++)
		ss += s[k];
	for (; i < n; i++)
		ss += (double)gr[i] * gr[i];
	norm = sqrt(ss);
	return clip > 0 && norm > clip ? norm / clip : 1;
}

/*
 * AdamW on block blk, whose gradient gr the caller keeps mapped (so it
 * stays resident while the state streams p, m and v through memory).
 */
int gpt_adamw_block(struct gpt *g, int blk, const float *gr,
		    const struct optim_hp *hp)
{
	size_t n = blk == g->c.layers ? g->E.total : g->L.total;
	struct optim_hp h = *hp;
	double t0 = gpt_now();
	int err;

	h.grad_scale = clip_scale(gr, n, g->clip);
	err = state_adamw(g->st, blk, &h, g->weight_decay);
	g->t.opt += gpt_now() - t0;
	return err;
}

/* Block input l (l = layers: the final LayerNorm's input). */
static float *xin(const struct gpt *g, int l)
{
	return g->xp ? g->xp[l] : g->acts + (size_t)l * g->n * g->c.d;
}

/* Offloaded activations: map block input l with access, 0 or -EIO. */
static int act_get(struct gpt *g, int l, unsigned access)
{
	if (!g->xp)
		return 0;
	g->xp[l] = state_act_map(g->st, l, access);
	return g->xp[l] ? 0 : -EIO;
}

/* ... and unmap it (if mapped), with evict sending it to the store. */
static void act_put(struct gpt *g, int l, int evict)
{
	if (!g->xp || !g->xp[l])
		return;
	state_act_unmap(g->st, l, g->xp[l], evict);
	g->xp[l] = NULL;
}

static void embed_fwd(struct gpt *g, const float *ep, const int *tok)
{
	int d = g->c.d, T = g->c.ctx;

	for (int r = 0; r < g->n; r++) {
		const float *te = ep + g->E.wte + (size_t)tok[r] * d;
		const float *pe = ep + g->E.wpe + (size_t)(r % T) * d;
		float *x = xin(g, 0) + (size_t)r * d;

		for (int c = 0; c < d; c++)
			x[c] = te[c] + pe[c];
	}
}

static void embed_bwd(struct gpt *g, float *eg, const int *tok)
{
	int d = g->c.d, T = g->c.ctx;

	for (int r = 0; r < g->n; r++) {
		float *te = eg + g->E.wte + (size_t)tok[r] * d;
		float *pe = eg + g->E.wpe + (size_t)(r % T) * d;
		const float *dx = g->dx + (size_t)r * d;

		for (int c = 0; c < d; c++) {
			te[c] += dx[c];
			pe[c] += dx[c];
		}
	}
}

/* Start reading block blk's AdamW moments while its backward runs. */
static void prefetch_moments(struct gpt *g, int blk)
{
	state_prefetch(g->st, blk, ST_M);
	state_prefetch(g->st, blk, ST_V);
}

static int forward(struct gpt *g, const float *ep, const int *tok,
		   const int *tgt, double *loss)
{
	int nl = g->c.layers, n = g->n, d = g->c.d, V = g->c.vocab, err;

	err = act_get(g, 0, SM_DISCARD);
	if (err)
		return err;
	embed_fwd(g, ep, tok);
	for (int l = 0; l < nl; l++) {
		float *p = state_map(g->st, l, ST_P, SM_READ);

		if (!p)
			return -EIO;
		/* read the next layer's p while this one computes; the last
		 * layer's m and v: the backward starts with its AdamW */
		if (l + 1 < nl)
			state_prefetch(g->st, l + 1, ST_P);
		else
			prefetch_moments(g, l);
		if (g->kept)
			use_acts(g, &g->kept[l]);
		err = act_get(g, l + 1, SM_DISCARD);
		if (!err)
			err = block_fwd(g, p, xin(g, l), xin(g, l + 1));
		state_unmap(g->st, l, ST_P, p);
		/* read: to the store while the next blocks compute, but for
		 * the last block's input, which the backward starts with */
		act_put(g, l, l + 1 < nl);
		if (err)
			return err;
	}
	ln_fwd(g->y, g->meanf, g->rstdf, xin(g, nl), ep + g->E.lnfg,
	       ep + g->E.lnfb, n, d);
	gemm(0, 1, n, V, d, 1, g->y, d, ep + g->E.wte, d, 0, g->logits, V);
	*loss = xent_fwd_bwd(g->logits, g->logits, tgt, n, V);
	return 0;
}

static int backward(struct gpt *g, const float *ep, float *eg,
		    const int *tok, const struct optim_hp *hp)
{
	int nl = g->c.layers, n = g->n, d = g->c.d, V = g->c.vocab, err = 0;

	memset(eg, 0, g->E.total * sizeof(float));
	gemm(1, 0, V, d, n, 1, g->logits, V, g->y, d, 0, eg + g->E.wte, d);
	gemm(0, 0, n, d, V, 1, g->logits, V, ep + g->E.wte, d, 0, g->dh, d);
	ln_bwd(g->dx, eg + g->E.lnfg, eg + g->E.lnfb, g->dh, xin(g, nl),
	       g->meanf, g->rstdf, ep + g->E.lnfg, n, d, 0);
	act_put(g, nl, 0);
	for (int l = nl - 1; l >= 0 && !err; l--) {
		float *p = state_map(g->st, l, ST_P, SM_READ), *gr = NULL;

		err = -EIO;
		if (p)
			gr = state_map(g->st, l, ST_G, SM_DISCARD);
		/* the block's input back from the store, the next one down
		 * on its way */
		if (gr)
			err = act_get(g, l, SM_READ);
		state_act_prefetch(g->st, l - 1);
		/* again: chunks skipped while the last layer's write-back
		 * held the budget get their turn */
		prefetch_moments(g, l);
		if (!err && g->kept)
			use_acts(g, &g->kept[l]);
		else if (!err)
			err = block_fwd(g, p, xin(g, l), g->out);
		prefetch_moments(g, l);
		if (!err)
			err = block_bwd(g, p, gr, xin(g, l), g->dx);
		act_put(g, l, 0);
		if (l > 0)
			state_prefetch(g->st, l - 1, ST_P);
		/* unmapped, p may be written back as soon as it is stepped;
		 * layer 0's stays resident: the next forward starts with it */
		if (l > 0)
			state_unmap(g->st, l, ST_P, p);
		if (!err && hp)
			err = gpt_adamw_block(g, l, gr, hp);
		if (l == 0)
			state_unmap(g->st, l, ST_P, p);
		state_unmap(g->st, l, ST_G, gr);
	}
	if (err)
		return err;
	embed_bwd(g, eg, tok);
	return hp ? gpt_adamw_block(g, nl, eg, hp) : 0;
}

int gpt_step(struct gpt *g, const int *tok, const int *tgt,
	     const struct optim_hp *hp, double *loss)
{
	int nl = g->c.layers, err = -EIO;
	double t0 = gpt_now(), t1, opt0 = g->t.opt;
	float *ep, *eg = NULL;

	state_step(g->st, 1);
	ep = state_map(g->st, nl, ST_P, SM_READ);
	if (!ep)
		goto out;
	err = forward(g, ep, tok, tgt, loss);
	t1 = gpt_now();
	g->t.fwd += t1 - t0;
	if (err)
		goto out;
	err = -EIO;
	eg = state_map(g->st, nl, ST_G, SM_DISCARD);
	if (eg)
		err = backward(g, ep, eg, tok, hp);
	g->t.bwd += gpt_now() - t1 - (g->t.opt - opt0);
out:
	for (int l = 0; l <= nl; l++)	/* left mapped by an error */
		act_put(g, l, 0);
	state_unmap(g->st, nl, ST_G, eg);
	state_unmap(g->st, nl, ST_P, ep);
	state_step(g->st, 0);
	return err;
}
