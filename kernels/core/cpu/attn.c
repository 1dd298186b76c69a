// SPDX-License-Identifier: MIT
/*
 * attn.c — FlashAttention-2 on the CPU (hk_attn.h): validation, packing,
 * threading and the forward; the backward is attn_bwd.c.  The per-ISA
 * primitives (a register-blocked gemm, a vectorized exp) sit behind
 * struct hk_attn_ops (attn.h).
 *
 * Packing, once per call, in parallel over (batch, kv head, kv tile): K
 * gathered through the block table and transposed into tiles Kt[d][BC]
 * (so S = Q Kt is a plain row-major gemm), V (forward) or V^T and K
 * (backward) likewise; the backward copies Q and dout into fp32 rows only
 * when they are not already dense fp32 with d % 8 == 0, the forward
 * converts each Q tile into its item's slot.  O(N d) extra, never N x N.
 * bf16 is converted to fp32 there, once, by ops->from_bf16 (and results
 * back by ops->to_bf16), so the products run the same fp32 kernels and
 * bf16 pays only the vector conversion.
 *
 * Forward, one work item per (batch, head, q tile of BR rows): for each
 * KV tile of BC keys in token order, S = Q Kt; per row the running max m
 * and sum l are updated and O rescaled (online softmax); O += P V.  At the
 * end o = O / l and lse = m + log l; a row that saw no key gets o = 0 and
 * lse = -inf.
 *
 * Tiles: 64 query rows x 128 keys (attn.h; measured against 64 x 64,
 * 96 x 64, 128 x 64, 64 x 256 and 48 x 128 in CPU seconds at d = 64 and
 * 128: the best, by ~10% in the backward).  At d = 128 one forward item
 * touches Q (32 KiB), one Kt and one V tile (64 KiB each), S (32 KiB) and
 * O (32 KiB): 224 KiB, inside a core's L2, with one 16-column panel of B
 * (<= 16 KiB) in L1 during each gemm.  The forward's V is packed into
 * contiguous 16-column panels (vp): read in place, its 512-byte rows at
 * d = 128 fell in 8 L1 sets and the P V panel was refetched from L2 for
 * every 6 rows (17% of forward CPU time at d = 128, 12% at d = 64).  The
 * gemm sums each element in the same order either way, so the bits are
 * the same.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk.h"
#include "attn.h"

#define BR HK_ATTN_BR
#define BC HK_ATTN_BC
#define LDT HK_ATTN_LDT

static __thread char err_msg[200];
static int forced_isa = -1;

/* ---- types and rows --------------------------------------------------- */

static void load_row(const struct hk_attn_ctx *c, float *dst,
		     const void *base, size_t off, int d)
{
	if (c->a.dtype == HK_F32)
		memcpy(dst, (const float *)base + off, d * sizeof(float));
	else
		c->ops->from_bf16(dst, (const uint16_t *)base + off, d);
}

void hk_attn_store_row(const struct hk_attn_ctx *c, void *base, size_t off,
		       const float *src, int d)
{
	if (c->a.dtype == HK_F32)
		memcpy((float *)base + off, src, d * sizeof(float));
	else
		c->ops->to_bf16((uint16_t *)base + off, src, d);
}

/* Offset (in elements) of key/value row t of (b, kv head g). */
static inline size_t kv_off(const struct hk_attn_ctx *c, int b, int g, int t)
{
	const struct hk_attn *a = &c->a;
	int32_t blk;

	if (!a->block_table)
		return (((size_t)b * a->Hkv + g) * a->Nk + t) * a->d;
	blk = a->block_table[(size_t)b * a->max_blocks + t / a->block_size];
	return (((size_t)blk * a->Hkv + g) * a->block_size +
		t % a->block_size) * a->d;
}

int hk_attn_vis(const struct hk_attn_ctx *c, int i)
{
	int n;

	if (!c->a.causal)
		return c->a.Nk;
	n = i + c->off + 1;
	return n < 0 ? 0 : n > c->a.Nk ? c->a.Nk : n;
}

/* ---- running items on threads ---------------------------------------- */

static void part_fn(void *arg, int part, int nparts)
{
	struct hk_attn_ctx *c = arg;
	float *slot = c->slots + (size_t)part * c->slot_floats;

	if (c->ops->prepare && c->ops->prepare()) {
		atomic_store(&c->err, -ENOMEM);
		return;
	}
	for (;;) {
		int i = atomic_fetch_add(&c->next, 1);

		if (i >= c->nitems)
			return;
		c->item(c, slot, i);
	}
}

