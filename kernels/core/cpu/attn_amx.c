// SPDX-License-Identifier: MIT
/*
 * attn_amx.c — the gemms of bf16 attention on bf16 products (attn.h):
 * AMX tiles (hk_attn_amx_ops) and, on a CPU with AVX512-BF16 but no AMX,
 * vdpbf16ps on the same packed operands (hk_attn_dpbf16_ops, "avx512bf16",
 * see dots(); written without a CPU that has it to run on: the tests run
 * it where one does and print a skip elsewhere).
 *
 * On AMX tiles: each call rounds its A and B operands to bf16
 * (vcvtneps2bf16: nearest even; inputs that were bf16 stay exact, P and
 * dS are rounded as FlashAttention-2 rounds them before its second
 * product), lays A out in rows of 32-element k blocks and B in pairs of k
 * rows ("VNNI"), and multiplies 32 x 32 blocks of C in four 16 x 16 fp32
 * tiles with tdpbf16ps, k in steps of 32.  Products are exact, sums fp32.
 * The other primitives (rowmax, exp, dS) are the AVX-512 ones.
 *
 * Measured on a 2-core Xeon (Sapphire Rapids class): tdpbf16ps at about 2300
 * GFLOP/s per core against 135 for zmm FMA and 71 for AVX512-BF16's
 * vdpbf16ps (one per two cycles there, half the FMA's rate), so the vector
 * dot product is used only where AMX is not: a CPU with AVX512-BF16 and no
 * tiles (AMD Zen 4, whose published instruction tables give it the zmm FMA's
 * rate, so twice its flops; not measured here), HK_ISA=avx512, or the tile
 * permission refused.  The tiles run for dtype HK_BF16 when hk_isa() is
 * HK_ISA_AMX and hk_amx_enable() got the permission; fp32 attention keeps
 * fp32 products on every path.  Operand buffers (320 KiB) are per thread,
 * allocated before a thread's first item (ops->prepare) and freed when it
 * exits.  K and V tiles come packed once a call (ops->pack_b, ldb < 0); only
 * Q, dO and the P, dS of each tile pair are packed in the gemm.  Subnormal
 * inputs are read as zero by the conversion (bf16 inputs that small, below
 * 1.2e-38, lose nothing else).
 */
#include <errno.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"

#define MB 128		/* C rows per pass: BC (dK, dV) at most */
#define NB 256		/* C columns per pass: dp at most */
#define KB 256		/* k per pass: d at most */

struct tilecfg {
	uint8_t palette, start;
	uint8_t rsv[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};

struct amx_buf {
	uint16_t a[MB * KB];	/* A: [mp][kp] bf16 */
	uint16_t b[KB * NB];	/* B: [kp / 2][np][2] bf16 */
	float c[MB * NB];	/* C: [mp][np] */
};

static pthread_key_t buf_key;
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
static int key_ok;

static void buf_key_init(void)
{
	key_ok = pthread_key_create(&buf_key, free) == 0;
}

static struct amx_buf *thread_buf(void)
{
	struct amx_buf *w;

	pthread_once(&buf_once, buf_key_init);
	if (!key_ok)
		return NULL;
	w = pthread_getspecific(buf_key);
	if (!w && !posix_memalign((void **)&w, 64, sizeof(*w)) &&
	    pthread_setspecific(buf_key, w)) {
		free(w);
		w = NULL;
	}
	return w;
}

/* Each thread's buffers, before its first item (attn.c, hk_attn_run). */
static int amx_prepare(void)
{
	return thread_buf() ? 0 : -ENOMEM;
}

static inline int up(int x, int m)
{
	return (x + m - 1) / m * m;
}

static inline __mmask16 lanes(int n)
{
	return n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
}

/* 16 floats at p (n valid) as bf16, nearest even. */
static inline __m256i cvt16(const float *p, int n)
{
	return (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lanes(n), p));
}

/*
 * A(i, p) for i < m, p < k into dst[mp][kp], zero padded.  Rows of A are
 * contiguous (acs == 1) or its columns are (ars == 1: A^T is stored).
 */
