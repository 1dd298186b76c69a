/* SPDX-License-Identifier: MIT */
/*
 * attn_ref.h — what test_attn_fwd.c and test_attn_bwd.c share: random
 * inputs, an fp64 reference and a naive fp32 implementation of attention
 * (materialising each softmax row), and the comparison rule.
 *
 * The rule: max |ours - fp64| <= 2 * max |naive fp32 - fp64| + slack, per
 * tensor, where slack = FLT_EPSILON * max |fp64| (one ulp of the
 * tensor's largest entry).  The slack is there because the naive error can
 * be exactly 0 (N = 1 gives o = v exactly; a dead row gives 0), where any
 * rounding of a different but equally valid summation order would fail a
 * pure ratio; a real bug (a wrong mask, a lost tile, a bad rescale) is
 * orders of magnitude larger.  For bf16 outputs each element may also be
 * off by the final rounding, 2^-8 |fp64|.
 *
 * A path that rounds the probabilities P and the score gradients dS to
 * bf16 before multiplying them (amx and avx512bf16 for bf16, as
 * FlashAttention-2 does on GPUs) is held to the same rule against a naive
 * fp32 that rounds them too (ar_naive_bf16: o = sum bf16(p) v,
 * dv = sum bf16(p) dout, dq, dk from bf16(ds)): it may not be more than
 * twice as far from fp64 as that naive, which is about 2^-9 of the sum
 * of |terms| (measured in these tests: 1e-4 to 2e-3 against 1e-7 to
 * 3e-5 for exact products).
 */
#ifndef HMM_TESTS_ATTN_REF_H
#define HMM_TESTS_ATTN_REF_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hk.h"
#include "hk_attn.h"
#include "t.h"

struct acase {
	int B, H, Hkv, Nq, Nk, d, causal, dtype;
	int bs;			/* block size for a paged copy, 0: dense */
};

static uint64_t ar_seed = 0x9e3779b97f4a7c15ull;

static float ar_rand(void)	/* uniform in [-1, 1) */
{
	ar_seed ^= ar_seed << 13;
	ar_seed ^= ar_seed >> 7;
	ar_seed ^= ar_seed << 17;
	return (float)((ar_seed >> 40) / (double)(1 << 23) - 1.0);
}

static inline uint16_t ar_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return (u + 0x7fff + ((u >> 16) & 1)) >> 16;
}

static inline float ar_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* n floats uniform in [-amp, amp), rounded to bf16 values if asked. */
static float *ar_fill(size_t n, float amp, int bf16)
{
	float *x = malloc((n ? n : 1) * sizeof(float));

	if (!x)
		t_fail_all("out of memory");
	for (size_t i = 0; i < n; i++) {
		x[i] = amp * ar_rand();
		if (bf16)
			x[i] = ar_f32(ar_bf16(x[i]));
	}
	return x;
}

/* The same values in the case's dtype (a new buffer). */
static void *ar_to(const float *x, size_t n, int dtype)
{
	void *p = malloc((n ? n : 1) * (dtype == HK_BF16 ? 2 : 4));

	if (!p)
		t_fail_all("out of memory");
	if (dtype == HK_F32)
		memcpy(p, x, n * 4);
	else
		for (size_t i = 0; i < n; i++)
			((uint16_t *)p)[i] = ar_bf16(x[i]);
	return p;
}

static float *ar_from(const void *p, size_t n, int dtype)
{
	float *x = malloc((n ? n : 1) * sizeof(float));

	if (!x)
		t_fail_all("out of memory");
	for (size_t i = 0; i < n; i++)
		x[i] = dtype == HK_F32 ? ((const float *)p)[i] :
					 ar_f32(((const uint16_t *)p)[i]);
	return x;
}

static int ar_vis(const struct acase *c, int i)
{
	int n = i + c->Nk - c->Nq + 1;

	if (!c->causal)
		return c->Nk;
	return n < 0 ? 0 : n > c->Nk ? c->Nk : n;
}

/* x as the case's dtype stores it. */
static inline float ar_stored(const struct acase *c, float x)
{
	return c->dtype == HK_BF16 ? ar_f32(ar_bf16(x)) : x;
}

