/* SPDX-License-Identifier: MIT */
/*
 * cuda_abi.h — the part of the CUDA driver API that libhmm uses, written
 * out so that libhmm builds with no CUDA header (it loads libcuda.so.1
 * with dlopen): the types, the values and the entry points with the
 * versioned symbol each one resolves to.  One copy: dev_cuda.c calls
 * through it and the fake driver (tests/fakecuda) implements it.
 * tests/unit/test_cuda_abi.c compiles each layout, value, symbol name
 * and prototype below against the installed cuda.h, where there is one.
 *
 * Define HMM_CUDA_ABI_LISTS_ONLY before including to get only the lists
 * (the test, which has cuda.h's names in scope instead).
 */
#ifndef HMM_CUDA_ABI_H
#define HMM_CUDA_ABI_H

#include <stddef.h>

/* The structs, under tags of ours (cuda.h's typedef names below). */
struct hmm_cu_location {
	int type;		/* CU_MEM_LOCATION_TYPE_DEVICE */
	int id;
};

struct hmm_cu_alloc_prop {
	int type;		/* CU_MEM_ALLOCATION_TYPE_PINNED */
	int requestedHandleTypes;
	struct hmm_cu_location location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
};

struct hmm_cu_access_desc {
	struct hmm_cu_location location;
	int flags;		/* CU_MEM_ACCESS_FLAGS_PROT_* */
};

/* X(cuda.h's name, its value): CUresult codes and the other constants
 * libhmm or the fake passes or checks. */
#define HMM_CU_VALUES(X)						\
	X(CUDA_SUCCESS, 0)						\
	X(CUDA_ERROR_INVALID_VALUE, 1)					\
	X(CUDA_ERROR_OUT_OF_MEMORY, 2)					\
	X(CUDA_ERROR_NOT_INITIALIZED, 3)				\
	X(CUDA_ERROR_NO_DEVICE, 100)					\
	X(CUDA_ERROR_INVALID_DEVICE, 101)				\
	X(CUDA_ERROR_INVALID_CONTEXT, 201)				\
	X(CUDA_ERROR_INVALID_HANDLE, 400)				\
	X(CUDA_ERROR_ILLEGAL_ADDRESS, 700)				\
	X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, 712)		\
	X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, 713)			\
	X(CUDA_ERROR_NOT_SUPPORTED, 801)				\
	X(CUDA_ERROR_UNKNOWN, 999)					\
	X(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 102)	\
	X(CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 83)			\
	X(CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, 89)		\
	X(CU_DEVICE_CPU, -1)						\
	X(CU_DEVICE_INVALID, -2)					\
	X(CU_MEM_ATTACH_GLOBAL, 1)					\
	X(CU_MEM_ATTACH_HOST, 2)					\
	X(CU_MEM_LOCATION_TYPE_INVALID, 0)				\
	X(CU_MEM_LOCATION_TYPE_HOST, 2)					\
	X(CU_MEM_LOCATION_TYPE_HOST_NUMA, 3)				\
	X(CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT, 4)			\
	X(CU_MEM_ADVISE_SET_READ_MOSTLY, 1)				\
	X(CU_MEM_ADVISE_UNSET_READ_MOSTLY, 2)				\
	X(CU_MEM_ADVISE_SET_PREFERRED_LOCATION, 3)			\
	X(CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, 4)			\
	X(CU_MEM_ADVISE_SET_ACCESSED_BY, 5)				\
	X(CU_MEM_ADVISE_UNSET_ACCESSED_BY, 6)				\
	X(CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, 1)			\
	X(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, 2)			\
	X(CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY, 3)			\
	X(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, 4)		\
	X(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, 5)		\
	X(CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, 6)		\
	X(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE, 7)	\
	X(CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID, 8)		\
	X(CU_MEM_ALLOCATION_TYPE_PINNED, 1)				\
	X(CU_MEM_LOCATION_TYPE_DEVICE, 1)				\
	X(CU_MEM_ACCESS_FLAGS_PROT_READ, 1)				\
	X(CU_MEM_ACCESS_FLAGS_PROT_READWRITE, 3)			\
	X(CU_MEM_ALLOC_GRANULARITY_MINIMUM, 0)				\
	X(CU_STREAM_NON_BLOCKING, 1)					\
	X(CU_EVENT_DISABLE_TIMING, 2)

