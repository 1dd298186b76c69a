// SPDX-License-Identifier: MIT
/*
 * crc32c.c — CRC-32C, hardware (SSE4.2) with a slicing-by-8 fallback.
 *
 * The "raw" functions below update a CRC register without the initial
 * and final inversion; the public ones add them.  Raw CRC is linear, so
 * the register after a||b equals shift(reg after a, |b|) ^ raw(0, b):
 * the hardware path runs three streams of STRIDE bytes side by side (the
 * crc32 instruction has a latency of 3 and a throughput of 1) and joins
 * them with shift(), a multiplication by x^(8*STRIDE) mod P done with
 * four 256-entry tables.
 *
 * Where the CPU has PCLMULQDQ, long buffers are folded instead: four
 * 128-bit accumulators each carry their stream 64 bytes forward per
 * step (two carry-less multiplies by x^(512+64) and x^512 mod P), are
 * folded into one at the end, and the crc32 instruction reduces that
 * one to the register.  With AVX-512 VPCLMULQDQ the same folding runs
 * on four zmm accumulators, 256 bytes a step.  Which path is fastest
 * depends on the core, so pick() times them once per process:
 *	Zen 1 EPYC (family 23; crc32 retires one 8-byte step per 3
 *	cycles): clmul 1.4x the three streams over 2 MiB buffers, cold
 *	(6.8-7.4 against 4.8-5.1 GB/s) and in cache (8.3-8.9 against
 *	5.9-6.0);
 *	Zen 4 EPYC (family 25): vclmul 30-31 GB/s cold and 55-58 in
 *	cache, the three streams 14.5 and 26, clmul 13.6 and 13.7.
 * The store's I/O thread checksums every extent it moves: in an
 * offloaded step at 256M parameters on the Zen 1 that was half of all
 * the process's CPU samples, and the thread ran 70-86% busy.
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crc32c.h"

#define POLY	0x82f63b78u	/* Castagnoli, reflected */
#define STRIDE	4096u

static uint32_t soft_tab[8][256];
static uint32_t shift_tab[4][256];	/* x^(8*STRIDE) times each byte */
/* fold constants (low, high qword) for 2048, 512, 384, 256, 128 bits */
static uint64_t k2048[2], k512[2], k384[2], k256[2], k128[2];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

/* a * b mod P, both reflected (bit 31 is x^0). */
static uint32_t multmodp(uint32_t a, uint32_t b)
{
	uint32_t m = 1u << 31, p = 0;

	for (;;) {
		if (a & m) {
			p ^= b;
			if ((a & (m - 1)) == 0)
				break;
		}
		m >>= 1;
		b = b & 1 ? (b >> 1) ^ POLY : b >> 1;
	}
	return p;
}

/* x^n mod P, reflected. */
static uint32_t xpow(uint64_t n)
{
	uint32_t r = 1u << 31, sq = 1u << 30;	/* x^0, x^1 */

	while (n) {
		if (n & 1)
			r = multmodp(sq, r);
		sq = multmodp(sq, sq);
		n >>= 1;
	}
	return r;
}

/*
 * The constants that fold a 128-bit block d bits forward.  A block's
 * bit r is the coefficient of x^(127-r) (reflected), its low qword the
 * high half H and its high qword the low half L, so it stands for
 * H x^64 + L, and moved d bits on, H x^(64+d) + L x^d.  A carry-less
 * product of a qword (bit i: x^(63-i)) by a qword whose bit j is
 * x^(64-j) lands bit r on x^(127-r), the block's own layout; so each
 * constant is x^e mod P times x (no x^0 term, which that layout cannot
 * hold), for e = d + 63 and d - 1: the reflected 32-bit residue
 * (bit i: x^(31-i)) shifted up 32.
 */
static void fold_consts(uint64_t k[2], uint64_t d)
{
	k[0] = (uint64_t)xpow(d + 63) << 32;
	k[1] = (uint64_t)xpow(d - 1) << 32;
}

