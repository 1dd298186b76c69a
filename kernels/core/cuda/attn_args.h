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

#endif /* HK_CUDA_ATTN_ARGS_H */
