/* SPDX-License-Identifier: MIT */
/*
 * attn_args.h — what every attention kernel knows of one call, passed by
 * value: plain C, so that a host program launching the kernels through
 * the driver (hmm-train's fatbin, cuLaunchKernel) passes the same bytes
 * that attn.cu's <<<>>> launches do.  grp = H / Hkv, off = Nk - Nq,
 * scale the logits' factor (hk_attn_resolve's: 1 / sqrt(d) unless set);
 * table/bs/maxb: the paged-KV block table, or NULL.
 */
#ifndef HK_CUDA_ATTN_ARGS_H
#define HK_CUDA_ATTN_ARGS_H

#include <stdint.h>

/* warps (query or key rows) per block of the SIMT kernels: each block
 * has 32 * HK_ATTN_SIMT_ROWS threads (attn_simt.cuh) */
#define HK_ATTN_SIMT_ROWS	8

struct args {
	int B, H, Hkv, Nq, Nk, d, dtype, causal, grp, off;
	float scale;
	const int32_t *table;
	int bs, maxb;
};

/* the same bytes in C and C++ (x86-64 and aarch64 LP64) */
#ifdef __cplusplus
static_assert(sizeof(struct args) == 64, "struct args is 64 bytes");
#else
_Static_assert(sizeof(struct args) == 64, "struct args is 64 bytes");
#endif

#endif /* HK_CUDA_ATTN_ARGS_H */
