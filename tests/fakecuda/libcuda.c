// SPDX-License-Identifier: MIT
/*
 * libcuda.c — a fake CUDA driver for testing libhmm's "cuda" device
 * (libhmm/src/engine/dev_cuda.c) where there is no GPU: the entry points
 * dev_cuda.c resolves, over host memory, with the real driver's
 * documented contracts checked strictly.  A broken contract returns the
 * code the real driver documents and is reported ("fakecuda: VIOLATION")
 * and counted; what is left at context destroy or exit is reported as a
 * leak; a summary line is printed at exit.  Built as
 * build/tests/fakecuda/libcuda.so.1 (SONAME libcuda.so.1, -z nodelete:
 * its stream threads and exit report outlive a dlclose); a test puts it
 * first with LD_LIBRARY_PATH.
 *
 * This file: knobs, entry bookkeeping, init, devices, the primary
 * context, error strings, reports.  vmm.c, stream.c and managed.c hold
 * the rest.
 *
 * Knobs (environment, read at the first call):
 *   FAKECUDA_MEM=bytes       device memory (default 1 GiB; K/M/G suffix)
 *   FAKECUDA_GRAN=bytes      allocation granularity (default 2 MiB)
 *   FAKECUDA_NODEV=1         cuInit fails: CUDA_ERROR_NO_DEVICE
 *   FAKECUDA_NODEV=2         cuInit works, cuDeviceGetCount says 0
 *   FAKECUDA_NOMANAGED=1     the device supports no managed memory
 *                            (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY and
 *                            _CONCURRENT_MANAGED_ACCESS say 0,
 *                            cuMemAllocManaged CUDA_ERROR_NOT_SUPPORTED)
 *   FAKECUDA_FAIL=fn:nth[:code][,...]  the nth call of entry point fn
 *                            fails (default CUDA_ERROR_OUT_OF_MEMORY),
 *                            changing nothing
 *   FAKECUDA_DELAY_US=us     each async operation waits this long on its
 *                            stream first (default 200), so a missing
 *                            synchronize shows up as wrong bytes
 *   FAKECUDA_NODISCARD=1     cuMemDiscardBatchAsync and
 *                            cuMemDiscardAndPrefetchBatchAsync say
 *                            CUDA_ERROR_NOT_SUPPORTED (a driver, or a
 *                            sandbox, without them)
 *   FAKECUDA_STRICT=1        abort() at the first violation (a core dump
 *                            with the caller's stack)
 *   FAKECUDA_REPORT=path     also append every report line to path
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

struct fk fk = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.next_id = 0x1000,
};

/* The one device's primary context; CUcontext is its address. */
static struct { int unused; } primary;
/* This thread's context stack; the top is its current context. */
#define FK_STACK 8
static __thread void *stack[FK_STACK];
static __thread int depth;
#define current (depth ? stack[depth - 1] : NULL)
static __thread const char *entry;	/* the entry point running */

#define FK_NFAIL 8
static struct {
	char fn[64];
	unsigned long nth, seen;
	CUresult code;
} fails[FK_NFAIL];
static int nfails;

/* ---- knobs and reports ------------------------------------------------- */

static uint64_t knob_size(const char *name, uint64_t def)
{
	const char *s = getenv(name);
	char *end;
	uint64_t v;

	if (!s || !*s)
		return def;
	v = strtoull(s, &end, 0);
	switch (*end) {
	case 'G': case 'g': v <<= 10;	/* fall through */
	case 'M': case 'm': v <<= 10;	/* fall through */
	case 'K': case 'k': v <<= 10;
	}
	return v;
}