static void pack_a(uint16_t *dst, int m, int k, int mp, int kp,
		   const float *a, long ars, long acs)
{
	if (acs == 1) {
		for (int i = 0; i < m; i++)
			for (int p = 0; p < kp; p += 16)
				_mm256_storeu_si256((__m256i *)(dst + i * kp + p),
						    p < k ? cvt16(a + i * ars + p,
								  k - p) :
						    _mm256_setzero_si256());
	} else {	/* column p of A is row p of the source */
		const __m512i idx = _mm512_set_epi16(
			31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
			24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1,
			16, 0);
		const __m512i stride = _mm512_mullo_epi32(
			_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5,
					 4, 3, 2, 1, 0), _mm512_set1_epi32(kp / 2));

		for (int i = 0; i < m; i += 16) {	/* pairs (p, p + 1) */
			int n = m - i;

			for (int p = 0; p < k; p += 2) {
				__m256i r0 = cvt16(a + p * acs + i, n);
				__m256i r1 = p + 1 < k ?
					cvt16(a + (p + 1) * acs + i, n) :
					_mm256_setzero_si256();
				__m512i w = _mm512_permutexvar_epi16(idx,
					_mm512_inserti64x4(
						_mm512_castsi256_si512(r0), r1, 1));

				_mm512_mask_i32scatter_epi32(dst + i * kp + p,
							     lanes(n), stride,
							     w, 4);
			}
		}
		for (int i = 0; i < m; i++)
			memset(dst + i * kp + k + (k & 1), 0,
			       (kp - k - (k & 1)) * 2);
	}
	memset(dst + m * kp, 0, (size_t)(mp - m) * kp * 2);
}

/* B(p, j) = b[p * ldb + j] for p < k, j < n into dst[kp / 2][np][2]. */
static void pack_b(uint16_t *dst, int n, int k, int np, int kp,
		   const float *b, long ldb)
{
	const __m512i idx = _mm512_set_epi16(
		31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
		23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);

	for (int p = 0; p < kp; p += 2) {
		uint16_t *row = dst + (size_t)p * np;

		for (int j = 0; j < np; j += 16) {
			__m256i r0 = _mm256_setzero_si256(), r1 = r0;

			if (j < n && p < k)
				r0 = cvt16(b + p * ldb + j, n - j);
			if (j < n && p + 1 < k)
				r1 = cvt16(b + (p + 1) * ldb + j, n - j);
			_mm512_storeu_si512(row + 2 * j, _mm512_permutexvar_epi16(
				idx, _mm512_inserti64x4(
					_mm512_castsi256_si512(r0), r1, 1)));
		}
	}
}

/* c[mp][np] = A B over packed A (w->a) and B (bp, bnp columns), 32 x 32
 * blocks. */
static void tiles(struct amx_buf *w, const uint16_t *bp, int bnp, int mp,
		  int np, int kp)
{
	struct tilecfg cfg = { .palette = 1 };

	for (int t = 0; t < 8; t++) {
		cfg.colsb[t] = 64;
		cfg.rows[t] = 16;
	}
	_tile_loadconfig(&cfg);
	for (int i = 0; i < mp; i += 32)
		for (int j = 0; j < np; j += 32) {
			float *c = w->c + (size_t)i * np + j;

			_tile_zero(0);
			_tile_zero(1);
			_tile_zero(2);
			_tile_zero(3);
			for (int p = 0; p < kp; p += 32) {
				const uint16_t *a = w->a + (size_t)i * kp + p;
				const uint16_t *b = bp + (size_t)p * bnp + 2 * j;

				_tile_loadd(4, a, kp * 2);
				_tile_loadd(5, a + 16 * kp, kp * 2);
				_tile_loadd(6, b, bnp * 4);
				_tile_loadd(7, b + 32, bnp * 4);
				_tile_dpbf16ps(0, 4, 6);
				_tile_dpbf16ps(1, 4, 7);
				_tile_dpbf16ps(2, 5, 6);
				_tile_dpbf16ps(3, 5, 7);
			}
			_tile_stored(0, c, np * 4);
			_tile_stored(1, c + 16, np * 4);
			_tile_stored(2, c + 16 * np, np * 4);
			_tile_stored(3, c + 16 * np + 16, np * 4);
		}
	_tile_release();
}

/*
 * The same product with AVX512-BF16's vdpbf16ps on the same packed
 * operands: 8 rows x 32 columns of C a block (16 zmm accumulators), k in
 * pairs: a pair (A(i, p), A(i, p + 1)) broadcast as one 32-bit lane, B's
 * pairs (B(p, j), B(p + 1, j)) 16 columns to a load.  Products exact, sums
 * fp32 (the instruction treats subnormals as zero).
 */
/* c[i..i+8)[j..j+32) over all kp of dots() below */
static inline void dot_block(struct amx_buf *w, const uint16_t *bp, int bnp,
			     int i, int j, int np, int kp)
{
	__m512 s[8][2];

#pragma GCC unroll 8
	for (int r = 0; r < 8; r++)
		s[r][0] = s[r][1] = _mm512_setzero_ps();
	for (int p = 0; p < kp; p += 2) {
		const uint16_t *b = bp + (size_t)p * bnp + 2 * j;
		const uint16_t *a = w->a + (size_t)i * kp + p;
		__m512bh b0 = (__m512bh)_mm512_loadu_si512(b);
		__m512bh b1 = (__m512bh)_mm512_loadu_si512(b + 32);

#pragma GCC unroll 8
		for (int r = 0; r < 8; r++) {
			uint32_t pr;
			__m512bh x;

			memcpy(&pr, a + (size_t)r * kp, 4);
			x = (__m512bh)_mm512_set1_epi32((int)pr);
			s[r][0] = _mm512_dpbf16_ps(s[r][0], x, b0);
			s[r][1] = _mm512_dpbf16_ps(s[r][1], x, b1);
		}
	}
#pragma GCC unroll 8
	for (int r = 0; r < 8; r++) {
		float *c = w->c + (size_t)(i + r) * np + j;

		_mm512_storeu_ps(c, s[r][0]);
		_mm512_storeu_ps(c + 16, s[r][1]);
	}
}

