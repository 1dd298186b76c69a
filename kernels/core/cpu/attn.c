// SPDX-License-Identifier: MIT
/*
 * attn.c — FlashAttention-2 on the CPU (hk_attn.h): validation, packing,
 * tiling, masking, the online softmax and the threading.  The per-ISA
 * primitives (a register-blocked gemm, a vectorized exp) sit behind
 * struct hk_attn_ops (attn.h).
 *
 * Forward, one work item per (batch, head, q-tile of FWD_BR rows): the Q
 * tile is packed once; for each KV tile of FWD_BC keys (in token order)
 * K is gathered through the block table, transposed and packed (Kt,
 * d x BC) and V packed row-major (BC x dp); S = Q Kt; per row the running
 * max m and sum l are updated and O rescaled (online softmax); O += P V.
 * At the end o = O / l and lse = m + log l.
 *
 * Backward, one work item per (batch, kv-head, kv-chunk): for each KV tile
 * the dK, dV accumulators stay in the slot while every query head of the
 * group and every q tile that sees the tile goes past: P is recomputed
 * from lse, dV += P^T dO, dP = dO V^T, dS = P (dP - D), dK += dS^T Q and
 * dQ += dS K.  dQ rows are owned by one item when the key axis is not
 * split, otherwise each chunk adds into its own fp32 copy and a last pass
 * sums the copies in chunk order: the result never depends on threads.
 *
 * Tiles: 64 x 64 keeps Q, Kt, V, S and O of one item under 256 KiB at
 * d = 256, inside a core's L2 (512 KiB here), with one 16-column panel of
 * B (<= 16 KiB) in L1 during the gemm.
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk.h"
#include "hk_attn.h"
#include "attn.h"

#define FWD_BR	64
#define FWD_BC	64
#define BWD_BR	64
#define BWD_BC	64
#define MAX_CHUNKS 4

static __thread char err_msg[200];
static const struct hk_attn_ops *forced_ops;

/* ---- types and rows --------------------------------------------------- */

static inline float bf16_to_f32(uint16_t h)
{
	union { uint32_t u; float f; } x = { .u = (uint32_t)h << 16 };

	return x.f;
}

static inline uint16_t f32_to_bf16(float f)
{
	union { uint32_t u; float f; } x = { .f = f };

	if (isnan(f))
		return 0x7fc0;
	return (x.u + 0x7fff + ((x.u >> 16) & 1)) >> 16;
}

static void load_row(float *dst, const void *base, size_t off, int d,
		     int dtype)
{
	if (dtype == HK_F32) {
		memcpy(dst, (const float *)base + off, d * sizeof(float));
	} else {
		const uint16_t *s = (const uint16_t *)base + off;

		for (int c = 0; c < d; c++)
			dst[c] = bf16_to_f32(s[c]);
	}
}

static void store_row(void *base, size_t off, const float *src, int d,
		      int dtype, float mul)
{
	if (dtype == HK_F32) {
		float *o = (float *)base + off;

		for (int c = 0; c < d; c++)
			o[c] = src[c] * mul;
	} else {
		uint16_t *o = (uint16_t *)base + off;

		for (int c = 0; c < d; c++)
			o[c] = f32_to_bf16(src[c] * mul);
	}
}

/* ---- one call's context ---------------------------------------------- */

/* On the caller's stack for the length of one hk_attn_fwd / _bwd. */
struct ctx {
	struct hk_attn a;		/* defaults resolved */
	const struct hk_attn_ops *ops;
	int grp, dp, off;		/* H / Hkv, d rounded to 8, Nk - Nq */
	const void *q, *k, *v, *o, *dout;
	void *out, *dq, *dk, *dv;
	float *lse;
	const float *lse_in;
	float *D;			/* [B*H*Nq], backward */
	float *dqacc;			/* [nchunk][B*H*Nq*d] or NULL */
	int nchunk, per_chunk;		/* kv tiles per chunk */
	/* the job hk_parallel runs */
	void (*item)(struct ctx *c, float *slot, int i);
	int nitems;
	atomic_int next;
	float *slots;			/* nparts * slot_floats */
	size_t slot_floats;
};