int hk_attn_run(struct hk_attn_ctx *c, int nitems, size_t slot_floats,
		void (*item)(struct hk_attn_ctx *, float *, int))
{
	int nparts = hk_threads();

	if (nitems <= 0)
		return 0;
	if (nparts > nitems)
		nparts = nitems;
	c->slot_floats = (slot_floats + 15) & ~(size_t)15;
	if (posix_memalign((void **)&c->slots, 64,
			   (nparts * c->slot_floats + 16) * sizeof(float)))
		return -ENOMEM;
	c->item = item;
	c->nitems = nitems;
	atomic_store(&c->next, 0);
	atomic_store(&c->err, 0);
	hk_parallel(nparts, part_fn, c);
	free(c->slots);
	c->slots = NULL;
	return atomic_load(&c->err);
}

/* ---- packing ---------------------------------------------------------- */

/* Kt tile t of kv head bg: rows j of the tile become columns. */
static void pack_t(struct hk_attn_ctx *c, const void *src, float *dst,
		   int b, int g, int t, float *row)
{
	int d = c->a.d, j0 = t * BC;
	int nc = c->a.Nk - j0 < BC ? c->a.Nk - j0 : BC;

	for (int j = 0; j < nc; j++) {
		load_row(c, row, src, kv_off(c, b, g, j0 + j), d);
		for (int p = 0; p < d; p++)
			dst[p * LDT + j] = row[p];
	}
	for (int p = 0; p < d; p++)
		for (int j = nc; j < BC; j++)
			dst[p * LDT + j] = 0;
}

/* Tile t of src (V or K) of kv head bg into column panels (attn.h,
 * HK_ATTN_VPW). */
static void pack_vp(struct hk_attn_ctx *c, const void *src, float *dst,
		    int b, int g, int t, float *row)
{
	int d = c->a.d, dp = c->dp, j0 = t * BC, vpw = hk_attn_vpw(c);
	int nc = c->a.Nk - j0 < BC ? c->a.Nk - j0 : BC;

	for (int j = 0; j < nc; j++) {
		load_row(c, row, src, kv_off(c, b, g, j0 + j), d);
		memset(row + d, 0, (dp - d) * sizeof(float));
		for (int p0 = 0; p0 < dp; p0 += vpw) {
			int w = dp - p0 < vpw ? dp - p0 : vpw;

			memcpy(dst + (size_t)p0 * BC + j * w, row + p0,
			       w * sizeof(float));
		}
	}
}

void hk_attn_pack_rows(const struct hk_attn_ctx *c, const void *src,
		       float *dst, int b, int g, int j0, int n)
{
	int d = c->a.d;

	for (int j = 0; j < n; j++) {
		float *r = dst + (size_t)j * c->dp;
		size_t off = g >= 0 ? kv_off(c, b, g, j0 + j) :
			     ((size_t)b * c->a.Nq + j0 + j) * d;

		load_row(c, r, src, off, d);
		memset(r + d, 0, (c->dp - d) * sizeof(float));
	}
}

/* Kt / Vt tile (vp = 0) or vp / kp tile (vp = 1) into dst, through
 * ops->pack_b when there is one (its fp32 input in row + dp). */
static void pack_tile(struct hk_attn_ctx *c, const void *src, float *dst,
		      int b, int g, int t, float *row, int vp)
{
	const struct hk_attn_ops *ops = c->ops;
	float *tmp = ops->pack_b ? row + c->dp : dst;
	int nc = c->a.Nk - t * BC < BC ? c->a.Nk - t * BC : BC;

	if (vp)
		pack_vp(c, src, tmp, b, g, t, row);
	else
		pack_t(c, src, tmp, b, g, t, row);
	if (!ops->pack_b)
		return;
	if (vp)		/* B = V or K rows [nc][dp], k along the keys */
		ops->pack_b((uint16_t *)dst, c->dp, nc, c->npv, BC, tmp,
			    c->dp);
	else		/* B = Kt or Vt [d][BC] */
		ops->pack_b((uint16_t *)dst, BC, c->a.d, BC,
			    (c->a.d + 31) / 32 * 32, tmp, LDT);
}