/*
 * X(field, cuda.h's name, the symbol it resolves to, parameters): the
 * entry points, in the order dev_cuda.c resolves them.  The parameters
 * use cuda.h's type names, so that the test can hold each list against
 * the real prototype.
 */
#define HMM_CU_CALLS(X)							\
	X(Init, cuInit, "cuInit", (unsigned int))			\
	X(DeviceGetCount, cuDeviceGetCount, "cuDeviceGetCount", (int *)) \
	X(DeviceGet, cuDeviceGet, "cuDeviceGet", (CUdevice *, int))	\
	X(DeviceGetAttribute, cuDeviceGetAttribute, "cuDeviceGetAttribute", \
	  (int *, CUdevice_attribute, CUdevice))			\
	X(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain,		\
	  "cuDevicePrimaryCtxRetain", (CUcontext *, CUdevice))		\
	X(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease,		\
	  "cuDevicePrimaryCtxRelease_v2", (CUdevice))			\
	X(CtxSetCurrent, cuCtxSetCurrent, "cuCtxSetCurrent", (CUcontext)) \
	X(CtxPushCurrent, cuCtxPushCurrent, "cuCtxPushCurrent_v2",	\
	  (CUcontext))							\
	X(CtxPopCurrent, cuCtxPopCurrent, "cuCtxPopCurrent_v2",		\
	  (CUcontext *))						\
	X(MemGetInfo, cuMemGetInfo, "cuMemGetInfo_v2", (size_t *, size_t *)) \
	X(MemGetAllocationGranularity, cuMemGetAllocationGranularity,	\
	  "cuMemGetAllocationGranularity", (size_t *,			\
	  const CUmemAllocationProp *, CUmemAllocationGranularity_flags)) \
	X(MemAddressReserve, cuMemAddressReserve, "cuMemAddressReserve", \
	  (CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long)) \
	X(MemAddressFree, cuMemAddressFree, "cuMemAddressFree",		\
	  (CUdeviceptr, size_t))					\
	X(MemCreate, cuMemCreate, "cuMemCreate",			\
	  (CUmemGenericAllocationHandle *, size_t,			\
	   const CUmemAllocationProp *, unsigned long long))		\
	X(MemRelease, cuMemRelease, "cuMemRelease",			\
	  (CUmemGenericAllocationHandle))				\
	X(MemMap, cuMemMap, "cuMemMap", (CUdeviceptr, size_t, size_t,	\
	  CUmemGenericAllocationHandle, unsigned long long))		\
	X(MemUnmap, cuMemUnmap, "cuMemUnmap", (CUdeviceptr, size_t))	\
	X(MemSetAccess, cuMemSetAccess, "cuMemSetAccess",		\
	  (CUdeviceptr, size_t, const CUmemAccessDesc *, size_t))	\
	X(MemHostRegister, cuMemHostRegister, "cuMemHostRegister_v2",	\
	  (void *, size_t, unsigned int))				\
	X(MemHostUnregister, cuMemHostUnregister, "cuMemHostUnregister", \
	  (void *))							\
	X(MemcpyHtoDAsync, cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2",	\
	  (CUdeviceptr, const void *, size_t, CUstream))		\
	X(MemcpyDtoHAsync, cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2",	\
	  (void *, CUdeviceptr, size_t, CUstream))			\
	X(StreamCreate, cuStreamCreate, "cuStreamCreate",		\
	  (CUstream *, unsigned int))					\
	X(StreamDestroy, cuStreamDestroy, "cuStreamDestroy_v2", (CUstream)) \
	X(StreamSynchronize, cuStreamSynchronize, "cuStreamSynchronize", \
	  (CUstream))							\
	X(EventCreate, cuEventCreate, "cuEventCreate",			\
	  (CUevent *, unsigned int))					\
	X(EventDestroy, cuEventDestroy, "cuEventDestroy_v2", (CUevent))	\
	X(EventRecord, cuEventRecord, "cuEventRecord", (CUevent, CUstream)) \
	X(EventSynchronize, cuEventSynchronize, "cuEventSynchronize",	\
	  (CUevent))							\
	X(GetErrorString, cuGetErrorString, "cuGetErrorString",		\
	  (CUresult, const char **))