/* Offset (in elements) of key/value row t of (b, kv head g). */
static inline size_t kv_off(const struct ctx *c, int b, int g, int t)
{
	const struct hk_attn *a = &c->a;

	if (!a->block_table)
		return (((size_t)b * a->Hkv + g) * a->Nk + t) * a->d;
	int32_t blk = a->block_table[(size_t)b * a->max_blocks +
				     t / a->block_size];

	return (((size_t)blk * a->Hkv + g) * a->block_size +
		t % a->block_size) * a->d;
}

/* Keys row i of the query sees: [0, vis). */
static inline int vis(const struct ctx *c, int i)
{
	int n;

	if (!c->a.causal)
		return c->a.Nk;
	n = i + c->off + 1;
	return n < 0 ? 0 : n > c->a.Nk ? c->a.Nk : n;
}

static inline int round8(int n)
{
	return (n + 7) & ~7;
}

/* Kt[p][j] = K[j0 + j][p] (d x ldt, columns nc..ncp zero). */
static void pack_kt(const struct ctx *c, const void *src, int b, int g,
		    int j0, int nc, float *kt, int ldt, float *row)
{
	int d = c->a.d, ncp = round8(nc);

	for (int j = 0; j < nc; j++) {
		load_row(row, src, kv_off(c, b, g, j0 + j), d, c->a.dtype);
		for (int p = 0; p < d; p++)
			kt[p * ldt + j] = row[p];
	}
	for (int p = 0; p < d; p++)
		for (int j = nc; j < ncp; j++)
			kt[p * ldt + j] = 0;
}

/* Rows [0, n) of a dp-wide packed copy, pad columns zero. */
static void pack_kv_rows(const struct ctx *c, const void *src, int b, int g,
			 int j0, int n, float *dst)
{
	for (int j = 0; j < n; j++) {
		float *r = dst + (size_t)j * c->dp;

		load_row(r, src, kv_off(c, b, g, j0 + j), c->a.d, c->a.dtype);
		memset(r + c->a.d, 0, (c->dp - c->a.d) * sizeof(float));
	}
}

static void pack_q_rows(const struct ctx *c, const void *src, int bh, int i0,
			int n, float *dst)
{
	int d = c->a.d;

	for (int i = 0; i < n; i++) {
		float *r = dst + (size_t)i * c->dp;

		load_row(r, src, ((size_t)bh * c->a.Nq + i0 + i) * d, d,
			 c->a.dtype);
		memset(r + d, 0, (c->dp - d) * sizeof(float));
	}
}

/* ---- running items on threads ---------------------------------------- */

static void part_fn(void *arg, int part, int nparts)
{
	struct ctx *c = arg;
	float *slot = c->slots + (size_t)part * c->slot_floats;

	for (;;) {
		int i = atomic_fetch_add(&c->next, 1);

		if (i >= c->nitems)
			return;
		c->item(c, slot, i);
	}
}

static int run(struct ctx *c, int nitems, size_t slot_floats,
	       void (*item)(struct ctx *, float *, int))
{
	int nparts = hk_threads();

	if (nitems <= 0)
		return 0;
	if (nparts > nitems)
		nparts = nitems;
	c->slot_floats = (slot_floats + 15) & ~(size_t)15;
	c->slots = NULL;
	if (c->slot_floats &&
	    posix_memalign((void **)&c->slots, 64,
			   nparts * c->slot_floats * sizeof(float)))
		return -ENOMEM;
	c->item = item;
	c->nitems = nitems;
	atomic_store(&c->next, 0);
	hk_parallel(nparts, part_fn, c);
	free(c->slots);
	return 0;
}

/* ---- validation ------------------------------------------------------- */

static int bad(const char *fmt, int v)
{
	snprintf(err_msg, sizeof(err_msg), fmt, v);
	return -EINVAL;
}

