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
 * calls and pops it after (hmm_cu_in/out), so the caller's own current
 * context is left as it was.  The copy thread makes it current once.
 * The queue is dev_common.c's.
 *
 * Loading, the device, its context, the stream and the staged copies
 * are shared with the "uvm" device (dev_uvm.c, dev_cu.h): it opens with
 * managed = 1 and replaces only the four memory ops.
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
#include "dev_cu.h"
#include "err.h"

const char *hmm_cu_str(struct cu *c, CUresult r)
{
	const char *s = NULL;

	if (c->api.GetErrorString)
		c->api.GetErrorString(r, &s);
	return s ? s : "unknown CUDA error";
}

struct cu_sym {
	const char *name;
	size_t off;
};
#define CU_SYM(field, name, sym, params) { sym, offsetof(struct cu_api, field) },
static const struct cu_sym cu_syms[] = { HMM_CU_CALLS(CU_SYM) };
static const struct cu_sym cu_managed_syms[] = { HMM_CU_MANAGED_CALLS(CU_SYM) };
static const struct cu_sym cu_discard_syms[] = { HMM_CU_DISCARD_CALLS(CU_SYM) };
#undef CU_SYM

/* Resolves n entry points of the table into c->api.  0 or -ENODEV. */
static int cu_resolve(struct cu *c, const struct cu_sym *t, size_t n,
		      const char *since)
{
	size_t i;

	for (i = 0; i < n; i++) {
		void *f = dlsym(c->lib, t[i].name);

		if (!f)
			return hmm_err(-ENODEV, "device %s: the driver has "
				       "no %s (older than CUDA %s?)", c->name,
				       t[i].name, since);
		memcpy((char *)&c->api + t[i].off, &f, sizeof(f));
	}
	return 0;
}

#define CU_N(t)	(sizeof(t) / sizeof((t)[0]))

static int cu_load(struct cu *c)
{
	int r;

	c->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!c->lib)
		return hmm_err(-ENODEV, "device %s: no driver: dlopen "
			       "libcuda.so.1: %s", c->name, dlerror());
	r = cu_resolve(c, cu_syms, CU_N(cu_syms), "11.2");
	if (!r && c->managed)
		r = cu_resolve(c, cu_managed_syms, CU_N(cu_managed_syms),
			       "12.2");
	if (!r && c->managed &&	/* optional: left NULL before CUDA 13 */
	    cu_resolve(c, cu_discard_syms, CU_N(cu_discard_syms), "13.0"))
		memset((char *)&c->api + cu_discard_syms[0].off, 0,
		       CU_N(cu_discard_syms) * sizeof(void *));
	return r;
}

/* A driver error as -errno: out of memory is -ENOMEM, the rest -EIO. */
int hmm_cu_errno(CUresult r)
{
	return r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
}

/* c's context current on the calling thread for a few driver calls;
 * hmm_cu_out puts back what the thread had.  0 or -EIO. */
int hmm_cu_in(struct cu *c)
{
	CUresult r = c->api.CtxPushCurrent(c->ctx);

	if (r)
		return hmm_err(-EIO, "device %s: cuCtxPushCurrent: %s (%d)",
			       c->name, hmm_cu_str(c, r), r);
	return 0;
}

void hmm_cu_out(struct cu *c)
{
	CUcontext old;

	c->api.CtxPopCurrent(&old);
}