/*
 * Attention in fp64 (T = double) or naive fp32 (T = float), one softmax
 * row at a time.  o, lse: outputs.  With dout: also dq, dk, dv
 * (zeroed here) as a softmax backward, dS = P (dP - D).  fp64 takes the
 * exact D = rowsum(P dP); naive fp32 takes the FlashAttention-2 formula
 * D = rowsum(dout * o) with o as the dtype stores it, as the kernel
 * under test must (with rowsum(P dP) an N = 1 row cancels exactly, while
 * any implementation of the specified formula cannot).  Inputs are float.
 */
#define AR_DEFINE(NAME, T, EXP, LOG, FA2D, R)                                    \
static void NAME(const struct acase *c, const float *q, const float *k,      \
		 const float *v, const float *dout, T *o, T *lse, T *dq,     \
		 T *dk, T *dv)                                               \
{                                                                            \
	int d = c->d, grp = c->H / c->Hkv;                                   \
	T scale = (T)1 / (T)sqrt((double)d);                                 \
	T *p = malloc((c->Nk + 1) * sizeof(T));                              \
	T *dp = malloc((c->Nk + 1) * sizeof(T));                             \
	size_t nkv = (size_t)c->B * c->Hkv * c->Nk * d;                      \
                                                                             \
	if (dk) {                                                            \
		memset(dk, 0, nkv * sizeof(T));                              \
		memset(dv, 0, nkv * sizeof(T));                              \
	}                                                                    \
	for (int b = 0; b < c->B; b++)                                       \
	for (int h = 0; h < c->H; h++)                                       \
	for (int i = 0; i < c->Nq; i++) {                                    \
		size_t bh = (size_t)b * c->H + h, row = bh * c->Nq + i;      \
		size_t kb = ((size_t)b * c->Hkv + h / grp) * c->Nk;          \
		const float *qi = q + row * d;                               \
		int n = ar_vis(c, i);                                        \
		T m = -INFINITY, l = 0, Dr = 0;                              \
                                                                             \
		for (int j = 0; j < n; j++) {                                \
			T s = 0;                                             \
			for (int x = 0; x < d; x++)                          \
				s += (T)qi[x] * (T)k[(kb + j) * d + x];      \
			p[j] = s * scale;                                    \
			m = p[j] > m ? p[j] : m;                             \
		}                                                            \
		for (int j = 0; j < n; j++)                                  \
			l += p[j] = EXP(p[j] - m);                           \
		for (int j = 0; j < n; j++)                                  \
			p[j] /= l;                                           \
		lse[row] = n ? m + LOG(l) : -INFINITY;                       \
		for (int x = 0; x < d; x++) {                                \
			T s = 0;                                             \
			for (int j = 0; j < n; j++)                          \
				s += R(p[j]) * (T)v[(kb + j) * d + x];       \
			o[row * d + x] = s;                                  \
		}                                                            \
		if (!dq)                                                     \
			continue;                                            \
		for (int j = 0; j < n; j++) {                                \
			T s = 0;                                             \
			for (int x = 0; x < d; x++)                          \
				s += (T)dout[row * d + x] *                  \
				     (T)v[(kb + j) * d + x];                 \
			dp[j] = s;                                           \
			Dr += p[j] * s;                                      \
		}                                                            \
		if (FA2D) {	/* D = rowsum(dout * o), o as stored */      \
			Dr = 0;                                              \
			for (int x = 0; x < d; x++)                          \
				Dr += (T)dout[row * d + x] *                 \
				      ar_stored(c, o[row * d + x]);          \
		}                                                            \
		for (int x = 0; x < d; x++)                                  \
			dq[row * d + x] = 0;                                 \
		for (int j = 0; j < n; j++) {                                \
			T ds = R(p[j] * (dp[j] - Dr) * scale), pj = R(p[j]); \
			for (int x = 0; x < d; x++) {                        \
				dq[row * d + x] += ds * (T)k[(kb + j) * d + x]; \
				dk[(kb + j) * d + x] += ds * (T)qi[x];       \
				dv[(kb + j) * d + x] +=                      \
					pj * (T)dout[row * d + x];           \
			}                                                    \
		}                                                            \
	}                                                                    \
	free(p);                                                             \
	free(dp);                                                            \
}
#define AR_EXACT(x) (x)
#define AR_BF16(x) ar_f32(ar_bf16(x))
AR_DEFINE(ar_ref64, double, exp, log, 0, AR_EXACT)
AR_DEFINE(ar_naive32, float, expf, logf, 1, AR_EXACT)
AR_DEFINE(ar_naive_bf16, float, expf, logf, 1, AR_BF16)

