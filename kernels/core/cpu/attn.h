/* SPDX-License-Identifier: MIT */
/*
 * attn.h — inside the CPU attention.  attn.c: validation, packing,
 * threading, the forward; attn_bwd.c: the backward; attn_scalar.c /
 * attn_avx2.c / attn_avx512.c: one hk_attn_ops each, the primitives the
 * tiles run on; attn_amx.c (bf16 only): two, AMX tiles and AVX512-BF16's
 * vdpbf16ps.  All buffers here are fp32 (bf16 where ops->pack_b packs
 * them), allocated by attn.c / attn_bwd.c for one call and freed before
 * it returns.
 */
#ifndef HK_CPU_ATTN_H
#define HK_CPU_ATTN_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "hk_attn.h"

#ifndef HK_ATTN_BR		/* -D overrides: for tuning runs only */
#define HK_ATTN_BR	64	/* query rows per tile */
#endif
#ifndef HK_ATTN_BC
#define HK_ATTN_BC	128	/* keys per tile, a multiple of 8 */
#endif
/*
 * Row stride of the Kt / Vt tiles and of S, dP: BC + 8 floats, so that
 * the rows of one 16-column panel do not all fall in the same few L1 sets
 * (a 512-byte stride maps every 8th row to one set of an 8-way 32 KiB L1).
 */
#define HK_ATTN_LDT	(HK_ATTN_BC + 8)
/*
 * Column panel width of the forward's packed V (vp): V tile t is stored
 * as dp / 16 panels (the last 8 wide when dp % 16 == 8), each BC rows of
 * 16 contiguous floats, so the panel the P V gemm keeps in L1 is one
 * contiguous 8 KiB block.  Rows of dp floats at d = 128 are 512 bytes
 * apart and a 128-row panel of them falls in 8 of the L1's 64 sets.  The
 * backward keeps K the same way (kp) for dQ += dS K.
 */
#define HK_ATTN_VPW	16

struct hk_attn_ops {
	const char *name;
	/* 1: the P V and dS K products run on whole rows of V and K (V, K
	 * packed in one panel dp wide), not on 16-column panels */
	int wide;
	/*
	 * C[m][n] = (acc ? C : 0) + A * B, A is m x k with A(i,p) at
	 * a[i * ars + p * acs] (so a transposed A costs nothing), B is k x n
	 * row-major with row stride ldb, C row stride ldc.  n is a multiple
	 * of 8; b and c rows hold n valid floats.  m, k >= 0.  With
	 * pack_b, ldb < 0 means b was packed by pack_b with np = -ldb.
	 */
	void (*gemm)(int m, int n, int k, const float *a, long ars, long acs,
		     const float *b, long ldb, float *c, long ldc, int acc);
	/*
	 * NULL, or: B(p, j) = b[p * ldb + j] (p < k, j < n; zero beyond,
	 * up to kp and np, multiples of 32) into dst in the gemm's own
	 * layout, kp * np bf16.  attn.c packs the K, V tiles so, once a call.
	 */
	void (*pack_b)(uint16_t *dst, int n, int k, int np, int kp,
		       const float *b, long ldb);
	/* NULL, or run by each thread before its first item: 0 or -ENOMEM */
	int (*prepare)(void);
	/* max of x[0..n), -INFINITY for n == 0 */
	float (*rowmax)(const float *x, int n);
	/*
	 * x[i] = exp(x[i] * mul - sub) for i < n, -INFINITY giving exactly 0;
	 * returns the sum of the new x.  n is a multiple of 8.
	 */
	float (*exp_sum)(float *x, int n, float mul, float sub);
	/* ds[i] = mul * p[i] * (ds[i] - sub), n a multiple of 8 */
	void (*dsoft)(float *ds, const float *p, int n, float sub, float mul);
	/*
	 * The bf16 rows of a call, read once into the fp32 tiles and written
	 * once from them (attn.c): dst[i] = src[i] for i < n, any n >= 0;
	 * to_bf16 rounds to nearest even, any NaN giving 0x7fc0 (hk_f32_bf16).
	 */
	void (*from_bf16)(float *dst, const uint16_t *src, int n);
	void (*to_bf16)(uint16_t *dst, const float *src, int n);
};

extern const struct hk_attn_ops hk_attn_scalar_ops;
extern const struct hk_attn_ops hk_attn_avx2_ops;
extern const struct hk_attn_ops hk_attn_avx512_ops;
extern const struct hk_attn_ops hk_attn_amx_ops;
extern const struct hk_attn_ops hk_attn_dpbf16_ops;	/* attn_amx.c */
/* isa.c: 1 if the CPU has AVX-512 and AVX512-BF16 (vdpbf16ps) */
int hk_avx512_bf16(void);
/* attn_avx2.c's conversions, shared with attn_avx512.c and attn_amx.c (a
 * CPU with AVX-512 has AVX2; the conversion is bound by memory) */