static int setup(struct ctx *c, const struct hk_attn *a)
{
	memset(c, 0, sizeof(*c));
	if (!a)
		return bad("hk_attn: NULL arguments%.0d", 0);
	c->a = *a;
	a = &c->a;
	if (c->a.Hkv == 0)
		c->a.Hkv = a->H;
	if (a->B < 0 || a->H < 0 || a->Hkv < 0)
		return bad("hk_attn: negative B, H or Hkv (%d)", a->B);
	if (a->H && a->H % a->Hkv)
		return bad("hk_attn: H is not a multiple of Hkv (%d)", a->Hkv);
	if (a->Nq < 0 || a->Nk < 0)
		return bad("hk_attn: negative Nq or Nk (%d)",
			   a->Nq < 0 ? a->Nq : a->Nk);
	if (a->d < 1 || a->d > 256)
		return bad("hk_attn: d = %d, must be 1..256", a->d);
	if (a->dtype != HK_F32 && a->dtype != HK_BF16)
		return bad("hk_attn: unknown dtype %d", a->dtype);
	if (!(a->scale >= 0) || isinf(a->scale))
		return bad("hk_attn: scale must be finite and >= 0%.0d", 0);
	if (a->scale == 0)
		c->a.scale = 1.0f / sqrtf((float)a->d);
	if (a->block_table &&
	    (a->block_size < 1 || a->max_blocks < 0 ||
	     (long)a->block_size * a->max_blocks < a->Nk))
		return bad("hk_attn: block table of %d tokens is too small "
			   "for Nk", a->block_size * a->max_blocks);
	c->grp = a->H ? a->H / a->Hkv : 1;
	c->dp = round8(a->d);
	c->off = a->Nk - a->Nq;
	c->ops = forced_ops;
	if (!c->ops)
		c->ops = hk_isa() == HK_ISA_AVX512 ? &hk_attn_avx512_ops :
			 hk_isa() == HK_ISA_AVX2 ? &hk_attn_avx2_ops :
			 &hk_attn_scalar_ops;
	return 0;
}

const char *hk_attn_strerror(void)
{
	return err_msg;
}

int hk_attn_force_isa(int isa)
{
	if (isa < 0) {
		forced_ops = NULL;
		return 0;
	}
	if (isa > HK_ISA_AVX512 || !hk_isa_supported(isa))
		return -ENOTSUP;
	forced_ops = isa == HK_ISA_AVX512 ? &hk_attn_avx512_ops :
		     isa == HK_ISA_AVX2 ? &hk_attn_avx2_ops :
		     &hk_attn_scalar_ops;
	return 0;
}

const char *hk_attn_isa_name(void)
{
	struct ctx c;
	struct hk_attn a = { .B = 1, .H = 1, .Nq = 1, .Nk = 1, .d = 1 };

	setup(&c, &a);
	return c.ops->name;
}

/* ---- forward ---------------------------------------------------------- */

/* Floats of one forward slot. */
static size_t fwd_slot(int d, int dp)
{
	return (size_t)FWD_BR * dp + (size_t)d * FWD_BC + FWD_BC * dp +
	       FWD_BR * FWD_BC + (size_t)FWD_BR * dp + 2 * FWD_BR + dp;
}

/* Online-softmax update of rows [0, mr) of one S tile; returns nothing,
 * leaves P in S. */
static void fwd_softmax(struct ctx *c, float *S, int mr, int i0, int j0,
			int nc, float *O, float *m, float *l)
{
	const struct hk_attn_ops *ops = c->ops;
	int ncp = round8(nc);

	for (int r = 0; r < mr; r++) {
		float *s = S + r * FWD_BC, *o = O + (size_t)r * c->dp;
		int lim = vis(c, i0 + r) - j0;
		float mx, mnew, alpha;

		lim = lim < 0 ? 0 : lim > nc ? nc : lim;
		if (lim == 0) {
			memset(s, 0, ncp * sizeof(float));
			continue;
		}
		for (int j = lim; j < ncp; j++)
			s[j] = -INFINITY;
		mx = ops->rowmax(s, lim) * c->a.scale;
		mnew = mx > m[r] ? mx : m[r];
		alpha = m[r] == -INFINITY ? 0 : expf(m[r] - mnew);
		l[r] = l[r] * alpha + ops->exp_sum(s, ncp, c->a.scale, mnew);
		if (alpha != 1)
			for (int p = 0; p < c->dp; p++)
				o[p] *= alpha;
		m[r] = mnew;
	}
}