/* 1 when the path a call of c's dtype takes now rounds P and dS to bf16
 * (amx, and avx512bf16's vdpbf16ps). */
static int ar_rounds_pds(const struct acase *c)
{
	const char *isa = hk_attn_isa_name(c->dtype);

	return !strcmp(isa, "amx") || !strcmp(isa, "avx512bf16");
}

/* The naive fp32 that the path under test is held to (see above). */
static void ar_naive(const struct acase *c, const float *q, const float *k,
		     const float *v, const float *dout, float *o, float *lse,
		     float *dq, float *dk, float *dv)
{
	if (ar_rounds_pds(c))
		ar_naive_bf16(c, q, k, v, dout, o, lse, dq, dk, dv);
	else
		ar_naive32(c, q, k, v, dout, o, lse, dq, dk, dv);
}

static double ar_maxabs(const double *r, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++)
		m = fabs(r[i]) > m ? fabs(r[i]) : m;
	return m;
}

/*
 * The rule above for one tensor: ours (float values of the output),
 * naive fp32, fp64.  `scale` is a floor for max |fp64| in the slack: the
 * gradients pass the largest of |dq|, |dk|, |dv| (a gradient that is
 * exactly 0 in exact arithmetic, like dq at N = 1, is a cancellation
 * dP - D whose rounding is that of the gradients around it).  Prints
 * both errors; returns 1 if within.
 */
static int ar_check(const char *what, const char *name, const float *ours,
		    const float *naive, const double *ref, size_t n,
		    int bf16out, double scale)
{
	double mx = ar_maxabs(ref, n), en = 0, eo = 0, slack;
	int ok;

	for (size_t i = 0; i < n; i++) {
		double a = fabs(naive[i] - ref[i]);
		double b = fabs(ours[i] - ref[i]);

		if (bf16out)
			b -= ldexp(fabs(ref[i]), -8) * (1 + 1e-3);
		if (isnan(ours[i]))
			b = INFINITY;
		en = a > en ? a : en;
		eo = b > eo ? b : eo;
	}
	slack = FLT_EPSILON * (mx > scale ? mx : scale);
	ok = eo <= 2 * en + slack;
	t_ok(ok, "%s: %s err %.3g <= 2 x naive %.3g + %.3g", name, what, eo,
	     en, slack);
	return ok;
}

/*
 * The slack floor of lse: a row's lse is (near its max) a scaled dot
 * product q . k, which another summation order may change by a few ulps
 * of sum |q_x k_x| <= |q| |k|, not of the result (at N = 1 the naive
 * error can be a tenth of that by luck, and ours was 3.8x it).  So the
 * floor is scale sqrt(d) max |q| max |k| (2-norms of rows).
 */
static inline double ar_lse_floor(const struct acase *c, const float *q,
				  const float *k)
{
	size_t nq = (size_t)c->B * c->H * c->Nq, nk = (size_t)c->B * c->Hkv * c->Nk;
	double mq = 0, mk = 0;

	for (size_t r = 0; r < nq + nk; r++) {
		const float *x = r < nq ? q + r * c->d : k + (r - nq) * c->d;
		double s = 0;

		for (int i = 0; i < c->d; i++)
			s += (double)x[i] * x[i];
		if (r < nq)
			mq = s > mq ? s : mq;
		else
			mk = s > mk ? s : mk;
	}
	return sqrt(mq * mk);	/* scale sqrt(d) = 1 */
}