static void dots(struct amx_buf *w, const uint16_t *bp, int bnp, int mp,
		 int np, int kp)
{
	for (int i = 0; i < mp; i += 8)
		for (int j = 0; j < np; j += 32)
			dot_block(w, bp, bnp, i, j, np, kp);
}

typedef void mul_fn(struct amx_buf *w, const uint16_t *bp, int bnp, int mp,
		    int np, int kp);

/* C = (acc ? C : 0) + A B (attn.h), on operands rounded to bf16 and
 * multiplied by mul (tiles or dots) in passes of MB x NB x KB. */
static void gemm_bf16(int m, int n, int k, const float *a, long ars,
		      long acs, const float *b, long ldb, float *c, long ldc,
		      int acc, mul_fn *mul)
{
	struct amx_buf *w = thread_buf();

	if (!w || (acs != 1 && ars != 1)) {	/* never from attn.c */
		hk_attn_avx512_ops.gemm(m, n, k, a, ars, acs, b, ldb, c, ldc,
					acc);
		return;
	}
	for (int i0 = 0; i0 < m; i0 += MB)
	for (int j0 = 0; j0 < n; j0 += NB)
	for (int p0 = 0; p0 < k || p0 == 0; p0 += KB) {
		int mc = m - i0 < MB ? m - i0 : MB, nc = n - j0 < NB ? n - j0 : NB;
		int kc = k - p0 < KB ? k - p0 : KB;
		int mp = up(mc, 32), np = up(nc, 32), kp = up(kc > 0 ? kc : 1, 32);
		int add = acc || p0 > 0;

		const uint16_t *bp = w->b;
		int bnp = np;

		pack_a(w->a, mc, kc, mp, kp, a + i0 * ars + p0 * acs, ars, acs);
		if (ldb < 0) {	/* packed by pack_b: [kp / 2][-ldb][2] */
			bnp = (int)-ldb;
			bp = (const uint16_t *)b + (size_t)p0 * bnp + 2 * j0;
		} else {
			pack_b(w->b, nc, kc, np, kp, b + p0 * ldb + j0, ldb);
		}
		mul(w, bp, bnp, mp, np, kp);
		for (int i = 0; i < mc; i++) {
			float *ci = c + (i0 + i) * ldc + j0;
			const float *wi = w->c + (size_t)i * np;

			for (int j = 0; j < nc; j += 16) {
				__mmask16 mk = lanes(nc - j);
				__m512 x = _mm512_maskz_loadu_ps(mk, wi + j);

				if (add)
					x = _mm512_add_ps(x,
						_mm512_maskz_loadu_ps(mk, ci + j));
				_mm512_mask_storeu_ps(ci + j, mk, x);
			}
		}
	}
}

static void gemm_amx(int m, int n, int k, const float *a, long ars, long acs,
		     const float *b, long ldb, float *c, long ldc, int acc)
{
	gemm_bf16(m, n, k, a, ars, acs, b, ldb, c, ldc, acc, tiles);
}

static void gemm_dpbf16(int m, int n, int k, const float *a, long ars,
			long acs, const float *b, long ldb, float *c, long ldc,
			int acc)
{
	gemm_bf16(m, n, k, a, ars, acs, b, ldb, c, ldc, acc, dots);
}

const struct hk_attn_ops hk_attn_amx_ops = {
	.name = "amx",
	.wide = 1,
	.gemm = gemm_amx,
	.pack_b = pack_b,
	.prepare = amx_prepare,
	.rowmax = hk_attn_avx512_rowmax,
	.exp_sum = hk_attn_avx512_exp_sum,
	.dsoft = hk_attn_avx512_dsoft,
	.from_bf16 = hk_attn_avx2_from_bf16,
	.to_bf16 = hk_attn_avx2_to_bf16,
};

/* Without AMX (or its permission), with AVX512-BF16: hk_attn_ops_for. */
const struct hk_attn_ops hk_attn_dpbf16_ops = {
	.name = "avx512bf16",
	.wide = 1,
	.gemm = gemm_dpbf16,
	.pack_b = pack_b,
	.prepare = amx_prepare,
	.rowmax = hk_attn_avx512_rowmax,
	.exp_sum = hk_attn_avx512_exp_sum,
	.dsoft = hk_attn_avx512_dsoft,
	.from_bf16 = hk_attn_avx2_from_bf16,
	.to_bf16 = hk_attn_avx2_to_bf16,
};