static void knobs_read(void)
{
	const char *s = getenv("FAKECUDA_FAIL");

	fk.mem = knob_size("FAKECUDA_MEM", 1ull << 30);
	fk.gran = knob_size("FAKECUDA_GRAN", 2u << 20);
	fk.nodev = atoi(getenv("FAKECUDA_NODEV") ? getenv("FAKECUDA_NODEV")
		       : "0");
	fk.nomanaged = getenv("FAKECUDA_NOMANAGED") &&
		       atoi(getenv("FAKECUDA_NOMANAGED"));
	fk.nodiscard = getenv("FAKECUDA_NODISCARD") &&
		       atoi(getenv("FAKECUDA_NODISCARD"));
	fk.strict = getenv("FAKECUDA_STRICT") &&
		    atoi(getenv("FAKECUDA_STRICT"));
	fk.delay_us = knob_size("FAKECUDA_DELAY_US", 200);
	fk.st.dev_total = fk.mem;
	while (s && *s && nfails < FK_NFAIL) {
		int code = CUDA_ERROR_OUT_OF_MEMORY, len = 0;
		unsigned long nth = 0;

		if (sscanf(s, "%63[^:]:%lu%n", fails[nfails].fn, &nth,
			   &len) < 2)
			break;
		s += len;
		if (*s == ':')
			code = strtol(s + 1, (char **)&s, 0);
		fails[nfails].nth = nth;
		fails[nfails].code = code;
		nfails++;
		s += strcspn(s, ",");
		if (*s == ',')
			s++;
	}
	fk.knobs_read = 1;
}

static void fk_logv(const char *kind, const char *fmt, va_list ap)
{
	const char *path = getenv("FAKECUDA_REPORT");
	char line[512];
	int n;

	n = snprintf(line, sizeof(line), "fakecuda: %s%s%s", kind,
		     entry ? entry : "", entry ? ": " : "");
	vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	fprintf(stderr, "%s\n", line);
	if (path) {
		FILE *f = fopen(path, "a");

		if (f) {
			fprintf(f, "%s\n", line);
			fclose(f);
		}
	}
}

CUresult fk_bad(CUresult r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fk_logv("VIOLATION ", fmt, ap);
	va_end(ap);
	fk.st.violations++;
	if (fk.strict)
		abort();
	return r;
}

void fk_leak(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fk_logv("LEAK ", fmt, ap);
	va_end(ap);
	fk.st.leaks++;
}

static void fk_note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fk_logv("", fmt, ap);
	va_end(ap);
}

CUresult fk_begin(const char *fn, unsigned needs)
{
	int i;

	pthread_mutex_lock(&fk.lock);
	entry = fn;
	if (!fk.knobs_read)
		knobs_read();
	fk.st.calls++;
	for (i = 0; i < nfails; i++)
		if (!strcmp(fails[i].fn, fn) && ++fails[i].seen ==
		    fails[i].nth) {
			fk.st.injected++;
			fk_note("injected failure %d (call %lu)",
				fails[i].code, fails[i].nth);
			return fails[i].code;
		}
	if ((needs & (FK_INIT | FK_CTX)) && !fk.init)
		return fk_bad(CUDA_ERROR_NOT_INITIALIZED, "before cuInit");
	if (needs & FK_CTX) {
		if (!current)
			return fk_bad(CUDA_ERROR_INVALID_CONTEXT,
				      "no current context on this thread");
		if (!fk.ctx_refs)
			return fk_bad(CUDA_ERROR_INVALID_CONTEXT,
				      "the current context was destroyed "
				      "(primary context released)");
		if (fk.sticky)
			return fk.sticky;
	}
	return CUDA_SUCCESS;
}

CUresult fk_end(CUresult r)
{
	entry = NULL;
	pthread_mutex_unlock(&fk.lock);
	return r;
}

/* ---- init, devices, the primary context -------------------------------- */

CUresult cuInit(unsigned flags)
{
	CUresult r = fk_begin("cuInit", 0);

	if (r)
		return fk_end(r);
	if (flags)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "flags %#x, "
				     "must be 0", flags));
	if (fk.nodev == 1)
		return fk_end(CUDA_ERROR_NO_DEVICE);
	fk.init = 1;
	return fk_end(CUDA_SUCCESS);
}