static void pack_item(struct hk_attn_ctx *c, float *row, int it)
{
	const struct hk_attn *a = &c->a;
	int nkv = a->B * a->Hkv * c->ntk;

	if (it < nkv) {		/* one kv tile */
		int bg = it / c->ntk, t = it % c->ntk;
		int b = bg / a->Hkv, g = bg % a->Hkv;
		size_t tile = (size_t)bg * c->ntk + t;

		pack_tile(c, c->k, c->kt + tile * c->kt_sz, b, g, t, row, 0);
		if (c->vp)
			pack_tile(c, c->v, c->vp + tile * c->vp_sz, b, g, t,
				  row, 1);
		if (c->kp)
			pack_tile(c, c->k, c->kp + tile * c->vp_sz, b, g, t,
				  row, 1);
		if (c->vt)
			pack_tile(c, c->v, c->vt + tile * c->kt_sz, b, g, t,
				  row, 0);
		return;
	}
	it -= nkv;		/* q, dout rows of one (batch, head) */
	if (c->own[4])
		hk_attn_pack_rows(c, c->q, c->own[4] +
				  (size_t)it * a->Nq * c->dp, it, -1, 0, a->Nq);
	if (c->own[5])
		hk_attn_pack_rows(c, c->dout, c->own[5] +
				  (size_t)it * a->Nq * c->dp, it, -1, 0, a->Nq);
}

static float *alloc_f(size_t n)
{
	float *p = NULL;

	return posix_memalign((void **)&p, 64, (n + 16) * sizeof(float)) ?
	       NULL : p;
}

/*
 * Forward (bwd = 0): kt, vp.  Backward: kt, vt, kp, and qf, dof when the
 * key axis is split (else each item converts its own rows, attn_bwd.c).
 * own[]: 0 kt, 1 vt, 2 kf and 3 vf (unused), 4 qf, 5 dof, 6 vp, 7 kp.
 */
int hk_attn_pack(struct hk_attn_ctx *c, int bwd)
{
	const struct hk_attn *a = &c->a;
	size_t nt = (size_t)a->B * a->Hkv * c->ntk * c->kt_sz;
	size_t nkv = (size_t)a->B * a->Hkv * a->Nk * c->dp;
	size_t nq = (size_t)a->B * a->H * a->Nq * c->dp;
	int plain = a->dtype == HK_F32 && a->d % 8 == 0;
	size_t nvp = (size_t)a->B * a->Hkv * c->ntk * c->vp_sz;
	size_t tmp = (size_t)a->d * LDT > (size_t)BC * c->dp ?
		     (size_t)a->d * LDT : (size_t)BC * c->dp;
	int copy = bwd && !plain && c->nchunk > 1;	/* q, dout as fp32 */
	int want[8] = { 1, bwd, 0, 0, copy, copy, !bwd, bwd };
	size_t len[8] = { nt, nt, nkv, nkv, nq, nq, nvp, nvp };
	int r;

	for (int i = 0; i < 8; i++)
		if (want[i] && !(c->own[i] = alloc_f(len[i])))
			return -ENOMEM;
	c->kt = c->own[0];
	c->vt = c->own[1];
	c->vp = c->own[6];
	c->kp = c->own[7];
	c->qf = c->own[4] ? c->own[4] : plain ? (const float *)c->q : NULL;
	c->dof = c->own[5] ? c->own[5] : plain ? (const float *)c->dout : NULL;
	r = hk_attn_run(c, a->B * a->Hkv * c->ntk + (copy ? a->B * a->H : 0),
			c->dp + (c->ops->pack_b ? tmp : 0), pack_item);
	return r;
}

void hk_attn_ctx_fini(struct hk_attn_ctx *c)
{
	for (int i = 0; i < 8; i++)
		free(c->own[i]);
}

/* ---- validation ------------------------------------------------------- */

int hk_attn_bad(const char *fmt, int v)
{
	snprintf(err_msg, sizeof(err_msg), fmt, v);
	return -EINVAL;
}