static void fwd_item(struct ctx *c, float *slot, int it)
{
	const struct hk_attn *a = &c->a;
	int ntq = (a->Nq + FWD_BR - 1) / FWD_BR, dp = c->dp, d = a->d;
	int bh = it / ntq, i0 = it % ntq * FWD_BR;
	int b = bh / a->H, g = bh % a->H / c->grp;
	int mr = a->Nq - i0 < FWD_BR ? a->Nq - i0 : FWD_BR;
	float *Q = slot, *Kt = Q + FWD_BR * dp, *V = Kt + d * FWD_BC;
	float *S = V + FWD_BC * dp, *O = S + FWD_BR * FWD_BC;
	float *m = O + FWD_BR * dp, *l = m + FWD_BR, *row = l + FWD_BR;
	int jend = vis(c, i0 + mr - 1);

	pack_q_rows(c, c->q, bh, i0, mr, Q);
	memset(O, 0, (size_t)mr * dp * sizeof(float));
	for (int r = 0; r < mr; r++) {
		m[r] = -INFINITY;
		l[r] = 0;
	}
	for (int j0 = 0; j0 < jend; j0 += FWD_BC) {
		int nc = a->Nk - j0 < FWD_BC ? a->Nk - j0 : FWD_BC;

		pack_kt(c, c->k, b, g, j0, nc, Kt, FWD_BC, row);
		pack_kv_rows(c, c->v, b, g, j0, nc, V);
		c->ops->gemm(mr, round8(nc), d, Q, dp, 1, Kt, FWD_BC, S,
			     FWD_BC, 0);
		fwd_softmax(c, S, mr, i0, j0, nc, O, m, l);
		c->ops->gemm(mr, dp, nc, S, FWD_BC, 1, V, dp, O, dp, 1);
	}
	for (int r = 0; r < mr; r++) {
		size_t off = ((size_t)bh * a->Nq + i0 + r);
		float *o = O + (size_t)r * dp;

		if (l[r] > 0) {
			for (int p = 0; p < d; p++)
				o[p] /= l[r];
		} else {
			memset(o, 0, d * sizeof(float));
		}
		store_row(c->out, off * d, o, d, a->dtype, 1.0f);
		if (c->lse)
			c->lse[off] = l[r] > 0 ? m[r] + logf(l[r]) : -INFINITY;
	}
}

int hk_attn_fwd(const struct hk_attn *a, const void *q, const void *k,
		const void *v, void *o, float *lse)
{
	struct ctx c;
	int r = setup(&c, a), ntq;

	if (r)
		return r;
	a = &c.a;
	if (!a->B || !a->H || !a->Nq)
		return 0;
	if (!q || !o || (a->Nk && (!k || !v)))
		return bad("hk_attn_fwd: NULL q, k, v or o%.0d", 0);
	c.q = q;
	c.k = k;
	c.v = v;
	c.out = o;
	c.lse = lse;
	ntq = (a->Nq + FWD_BR - 1) / FWD_BR;
	return run(&c, a->B * a->H * ntq, fwd_slot(a->d, c.dp), fwd_item);
}

/* ---- backward ----------------------------------------------------------- */

/* D[bh][i] = sum_p dout * o, one item per (batch, head). */
static void bwd_d_item(struct ctx *c, float *slot, int bh)
{
	const struct hk_attn *a = &c->a;
	float *x = slot, *y = slot + a->d;

	for (int i = 0; i < a->Nq; i++) {
		size_t off = ((size_t)bh * a->Nq + i) * a->d;
		double s = 0;

		load_row(x, c->dout, off, a->d, a->dtype);
		load_row(y, c->o, off, a->d, a->dtype);
		for (int p = 0; p < a->d; p++)
			s += (double)x[p] * y[p];
		c->D[(size_t)bh * a->Nq + i] = (float)s;
	}
}

static size_t bwd_slot(int d, int dp)
{
	return 2 * (size_t)d * BWD_BC + 3 * (size_t)BWD_BC * dp +
	       3 * (size_t)BWD_BR * dp + 2 * BWD_BR * BWD_BC + dp;
}

/* The buffers of one backward slot, carved in bwd_item. */
struct bwd_buf {
	float *Kt, *Vt, *K, *dK, *dV, *Q, *dO, *dQ, *S, *dP, *row;
};