/* Finds the GPU and retains its primary context.  0 or -errno. */
static int cu_device(struct cu *c, const struct hmm_config *cfg)
{
	CUcontext ctx = NULL;
	int n = 0, vmm = 0, conc = 0;

	CU_NODEV(c, c->api.Init(0), "cuInit");
	CU_NODEV(c, c->api.DeviceGetCount(&n), "cuDeviceGetCount");
	if (cfg->device_index < 0 || cfg->device_index >= n)
		return hmm_err(-ENODEV, "device %s: device_index %d, but "
			       "%d GPU(s) visible", c->name,
			       cfg->device_index, n);
	CU_NODEV(c, c->api.DeviceGet(&c->dev, cfg->device_index),
		 "cuDeviceGet");
	if (c->managed) {
		/* hmm moves managed memory to the GPU and back while the
		 * host may touch other parts of it: concurrent access */
		CU_NODEV(c, c->api.DeviceGetAttribute(&vmm,
				CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, c->dev),
			 "cuDeviceGetAttribute");
		CU_NODEV(c, c->api.DeviceGetAttribute(&conc,
				CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
				c->dev), "cuDeviceGetAttribute");
		if (!vmm || !conc)
			return hmm_err(-ENODEV, "device uvm: GPU %d lacks "
				       "managed memory with concurrent access",
				       cfg->device_index);
	} else {
		CU_NODEV(c, c->api.DeviceGetAttribute(&vmm,
			CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
			c->dev), "cuDeviceGetAttribute");
		if (!vmm)
			return hmm_err(-ENODEV, "device cuda: GPU %d lacks "
				       "virtual memory management",
				       cfg->device_index);
	}
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
	if (c->managed)		/* managed memory migrates by CPU pages */
		c->gran = HMM_PAGE;
	else
		CU_TRY(c, c->api.MemGetAllocationGranularity(&c->gran,
			  &c->prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
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
	if (c->managed)
		CU_TRY(c, c->api.EventCreate(&c->discarded,
					     CU_EVENT_DISABLE_TIMING),
		       "cuEventCreate");
	for (i = 0; i < 2; i++) {
		CU_TRY(c, c->api.EventCreate(&c->ev[i],
					     CU_EVENT_DISABLE_TIMING),
		       "cuEventCreate");
		if (posix_memalign(&c->stage[i], 4096, CU_STAGE_BYTES))
			return hmm_err(-ENOMEM, "device %s: staging buffer",
				       c->name);
		CU_TRY(c, c->api.MemHostRegister(c->stage[i], CU_STAGE_BYTES,
						 0), "cuMemHostRegister");
		c->registered[i] = 1;
	}
	return 0;
}

/*
 * One copy, in staging-sized pieces, double-buffered: ev[k] marks when
 * stage[k] is free again.  0 or -EIO, the detail (this thread's, which
 * the engine keeps for the chunk) the driver's words: a sticky fault
 * such as an illegal address is named.  Whatever happened, the stream is
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
	if (!r)
		r = sync;
	if (r)
		return hmm_err(-EIO, "device copy %s, %llu bytes at %#llx: %s "
			       "(%d)", q->dir == HMM_H2D ? "host to device" :
			       "device to host", (unsigned long long)q->bytes,
			       (unsigned long long)q->dev, hmm_cu_str(c, r), r);
	return 0;
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

	if (c->ctx && !hmm_cu_in(c)) {
		for (i = 0; i < 2; i++) {
			if (c->registered[i])
				c->api.MemHostUnregister(c->stage[i]);
			if (c->ev[i])
				c->api.EventDestroy(c->ev[i]);
		}
		if (c->discarded)
			c->api.EventDestroy(c->discarded);
		if (c->stream)
			c->api.StreamDestroy(c->stream);
		hmm_cu_out(c);
	}
	if (c->ctx)
		c->api.DevicePrimaryCtxRelease(c->dev);
	free(c->stage[0]);
	free(c->stage[1]);
	if (c->lib)
		dlclose(c->lib);
	free(c);
}

int hmm_cu_open(const struct hmm_config *cfg, int managed, void **priv,
		uint64_t *capacity, uint64_t *granularity)
{
	struct cu *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return hmm_err(-ENOMEM, "device %s: no memory", cfg->device);
	c->name = managed ? "uvm" : "cuda";
	c->managed = managed;
	r = cu_load(c);
	if (!r)
		r = cu_device(c, cfg);
	if (!r)
		r = hmm_cu_in(c);
	if (!r) {
		r = cu_memory(c, cfg, capacity);
		if (!r)
			r = cu_streams(c);
		hmm_cu_out(c);
	}
	if (!r && hmm_dev_queue_start(&c->q, c, cu_enter, cu_do_copy))
		r = hmm_err(-EAGAIN, "device %s: cannot start the copy "
			    "thread", c->name);
	if (r) {
		cu_teardown(c);
		return r;
	}
	*priv = c;
	*granularity = c->gran;
	return 0;
}

void hmm_cu_close(void *priv)
{
	struct cu *c = priv;

	hmm_dev_queue_stop(&c->q);
	cu_teardown(c);
}

static int cu_open(const struct hmm_config *cfg, void **priv,
		   uint64_t *capacity, uint64_t *granularity)
{
	return hmm_cu_open(cfg, 0, priv, capacity, granularity);
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

	if (hmm_cu_in(c))
		return -EIO;
	r = c->api.MemAddressReserve(&p, cu_round(c, bytes), c->gran, 0, 0);
	hmm_cu_out(c);
	if (r)
		return hmm_err(hmm_cu_errno(r), "device cuda: cuMemAddressReserve "
			       "%llu bytes: %s (%d)", (unsigned long long)
			       cu_round(c, bytes), hmm_cu_str(c, r), r);
	*addr = p;
	return 0;
}

static void cu_release(void *priv, uint64_t addr, uint64_t bytes)
{
	struct cu *c = priv;

	if (hmm_cu_in(c))
		return;
	c->api.MemAddressFree(addr, cu_round(c, bytes));
	hmm_cu_out(c);
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

	if (hmm_cu_in(c))
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
	hmm_cu_out(c);
	if (r)
		return hmm_err(hmm_cu_errno(r), "device cuda: %s %#llx + %zu: %s "
			       "(%d)", what, (unsigned long long)addr, n,
			       hmm_cu_str(c, r), r);
	return 0;
}

static void cu_depopulate(void *priv, uint64_t addr, uint64_t bytes)
{
	struct cu *c = priv;

	if (hmm_cu_in(c))
		return;
	c->api.MemUnmap(addr, cu_round(c, bytes));
	hmm_cu_out(c);
}

/* Designated: release and depopulate share a signature. */
const struct hmm_dev_ops hmm_dev_cuda = {
	.name = "cuda", .open = cu_open, .close = hmm_cu_close,
	.reserve = cu_reserve, .release = cu_release,
	.populate = cu_populate, .depopulate = cu_depopulate,
	.copy = hmm_dev_queue_copy,
};
