/* SPDX-License-Identifier: MIT */
/*
 * gpu_priv.h — what gpu_lib.c, gpu_plan.c and gpu_step.c share: the
 * device arena's layout (every activation and scratch array of the step,
 * carved from one cuMemAlloc) and the loaded driver, cuBLAS and kernels.
 * Device addresses are CUdeviceptr (64-bit integers).
 */
#ifndef HMM_TRAIN_GPU_PRIV_H
#define HMM_TRAIN_GPU_PRIV_H

#include "cuda_abi.h"
#include "gpu.h"
#include "gpu_cublas.h"

/* The widest head the CUDA attention takes (attn_simt.cuh's rows). */
#define GPU_HEAD_MAX	256

/* One block's intermediates, kept from its forward for its backward
 * (model.h's struct gpt_acts on the device). */
struct gpu_acts {
	CUdeviceptr h1, mean1, rstd1, qkv, attw, a, x1;
	CUdeviceptr h2, mean2, rstd2, u, g;
};

/* The arena: [layers] sets, the block inputs x[layers + 1], scratch. */
struct gpu_arena {
	struct gpu_acts *acts;		/* [layers], caller's array */
	CUdeviceptr *x;			/* [layers + 1], caller's array */
	CUdeviceptr dbig, dh, da, dqkv, dx, y, meanf, rstdf, logits, loss;
	CUdeviceptr D, tok, tgt;
	uint64_t bytes;			/* the total */
};

/* Carve the arena from base; with acts and x NULL only count a->bytes. */
void gpu_arena_carve(const struct gpt_config *c, CUdeviceptr base,
		     struct gpu_arena *a);

/* blas.h's gemm() through b->Sgemm on device pointers: 0 or -EIO. */
int gpu_gemm(const struct hmm_cublas *b, cublasHandle_t handle, int ta,
	     int tb, int M, int N, int K, float alpha, CUdeviceptr A, int lda,
	     CUdeviceptr B, int ldb, float beta, CUdeviceptr C, int ldc);

#define GK_KERNELS(X)							\
	X(embed_fwd, "gk_embed_fwd") X(wte_bwd, "gk_wte_bwd")		\
	X(wpe_bwd, "gk_wpe_bwd") X(ln_fwd, "gk_ln_fwd")			\
	X(ln_bwd_dx, "gk_ln_bwd_dx") X(ln_bwd_dgdb, "gk_ln_bwd_dgdb")	\
	X(bias_grad, "gk_bias_grad") X(rows_init, "gk_rows_init")	\
	X(gelu_fwd, "gk_gelu_fwd") X(gelu_bwd, "gk_gelu_bwd")		\
	X(xent, "gk_xent") X(pack, "gk_pack")				\
	X(attn_fwd, "fwd_simt") X(attn_drows, "d_rows")			\
	X(attn_dq, "bwd_dq") X(attn_dkdv, "bwd_dkdv")

/* The loaded libraries: gpu_lib_open fills it or says what is missing. */
struct gpu_lib {
	void *cuda, *cublas;
	struct {
#define F(field, name, sym, params)	CUresult (*field) params;
		HMM_CU_CALLS(F)
		HMM_CU_LAUNCH_CALLS(F)
#undef F
		CUresult (*MemFree)(CUdeviceptr);
	} cu;
	struct hmm_cublas blas;		/* gpu_cublas.h's calls */
	cublasHandle_t handle;
	CUdevice dev;
	CUcontext ctx;			/* device 0's primary context */
	CUstream stream;		/* every kernel and product runs here */
	CUmodule mod;
	struct {
#define K(field, sym)	CUfunction field;
		GK_KERNELS(K)
#undef K
	} k;
};

int gpu_lib_open(struct gpu_lib *l);
void gpu_lib_close(struct gpu_lib *l);
/* Record why (printf-style) for gpu_error(); returns err. */
int gpu_fail(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* A CUresult: 0, or -EIO with the call and the driver's words. */
int gpu_cu(const struct gpu_lib *l, CUresult r, const char *what);

#endif /* HMM_TRAIN_GPU_PRIV_H */
