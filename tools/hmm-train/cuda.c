// SPDX-License-Identifier: MIT
/*
 * cuda.c — hmm-train --device cuda: the driver, a GPU and cuBLAS, each
 * loaded and checked at run time (cuda.h).  The driver's types are
 * libhmm's one copy of its ABI (cuda_abi.h, held against cuda.h by
 * test_cuda_abi); cuBLAS's are gpu_cublas.h's (held against cublas_v2.h by
 * the same test).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda.h"
#include "cuda_abi.h"
#include "gpu_cublas.h"

static int cu_fail(void *lib, char *why, size_t n, const char *what,
		   CUresult r)
{
	CUresult (*str)(CUresult, const char **) = dlsym(lib,
							 "cuGetErrorString");
	const char *s = NULL;

	if (str)
		str(r, &s);
	snprintf(why, n, "no GPU: %s: %s (%d)", what, s ? s : "unknown", r);
	return -ENODEV;
}

/* The driver and a GPU: 0, or -ENODEV with why. */
static int probe_gpu(void *lib, char *why, size_t n, int *count)
{
	CUresult (*init)(unsigned int) = dlsym(lib, "cuInit");
	CUresult (*get_count)(int *) = dlsym(lib, "cuDeviceGetCount");
	CUresult r;

	if (!init || !get_count) {
		snprintf(why, n, "libcuda.so.1 has no cuInit/cuDeviceGetCount");
		return -ENODEV;
	}
	r = init(0);
	if (r)
		return cu_fail(lib, why, n, "cuInit", r);
	r = get_count(count);
	if (r)
		return cu_fail(lib, why, n, "cuDeviceGetCount", r);
	if (*count < 1) {
		snprintf(why, n, "no GPU: the driver sees 0 devices");
		return -ENODEV;
	}
	return 0;
}

void *cublas_dlopen(const char **name, char *why, size_t why_n)
{
	static const char *const names[] = {
		"libcublas.so.13", "libcublas.so.12", "libcublas.so",
	};
	const char *env = getenv("HMM_CUBLAS");
	void *lib;

	if (env && *env) {
		lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
		if (!lib)
			snprintf(why, why_n, "no cuBLAS: dlopen %s "
				 "($HMM_CUBLAS): %s", env, dlerror());
		*name = env;
		return lib;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (lib) {
			*name = names[i];
			return lib;
		}
	}
	snprintf(why, why_n, "no cuBLAS: dlopen libcublas.so.13, .so.12 "
		 "and .so: %s", dlerror());
	*name = names[0];
	return NULL;
}

/* cuBLAS and a handle on the GPU: 0, or -ENODEV with why. */
static int probe_cublas(char *why, size_t n, int *version)
{
	const char *so;
	void *lib = cublas_dlopen(&so, why, n);
	struct hmm_cublas b;
	cublasHandle_t h = NULL;
	cublasStatus_t st;

	if (!lib)
		return -ENODEV;
	*(void **)&b.Create = dlsym(lib, "cublasCreate_v2");
	*(void **)&b.Destroy = dlsym(lib, "cublasDestroy_v2");
	*(void **)&b.GetVersion = dlsym(lib, "cublasGetVersion_v2");
	if (!b.Create || !b.Destroy || !b.GetVersion) {
		snprintf(why, n, "no cuBLAS: %s lacks cublasCreate_v2, "
			 "cublasDestroy_v2 or cublasGetVersion_v2", so);
		dlclose(lib);
		return -ENODEV;
	}
	st = b.Create(&h);
	if (st) {
		snprintf(why, n, "no cuBLAS: cublasCreate_v2: status %d%s", st,
			 st == CUBLAS_STATUS_NOT_INITIALIZED ?
			 " (CUBLAS_STATUS_NOT_INITIALIZED: the driver or the "
			 "GPU is not usable)" : "");
		dlclose(lib);
		return -ENODEV;
	}
	b.GetVersion(h, version);
	b.Destroy(h);
	dlclose(lib);
	return 0;
}

int cuda_probe(char *why, size_t why_n, char *found, size_t found_n)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	int count = 0, version = 0, r;

	if (!lib) {
		snprintf(why, why_n, "no driver: dlopen libcuda.so.1: %s",
			 dlerror());
		return -ENODEV;
	}
	r = probe_gpu(lib, why, why_n, &count);
	if (!r)
		r = probe_cublas(why, why_n, &version);
	dlclose(lib);
	if (!r)
		snprintf(found, found_n, "%d GPU(s), cuBLAS %d", count,
			 version);
	return r;
}