static int ndev(void)
{
	return fk.nodev ? 0 : 1;
}

CUresult cuDeviceGetCount(int *n)
{
	CUresult r = fk_begin("cuDeviceGetCount", FK_INIT);

	if (r)
		return fk_end(r);
	if (!n)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "count NULL"));
	*n = ndev();
	return fk_end(CUDA_SUCCESS);
}

CUresult cuDeviceGet(int *dev, int ordinal)
{
	CUresult r = fk_begin("cuDeviceGet", FK_INIT);

	if (r)
		return fk_end(r);
	if (!dev)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "device NULL"));
	if (ordinal < 0 || ordinal >= ndev())
		return fk_end(fk_bad(CUDA_ERROR_INVALID_DEVICE, "ordinal %d "
				     "of %d", ordinal, ndev()));
	*dev = ordinal;
	return fk_end(CUDA_SUCCESS);
}

CUresult cuDeviceGetAttribute(int *v, int attr, int dev)
{
	CUresult r = fk_begin("cuDeviceGetAttribute", FK_INIT);

	if (r)
		return fk_end(r);
	if (!v)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "value NULL"));
	if (dev < 0 || dev >= ndev())
		return fk_end(fk_bad(CUDA_ERROR_INVALID_DEVICE, "device %d",
				     dev));
	switch (attr) {
	case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
		*v = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
		*v = !fk.nomanaged;
		break;
	default:
		fk_note("attribute %d is not modelled by the fake", attr);
		return fk_end(CUDA_ERROR_INVALID_VALUE);
	}
	return fk_end(CUDA_SUCCESS);
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
	CUresult r = fk_begin("cuDevicePrimaryCtxRetain", FK_INIT);

	if (r)
		return fk_end(r);
	if (!ctx)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "pctx NULL"));
	if (dev < 0 || dev >= ndev())
		return fk_end(fk_bad(CUDA_ERROR_INVALID_DEVICE, "device %d",
				     dev));
	fk.ctx_refs++;
	*ctx = &primary;
	return fk_end(CUDA_SUCCESS);
}

CUresult cuDevicePrimaryCtxRelease_v2(int dev)
{
	CUresult r = fk_begin("cuDevicePrimaryCtxRelease_v2", FK_INIT);

	if (r)
		return fk_end(r);
	if (dev < 0 || dev >= ndev())
		return fk_end(fk_bad(CUDA_ERROR_INVALID_DEVICE, "device %d",
				     dev));
	if (!fk.ctx_refs)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_CONTEXT, "released "
				     "more often than retained"));
	if (--fk.ctx_refs == 0) {
		/* the context is destroyed: whatever is left leaked */
		fk_stream_leaks(1);
		fk_managed_leaks(1);
		fk_vmm_leaks(1);
		fk.sticky = 0;
	}
	return fk_end(CUDA_SUCCESS);
}

static int ctx_live(void *ctx)
{
	return ctx == &primary && fk.ctx_refs;
}

/* Documented: replaces the top of the stack; NULL pops it. */
CUresult cuCtxSetCurrent(void *ctx)
{
	CUresult r = fk_begin("cuCtxSetCurrent", FK_INIT);

	if (r)
		return fk_end(r);
	if (ctx && !ctx_live(ctx))
		return fk_end(fk_bad(CUDA_ERROR_INVALID_CONTEXT, "context %p "
				     "is not a live context", ctx));
	if (!ctx)
		depth -= depth > 0;
	else if (depth)
		stack[depth - 1] = ctx;
	else
		stack[depth++] = ctx;
	return fk_end(CUDA_SUCCESS);
}

