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
 * one to the register.  On the build machine (AMD EPYC, family 23,
 * where crc32 retires one 8-byte step per 3 cycles, so three streams
 * gain nothing) it ran 1.4x the three-stream path over 2 MiB buffers,
 * cold (6.8-7.4 against 4.8-5.1 GB/s) and in cache (8.3-8.9 against
 * 5.9-6.0), three interleaved runs; running the crc32 instruction over
 * a second part of the buffer in the same loop made it slower (7.7-7.9
 * in cache).  The store's I/O thread checksums every extent it moves:
 * in an offloaded step at 256M parameters that was half of all the
 * process's CPU samples, and the thread ran 70-86% busy.
 */
#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"

#define POLY	0x82f63b78u	/* Castagnoli, reflected */
#define STRIDE	4096u

static uint32_t soft_tab[8][256];
static uint32_t shift_tab[4][256];	/* x^(8*STRIDE) times each byte */
static int use_hw, use_clmul;
static uint64_t k512[2], k128[2];	/* fold constants: low, high qword */
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
	fold_consts(k512, 512);
	fold_consts(k128, 128);
	__builtin_cpu_init();
	use_hw = __builtin_cpu_supports("sse4.2") &&
		 !(env && !strcmp(env, "soft"));
	use_clmul = use_hw && __builtin_cpu_supports("pclmul") &&
		    !(env && !strcmp(env, "hw"));
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
static __m128i fold(__m128i x, __m128i k)
{
	return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),
			     _mm_clmulepi64_si128(x, k, 0x11));
}

/* Fold 64 bytes a step, four accumulators; the register goes into the
 * first 4 bytes (raw CRC is linear: raw(c, D) = raw(0, D with c xored
 * in front)), and the crc32 instruction reduces the last accumulator. */
__attribute__((target("sse4.2,pclmul")))
static uint32_t raw_clmul(uint32_t c, const uint8_t *p, size_t n)
{
	const __m128i k4 = _mm_set_epi64x((long long)k512[1],
					  (long long)k512[0]);
	const __m128i k1 = _mm_set_epi64x((long long)k128[1],
					  (long long)k128[0]);
	__m128i a[4];
	uint64_t w[2];

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
	_mm_storeu_si128((__m128i *)w, a[3]);
	c = (uint32_t)__builtin_ia32_crc32di(__builtin_ia32_crc32di(0, w[0]),
					     w[1]);
	return raw_hw1(c, p, n);
}

uint32_t hmm_crc32c_soft(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
	return ~raw_soft(~crc, buf, len);
}

uint32_t hmm_crc32c_hw(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
	if (!__builtin_cpu_supports("sse4.2"))
		return ~raw_soft(~crc, buf, len);
	return ~raw_hw3(~crc, buf, len);
}

uint32_t hmm_crc32c_clmul(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
	if (!__builtin_cpu_supports("pclmul") ||
	    !__builtin_cpu_supports("sse4.2"))
		return hmm_crc32c_hw(crc, buf, len);
	return ~raw_clmul(~crc, buf, len);
}

uint32_t hmm_crc32c(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
	if (use_clmul)
		return ~raw_clmul(~crc, buf, len);
	if (use_hw)
		return ~raw_hw3(~crc, buf, len);
	return ~raw_soft(~crc, buf, len);
}

const char *hmm_crc32c_path(void)
{
	pthread_once(&crc_once, crc_init);
	return use_clmul ? "clmul" : use_hw ? "hw" : "soft";
}
