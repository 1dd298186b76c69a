/* SPDX-License-Identifier: MIT */
/*
 * cuda_bf16.h — stands in for the toolkit's under tests/gpu/emu
 * (cuda_emu.h): bf16 as its bits, conversions rounding to nearest even
 * (NaN kept quiet), as the device's __float2bfloat16_rn does.
 */
#ifndef HK_EMU_CUDA_BF16_H
#define HK_EMU_CUDA_BF16_H

#include "cuda_emu.h"

struct __nv_bfloat16 {
	uint16_t x;
};
struct __nv_bfloat162 {
	__nv_bfloat16 x, y;
};

static inline float __bfloat162float(__nv_bfloat16 h)
{
	return __uint_as_float((uint32_t)h.x << 16);
}

static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
	uint32_t u = __float_as_uint(f);
	__nv_bfloat16 h;

	if ((u & 0x7fffffffu) > 0x7f800000u)
		h.x = (uint16_t)((u >> 16) | 0x40);
	else
		h.x = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
	return h;
}

static inline __nv_bfloat162 __floats2bfloat162_rn(float lo, float hi)
{
	__nv_bfloat162 v;

	v.x = __float2bfloat16_rn(lo);
	v.y = __float2bfloat16_rn(hi);
	return v;
}

#endif
