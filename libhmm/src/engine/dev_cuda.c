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
 * cuMemcpyHtoDAsync/DtoHAsync: host -> device double-buffered on events,
 * device -> host waiting for each piece before copying it out.
 *
 * The driver ABI (types, values, entry points with their _v2 symbols)
 * is cuda_abi.h, so that cuda.h is not needed; test_cuda_abi holds it
 * against the toolkit's cuda.h (CUDA 13 here) at every make check.
 * Threading: the application's threads call reserve/release/populate/
 * depopulate; each pushes the device's primary context for its driver
 * calls and pops it after (cu_in/cu_out), so the caller's own current
 * context is left as it was.  The copy thread makes it current once.
 * The queue is dev_common.c's.
 *
 * Errors: CUDA_ERROR_OUT_OF_MEMORY is -ENOMEM, anything else -EIO, but
 * -ENODEV for whatever stops us finding a device (no driver, cuInit,
 * no GPU, no VMM), with the driver's words in the detail.
 *
 * Tested without a GPU on tests/fakecuda (test_cuda_fake.sh), which
 * checks the documented contracts of every call below.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "cuda_abi.h"
#include "dev.h"
#include "err.h"

#define CU_STAGE_BYTES		(4u << 20)

/* The driver's entry points, resolved by dlsym (cuda_abi.h). */
struct cu_api {
#define CU_FIELD(field, name, sym, params)	CUresult (*field) params;
	HMM_CU_CALLS(CU_FIELD)
#undef CU_FIELD
};