void hk_attn_avx2_from_bf16(float *dst, const uint16_t *src, int n);
void hk_attn_avx2_to_bf16(uint16_t *dst, const float *src, int n);
/* attn_avx512.c's primitives, shared with attn_amx.c */
float hk_attn_avx512_rowmax(const float *x, int n);
float hk_attn_avx512_exp_sum(float *x, int n, float mul, float sub);
void hk_attn_avx512_dsoft(float *ds, const float *p, int n, float sub,
			  float mul);

/*
 * One call's state, on the caller's stack for the length of one
 * hk_attn_fwd / hk_attn_bwd.  The f32 views (qf, dof) have rows of dp
 * floats: the caller's own arrays when they are dense fp32 with d % 8 == 0,
 * else, in a backward whose key axis is split, packed copies (own[],
 * freed by hk_attn_ctx_fini); otherwise they are NULL and each item
 * converts the rows it alone reads into its slot (the forward's q tile;
 * the backward's q and dout rows of one kv head's query heads).
 */
struct hk_attn_ctx {
	struct hk_attn a;		/* defaults resolved */
	const struct hk_attn_ops *ops;
	int grp, dp, off, ntq, ntk;	/* H/Hkv, d rounded to 8, Nk - Nq */
	const void *q, *k, *v, *o, *dout;
	void *out, *dq, *dk, *dv;
	float *lse;
	const float *lse_in;
	const float *qf, *dof;		/* [bh][N][dp] */
	float *kt, *vt;			/* [bg][tile][d][BC] transposed */
	float *vp;			/* forward V: [bg][tile][panel][BC][16] */
	float *kp;			/* backward K, laid out like vp */
	/* With ops->pack_b the tiles of kt, vt, vp, kp are packed by it: */
	size_t kt_sz, vp_sz;		/* floats per tile of kt / vt, vp / kp */
	long ldkt;			/* gemm's ldb for kt, vt: LDT or -BC */
	int npv;			/* vp, kp: pack_b's np (dp rounded to 32) */
	float *own[8];			/* packed copies to free */
	float *D;			/* [B*H*Nq], backward */
	float *dqf;			/* [nchunk][B*H*Nq][dp], dq itself or
					   NULL: in each item's slot */
	int nchunk, per_chunk;		/* kv tiles per chunk */
	int pack_v_t;			/* also pack V transposed */
	/* the job hk_parallel runs */
	void (*item)(struct hk_attn_ctx *c, float *slot, int i);
	int nitems;
	atomic_int next;
	atomic_int err;			/* ops->prepare failed: -ENOMEM */
	float *slots;			/* nparts * slot_floats */
	size_t slot_floats;
};

int hk_attn_setup(struct hk_attn_ctx *c, const struct hk_attn *a);
/*
 * Also called by cuda/attn.cu (declared there, extern "C"): validate *a
 * and resolve its defaults (Hkv, scale) into *out; and keep a message for
 * hk_attn_strerror() and return -EINVAL.
 */
int hk_attn_resolve(const struct hk_attn *a, struct hk_attn *out);
int hk_attn_bad(const char *fmt, int v);
/* Rows [j0, j0 + n) of kv head g of batch b (or, for g < 0, of q or dout
 * head b = batch * H + head) as fp32 rows of dp floats, zero padded. */
void hk_attn_pack_rows(const struct hk_attn_ctx *c, const void *src,
		       float *dst, int b, int g, int j0, int n);
/* Pack what the call needs (kt, vt, f32 views); -ENOMEM. */
int hk_attn_pack(struct hk_attn_ctx *c, int need_dout);
void hk_attn_ctx_fini(struct hk_attn_ctx *c);
/* Run item(c, slot, i) for i < nitems on hk_parallel; -ENOMEM. */
int hk_attn_run(struct hk_attn_ctx *c, int nitems, size_t slot_floats,
		void (*item)(struct hk_attn_ctx *, float *, int));
int hk_attn_vis(const struct hk_attn_ctx *c, int i);	/* keys row i sees */
/* Row of d floats into the output array base (dtype c->a.dtype) at
 * element off. */
void hk_attn_store_row(const struct hk_attn_ctx *c, void *base, size_t off,
		       const float *src, int d);

/* gemm's ldb for a panel of vp or kp w wide. */
static inline long hk_attn_ldv(const struct hk_attn_ctx *c, int w)
{
	return c->ops->pack_b ? -c->npv : w;
}

/* Column panel width of vp and kp (attn.h, HK_ATTN_VPW). */
static inline int hk_attn_vpw(const struct hk_attn_ctx *c)
{
	return c->ops->wide ? c->dp : HK_ATTN_VPW;
}

static inline float hk_bf16_f32(uint16_t h)
{
	union { uint32_t u; float f; } x = { .u = (uint32_t)h << 16 };

	return x.f;
}

/* Nearest even; any NaN gives 0x7fc0. */
static inline uint16_t hk_f32_bf16(float f)
{
	union { uint32_t u; float f; } x = { .f = f };

	if (f != f)
		return 0x7fc0;
	return (x.u + 0x7fff + ((x.u >> 16) & 1)) >> 16;
}

static inline int hk_round8(int n)
{
	return (n + 7) & ~7;
}

#endif /* HK_CPU_ATTN_H */