static void ar_name(char *buf, size_t n, const struct acase *c,
		    const char *isa)
{
	snprintf(buf, n, "%s B%d H%d/%d Nq%d Nk%d d%d%s%s%s", isa, c->B,
		 c->H, c->Hkv, c->Nq, c->Nk, c->d, c->causal ? " causal" : "",
		 c->dtype == HK_BF16 ? " bf16" : "", c->bs ? " paged" : "");
}

static struct hk_attn ar_attn(const struct acase *c)
{
	struct hk_attn a = { .B = c->B, .H = c->H, .Hkv = c->Hkv,
			     .Nq = c->Nq, .Nk = c->Nk, .d = c->d,
			     .dtype = c->dtype, .causal = c->causal };

	return a;
}

/* c's problem read through block table table ([B][maxb], NULL: dense). */
static struct hk_attn ar_attn_paged(const struct acase *c,
				    const int32_t *table, int maxb)
{
	struct hk_attn a = ar_attn(c);

	a.block_table = table;
	a.block_size = c->bs;
	a.max_blocks = maxb;
	return a;
}

/*
 * A paged copy of dense x [B][Hkv][Nk][d] (elements of esz bytes) placed
 * by table ([B][maxb]): a pool laid out [blk][Hkv][bs][d].  free() it.
 */
static void *ar_place(const struct acase *c, const void *x, size_t esz,
		      const int32_t *table, int maxb)
{
	size_t blk = (size_t)c->Hkv * c->bs * c->d * esz;
	char *pool = calloc(c->B * maxb + 1, blk);

	if (!pool)
		t_fail_all("out of memory");
	for (int b = 0; b < c->B; b++)
	for (int g = 0; g < c->Hkv; g++)
	for (int t = 0; t < c->Nk; t++) {
		int32_t pb = table[b * maxb + t / c->bs];
		size_t dst = (((size_t)pb * c->Hkv + g) * c->bs + t % c->bs);
		size_t src = (((size_t)b * c->Hkv + g) * c->Nk + t);

		memcpy(pool + dst * c->d * esz,
		       (const char *)x + src * c->d * esz, c->d * esz);
	}
	return pool;
}

/*
 * A block table [B][*maxb] that places the blocks by a random
 * permutation of B * maxb + 1 slots (one spare, so the indices are not
 * just 0..n-1).  free() it.
 */
static int32_t *ar_table(const struct acase *c, int *maxb)
{
	int nb = (c->Nk + c->bs - 1) / c->bs, total = c->B * nb + 1;
	int32_t *perm = malloc(total * sizeof(int32_t));

	if (!perm)
		t_fail_all("out of memory");
	for (int i = 0; i < total; i++)
		perm[i] = i;
	for (int i = total - 1; i > 0; i--) {
		int j, t;

		ar_seed = ar_seed * 6364136223846793005ull + 1;
		j = (int)((ar_seed >> 33) % (uint64_t)(i + 1));
		t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	*maxb = nb;
	return perm;
}

/*
 * Run each of the CPU's ISA paths: fn(isa name) after forcing it; then
 * name the paths that ran (the bf16 calls' path at each level).
 */
static void ar_each_isa(void (*fn)(const char *isa))
{
	char ran[128] = "";

	for (int isa = HK_ISA_SCALAR; isa <= HK_ISA_AMX; isa++) {
		if (hk_attn_force_isa(isa)) {
			t_ok(1, "%s # SKIP this CPU has no %s",
			     hk_isa_name(isa), hk_isa_name(isa));
			continue;
		}
		fn(hk_isa_name(isa));
		snprintf(ran + strlen(ran), sizeof(ran) - strlen(ran),
			 " %s (f32 %s, bf16 %s)", hk_isa_name(isa),
			 hk_attn_isa_name(HK_F32), hk_attn_isa_name(HK_BF16));
	}
	hk_attn_force_isa(-1);
	if (!strstr(ran, "avx512bf16"))
		t_ok(1, "avx512bf16 # SKIP this CPU has no AVX-512 with "
		     "AVX512-BF16: the vdpbf16ps path did not run");
	t_diag("ISA levels run against the fp64 reference:%s", ran);
}

#endif /* HMM_TESTS_ATTN_REF_H */