static int check(const struct hk_attn *a)
{
	if (a->B < 0 || a->H < 0 || a->Hkv < 0)
		return hk_attn_bad("hk_attn: negative B, H or Hkv (%d)",
				   a->B < 0 ? a->B : a->H < 0 ? a->H : a->Hkv);
	if (a->H && a->H % a->Hkv)
		return hk_attn_bad("hk_attn: H is not a multiple of Hkv (%d)",
				   a->Hkv);
	if (a->Nq < 0 || a->Nk < 0)
		return hk_attn_bad("hk_attn: negative Nq or Nk (%d)",
				   a->Nq < 0 ? a->Nq : a->Nk);
	if (a->d < 1 || a->d > 256)
		return hk_attn_bad("hk_attn: d = %d, must be 1..256", a->d);
	if (a->dtype != HK_F32 && a->dtype != HK_BF16)
		return hk_attn_bad("hk_attn: unknown dtype %d", a->dtype);
	if (!(a->scale >= 0) || isinf(a->scale))
		return hk_attn_bad("hk_attn: scale must be finite and >= 0%.0d",
				   0);
	if (a->block_table &&
	    (a->block_size < 1 || a->max_blocks < 0 ||
	     (long)a->block_size * a->max_blocks < a->Nk))
		return hk_attn_bad("hk_attn: block table of %d tokens is too "
				   "small for Nk", a->block_size * a->max_blocks);
	return 0;
}

int hk_attn_resolve(const struct hk_attn *a, struct hk_attn *out)
{
	int r;

	if (!a)
		return hk_attn_bad("hk_attn: NULL arguments%.0d", 0);
	*out = *a;
	if (out->Hkv == 0)
		out->Hkv = a->H;
	r = check(out);
	if (r)
		return r;
	if (out->scale == 0)
		out->scale = 1.0f / sqrtf((float)a->d);
	return 0;
}

/* The primitives of ISA level isa for dtype: bf16 products (AMX tiles,
 * else vdpbf16ps) only for bf16. */
static const struct hk_attn_ops *hk_attn_ops_for(int isa, int dtype)
{
	if (isa >= HK_ISA_AMX && dtype == HK_BF16 && hk_amx_enable())
		return &hk_attn_amx_ops;
	if (isa >= HK_ISA_AVX512 && dtype == HK_BF16 && hk_avx512_bf16())
		return &hk_attn_dpbf16_ops;
	return isa >= HK_ISA_AVX512 ? &hk_attn_avx512_ops :
	       isa == HK_ISA_AVX2 ? &hk_attn_avx2_ops : &hk_attn_scalar_ops;
}

int hk_attn_setup(struct hk_attn_ctx *c, const struct hk_attn *a)
{
	int r;

	memset(c, 0, sizeof(*c));
	r = hk_attn_resolve(a, &c->a);
	if (r)
		return r;
	c->grp = c->a.H ? c->a.H / c->a.Hkv : 1;
	c->dp = hk_round8(a->d);
	c->off = a->Nk - a->Nq;
	c->ntq = (a->Nq + BR - 1) / BR;
	c->ntk = (a->Nk + BC - 1) / BC;
	c->ops = hk_attn_ops_for(forced_isa >= 0 ? forced_isa : hk_isa(),
				 a->dtype);
	c->npv = (c->dp + 31) / 32 * 32;
	if (c->ops->pack_b) {	/* pack_b's kp x np bf16 */
		c->kt_sz = (size_t)(a->d + 31) / 32 * 32 * BC / 2;
		c->vp_sz = (size_t)BC * c->npv / 2;
		c->ldkt = -BC;
	} else {
		c->kt_sz = (size_t)a->d * LDT;
		c->vp_sz = (size_t)c->dp * BC;
		c->ldkt = LDT;
	}
	return 0;
}

const char *hk_attn_strerror(void)
{
	return err_msg;
}

int hk_attn_force_isa(int isa)
{
	if (isa < 0) {
		forced_isa = -1;
		return 0;
	}
	if (isa > HK_ISA_AMX || !hk_isa_supported(isa))
		return -ENOTSUP;
	forced_isa = isa;
	return 0;
}

const char *hk_attn_isa_name(int dtype)
{
	return hk_attn_ops_for(forced_isa >= 0 ? forced_isa : hk_isa(),
			       dtype)->name;
}

/* ---- forward ---------------------------------------------------------- */

