/* SPDX-License-Identifier: MIT */
/*
 * gpu_cublas.h — the part of cuBLAS that hmm-train uses, written out as
 * cuda_abi.h writes out the driver's: cublas_api.h's type names, the
 * values passed or checked, and each entry point with the _v2 symbol
 * cublas_v2.h binds it to, so that hmm-train dlopens cuBLAS with no
 * CUDA header.  cuda.c (the probe) and gpu_lib.c (the step) resolve
 * from this one list; tests/unit/test_cuda_abi.c holds every symbol
 * name, value and prototype below against the toolkit's cublas_v2.h.
 *
 * Define HMM_CUBLAS_ABI_LISTS_ONLY before including to get only the
 * lists (the test, which has cublas_api.h's names in scope instead).
 * Include cuda_abi.h first otherwise (CUstream).
 */
#ifndef HMM_TRAIN_GPU_CUBLAS_H
#define HMM_TRAIN_GPU_CUBLAS_H

/* X(cublas_api.h's name, its value) */
#define HMM_CUBLAS_VALUES(X)						\
	X(CUBLAS_STATUS_SUCCESS, 0)					\
	X(CUBLAS_STATUS_NOT_INITIALIZED, 1)				\
	X(CUBLAS_STATUS_INVALID_VALUE, 7)				\
	X(CUBLAS_OP_N, 0)						\
	X(CUBLAS_OP_T, 1)

/*
 * X(field, cublas_v2.h's name, the symbol it resolves to, parameters):
 * every call returns cublasStatus_t.
 */
#define HMM_CUBLAS_CALLS(X)						\
	X(Create, cublasCreate, "cublasCreate_v2", (cublasHandle_t *))	\
	X(Destroy, cublasDestroy, "cublasDestroy_v2", (cublasHandle_t))	\
	X(GetVersion, cublasGetVersion, "cublasGetVersion_v2",		\
	  (cublasHandle_t, int *))					\
	X(SetStream, cublasSetStream, "cublasSetStream_v2",		\
	  (cublasHandle_t, cudaStream_t))				\
	X(Sgemm, cublasSgemm, "cublasSgemm_v2", (cublasHandle_t,	\
	  cublasOperation_t, cublasOperation_t, int, int, int,		\
	  const float *, const float *, int, const float *, int,	\
	  const float *, float *, int))

#ifndef HMM_CUBLAS_ABI_LISTS_ONLY

/* cublas_api.h's names; its enums are ints here (same size, same
 * passing), its handle an opaque pointer, a stream the driver's */
typedef int cublasStatus_t;
typedef int cublasOperation_t;
typedef struct cublasContext *cublasHandle_t;
typedef CUstream cudaStream_t;

#define HMM_CUBLAS_VALUE_ENUM(name, v)	name = v,
enum { HMM_CUBLAS_VALUES(HMM_CUBLAS_VALUE_ENUM) };
#undef HMM_CUBLAS_VALUE_ENUM

/* The entry points as function pointers, resolved by dlsym. */
struct hmm_cublas {
#define HMM_CUBLAS_FIELD(field, name, sym, params)			\
	cublasStatus_t (*field) params;
	HMM_CUBLAS_CALLS(HMM_CUBLAS_FIELD)
#undef HMM_CUBLAS_FIELD
};

#endif /* HMM_CUBLAS_ABI_LISTS_ONLY */
#endif /* HMM_TRAIN_GPU_CUBLAS_H */
