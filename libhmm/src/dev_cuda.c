// SPDX-License-Identifier: MIT
/*
 * dev_cuda.c — the "cuda" device: the CUDA driver API loaded at run time
 * with dlopen("libcuda.so.1"), so libhmm builds and runs without CUDA and
 * says -ENODEV (with the reason) when asked for a GPU it cannot have.
 *
 * Memory: each tensor gets a contiguous device address range
 * (cuMemAddressReserve) and each resident chunk is backed by its own
 * physical allocation (cuMemCreate + cuMemMap + cuMemSetAccess, released
 * by cuMemUnmap).  That is cuMemAlloc per chunk, mapped where the chunk
 * lives in the tensor, so a mapped range is one device pointer and the
 * budget is per chunk.  Chunks must be multiples of the allocation
 * granularity (2 MiB on current GPUs): checked at open.
 *
 * Copies: one copy thread, one stream; host memory is pageable (the
 * tensor's own mapping), so bytes go through two pinned staging buffers
 * (page-aligned, cuMemHostRegister'ed: the device's pinned pool) with
 * cuMemcpyHtoDAsync/DtoHAsync, double-buffered on events.
 *
 * The prototypes below are the CUDA 13 driver ABI (the _v2 entry points
 * where they exist), declared here so that cuda.h is not needed.
 * Threading: a primary context is made current on every thread that
 * calls in (cuCtxSetCurrent is cheap).  The queue is dev_common.c's.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "dev.h"
#include "err.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

typedef struct {
	int type;		/* CU_MEM_LOCATION_TYPE_DEVICE = 1 */
	int id;
} CUmemLocation;

typedef struct {
	int type;		/* CU_MEM_ALLOCATION_TYPE_PINNED = 1 */
	int requestedHandleTypes;
	CUmemLocation location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} CUmemAllocationProp;

typedef struct {
	CUmemLocation location;
	int flags;		/* CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3 */
} CUmemAccessDesc;

#define CU_ATTR_VMM_SUPPORTED	102
#define CU_STAGE_BYTES		(4u << 20)

/* The driver's entry points, resolved by dlsym. */
struct cu_api {
	CUresult (*Init)(unsigned);
	CUresult (*DeviceGetCount)(int *);
	CUresult (*DeviceGet)(CUdevice *, int);
	CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
	CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*DevicePrimaryCtxRelease)(CUdevice);
	CUresult (*CtxSetCurrent)(CUcontext);
	CUresult (*MemGetInfo)(size_t *, size_t *);
	CUresult (*MemGetAllocationGranularity)(size_t *,
			const CUmemAllocationProp *, int);
	CUresult (*MemAddressReserve)(CUdeviceptr *, size_t, size_t,
				      CUdeviceptr, unsigned long long);
	CUresult (*MemAddressFree)(CUdeviceptr, size_t);
	CUresult (*MemCreate)(CUmemGenericAllocationHandle *, size_t,
			      const CUmemAllocationProp *, unsigned long long);
	CUresult (*MemRelease)(CUmemGenericAllocationHandle);
	CUresult (*MemMap)(CUdeviceptr, size_t, size_t,
			   CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*MemUnmap)(CUdeviceptr, size_t);
	CUresult (*MemSetAccess)(CUdeviceptr, size_t, const CUmemAccessDesc *,
				 size_t);
	CUresult (*MemHostRegister)(void *, size_t, unsigned);
	CUresult (*MemHostUnregister)(void *);
	CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t,
				    CUstream);
	CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
	CUresult (*StreamCreate)(CUstream *, unsigned);
	CUresult (*StreamDestroy)(CUstream);
	CUresult (*StreamSynchronize)(CUstream);
	CUresult (*EventCreate)(CUevent *, unsigned);
	CUresult (*EventDestroy)(CUevent);
	CUresult (*EventRecord)(CUevent, CUstream);
	CUresult (*EventSynchronize)(CUevent);
	CUresult (*GetErrorString)(CUresult, const char **);
};

/* Allocated by cu_open, freed by cu_close. */
struct cu {
	struct cu_api api;
	void *lib;
	CUdevice dev;
	CUcontext ctx;
	size_t gran;
	CUmemAllocationProp prop;
	CUstream stream;		/* copy thread only */
	CUevent ev[2];
	void *stage[2];			/* registered, CU_STAGE_BYTES each */
	struct hmm_dev_queue q;		/* the copy thread and its queue */
};

static const char *cu_str(struct cu *c, CUresult r)
{
	const char *s = NULL;

	if (c->api.GetErrorString)
		c->api.GetErrorString(r, &s);
	return s ? s : "unknown CUDA error";
}

