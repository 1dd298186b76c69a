// SPDX-License-Identifier: MIT
/*
 * attn_bwd.c — FlashAttention-2 backward on the CPU (hk_attn.h).
 *
 * D = rowsum(dout * o) first, one item per (batch, head).  Then one work
 * item per (batch, kv head, kv chunk): for each KV tile of the chunk the
 * dK, dV accumulators (BC x dp) stay in the item's slot while every query
 * head of the group and every q tile that sees the tile goes past:
 *
 *	S = Q Kt, P = exp(scale S - lse)	(recomputed, masked rows 0)
 *	dV += P^T dO
 *	dP = dO Vt, dS = scale P (dP - D)
 *	dK += dS^T Q, dQ += dS K
 *
 * dQ rows are owned by one item when the key axis is not split: for dense
 * fp32 with d % 8 == 0 the gemm adds straight into the caller's dq and
 * reads q and dout in place, else (bf16, odd d) the item converts its q
 * and dout rows into its slot once and sums dq in fp32 rows there,
 * written out when the item ends.  When the axis is split each chunk
 * adds into its own fp32 copy and a last pass sums the copies in chunk
 * order.  The chunk count comes from the shape only, so results never
 * depend on the number of threads.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hk.h"
#include "attn.h"

#define BR HK_ATTN_BR
#define BC HK_ATTN_BC
#define LDT HK_ATTN_LDT
#define MAX_CHUNKS 4

/* D[bh][i] = sum_p dout * o (in double), one item per (batch, head). */
static void d_item(struct hk_attn_ctx *c, float *slot, int bh)
{
	const struct hk_attn *a = &c->a;

	for (int i = 0; i < a->Nq; i++) {
		size_t row = (size_t)bh * a->Nq + i, off = row * a->d;
		double s = 0;

		if (a->dtype == HK_F32) {
			const float *x = (const float *)c->dout + off;
			const float *y = (const float *)c->o + off;

			for (int p = 0; p < a->d; p++)
				s += (double)x[p] * y[p];
		} else {
			const uint16_t *x = (const uint16_t *)c->dout + off;
			const uint16_t *y = (const uint16_t *)c->o + off;

			for (int p = 0; p < a->d; p++)
				s += (double)hk_bf16_f32(x[p]) *
				     hk_bf16_f32(y[p]);
		}
		c->D[row] = (float)s;
	}
}

/* P = exp(scale S - lse) in S, masked and dead rows zero. */
static void probs(struct hk_attn_ctx *c, float *S, int bh, int i0, int mr,
		  int j0, int nc)
{
	int ncp = hk_round8(nc);

	for (int r = 0; r < mr; r++) {
		float *s = S + r * LDT;
		float lse = c->lse_in[(size_t)bh * c->a.Nq + i0 + r];
		int lim = hk_attn_vis(c, i0 + r) - j0;

		lim = lim < 0 ? 0 : lim > nc ? nc : lim;
		if (lim == 0 || lse == -INFINITY) {
			memset(s, 0, ncp * sizeof(float));
			continue;
		}
		for (int j = lim; j < ncp; j++)
			s[j] = -INFINITY;
		c->ops->exp_sum(s, ncp, c->a.scale, lse);
	}
}

/* The slot of one backward item, and the rows of its query heads. */
struct bwd_buf {
	float *dK, *dV, *S, *dP;	/* BC x dp, BC x dp, BR x BC, BR x BC */
	/* q, dout, dq rows of the kv head's first query head, Nq x dp each,
	 * the group's other heads Nq * dp floats apart */
	const float *Q, *dO;
	float *dq;
};

static size_t bwd_slot(int dp)
{
	return 2 * (size_t)BC * dp + 2 * BR * LDT;
}

/* One q tile [i0, i0 + mr) of head bh (hl-th of its group) against kv
 * tile t of head bg. */