static const struct path *pick(const char *env);
static const struct path *best;		/* what hmm_crc32c runs */

static void crc_init(void)
{
	const char *env = getenv("HMM_CRC32C");
	uint32_t k;

	for (unsigned i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int j = 0; j < 8; j++)
			c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
		soft_tab[0][i] = c;
	}
	for (unsigned i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			soft_tab[t][i] = (soft_tab[t - 1][i] >> 8) ^
					 soft_tab[0][soft_tab[t - 1][i] & 0xff];
	k = xpow(8 * (uint64_t)STRIDE);
	for (unsigned t = 0; t < 4; t++)
		for (unsigned i = 0; i < 256; i++)
			shift_tab[t][i] = multmodp(k, i << (8 * t));
	fold_consts(k2048, 2048);
	fold_consts(k512, 512);
	fold_consts(k384, 384);
	fold_consts(k256, 256);
	fold_consts(k128, 128);
	__builtin_cpu_init();
	best = pick(env);
}

static uint32_t shift_stride(uint32_t c)
{
	return shift_tab[0][c & 0xff] ^ shift_tab[1][(c >> 8) & 0xff] ^
	       shift_tab[2][(c >> 16) & 0xff] ^ shift_tab[3][c >> 24];
}

static uint32_t raw_soft(uint32_t c, const uint8_t *p, size_t n)
{
	while (n && ((uintptr_t)p & 7)) {
		c = (c >> 8) ^ soft_tab[0][(c ^ *p++) & 0xff];
		n--;
	}
	while (n >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);	/* little-endian host */
		w ^= c;
		c = soft_tab[7][w & 0xff] ^ soft_tab[6][(w >> 8) & 0xff] ^
		    soft_tab[5][(w >> 16) & 0xff] ^
		    soft_tab[4][(w >> 24) & 0xff] ^
		    soft_tab[3][(w >> 32) & 0xff] ^
		    soft_tab[2][(w >> 40) & 0xff] ^
		    soft_tab[1][(w >> 48) & 0xff] ^ soft_tab[0][w >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = (c >> 8) ^ soft_tab[0][(c ^ *p++) & 0xff];
	return c;
}

__attribute__((target("sse4.2")))
static uint32_t raw_hw1(uint32_t c, const uint8_t *p, size_t n)
{
	uint64_t c64;

	while (n && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi(c, *p++);
		n--;
	}
	c64 = c;
	for (; n >= 8; n -= 8, p += 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		c64 = __builtin_ia32_crc32di(c64, w);
	}
	c = (uint32_t)c64;
	while (n--)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}

__attribute__((target("sse4.2")))
static uint32_t raw_hw3(uint32_t c, const uint8_t *p, size_t n)
{
	while (n >= 3 * STRIDE) {
		uint64_t a = c, b = 0, d = 0, w0, w1, w2;
		const uint8_t *q = p;

		for (unsigned i = 0; i < STRIDE; i += 8, q += 8) {
			memcpy(&w0, q, 8);
			memcpy(&w1, q + STRIDE, 8);
			memcpy(&w2, q + 2 * STRIDE, 8);
			a = __builtin_ia32_crc32di(a, w0);
			b = __builtin_ia32_crc32di(b, w1);
			d = __builtin_ia32_crc32di(d, w2);
		}
		c = shift_stride((uint32_t)a) ^ (uint32_t)b;
		c = shift_stride(c) ^ (uint32_t)d;
		p += 3 * STRIDE;
		n -= 3 * STRIDE;
	}
	return raw_hw1(c, p, n);
}

__attribute__((target("sse4.2,pclmul")))
static inline __attribute__((always_inline)) __m128i fold(__m128i x, __m128i k)
{
	return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),
			     _mm_clmulepi64_si128(x, k, 0x11));
}

/* A fold constant (low, high qword) as a register. */
__attribute__((target("sse4.2,pclmul")))
static inline __attribute__((always_inline)) __m128i kvec(const uint64_t k[2])
{
	return _mm_set_epi64x((long long)k[1], (long long)k[0]);
}