CUresult cuCtxPushCurrent_v2(void *ctx)
{
	CUresult r = fk_begin("cuCtxPushCurrent_v2", FK_INIT);

	if (r)
		return fk_end(r);
	if (!ctx_live(ctx))
		return fk_end(fk_bad(CUDA_ERROR_INVALID_CONTEXT, "context %p "
				     "is not a live context", ctx));
	if (depth == FK_STACK)
		return fk_end(CUDA_ERROR_OUT_OF_MEMORY);
	stack[depth++] = ctx;
	return fk_end(CUDA_SUCCESS);
}

CUresult cuCtxPopCurrent_v2(void **pctx)
{
	CUresult r = fk_begin("cuCtxPopCurrent_v2", FK_INIT);

	if (r)
		return fk_end(r);
	if (!depth)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_CONTEXT, "no context "
				     "current on this thread"));
	if (pctx)
		*pctx = stack[depth - 1];
	depth--;
	return fk_end(CUDA_SUCCESS);
}

CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total)
{
	CUresult r = fk_begin("cuMemGetInfo_v2", FK_CTX);

	if (r)
		return fk_end(r);
	if (!free_b || !total)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "NULL out"));
	*free_b = fk.mem - fk.st.dev_used - fk.st.managed_dev;
	*total = fk.mem;
	return fk_end(CUDA_SUCCESS);
}

/* ---- error strings ------------------------------------------------------ */

static const struct { CUresult r; const char *s; } strs[] = {
	{ CUDA_SUCCESS, "no error" },
	{ CUDA_ERROR_INVALID_VALUE, "invalid argument" },
	{ CUDA_ERROR_OUT_OF_MEMORY, "out of memory" },
	{ CUDA_ERROR_NOT_INITIALIZED, "initialization error" },
	{ CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected" },
	{ CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal" },
	{ CUDA_ERROR_INVALID_CONTEXT, "invalid device context" },
	{ CUDA_ERROR_INVALID_HANDLE, "invalid resource handle" },
	{ CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was "
	  "encountered" },
	{ CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "part or all of the "
	  "requested memory range is already mapped" },
	{ CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not "
	  "correspond to a registered memory region" },
	{ CUDA_ERROR_NOT_SUPPORTED, "operation not supported" },
	{ CUDA_ERROR_UNKNOWN, "unknown error" },
};

/* Needs no cuInit, as the real one. */
CUresult cuGetErrorString(CUresult err, const char **s)
{
	size_t i;

	if (!s)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		if (strs[i].r == err) {
			*s = strs[i].s;
			return CUDA_SUCCESS;
		}
	*s = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- what a test may ask, and the report at exit ------------------------ */

__attribute__((visibility("default")))
void fakecuda_stats(struct fakecuda_stats *st)
{
	pthread_mutex_lock(&fk.lock);
	if (!fk.knobs_read)
		knobs_read();
	*st = fk.st;
	st->ctx_current = depth;
	pthread_mutex_unlock(&fk.lock);
}

__attribute__((destructor))
static void fk_exit(void)
{
	pthread_mutex_lock(&fk.lock);
	entry = "exit";
	if (fk.ctx_refs)
		fk_leak("primary context still retained (%d)", fk.ctx_refs);
	fk_stream_leaks(0);
	fk_managed_leaks(0);
	fk_vmm_leaks(0);
	entry = NULL;
	fk_note("summary: calls %llu violations %llu leaks %llu injected "
		"%llu dev_peak %llu async_copies %llu sync_copies %llu "
		"managed_dev_peak %llu driver_evicted %llu",
		(unsigned long long)fk.st.calls,
		(unsigned long long)fk.st.violations,
		(unsigned long long)fk.st.leaks,
		(unsigned long long)fk.st.injected,
		(unsigned long long)fk.st.dev_peak,
		(unsigned long long)fk.st.async_copies,
		(unsigned long long)fk.st.sync_copies,
		(unsigned long long)fk.st.managed_dev_peak,
		(unsigned long long)fk.st.driver_evicted);
	pthread_mutex_unlock(&fk.lock);
}