static void pair(struct hk_attn_ctx *c, struct bwd_buf *w, int bh, int hl,
		 int bg, int i0, int mr, int t)
{
	const struct hk_attn_ops *ops = c->ops;
	int d = c->a.d, dp = c->dp, j0 = t * BC, vpw = hk_attn_vpw(c);
	int nc = c->a.Nk - j0 < BC ? c->a.Nk - j0 : BC, ncp = hk_round8(nc);
	size_t tile = (size_t)bg * c->ntk + t;
	size_t qrow = (size_t)bh * c->a.Nq + i0;
	size_t lrow = ((size_t)hl * c->a.Nq + i0) * dp;
	const float *Q = w->Q + lrow, *dO = w->dO + lrow;
	float *dq = w->dq + lrow;
	const float *K = c->kp + tile * c->vp_sz;
	const float *D = c->D + qrow;

	ops->gemm(mr, ncp, d, Q, dp, 1, c->kt + tile * c->kt_sz, c->ldkt,
		  w->S, LDT, 0);
	probs(c, w->S, bh, i0, mr, j0, nc);
	ops->gemm(nc, dp, mr, w->S, 1, LDT, dO, dp, w->dV, dp, 1);
	ops->gemm(mr, ncp, d, dO, dp, 1, c->vt + tile * c->kt_sz, c->ldkt,
		  w->dP, LDT, 0);
	for (int r = 0; r < mr; r++)
		ops->dsoft(w->dP + r * LDT, w->S + r * LDT, ncp, D[r],
			   c->a.scale);
	ops->gemm(nc, dp, mr, w->dP, 1, LDT, Q, dp, w->dK, dp, 1);
	for (int p0 = 0; p0 < dp; p0 += vpw) {	/* dq += dS K */
		int pw = dp - p0 < vpw ? dp - p0 : vpw;

		ops->gemm(mr, pw, nc, w->dP, LDT, 1, K + (size_t)p0 * BC,
			  hk_attn_ldv(c, pw),
			  dq + p0, dp, 1);
	}
}

/* Kv tile t against every q tile that sees it. */
static void tile(struct hk_attn_ctx *c, struct bwd_buf *w, int bg, int t)
{
	const struct hk_attn *a = &c->a;
	int b = bg / a->Hkv, g = bg % a->Hkv, dp = c->dp, j0 = t * BC;
	int nc = a->Nk - j0 < BC ? a->Nk - j0 : BC;
	int istart = a->causal ? j0 - c->off : 0;

	istart = istart < 0 ? 0 : istart / BR * BR;
	memset(w->dK, 0, (size_t)nc * dp * sizeof(float));
	memset(w->dV, 0, (size_t)nc * dp * sizeof(float));
	for (int hl = 0; hl < c->grp; hl++) {
		int bh = b * a->H + g * c->grp + hl;

		for (int i0 = istart; i0 < a->Nq; i0 += BR)
			pair(c, w, bh, hl, bg, i0,
			     a->Nq - i0 < BR ? a->Nq - i0 : BR, t);
	}
	for (int j = 0; j < nc; j++) {
		size_t off = ((size_t)bg * a->Nk + j0 + j) * a->d;

		hk_attn_store_row(c, c->dk, off, w->dK + (size_t)j * dp,
				  a->d);
		hk_attn_store_row(c, c->dv, off, w->dV + (size_t)j * dp,
				  a->d);
	}
}

/*
 * One (b, kv head, chunk).  With c->dqf NULL (one chunk, inputs not dense
 * fp32 with d % 8 == 0) the item owns its query heads' rows outright: it
 * converts their q and dout rows into its slot after the tile buffers,
 * sums their dq in fp32 there, and writes dq when done.
 */
static void kv_item(struct hk_attn_ctx *c, float *slot, int it)
{
	const struct hk_attn *a = &c->a;
	int ch = it % c->nchunk, bg = it / c->nchunk;
	int t0 = ch * c->per_chunk, t1 = t0 + c->per_chunk;
	int b = bg / a->Hkv, h0 = bg % a->Hkv * c->grp;
	size_t rows = (size_t)c->grp * a->Nq, bh0 = (size_t)b * a->H + h0;
	size_t head = (size_t)a->Nq * c->dp;
	struct bwd_buf w;
	float *own = slot + bwd_slot(c->dp);	/* dq, q, dout rows */

	w.dK = slot;
	w.dV = w.dK + BC * c->dp;
	w.S = w.dV + BC * c->dp;
	w.dP = w.S + BR * LDT;
	if (c->dqf) {
		w.Q = c->qf + bh0 * head;
		w.dO = c->dof + bh0 * head;
		w.dq = c->dqf + ((size_t)ch * a->B * a->H + bh0) * head;
	} else {
		w.dq = own;
		memset(w.dq, 0, rows * c->dp * sizeof(float));
		for (int hl = 0; hl < c->grp; hl++) {
			hk_attn_pack_rows(c, c->q, own + (c->grp + hl) * head,
					  bh0 + hl, -1, 0, a->Nq);
			hk_attn_pack_rows(c, c->dout,
					  own + (2 * c->grp + hl) * head,
					  bh0 + hl, -1, 0, a->Nq);
		}
		w.Q = own + c->grp * head;
		w.dO = own + 2 * c->grp * head;
	}
	for (int t = t0; t < t1 && t < c->ntk; t++)
		tile(c, &w, bg, t);
	for (size_t i = 0; !c->dqf && i < rows; i++)
		hk_attn_store_row(c, c->dq, (bh0 * a->Nq + i) * a->d,
				  w.dq + i * c->dp, a->d);
}