/* The folded 128 bits x reduced by the crc32 instruction, then the
 * n < 64 bytes left at p. */
__attribute__((target("sse4.2,pclmul")))
static inline __attribute__((always_inline)) uint32_t
reduce(__m128i x, const uint8_t *p, size_t n)
{
	uint64_t w[2];
	uint32_t c;

	_mm_storeu_si128((__m128i *)w, x);
	c = (uint32_t)__builtin_ia32_crc32di(__builtin_ia32_crc32di(0, w[0]),
					     w[1]);
	return raw_hw1(c, p, n);
}

/* Fold 64 bytes a step, four accumulators; the register goes into the
 * first 4 bytes (raw CRC is linear: raw(c, D) = raw(0, D with c xored
 * in front)), and the crc32 instruction reduces the last accumulator. */
__attribute__((target("sse4.2,pclmul")))
static uint32_t raw_clmul(uint32_t c, const uint8_t *p, size_t n)
{
	const __m128i k4 = kvec(k512), k1 = kvec(k128);
	__m128i a[4];

	if (n < 256)
		return raw_hw3(c, p, n);
	for (int i = 0; i < 4; i++)
		a[i] = _mm_loadu_si128((const __m128i *)(p + 16 * i));
	a[0] = _mm_xor_si128(a[0], _mm_cvtsi32_si128((int)c));
	for (p += 64, n -= 64; n >= 64; p += 64, n -= 64)
		for (int i = 0; i < 4; i++)
			a[i] = _mm_xor_si128(fold(a[i], k4),
				_mm_loadu_si128((const __m128i *)(p + 16 * i)));
	for (int i = 1; i < 4; i++)
		a[i] = _mm_xor_si128(a[i], fold(a[i - 1], k1));
	return reduce(a[3], p, n);
}

/*
 * The same folding, 256 bytes a step: four zmm accumulators of four
 * 128-bit lanes each, every lane carried 2048 bits forward by one
 * VPCLMULQDQ pair; then the accumulators fold into the last (512
 * bits apart), its lanes into its top one (384, 256 and 128 bits), and
 * the crc32 instruction reduces that as above.
 */
#define VCLMUL_TARGET "sse4.2,pclmul,avx512f,vpclmulqdq"

__attribute__((target(VCLMUL_TARGET)))
static inline __attribute__((always_inline)) __m512i vfold(__m512i x, __m512i k, __m512i y)
{
	return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00),
					 _mm512_clmulepi64_epi128(x, k, 0x11),
					 y, 0x96);	/* a ^ b ^ c */
}

__attribute__((target(VCLMUL_TARGET)))
static __m512i kbcast(const uint64_t k[2])
{
	return _mm512_broadcast_i32x4(kvec(k));
}

__attribute__((target(VCLMUL_TARGET)))
static uint32_t raw_vclmul(uint32_t c, const uint8_t *p, size_t n)
{
	const __m512i k4 = kbcast(k2048), k1 = kbcast(k512);
	__m512i a[4];
	__m128i x;

	if (n < 512)
		return raw_clmul(c, p, n);
	for (int i = 0; i < 4; i++)
		a[i] = _mm512_loadu_si512(p + 64 * i);
	a[0] = _mm512_xor_si512(a[0], _mm512_inserti32x4(
		_mm512_setzero_si512(), _mm_cvtsi32_si128((int)c), 0));
	for (p += 256, n -= 256; n >= 256; p += 256, n -= 256)
#pragma GCC unroll 4	/* accumulators in registers: 1.3x in cache */
		for (int i = 0; i < 4; i++)
			a[i] = vfold(a[i], k4, _mm512_loadu_si512(p + 64 * i));
	for (int i = 1; i < 4; i++)
		a[i] = vfold(a[i - 1], k1, a[i]);
	x = _mm_xor_si128(_mm512_extracti32x4_epi32(a[3], 3),
			  fold(_mm512_extracti32x4_epi32(a[3], 0),
			       kvec(k384)));
	x = _mm_xor_si128(x, fold(_mm512_extracti32x4_epi32(a[3], 1),
				  kvec(k256)));
	x = _mm_xor_si128(x, fold(_mm512_extracti32x4_epi32(a[3], 2),
				  kvec(k128)));
	/* gcc puts no vzeroupper in a target("avx512f") function: without
	 * one, the non-VEX SSE code that runs next (raw_clmul, or any of
	 * the process's) ran at 0.4 of its speed on a Zen 4 EPYC; x, an
	 * xmm, keeps its bits */
	_mm256_zeroupper();
	return reduce(x, p, n);
}

