/* SPDX-License-Identifier: MIT */
/*
 * cuda_runtime.h — stands in for the toolkit's under tests/gpu/emu
 * (cuda_emu.h): the few runtime types the kernels' sources name.
 */
#ifndef HK_EMU_CUDA_RUNTIME_H
#define HK_EMU_CUDA_RUNTIME_H

#include "cuda_emu.h"

typedef struct hk_emu_stream *cudaStream_t;
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1 };

#endif