/*
 * The managed-memory entry points: resolved only by the "uvm" device
 * (dev_uvm.c), so that "cuda" still runs on a driver older than CUDA
 * 12.2 (where cuMemPrefetchAsync/cuMemAdvise took a CUdevice; the _v2
 * symbols take a CUmemLocation, CUDA 13's only form).
 */
#define HMM_CU_MANAGED_CALLS(X)						\
	X(MemAllocManaged, cuMemAllocManaged, "cuMemAllocManaged",	\
	  (CUdeviceptr *, size_t, unsigned int))			\
	X(MemFree, cuMemFree, "cuMemFree_v2", (CUdeviceptr))		\
	X(MemPrefetchAsync, cuMemPrefetchAsync, "cuMemPrefetchAsync_v2", \
	  (CUdeviceptr, size_t, CUmemLocation, unsigned int, CUstream))	\
	X(MemAdvise, cuMemAdvise, "cuMemAdvise_v2",			\
	  (CUdeviceptr, size_t, CUmem_advise, CUmemLocation))		\
	X(MemRangeGetAttribute, cuMemRangeGetAttribute,			\
	  "cuMemRangeGetAttribute", (void *, size_t,			\
	  CUmem_range_attribute, CUdeviceptr, size_t))			\
	X(MemRangeGetAttributes, cuMemRangeGetAttributes,		\
	  "cuMemRangeGetAttributes", (void **, size_t *,		\
	  CUmem_range_attribute *, size_t, CUdeviceptr, size_t))

/*
 * Discarding managed memory (CUDA 13): optional, resolved by "uvm" when
 * the driver has them (dev_uvm.c falls back to prefetches).  A discarded
 * range's contents are indeterminate until written or prefetched, so
 * the driver neither moves them back nor in.
 */
#define HMM_CU_DISCARD_CALLS(X)						\
	X(MemDiscardBatchAsync, cuMemDiscardBatchAsync,			\
	  "cuMemDiscardBatchAsync", (CUdeviceptr *, size_t *, size_t,	\
	  unsigned long long, CUstream))				\
	X(MemDiscardAndPrefetchBatchAsync,				\
	  cuMemDiscardAndPrefetchBatchAsync,				\
	  "cuMemDiscardAndPrefetchBatchAsync", (CUdeviceptr *, size_t *, \
	  size_t, CUmemLocation *, size_t *, size_t, unsigned long long, \
	  CUstream))

/*
 * Loading and launching a kernel image, and plain device memory: not
 * libhmm's, but the tools' that run bundled kernels through the driver
 * with no CUDA runtime linked (hmm-bench uvm), so that they, too, run
 * where no GPU is and say why.
 */
#define HMM_CU_LAUNCH_CALLS(X)						\
	X(ModuleLoadData, cuModuleLoadData, "cuModuleLoadData",		\
	  (CUmodule *, const void *))					\
	X(ModuleUnload, cuModuleUnload, "cuModuleUnload", (CUmodule))	\
	X(ModuleGetFunction, cuModuleGetFunction, "cuModuleGetFunction", \
	  (CUfunction *, CUmodule, const char *))			\
	X(LaunchKernel, cuLaunchKernel, "cuLaunchKernel",		\
	  (CUfunction, unsigned int, unsigned int, unsigned int,	\
	   unsigned int, unsigned int, unsigned int, unsigned int,	\
	   CUstream, void **, void **))					\
	X(CtxSynchronize, cuCtxSynchronize, "cuCtxSynchronize", (void))	\
	X(MemAlloc, cuMemAlloc, "cuMemAlloc_v2", (CUdeviceptr *, size_t))

#ifndef HMM_CUDA_ABI_LISTS_ONLY

/* cuda.h's names.  Its enums are ints here: the same size and passing. */
typedef int CUresult;
typedef int CUdevice;
typedef int CUdevice_attribute;
typedef int CUmemAllocationGranularity_flags;
typedef int CUmem_advise;
typedef int CUmem_range_attribute;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct hmm_cu_location CUmemLocation;
typedef struct hmm_cu_alloc_prop CUmemAllocationProp;
typedef struct hmm_cu_access_desc CUmemAccessDesc;

#define HMM_CU_VALUE_ENUM(name, v)	name = v,
enum { HMM_CU_VALUES(HMM_CU_VALUE_ENUM) };
#undef HMM_CU_VALUE_ENUM

#endif /* HMM_CUDA_ABI_LISTS_ONLY */
#endif /* HMM_CUDA_ABI_H */