/* Online-softmax update of rows [0, mr) of one S tile; leaves P in S. */
static void fwd_softmax(struct hk_attn_ctx *c, float *S, int mr, int i0,
			int j0, int nc, float *O, float *m, float *l)
{
	const struct hk_attn_ops *ops = c->ops;
	int ncp = hk_round8(nc);

	for (int r = 0; r < mr; r++) {
		float *s = S + r * LDT, *o = O + (size_t)r * c->dp;
		int lim = hk_attn_vis(c, i0 + r) - j0;
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
		if (alpha != 1)		/* dp % 8 == 0: vectorizes */
			for (int p = 0; p < c->dp; p += 8)
				for (int u = 0; u < 8; u++)
					o[p + u] *= alpha;
		m[r] = mnew;
	}
}

static void fwd_finish(struct hk_attn_ctx *c, int bh, int i0, int mr,
		       float *O, const float *m, const float *l)
{
	int d = c->a.d;

	for (int r = 0; r < mr; r++) {
		size_t row = (size_t)bh * c->a.Nq + i0 + r;
		float *o = O + (size_t)r * c->dp;

		if (l[r] > 0) {
			for (int p = 0; p < d; p++)
				o[p] /= l[r];
		} else {
			memset(o, 0, d * sizeof(float));
		}
		hk_attn_store_row(c, c->out, row * d, o, d);
		if (c->lse)
			c->lse[row] = l[r] > 0 ? m[r] + logf(l[r]) : -INFINITY;
	}
}

static void fwd_item(struct hk_attn_ctx *c, float *slot, int it)
{
	const struct hk_attn *a = &c->a;
	int dp = c->dp, d = a->d, vpw = hk_attn_vpw(c);
	int bh = it / c->ntq, i0 = it % c->ntq * BR;
	int bg = bh / a->H * a->Hkv + bh % a->H / c->grp;
	int mr = a->Nq - i0 < BR ? a->Nq - i0 : BR;
	float *S = slot, *O = S + BR * LDT, *m = O + BR * dp, *l = m + BR;
	float *Qt = l + BR;		/* BR x dp */
	const float *Q = Qt;
	int jend = hk_attn_vis(c, i0 + mr - 1);

	if (c->qf)	/* dense fp32, d % 8 == 0: read in place */
		Q = c->qf + ((size_t)bh * a->Nq + i0) * dp;
	else		/* this tile's rows as fp32, once, in the slot */
		hk_attn_pack_rows(c, c->q, Qt, bh, -1, i0, mr);

	memset(O, 0, (size_t)mr * dp * sizeof(float));
	for (int r = 0; r < mr; r++) {
		m[r] = -INFINITY;
		l[r] = 0;
	}
	for (int j0 = 0; j0 < jend; j0 += BC) {
		int nc = a->Nk - j0 < BC ? a->Nk - j0 : BC;
		size_t tile = (size_t)bg * c->ntk + j0 / BC;
		const float *Kt = c->kt + tile * c->kt_sz;
		const float *V = c->vp + tile * c->vp_sz;

		c->ops->gemm(mr, hk_round8(nc), d, Q, dp, 1, Kt, c->ldkt, S,
			     LDT, 0);
		fwd_softmax(c, S, mr, i0, j0, nc, O, m, l);
		for (int p0 = 0; p0 < dp; p0 += vpw) {
			int w = dp - p0 < vpw ? dp - p0 : vpw;

			c->ops->gemm(mr, w, nc, S, LDT, 1, V + (size_t)p0 * BC,
				     hk_attn_ldv(c, w), O + p0, dp, 1);
		}
	}
	fwd_finish(c, bh, i0, mr, O, m, l);
}

int hk_attn_fwd(const struct hk_attn *a, const void *q, const void *k,
		const void *v, void *o, float *lse)
{
	struct hk_attn_ctx c;
	int r = hk_attn_setup(&c, a);

	if (r)
		return r;
	a = &c.a;
	if (!a->B || !a->H || !a->Nq)
		return 0;
	if (!q || !o || (a->Nk && (!k || !v)))
		return hk_attn_bad("hk_attn_fwd: NULL q, k, v or o%.0d", 0);
	c.q = q;
	c.k = k;
	c.v = v;
	c.out = o;
	c.lse = lse;
	r = hk_attn_pack(&c, 0);
	if (!r)
		r = hk_attn_run(&c, a->B * a->H * c.ntq,
				BR * LDT + 2 * (size_t)BR * c.dp + 2 * BR,
				fwd_item);
	hk_attn_ctx_fini(&c);
	return r;
}