static int cu_load(struct cu *c)
{
	static const struct { const char *name; size_t off; } syms[] = {
#define S(f, n) { n, offsetof(struct cu_api, f) }
		S(Init, "cuInit"), S(DeviceGetCount, "cuDeviceGetCount"),
		S(DeviceGet, "cuDeviceGet"),
		S(DeviceGetAttribute, "cuDeviceGetAttribute"),
		S(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
		S(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
		S(CtxSetCurrent, "cuCtxSetCurrent"),
		S(MemGetInfo, "cuMemGetInfo_v2"),
		S(MemGetAllocationGranularity,
		  "cuMemGetAllocationGranularity"),
		S(MemAddressReserve, "cuMemAddressReserve"),
		S(MemAddressFree, "cuMemAddressFree"),
		S(MemCreate, "cuMemCreate"), S(MemRelease, "cuMemRelease"),
		S(MemMap, "cuMemMap"), S(MemUnmap, "cuMemUnmap"),
		S(MemSetAccess, "cuMemSetAccess"),
		S(MemHostRegister, "cuMemHostRegister_v2"),
		S(MemHostUnregister, "cuMemHostUnregister"),
		S(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
		S(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
		S(StreamCreate, "cuStreamCreate"),
		S(StreamDestroy, "cuStreamDestroy_v2"),
		S(StreamSynchronize, "cuStreamSynchronize"),
		S(EventCreate, "cuEventCreate"),
		S(EventDestroy, "cuEventDestroy_v2"),
		S(EventRecord, "cuEventRecord"),
		S(EventSynchronize, "cuEventSynchronize"),
		S(GetErrorString, "cuGetErrorString"),
#undef S
	};
	size_t i;

	c->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!c->lib)
		return hmm_err(-ENODEV, "device cuda: no driver: dlopen "
			       "libcuda.so.1: %s", dlerror());
	for (i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(c->lib, syms[i].name);

		if (!f)
			return hmm_err(-ENODEV, "device cuda: the driver has "
				       "no %s (older than CUDA 11.2?)",
				       syms[i].name);
		memcpy((char *)&c->api + syms[i].off, &f, sizeof(f));
	}
	return 0;
}

#define CU_TRY(c, call, what)                                              \
	do {                                                               \
		CUresult r_ = (call);                                      \
		if (r_)                                                    \
			return hmm_err(-ENODEV, "device cuda: %s: %s (%d)",\
				       what, cu_str(c, r_), r_);           \
	} while (0)

static int cu_device(struct cu *c, const struct hmm_config *cfg,
		     uint64_t *capacity)
{
	size_t free_b = 0, total = 0;
	int n = 0, vmm = 0;

	CU_TRY(c, c->api.Init(0), "cuInit");
	CU_TRY(c, c->api.DeviceGetCount(&n), "cuDeviceGetCount");
	if (cfg->device_index < 0 || cfg->device_index >= n)
		return hmm_err(-ENODEV, "device cuda: device_index %d, but "
			       "%d GPU(s) visible", cfg->device_index, n);
	CU_TRY(c, c->api.DeviceGet(&c->dev, cfg->device_index),
	       "cuDeviceGet");
	CU_TRY(c, c->api.DeviceGetAttribute(&vmm, CU_ATTR_VMM_SUPPORTED,
					    c->dev), "cuDeviceGetAttribute");
	if (!vmm)
		return hmm_err(-ENODEV, "device cuda: GPU %d lacks virtual "
			       "memory management", cfg->device_index);
	CU_TRY(c, c->api.DevicePrimaryCtxRetain(&c->ctx, c->dev),
	       "cuDevicePrimaryCtxRetain");
	CU_TRY(c, c->api.CtxSetCurrent(c->ctx), "cuCtxSetCurrent");
	c->prop.type = 1;
	c->prop.location.type = 1;
	c->prop.location.id = c->dev;
	CU_TRY(c, c->api.MemGetAllocationGranularity(&c->gran, &c->prop, 0),
	       "cuMemGetAllocationGranularity");
	if (!c->gran || (cfg->chunk_bytes ? cfg->chunk_bytes : 2u << 20) %
	    c->gran)
		return hmm_err(-EINVAL, "device cuda: config.chunk_bytes must "
			       "be a multiple of %zu", c->gran);
	CU_TRY(c, c->api.MemGetInfo(&free_b, &total), "cuMemGetInfo");
	*capacity = free_b / 10 * 9;	/* leave room for kernels */
	return 0;
}

static int cu_streams(struct cu *c)
{
	int i;

	CU_TRY(c, c->api.StreamCreate(&c->stream, 1), "cuStreamCreate");
	for (i = 0; i < 2; i++) {
		CU_TRY(c, c->api.EventCreate(&c->ev[i], 2), "cuEventCreate");
		if (posix_memalign(&c->stage[i], 4096, CU_STAGE_BYTES))
			return hmm_err(-ENOMEM, "device cuda: staging buffer");
		CU_TRY(c, c->api.MemHostRegister(c->stage[i], CU_STAGE_BYTES,
						 0), "cuMemHostRegister");
	}
	return 0;
}

/* One copy, in staging-sized pieces, double-buffered.  0 or -EIO. */
static int cu_do_copy(void *owner, const struct hmm_dev_copy *q)
{
	struct cu *c = owner;
	uint64_t off;
	int k = 0;

	for (off = 0; off < q->bytes; off += CU_STAGE_BYTES, k ^= 1) {
		size_t n = q->bytes - off < CU_STAGE_BYTES ?
			   q->bytes - off : CU_STAGE_BYTES;

		if (c->api.EventSynchronize(c->ev[k]))
			return -EIO;
		if (q->dir == HMM_H2D) {
			memcpy(c->stage[k], (char *)q->host + off, n);
			if (c->api.MemcpyHtoDAsync(q->dev + off, c->stage[k],
						   n, c->stream))
				return -EIO;
		} else {
			if (c->api.MemcpyDtoHAsync(c->stage[k], q->dev + off,
						   n, c->stream) ||
			    c->api.StreamSynchronize(c->stream))
				return -EIO;
			memcpy((char *)q->host + off, c->stage[k], n);
		}
		c->api.EventRecord(c->ev[k], c->stream);
	}
	return c->api.StreamSynchronize(c->stream) ? -EIO : 0;
}

/* The copy thread's start: the context current on it. */
static void cu_enter(void *owner)
{
	struct cu *c = owner;

	c->api.CtxSetCurrent(c->ctx);
}

static void cu_teardown(struct cu *c)
{
	int i;

	if (c->ctx) {
		c->api.CtxSetCurrent(c->ctx);
		for (i = 0; i < 2; i++) {
			if (c->stage[i])
				c->api.MemHostUnregister(c->stage[i]);
			if (c->ev[i])
				c->api.EventDestroy(c->ev[i]);
		}
		if (c->stream)
			c->api.StreamDestroy(c->stream);
		c->api.DevicePrimaryCtxRelease(c->dev);
	}
	free(c->stage[0]);
	free(c->stage[1]);
	if (c->lib)
		dlclose(c->lib);
	free(c);
}

static int cu_open(const struct hmm_config *cfg, void **priv,
		   uint64_t *capacity, uint64_t *granularity)
{
	struct cu *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return hmm_err(-ENOMEM, "device cuda: no memory");
	r = cu_load(c);
	if (!r)
		r = cu_device(c, cfg, capacity);
	if (!r)
		r = cu_streams(c);
	if (!r && hmm_dev_queue_start(&c->q, c, cu_enter, cu_do_copy))
		r = hmm_err(-EAGAIN, "device cuda: cannot start the copy "
			    "thread");
	if (r) {
		cu_teardown(c);
		return r;
	}
	*priv = c;
	*granularity = c->gran;
	return 0;
}

static void cu_close(void *priv)
{
	struct cu *c = priv;

	hmm_dev_queue_stop(&c->q);
	cu_teardown(c);
}

static uint64_t cu_round(struct cu *c, uint64_t bytes)
{
	return (bytes + c->gran - 1) / c->gran * c->gran;
}

static int cu_reserve(void *priv, uint64_t bytes, uint64_t *addr)
{
	struct cu *c = priv;
	CUdeviceptr p;

	c->api.CtxSetCurrent(c->ctx);
	if (c->api.MemAddressReserve(&p, cu_round(c, bytes), c->gran, 0, 0))
		return -ENOMEM;
	*addr = p;
	return 0;
}

static void cu_release(void *priv, uint64_t addr, uint64_t bytes)
{
	struct cu *c = priv;

	c->api.CtxSetCurrent(c->ctx);
	c->api.MemAddressFree(addr, cu_round(c, bytes));
}

static int cu_populate(void *priv, uint64_t addr, uint64_t bytes)
{
	struct cu *c = priv;
	CUmemGenericAllocationHandle hd;
	CUmemAccessDesc acc = { c->prop.location, 3 };
	size_t n = cu_round(c, bytes);

	c->api.CtxSetCurrent(c->ctx);
	if (c->api.MemCreate(&hd, n, &c->prop, 0))
		return -ENOMEM;
	if (c->api.MemMap(addr, n, 0, hd, 0)) {
		c->api.MemRelease(hd);
		return -ENOMEM;
	}
	c->api.MemRelease(hd);	/* freed when unmapped */
	if (c->api.MemSetAccess(addr, n, &acc, 1)) {
		c->api.MemUnmap(addr, n);
		return -EIO;
	}
	return 0;
}

static void cu_depopulate(void *priv, uint64_t addr, uint64_t bytes)
{
	struct cu *c = priv;

	c->api.CtxSetCurrent(c->ctx);
	c->api.MemUnmap(addr, cu_round(c, bytes));
}

static int cu_copy(void *priv, int dir, uint64_t dev, void *host,
		   uint64_t bytes, void (*done)(void *arg, int err),
		   void *arg)
{
	struct cu *c = priv;

	return hmm_dev_queue_push(&c->q, dir, dev, host, bytes, done, arg);
}

const struct hmm_dev_ops hmm_dev_cuda = {
	.name = "cuda",
	.open = cu_open,
	.close = cu_close,
	.reserve = cu_reserve,
	.release = cu_release,
	.populate = cu_populate,
	.depopulate = cu_depopulate,
	.copy = cu_copy,
};
