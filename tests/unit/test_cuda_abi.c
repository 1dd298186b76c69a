// SPDX-License-Identifier: MIT
/*
 * test_cuda_abi — libhmm/src/engine/cuda_abi.h (what dev_cuda.c calls through
 * dlopen, and the fake driver implements) held against the CUDA
 * toolkit's own cuda.h: every struct's size and field offsets, every
 * value, the versioned symbol each entry point resolves to, and each
 * entry point's parameter list.  No GPU needed: this is the check that
 * dev_cuda.c talks to a real driver the way cuda.h says, on machines
 * that have none.  Built with cuda.h where the Makefile finds one
 * (HMM_HAVE_CUDA_H), skipped otherwise.  Then hmm-train's cuBLAS list
 * (tools/hmm-train/gpu_cublas.h: what cuda.c and gpu_lib.c dlsym) the
 * same way against cublas_v2.h, where the toolkit beside cuda.h has it.
 */
#include "t.h"

#ifndef HMM_HAVE_CUDA_H
int main(void)
{
	t_skip_all("no cuda.h (CUDA toolkit) to hold cuda_abi.h against");
}
#else

#include <stddef.h>
#include <string.h>

#define HMM_CUDA_ABI_LISTS_ONLY
#include "cuda_abi.h"
#include <cuda.h>

#if __has_include(<cublas_v2.h>)
#define HAVE_CUBLAS_H
#define HMM_CUBLAS_ABI_LISTS_ONLY
#include "../../tools/hmm-train/gpu_cublas.h"
#include <cublas_v2.h>
#endif

#define STR(x)	#x
#define XSTR(x)	STR(x)	/* after cuda.h's renames (cuMemGetInfo_v2...) */

#define SAME_SIZE(ours, theirs)						\
	t_eq(sizeof(ours), sizeof(theirs), "sizeof " #ours " = sizeof "	\
	     #theirs " (%zu)", sizeof(theirs))
#define SAME_OFF(ours, theirs, f)					\
	t_eq(offsetof(ours, f), offsetof(theirs, f), #theirs "." #f	\
	     " at %zu", offsetof(theirs, f))

static void layouts(void)
{
	SAME_SIZE(int, CUresult);
	SAME_SIZE(int, CUdevice);
	SAME_SIZE(int, CUdevice_attribute);
	SAME_SIZE(int, CUmemAllocationGranularity_flags);
	SAME_SIZE(int, CUmem_advise);
	SAME_SIZE(int, CUmem_range_attribute);
	SAME_SIZE(unsigned long long, CUdeviceptr);
	SAME_SIZE(unsigned long long, CUmemGenericAllocationHandle);
	SAME_SIZE(struct hmm_cu_location, CUmemLocation);
	SAME_OFF(struct hmm_cu_location, CUmemLocation, type);
	SAME_OFF(struct hmm_cu_location, CUmemLocation, id);
	SAME_SIZE(struct hmm_cu_alloc_prop, CUmemAllocationProp);
	SAME_OFF(struct hmm_cu_alloc_prop, CUmemAllocationProp, type);
	SAME_OFF(struct hmm_cu_alloc_prop, CUmemAllocationProp,
		 requestedHandleTypes);
	SAME_OFF(struct hmm_cu_alloc_prop, CUmemAllocationProp, location);
	SAME_OFF(struct hmm_cu_alloc_prop, CUmemAllocationProp,
		 win32HandleMetaData);
	SAME_OFF(struct hmm_cu_alloc_prop, CUmemAllocationProp, allocFlags);
	SAME_OFF(struct hmm_cu_alloc_prop, CUmemAllocationProp,
		 allocFlags.compressionType);
	SAME_OFF(struct hmm_cu_alloc_prop, CUmemAllocationProp,
		 allocFlags.gpuDirectRDMACapable);
	SAME_OFF(struct hmm_cu_alloc_prop, CUmemAllocationProp,
		 allocFlags.usage);
	SAME_OFF(struct hmm_cu_alloc_prop, CUmemAllocationProp,
		 allocFlags.reserved);
	SAME_SIZE(struct hmm_cu_access_desc, CUmemAccessDesc);
	SAME_OFF(struct hmm_cu_access_desc, CUmemAccessDesc, location);
	SAME_OFF(struct hmm_cu_access_desc, CUmemAccessDesc, flags);
}

/* name is cuda.h's constant here; v is cuda_abi.h's value for it */
#define VALUE(name, v)	t_eq((long long)(name), (long long)(v), #name " = %d", v);

/* name expands to the symbol cuda.h binds it to; params are checked as
 * cuda.h's types against cuda.h's prototype */
#define CALL(field, name, sym, params)					\
	t_ok(!strcmp(XSTR(name), sym), #name " is the symbol %s (cuda.h: %s)", \
	     sym, XSTR(name));						\
	t_ok(__builtin_types_compatible_p(__typeof__(&name),		\
					  CUresult (*) params),		\
	     #name " takes " #params);

#ifdef HAVE_CUBLAS_H
/* the same for cuBLAS: name expands to cublas_v2.h's symbol */
#define CUBLAS_CALL(field, name, sym, params)				\
	t_ok(!strcmp(XSTR(name), sym), #name " is the symbol %s "	\
	     "(cublas_v2.h: %s)", sym, XSTR(name));			\
	t_ok(__builtin_types_compatible_p(__typeof__(&name),		\
					  cublasStatus_t (*) params),	\
	     #name " takes " #params);
#endif

int main(void)
{
	t_diag("cuda.h CUDA_VERSION %d", CUDA_VERSION);
	layouts();
	HMM_CU_VALUES(VALUE)
	HMM_CU_CALLS(CALL)
	HMM_CU_MANAGED_CALLS(CALL)
	HMM_CU_DISCARD_CALLS(CALL)
	HMM_CU_LAUNCH_CALLS(CALL)
#ifdef HAVE_CUBLAS_H
	t_diag("cublas_v2.h CUBLAS_VERSION %d", CUBLAS_VERSION);
	SAME_SIZE(int, cublasStatus_t);
	SAME_SIZE(int, cublasOperation_t);
	SAME_SIZE(void *, cublasHandle_t);
	t_ok(__builtin_types_compatible_p(cudaStream_t, CUstream),
	     "cudaStream_t is the driver's CUstream");
	HMM_CUBLAS_VALUES(VALUE)
	HMM_CUBLAS_CALLS(CUBLAS_CALL)
#else
	t_ok(1, "# SKIP no cublas_v2.h beside cuda.h: gpu_cublas.h unchecked");
#endif
	return t_done();
}

#endif /* HMM_HAVE_CUDA_H */
