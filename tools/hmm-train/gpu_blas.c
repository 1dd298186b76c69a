// SPDX-License-Identifier: MIT
/*
 * gpu_blas.c — blas.h's row-major gemm() on cuBLAS's column-major
 * cublasSgemm_v2 (gpu_priv.h).  A row-major M x N matrix with leading
 * dimension ld is, read column-major, its N x M transpose with the same
 * ld; so C = op(A) op(B) is C^T = op(B)^T op(A)^T: cuBLAS is called
 * with the operands (and their transposes) swapped and m = N, n = M.
 * test_gpu_plan checks it against a row-major reference through a
 * column-major one that keeps cuBLAS's rules (lda >= rows of the stored
 * operand, or CUBLAS_STATUS_INVALID_VALUE).
 */
#include <errno.h>
#include <stdint.h>

#include "gpu_priv.h"

int gpu_gemm(const struct hmm_cublas *b, cublasHandle_t handle, int ta,
	     int tb, int M, int N, int K, float alpha, CUdeviceptr A, int lda,
	     CUdeviceptr B, int ldb, float beta, CUdeviceptr C, int ldc)
{
	cublasStatus_t st;

	st = b->Sgemm(handle, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
		      ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha,
		      (const float *)(uintptr_t)B, ldb,
		      (const float *)(uintptr_t)A, lda, &beta,
		      (float *)(uintptr_t)C, ldc);

	return st ? gpu_fail(-EIO, "cublasSgemm_v2 for %dx%dx%d (ta %d, tb "
			     "%d): status %d", M, N, K, ta, tb, st) : 0;
}
