/* SPDX-License-Identifier: MIT */
/*
 * attn_dev.cuh — what the CUDA attention files share: the call's shape as
 * kernels see it (struct args, passed by value), dtype loads and stores,
 * the block-table gather, the causal bound, warp reductions.  Included by
 * attn.cu (host API, SIMT kernels) and attn_mma.cu (tensor cores).
 */
#ifndef HK_CUDA_ATTN_DEV_CUH
#define HK_CUDA_ATTN_DEV_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "attn_args.h"
#include "hk_attn.h"

#define FULL 0xffffffffu

static inline struct args make_args(const struct hk_attn *a)
{
	struct args g;

	g.B = a->B;
	g.H = a->H;
	g.Hkv = a->Hkv;
	g.Nq = a->Nq;
	g.Nk = a->Nk;
	g.d = a->d;
	g.dtype = a->dtype;
	g.causal = a->causal;
	g.grp = a->H / a->Hkv;
	g.off = a->Nk - a->Nq;
	g.scale = a->scale;
	g.table = a->block_table;
	g.bs = a->block_size;
	g.maxb = a->max_blocks;
	return g;
}

__device__ __forceinline__ float ld(const void *p, size_t i, int dtype)
{
	if (dtype == HK_F32)
		return ((const float *)p)[i];
	return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}

__device__ __forceinline__ void st(void *p, size_t i, float x, int dtype)
{
	if (dtype == HK_F32)
		((float *)p)[i] = x;
	else
		((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(x);
}

/* Element offset of key/value row t of (batch b, kv head g). */
__device__ __forceinline__ size_t kv_off(const struct args &a, int b, int g,
					 int t)
{
	if (!a.table)
		return (((size_t)b * a.Hkv + g) * a.Nk + t) * a.d;
	int32_t blk = a.table[(size_t)b * a.maxb + t / a.bs];

	return (((size_t)blk * a.Hkv + g) * a.bs + t % a.bs) * a.d;
}

/* Keys query row i sees: [0, vis). */
__device__ __forceinline__ int vis(const struct args &a, int i)
{
	if (!a.causal)
		return a.Nk;
	int n = i + a.off + 1;

	return n < 0 ? 0 : n > a.Nk ? a.Nk : n;
}

__device__ __forceinline__ float warp_sum(float x)
{
	for (int o = 16; o; o >>= 1)
		x += __shfl_xor_sync(FULL, x, o);
	return x;
}


/* attn_mma.cu: the tensor-core paths (bf16, d in {32, 64, 80, 96, 128},
 * sm_80+).  Launch on s; return the launch's cudaError_t. */
int hk_attn_mma_d_ok(int d);
cudaError_t hk_attn_mma_fwd(const struct args &g, const void *q,
			    const void *k, const void *v, void *o, float *lse,
			    cudaStream_t s);
cudaError_t hk_attn_mma_bwd(const struct args &g, const void *q,
			    const void *k, const void *v, const float *lse,
			    const void *dout, const float *D, void *dq,
			    void *dk, void *dv, cudaStream_t s);

#endif /* HK_CUDA_ATTN_DEV_CUH */
