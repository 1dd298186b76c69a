/* SPDX-License-Identifier: MIT */
/*
 * dlpack.h — the DLPack ABI (the "legacy" DLManagedTensor of DLPack
 * 0.x/1.x, which torch.from_dlpack, NumPy, JAX and CuPy accept), written
 * from the specification at https://dmlc.github.io/dlpack/latest/.
 * Binary-compatible with dmlc/dlpack's header; if that header is included
 * first (DLPACK_VERSION defined), this one steps aside.
 *
 * A producer fills a DLManagedTensor and hands it over; the consumer
 * calls deleter(self) exactly once when it no longer needs the memory.
 */
#ifndef HMM_DLPACK_H
#define HMM_DLPACK_H
#ifndef DLPACK_VERSION

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
	kDLCPU = 1,
	kDLCUDA = 2,
	kDLCUDAHost = 3,
	kDLOpenCL = 4,
	kDLVulkan = 7,
	kDLMetal = 8,
	kDLVPI = 9,
	kDLROCM = 10,
	kDLROCMHost = 11,
	kDLExtDev = 12,
	kDLCUDAManaged = 13,
	kDLOneAPI = 14,
	kDLWebGPU = 15,
	kDLHexagon = 16,
} DLDeviceType;

typedef struct {
	DLDeviceType device_type;
	int32_t device_id;
} DLDevice;

typedef enum {
	kDLInt = 0,
	kDLUInt = 1,
	kDLFloat = 2,
	kDLOpaqueHandle = 3,
	kDLBfloat = 4,
	kDLComplex = 5,
	kDLBool = 6,
} DLDataTypeCode;

typedef struct {
	uint8_t code;		/* DLDataTypeCode */
	uint8_t bits;
	uint16_t lanes;
} DLDataType;

typedef struct {
	void *data;		/* 256-byte aligned for CUDA consumers */
	DLDevice device;
	int32_t ndim;
	DLDataType dtype;
	int64_t *shape;
	int64_t *strides;	/* NULL = compact row-major */
	uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
	DLTensor dl_tensor;
	void *manager_ctx;
	void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#ifdef __cplusplus
}
#endif

#endif /* DLPACK_VERSION */
#endif /* HMM_DLPACK_H */