/* P = exp(scale S - lse) in S, masked and dead rows zero. */
static void bwd_probs(struct ctx *c, float *S, int bh, int i0, int mr,
		      int j0, int nc)
{
	int ncp = round8(nc);

	for (int r = 0; r < mr; r++) {
		float *s = S + r * BWD_BC;
		float lse = c->lse_in[(size_t)bh * c->a.Nq + i0 + r];
		int lim = vis(c, i0 + r) - j0;

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

/* One q tile [i0, i0+mr) of head bh against the packed kv tile. */
static void bwd_pair(struct ctx *c, struct bwd_buf *w, int bh, int i0,
		     int mr, int j0, int nc, float *dqrows)
{
	const struct hk_attn_ops *ops = c->ops;
	int d = c->a.d, dp = c->dp, ncp = round8(nc);
	const float *D = c->D + (size_t)bh * c->a.Nq + i0;

	pack_q_rows(c, c->q, bh, i0, mr, w->Q);
	pack_q_rows(c, c->dout, bh, i0, mr, w->dO);
	ops->gemm(mr, ncp, d, w->Q, dp, 1, w->Kt, BWD_BC, w->S, BWD_BC, 0);
	bwd_probs(c, w->S, bh, i0, mr, j0, nc);
	/* dV += P^T dO */
	ops->gemm(nc, dp, mr, w->S, 1, BWD_BC, w->dO, dp, w->dV, dp, 1);
	/* dP = dO V^T, then dS = P (dP - D) in dP */
	ops->gemm(mr, ncp, d, w->dO, dp, 1, w->Vt, BWD_BC, w->dP, BWD_BC, 0);
	for (int r = 0; r < mr; r++) {
		float *p = w->S + r * BWD_BC, *ds = w->dP + r * BWD_BC;

		for (int j = 0; j < ncp; j++)
			ds[j] = p[j] * (ds[j] - D[r]);
	}
	/* dK += dS^T Q, dQ = dS K */
	ops->gemm(nc, dp, mr, w->dP, 1, BWD_BC, w->Q, dp, w->dK, dp, 1);
	ops->gemm(mr, dp, nc, w->dP, BWD_BC, 1, w->K, dp, w->dQ, dp, 0);
	for (int r = 0; r < mr; r++) {
		float *acc = dqrows + ((size_t)i0 + r) * d;
		const float *x = w->dQ + (size_t)r * dp;

		for (int p = 0; p < d; p++)
			acc[p] += c->a.scale * x[p];
	}
}

/* dq accumulator rows of head bh for chunk ch. */
static float *dq_rows(struct ctx *c, int bh, int ch)
{
	size_t n = (size_t)c->a.B * c->a.H * c->a.Nq * c->a.d;

	if (!c->dqacc)
		return (float *)c->dq + (size_t)bh * c->a.Nq * c->a.d;
	return c->dqacc + ch * n + (size_t)bh * c->a.Nq * c->a.d;
}

static void bwd_tile(struct ctx *c, struct bwd_buf *w, int b, int g, int ch,
		     int j0)
{
	const struct hk_attn *a = &c->a;
	int nc = a->Nk - j0 < BWD_BC ? a->Nk - j0 : BWD_BC, dp = c->dp;
	int istart = a->causal ? j0 - c->off : 0;

	istart = istart < 0 ? 0 : istart / BWD_BR * BWD_BR;
	pack_kt(c, c->k, b, g, j0, nc, w->Kt, BWD_BC, w->row);
	pack_kt(c, c->v, b, g, j0, nc, w->Vt, BWD_BC, w->row);
	pack_kv_rows(c, c->k, b, g, j0, nc, w->K);
	memset(w->dK, 0, (size_t)nc * dp * sizeof(float));
	memset(w->dV, 0, (size_t)nc * dp * sizeof(float));
	for (int h = g * c->grp; h < (g + 1) * c->grp; h++) {
		int bh = b * a->H + h;
		float *dq = dq_rows(c, bh, ch);

		for (int i0 = istart; i0 < a->Nq; i0 += BWD_BR)
			bwd_pair(c, w, bh, i0,
				 a->Nq - i0 < BWD_BR ? a->Nq - i0 : BWD_BR,
				 j0, nc, dq);
	}
	for (int j = 0; j < nc; j++) {
		size_t off = (((size_t)b * a->Hkv + g) * a->Nk + j0 + j) * a->d;

		store_row(c->dk, off, w->dK + (size_t)j * dp, a->d, a->dtype,
			  a->scale);
		store_row(c->dv, off, w->dV + (size_t)j * dp, a->d, a->dtype,
			  1.0f);
	}
}

static void bwd_item(struct ctx *c, float *slot, int it)
{
	const struct hk_attn *a = &c->a;
	int d = a->d, dp = c->dp;
	int ntk = (a->Nk + BWD_BC - 1) / BWD_BC;
	int ch = it % c->nchunk, bg = it / c->nchunk;
	int b = bg / a->Hkv, g = bg % a->Hkv;
	int t0 = ch * c->per_chunk, t1 = t0 + c->per_chunk;
	struct bwd_buf w;

	w.Kt = slot;
	w.Vt = w.Kt + d * BWD_BC;
	w.K = w.Vt + d * BWD_BC;
	w.dK = w.K + BWD_BC * dp;
	w.dV = w.dK + BWD_BC * dp;
	w.Q = w.dV + BWD_BC * dp;
	w.dO = w.Q + BWD_BR * dp;
	w.dQ = w.dO + BWD_BR * dp;
	w.S = w.dQ + BWD_BR * dp;
	w.dP = w.S + BWD_BR * BWD_BC;
	w.row = w.dP + BWD_BR * BWD_BC;
	for (int t = t0; t < t1 && t < ntk; t++)
		bwd_tile(c, &w, b, g, ch, t * BWD_BC);
}

/* dq = sum over chunks of dqacc (chunk order), converted; per (b, h). */
static void bwd_dq_item(struct ctx *c, float *slot, int bh)
{
	const struct hk_attn *a = &c->a;
	size_t n = (size_t)a->B * a->H * a->Nq * a->d;

	for (int i = 0; i < a->Nq; i++) {
		size_t off = ((size_t)bh * a->Nq + i) * a->d;

		for (int p = 0; p < a->d; p++) {
			float s = 0;

			for (int ch = 0; ch < c->nchunk; ch++)
				s += c->dqacc[ch * n + off + p];
			slot[p] = s;
		}
		store_row(c->dq, off, slot, a->d, a->dtype, 1.0f);
	}
}

/* How many chunks the key axis of one (b, kv head) is split into: from
 * the shape only, so results do not depend on the thread count. */
static void bwd_chunks(struct ctx *c)
{
	const struct hk_attn *a = &c->a;
	int ntk = (a->Nk + BWD_BC - 1) / BWD_BC, want;

	want = (8 + a->B * a->Hkv - 1) / (a->B * a->Hkv);
	want = want > MAX_CHUNKS ? MAX_CHUNKS : want;
	want = want > ntk ? ntk : want;
	want = want < 1 ? 1 : want;
	c->per_chunk = ntk ? (ntk + want - 1) / want : 1;
	c->nchunk = ntk ? (ntk + c->per_chunk - 1) / c->per_chunk : 1;
}

static int bwd_run(struct ctx *c)
{
	const struct hk_attn *a = &c->a;
	size_t nq = (size_t)a->B * a->H * a->Nq;
	int r;

	c->D = malloc((nq ? nq : 1) * sizeof(float));
	if (!c->D)
		return -ENOMEM;
	bwd_chunks(c);
	if (c->nchunk > 1 || a->dtype != HK_F32) {
		c->dqacc = calloc(c->nchunk * nq * a->d + 1, sizeof(float));
		if (!c->dqacc) {
			r = -ENOMEM;
			goto out_free_d;
		}
	} else {
		memset(c->dq, 0, nq * a->d * sizeof(float));
	}
	r = run(c, a->B * a->H, 2 * a->d, bwd_d_item);
	if (!r)
		r = run(c, a->B * a->Hkv * c->nchunk, bwd_slot(a->d, c->dp),
			bwd_item);
	if (!r && c->dqacc)
		r = run(c, a->B * a->H, a->d, bwd_dq_item);
	free(c->dqacc);
out_free_d:
	free(c->D);
	return r;
}

int hk_attn_bwd(const struct hk_attn *a, const void *q, const void *k,
		const void *v, const void *o, const float *lse,
		const void *dout, void *dq, void *dk, void *dv)
{
	struct ctx c;
	int r = setup(&c, a);

	if (r)
		return r;
	a = &c.a;
	if (!a->B || !a->H)
		return 0;
	if (a->Nq && (!q || !o || !lse || !dout || !dq))
		return bad("hk_attn_bwd: NULL q, o, lse, dout or dq%.0d", 0);
	if (a->Nk && (!k || !v || !dk || !dv))
		return bad("hk_attn_bwd: NULL k, v, dk or dv%.0d", 0);
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