/* dq = sum over chunks of dqf (in chunk order), converted; per (b, h). */
static void dq_item(struct hk_attn_ctx *c, float *slot, int bh)
{
	const struct hk_attn *a = &c->a;
	size_t per = (size_t)a->B * a->H * a->Nq * c->dp;

	for (int i = 0; i < a->Nq; i++) {
		size_t row = (size_t)bh * a->Nq + i;

		for (int p = 0; p < a->d; p++) {
			float s = 0;

			for (int ch = 0; ch < c->nchunk; ch++)
				s += c->dqf[ch * per + row * c->dp + p];
			slot[p] = s;
		}
		hk_attn_store_row(c, c->dq, row * a->d, slot, a->d);
	}
}

/* How many chunks the key axis of one (b, kv head) is split into: from
 * the shape only, so results do not depend on the thread count. */
static void chunks(struct hk_attn_ctx *c)
{
	const struct hk_attn *a = &c->a;
	int want = (8 + a->B * a->Hkv - 1) / (a->B * a->Hkv);

	want = want > MAX_CHUNKS ? MAX_CHUNKS : want;
	want = want > c->ntk ? c->ntk : want;
	want = want < 1 ? 1 : want;
	c->per_chunk = c->ntk ? (c->ntk + want - 1) / want : 1;
	c->nchunk = c->ntk ? (c->ntk + c->per_chunk - 1) / c->per_chunk : 1;
}

static int bwd_run(struct hk_attn_ctx *c)
{
	const struct hk_attn *a = &c->a;
	size_t nq = (size_t)a->B * a->H * a->Nq;
	int own_dq, r;

	chunks(c);
	/* dqf: the caller's dq (dense fp32, one chunk), NULL (one chunk:
	 * each item keeps its own rows in its slot, as qf and dof are then)
	 * or a copy per chunk */
	own_dq = c->nchunk > 1;
	c->D = malloc((nq + 1) * sizeof(float));
	c->dqf = own_dq ? calloc(c->nchunk * nq * c->dp + 1, sizeof(float)) :
		 a->dtype == HK_F32 && a->d % 8 == 0 ? c->dq : NULL;
	if (!c->D || (nq && own_dq && !c->dqf)) {
		r = -ENOMEM;
		goto out;
	}
	r = hk_attn_pack(c, 1);
	if (!r && c->dqf == c->dq && nq)   /* only now: errors leave dq alone */
		memset(c->dq, 0, nq * a->d * sizeof(float));
	if (!r)
		r = hk_attn_run(c, a->B * a->H, 0, d_item);
	if (!r)
		r = hk_attn_run(c, a->B * a->Hkv * c->nchunk,
				bwd_slot(c->dp) + (c->dqf ? 0 :
				3 * (size_t)c->grp * a->Nq * c->dp), kv_item);
	if (!r && own_dq)
		r = hk_attn_run(c, a->B * a->H, a->d, dq_item);
out:
	if (own_dq)
		free(c->dqf);
	free(c->D);
	hk_attn_ctx_fini(c);
	return r;
}

int hk_attn_bwd(const struct hk_attn *a, const void *q, const void *k,
		const void *v, const void *o, const float *lse,
		const void *dout, void *dq, void *dk, void *dv)
{
	struct hk_attn_ctx c;
	int r = hk_attn_setup(&c, a);

	if (r)
		return r;
	a = &c.a;
	if (!a->B || !a->H)
		return 0;
	if (a->Nq && (!q || !o || !lse || !dout || !dq))
		return hk_attn_bad("hk_attn_bwd: NULL q, o, lse, dout or dq%.0d",
				   0);
	if (a->Nk && (!k || !v || !dk || !dv))
		return hk_attn_bad("hk_attn_bwd: NULL k, v, dk or dv%.0d", 0);
	c.q = q;
	c.k = k;
	c.v = v;
	c.o = o;
	c.lse_in = lse;
	c.dout = dout;
	c.dq = dq;
	c.dk = dk;
	c.dv = dv;
	return bwd_run(&c);
}
