// SPDX-License-Identifier: MIT
/*
 * gpu_lib.c — hmm-train's GPU libraries, loaded at run time (gpu_priv.h):
 * the driver's calls (cuda_abi.h's lists: libhmm's one copy of its ABI),
 * cuBLAS's (gpu_cublas.h's list), a handle on its stream, and the kernels of the fatbin
 * embedded by gpu_fatbin.S.  Each missing piece fails with its name.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cuda.h"
#include "gpu_priv.h"

/* gpu_kern.cu's fatbin; undefined (NULL) where nvcc did not build it */
extern const unsigned char ht_gpu_fatbin[] __attribute__((weak));

static __thread char gpu_why[512];

const char *gpu_error(void)
{
	return gpu_why;
}

int gpu_fail(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(gpu_why, sizeof(gpu_why), fmt, ap);
	va_end(ap);
	return err;
}

int gpu_cu(const struct gpu_lib *l, CUresult r, const char *what)
{
	const char *s = NULL;

	if (!r)
		return 0;
	if (l->cu.GetErrorString)
		l->cu.GetErrorString(r, &s);
	return gpu_fail(-EIO, "%s: %s (%d)", what, s ? s : "unknown", r);
}

static int load_driver(struct gpu_lib *l)
{
	static const struct { const char *sym; size_t off; } syms[] = {
#define S(field, name, sym, params) \
		{ sym, offsetof(__typeof__(l->cu), field) },
		HMM_CU_CALLS(S)
		HMM_CU_LAUNCH_CALLS(S)
#undef S
		{ "cuMemFree_v2", offsetof(__typeof__(l->cu), MemFree) },
	};

	l->cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!l->cuda)
		return gpu_fail(-ENODEV, "no driver: dlopen libcuda.so.1: %s",
				dlerror());
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(l->cuda, syms[i].sym);

		if (!f)
			return gpu_fail(-ENODEV, "the driver (libcuda.so.1) "
					"has no %s (hmm-train launches its "
					"kernels through the driver)",
					syms[i].sym);
		memcpy((char *)&l->cu + syms[i].off, &f, sizeof(f));
	}
	return 0;
}

static int load_cublas(struct gpu_lib *l)
{
	static const struct { const char *sym; size_t off; } syms[] = {
#define S(field, name, sym, params) \
		{ sym, offsetof(struct hmm_cublas, field) },
		HMM_CUBLAS_CALLS(S)
#undef S
	};
	const char *so;
	char why[256];
	int st;

	l->cublas = cublas_dlopen(&so, why, sizeof(why));
	if (!l->cublas)
		return gpu_fail(-ENODEV, "%s", why);
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(l->cublas, syms[i].sym);

		if (!f)
			return gpu_fail(-ENODEV, "no cuBLAS: %s has no %s",
					so, syms[i].sym);
		memcpy((char *)&l->blas + syms[i].off, &f, sizeof(f));
	}
	/* the handle binds to the current context (set by the caller) */
	st = l->blas.Create(&l->handle);
	if (st) {
		l->handle = NULL;
		return gpu_fail(-ENODEV, "no cuBLAS: cublasCreate_v2: status "
				"%d", st);
	}
	st = l->blas.SetStream(l->handle, l->stream);
	if (st)
		return gpu_fail(-EIO, "cuBLAS: cublasSetStream_v2: status %d",
				st);
	return 0;
}

static int load_kernels(struct gpu_lib *l)
{
	static const struct { const char *sym; size_t off; } ks[] = {
#define K(field, sym)	{ sym, offsetof(__typeof__(l->k), field) },
		GK_KERNELS(K)
#undef K
	};
	CUresult r;

	if (!ht_gpu_fatbin)
		return gpu_fail(-ENODEV, "no kernels: hmm-train was built "
				"without nvcc");
	r = l->cu.ModuleLoadData(&l->mod, ht_gpu_fatbin);
	if (r) {
		l->mod = NULL;
		return gpu_cu(l, r, "cuModuleLoadData of hmm-train's kernels "
			      "(built for sm_80 and sm_90a)");
	}
	for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
		r = l->cu.ModuleGetFunction((CUfunction *)((char *)&l->k +
					    ks[i].off), l->mod, ks[i].sym);
		if (r)
			return gpu_cu(l, r, ks[i].sym);
	}
	return 0;
}

int gpu_lib_open(struct gpu_lib *l)
{
	int n = 0, err;

	memset(l, 0, sizeof(*l));
	err = load_driver(l);
	if (err)
		goto fail;
	err = gpu_cu(l, l->cu.Init(0), "no GPU: cuInit");
	if (!err && (err = gpu_cu(l, l->cu.DeviceGetCount(&n),
				  "no GPU: cuDeviceGetCount")) == 0 && n < 1)
		err = gpu_fail(-ENODEV, "no GPU: the driver sees 0 devices");
	if (!err)
		err = gpu_cu(l, l->cu.DeviceGet(&l->dev, 0), "cuDeviceGet 0");
	if (!err) {
		err = gpu_cu(l, l->cu.DevicePrimaryCtxRetain(&l->ctx, l->dev),
			     "cuDevicePrimaryCtxRetain");
		if (err)
			l->ctx = NULL;
	}
	if (!err)
		err = gpu_cu(l, l->cu.CtxSetCurrent(l->ctx), "cuCtxSetCurrent");
	if (!err) {
		err = gpu_cu(l, l->cu.StreamCreate(&l->stream, 0),
			     "cuStreamCreate");
		if (err)
			l->stream = NULL;
	}
	if (!err)
		err = load_kernels(l);
	if (!err)
		err = load_cublas(l);
	if (!err)
		return 0;
fail:
	err = err == -EIO ? -ENODEV : err;
	gpu_lib_close(l);
	return err;
}

/* Undoes what gpu_lib_open did, in reverse; safe on a partial open. */
void gpu_lib_close(struct gpu_lib *l)
{
	if (l->handle)
		l->blas.Destroy(l->handle);
	if (l->cublas)
		dlclose(l->cublas);
	if (l->mod)
		l->cu.ModuleUnload(l->mod);
	if (l->stream)
		l->cu.StreamDestroy(l->stream);
	if (l->ctx)
		l->cu.DevicePrimaryCtxRelease(l->dev);
	if (l->cuda)
		dlclose(l->cuda);
	memset(l, 0, sizeof(*l));
}