/* Allocated by cu_open, freed by cu_close. */
struct cu {
	struct hmm_dev_queue q;		/* first (hmm_dev_queue_copy): the
					   copy thread and its queue */
	struct cu_api api;
	void *lib;
	CUdevice dev;
	CUcontext ctx;
	size_t gran;
	CUmemAllocationProp prop;
	CUstream stream;		/* copy thread only */
	CUevent ev[2];
	void *stage[2];			/* CU_STAGE_BYTES each */
	int registered[2];		/* stage[i] is cuMemHostRegister'ed */
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
#define CU_SYM(field, name, sym, params) { sym, offsetof(struct cu_api, field) },
		HMM_CU_CALLS(CU_SYM)
#undef CU_SYM
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

/* A driver error as -errno: out of memory is -ENOMEM, the rest -EIO. */
static int cu_errno(CUresult r)
{
	return r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
}

/* Returns from the caller with -errno and the driver's words. */
#define CU_TRY_AS(c, e, call, what)                                        \
	do {                                                               \
		CUresult r_ = (call);                                      \
		if (r_)                                                    \
			return hmm_err((e) ? (e) : cu_errno(r_),           \
				       "device cuda: %s: %s (%d)", what,   \
				       cu_str(c, r_), r_);                 \
	} while (0)
#define CU_TRY(c, call, what)	CU_TRY_AS(c, 0, call, what)
#define CU_NODEV(c, call, what)	CU_TRY_AS(c, -ENODEV, call, what)

/* c's context current on the calling thread for a few driver calls;
 * cu_out puts back what the thread had.  0 or -EIO. */
static int cu_in(struct cu *c)
{
	CUresult r = c->api.CtxPushCurrent(c->ctx);

	if (r)
		return hmm_err(-EIO, "device cuda: cuCtxPushCurrent: %s (%d)",
			       cu_str(c, r), r);
	return 0;
}

static void cu_out(struct cu *c)
{
	CUcontext old;

	c->api.CtxPopCurrent(&old);
}

/* Finds the GPU and retains its primary context.  0 or -errno. */
static int cu_device(struct cu *c, const struct hmm_config *cfg)
{
	CUcontext ctx = NULL;
	int n = 0, vmm = 0;

	CU_NODEV(c, c->api.Init(0), "cuInit");
	CU_NODEV(c, c->api.DeviceGetCount(&n), "cuDeviceGetCount");
	if (cfg->device_index < 0 || cfg->device_index >= n)
		return hmm_err(-ENODEV, "device cuda: device_index %d, but "
			       "%d GPU(s) visible", cfg->device_index, n);
	CU_NODEV(c, c->api.DeviceGet(&c->dev, cfg->device_index),
		 "cuDeviceGet");
	CU_NODEV(c, c->api.DeviceGetAttribute(&vmm,
			CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
			c->dev), "cuDeviceGetAttribute");
	if (!vmm)
		return hmm_err(-ENODEV, "device cuda: GPU %d lacks virtual "
			       "memory management", cfg->device_index);
	/* into a local: c->ctx set means retained (cu_teardown) */
	CU_NODEV(c, c->api.DevicePrimaryCtxRetain(&ctx, c->dev),
		 "cuDevicePrimaryCtxRetain");
	c->ctx = ctx;
	return 0;
}

/* The allocation unit against config.chunk_bytes, and the capacity.
 * With c's context pushed.  0 or -errno. */
static int cu_memory(struct cu *c, const struct hmm_config *cfg,
		     uint64_t *capacity)
{
	uint32_t chunk = cfg->chunk_bytes ? cfg->chunk_bytes : 2u << 20;
	size_t free_b = 0, total = 0;

	c->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	c->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	c->prop.location.id = c->dev;
	CU_TRY(c, c->api.MemGetAllocationGranularity(&c->gran, &c->prop,
		  CU_MEM_ALLOC_GRANULARITY_MINIMUM),
	       "cuMemGetAllocationGranularity");
	if (!c->gran || chunk % c->gran)
		return hmm_err(-EINVAL, "device cuda: config.chunk_bytes %u "
			       "is not a multiple of the GPU's allocation "
			       "granularity %zu", chunk, c->gran);
	CU_TRY(c, c->api.MemGetInfo(&free_b, &total), "cuMemGetInfo");
	*capacity = free_b / 10 * 9;	/* leave room for kernels */
	return 0;
}

static int cu_streams(struct cu *c)
{
	int i;

	CU_TRY(c, c->api.StreamCreate(&c->stream, CU_STREAM_NON_BLOCKING),
	       "cuStreamCreate");
	for (i = 0; i < 2; i++) {
		CU_TRY(c, c->api.EventCreate(&c->ev[i],
					     CU_EVENT_DISABLE_TIMING),
		       "cuEventCreate");
		if (posix_memalign(&c->stage[i], 4096, CU_STAGE_BYTES))
			return hmm_err(-ENOMEM, "device cuda: staging buffer");
		CU_TRY(c, c->api.MemHostRegister(c->stage[i], CU_STAGE_BYTES,
						 0), "cuMemHostRegister");
		c->registered[i] = 1;
	}
	return 0;
}

/*
 * One copy, in staging-sized pieces, double-buffered: ev[k] marks when
 * stage[k] is free again.  0 or -EIO.  Whatever happened, the stream is
 * drained before returning: done() must not run while a piece of this
 * copy is still on the stream (the chunk may be depopulated next).
 */
static int cu_do_copy(void *owner, const struct hmm_dev_copy *q)
{
	struct cu *c = owner;
	CUresult r = 0, sync;
	uint64_t off;
	int k = 0;

	for (off = 0; off < q->bytes && !r; off += CU_STAGE_BYTES, k ^= 1) {
		size_t n = q->bytes - off < CU_STAGE_BYTES ?
			   q->bytes - off : CU_STAGE_BYTES;

		r = c->api.EventSynchronize(c->ev[k]);
		if (r)
			break;
		if (q->dir == HMM_H2D) {
			memcpy(c->stage[k], (char *)q->host + off, n);
			r = c->api.MemcpyHtoDAsync(q->dev + off, c->stage[k],
						   n, c->stream);
		} else {
			r = c->api.MemcpyDtoHAsync(c->stage[k], q->dev + off,
						   n, c->stream);
			if (!r)
				r = c->api.StreamSynchronize(c->stream);
			if (!r)
				memcpy((char *)q->host + off, c->stage[k], n);
		}
		/* unrecorded, the next wait on ev[k] would not cover this
		 * piece and stage[k] would be rewritten under the copy */
		if (!r)
			r = c->api.EventRecord(c->ev[k], c->stream);
	}
	sync = c->api.StreamSynchronize(c->stream);
	return r || sync ? -EIO : 0;
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

	if (c->ctx && !cu_in(c)) {
		for (i = 0; i < 2; i++) {
			if (c->registered[i])
				c->api.MemHostUnregister(c->stage[i]);
			if (c->ev[i])
				c->api.EventDestroy(c->ev[i]);
		}
		if (c->stream)
			c->api.StreamDestroy(c->stream);
		cu_out(c);
	}
	if (c->ctx)
		c->api.DevicePrimaryCtxRelease(c->dev);
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
		r = cu_device(c, cfg);
	if (!r)
		r = cu_in(c);
	if (!r) {
		r = cu_memory(c, cfg, capacity);
		if (!r)
			r = cu_streams(c);
		cu_out(c);
	}
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
	CUresult r;

	if (cu_in(c))
		return -EIO;
	r = c->api.MemAddressReserve(&p, cu_round(c, bytes), c->gran, 0, 0);
	cu_out(c);
	if (r)
		return hmm_err(cu_errno(r), "device cuda: cuMemAddressReserve "
			       "%llu bytes: %s (%d)", (unsigned long long)
			       cu_round(c, bytes), cu_str(c, r), r);
	*addr = p;
	return 0;
}

static void cu_release(void *priv, uint64_t addr, uint64_t bytes)
{
	struct cu *c = priv;

	if (cu_in(c))
		return;
	c->api.MemAddressFree(addr, cu_round(c, bytes));
	cu_out(c);
}

/* Backs [addr, addr + bytes) with one physical allocation, read-write
 * for the device.  The handle is released at once: the memory goes
 * with the mapping (cuMemUnmap in cu_depopulate). */
static int cu_populate(void *priv, uint64_t addr, uint64_t bytes)
{
	struct cu *c = priv;
	CUmemGenericAllocationHandle hd;
	CUmemAccessDesc acc = { c->prop.location,
				CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
	size_t n = cu_round(c, bytes);
	const char *what = "cuMemCreate";
	CUresult r;

	if (cu_in(c))
		return -EIO;
	r = c->api.MemCreate(&hd, n, &c->prop, 0);
	if (!r) {
		what = "cuMemMap";
		r = c->api.MemMap(addr, n, 0, hd, 0);
		c->api.MemRelease(hd);
	}
	if (!r) {
		what = "cuMemSetAccess";
		r = c->api.MemSetAccess(addr, n, &acc, 1);
		if (r)
			c->api.MemUnmap(addr, n);
	}
	cu_out(c);
	if (r)
		return hmm_err(cu_errno(r), "device cuda: %s %#llx + %zu: %s "
			       "(%d)", what, (unsigned long long)addr, n,
			       cu_str(c, r), r);
	return 0;
}

static void cu_depopulate(void *priv, uint64_t addr, uint64_t bytes)
{
	struct cu *c = priv;

	if (cu_in(c))
		return;
	c->api.MemUnmap(addr, cu_round(c, bytes));
	cu_out(c);
}

/* Designated: release and depopulate share a signature. */
const struct hmm_dev_ops hmm_dev_cuda = {
	.name = "cuda", .open = cu_open, .close = cu_close,
	.reserve = cu_reserve, .release = cu_release,
	.populate = cu_populate, .depopulate = cu_depopulate,
	.copy = hmm_dev_queue_copy,
};