static int runs_hw(void)
{
	return __builtin_cpu_supports("sse4.2");
}

static int runs_clmul(void)
{
	return runs_hw() && __builtin_cpu_supports("pclmul");
}

static int runs_vclmul(void)
{
	return runs_clmul() && __builtin_cpu_supports("avx512f") &&
	       __builtin_cpu_supports("vpclmulqdq");
}

static int runs_soft(void)
{
	return 1;
}

/* Every path, each a fallback for the one after it. */
static const struct path {
	const char *name;
	uint32_t (*raw)(uint32_t c, const uint8_t *p, size_t n);
	int (*runs)(void);
} paths[] = {
	{ "soft", raw_soft, runs_soft },
	{ "hw", raw_hw3, runs_hw },
	{ "clmul", raw_clmul, runs_clmul },
	{ "vclmul", raw_vclmul, runs_vclmul },
};
#define NPATHS (int)(sizeof(paths) / sizeof(paths[0]))

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/*
 * The path hmm_crc32c takes: the one HMM_CRC32C names where the CPU
 * runs it, else the fastest hardware path over 64 KiB in cache (the
 * least of five runs each, some 0.1 ms in all, once per process).  Which
 * is fastest depends on the core, not on its flags: on a Zen 1 EPYC the
 * 128-bit folding ran 1.4x the crc32 instruction's three streams; on a
 * Zen 4 EPYC the streams ran 1.9x the 128-bit folding (26 against 14
 * GB/s in cache, 14.5 against 13.6 cold) and the 512-bit folding ran
 * faster than either.
 */
static const struct path *pick(const char *env)
{
	static uint8_t buf[64 << 10];
	const struct path *p = &paths[0];
	double least = 0;

	for (int i = 0; env && i < NPATHS; i++)
		if (!strcmp(env, paths[i].name) && paths[i].runs())
			return &paths[i];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 131 + (i >> 9));
	for (int i = 1; i < NPATHS; i++) {
		double t = 0;

		if (!paths[i].runs())
			continue;
		for (int r = 0; r < 5; r++) {
			double t0 = now_s(), d;
			volatile uint32_t c = paths[i].raw(0, buf, sizeof(buf));

			(void)c;
			d = now_s() - t0;
			if (r == 0 || d < t)
				t = d;
		}
		if (p == &paths[0] || t < least) {
			p = &paths[i];
			least = t;
		}
	}
	return p;
}

/* Path i, or the fastest below it that the CPU runs. */
static uint32_t crc_on(int i, uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
	while (!paths[i].runs())
		i--;
	return ~paths[i].raw(~crc, buf, len);
}

uint32_t hmm_crc32c_soft(uint32_t crc, const void *buf, size_t len)
{
	return crc_on(0, crc, buf, len);
}

uint32_t hmm_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	return crc_on(1, crc, buf, len);
}

uint32_t hmm_crc32c_clmul(uint32_t crc, const void *buf, size_t len)
{
	return crc_on(2, crc, buf, len);
}

uint32_t hmm_crc32c_vclmul(uint32_t crc, const void *buf, size_t len)
{
	return crc_on(3, crc, buf, len);
}

uint32_t hmm_crc32c(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
	return ~best->raw(~crc, buf, len);
}

const char *hmm_crc32c_path(void)
{
	pthread_once(&crc_once, crc_init);
	return best->name;
}
