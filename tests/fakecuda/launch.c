// SPDX-License-Identifier: MIT
/*
 * launch.c — kernels and cuBLAS on the fake driver: cuModuleLoadData,
 * cuModuleGetFunction, cuLaunchKernel, cuModuleUnload, and a cuBLAS
 * (cublasCreate_v2 ... cublasSgemm_v2, the calls hmm-train's
 * gpu_cublas.h lists) exported from this same library, so that
 * hmm-train --device cuda runs its whole step here with
 * HMM_CUBLAS=<this library>.
 *
 * The kernels are not the fatbin's (a fake cannot run SASS): the
 * module's functions come from FAKECUDA_KERNELS, a library built from
 * the kernels' own CUDA source for the CPU (tests/gpu/emu/kernels_emu.cpp
 * under cuda_emu.h), which names the kernels it has (hk_emu_find),
 * copies a launch's parameters as the driver does at launch time
 * (hk_emu_pack: each pointer parameter must be NULL or device memory of
 * this fake, else the launch is refused) and runs a grid
 * (hk_emu_run).  Without FAKECUDA_KERNELS cuModuleLoadData fails with
 * CUDA_ERROR_NOT_SUPPORTED.  A launch and a product run in stream order
 * on the stream's worker (stream.c), as on a GPU: a missing synchronize
 * before the host reads the result shows as wrong bytes.
 *
 * Contracts checked (the driver API reference): a grid of at least 1 in
 * each dimension, y and z at most 65535, at most 1024 threads a block,
 * at most 48 KiB of dynamic shared memory (the fake knows no opt-in
 * attribute), kernelParams given and extra NULL; an unknown function,
 * module or stream is CUDA_ERROR_INVALID_HANDLE.  cublasSgemm_v2 keeps
 * cuBLAS's rules (m, n, k >= 0; lda >= max(1, rows of the stored A),
 * and so on: CUBLAS_STATUS_INVALID_VALUE) and reads C only when beta is
 * not 0; its operands must be device memory of this fake.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "fake.h"

/* cuBLAS's values (gpu_cublas.h; test_cuda_abi holds them) */
#define CUBLAS_STATUS_SUCCESS		0
#define CUBLAS_STATUS_NOT_INITIALIZED	1
#define CUBLAS_STATUS_INVALID_VALUE	7
#define CUBLAS_STATUS_EXECUTION_FAILED	13
#define CUDA_ERROR_NOT_FOUND		500

/* ---- the kernels' library ------------------------------------------------ */

static struct {
	void *lib;
	void *(*find)(const char *name);
	void *(*pack)(void *entry, void **params,
		      int (*ptr_ok)(const void *p), char *why, size_t n);
	void (*run)(void *blob, unsigned gx, unsigned gy, unsigned bx);
	int loaded;		/* modules loaded and not unloaded */
} emu;

static int emu_load(void)
{
	const char *path = getenv("FAKECUDA_KERNELS");

	if (emu.lib)
		return 0;
	if (!path || !*path)
		return -1;
	emu.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!emu.lib) {
		fk_bad(0, "FAKECUDA_KERNELS=%s: %s", path, dlerror());
		return -1;
	}
	*(void **)&emu.find = dlsym(emu.lib, "hk_emu_find");
	*(void **)&emu.pack = dlsym(emu.lib, "hk_emu_pack");
	*(void **)&emu.run = dlsym(emu.lib, "hk_emu_run");
	if (!emu.find || !emu.pack || !emu.run) {
		fk_bad(0, "FAKECUDA_KERNELS=%s lacks hk_emu_find, _pack or "
		       "_run", path);
		dlclose(emu.lib);
		emu.lib = NULL;
		return -1;
	}
	return 0;
}

#define FK_MODULE	((void *)&emu)	/* the one module handle */

/* Between fk_begin and fk_end: CUDA_SUCCESS when mod is the module and
 * it is loaded, else CUDA_ERROR_INVALID_HANDLE, counted as a violation. */
static CUresult module_check(void *mod)
{
	if (mod != FK_MODULE || !emu.loaded)
		return fk_bad(CUDA_ERROR_INVALID_HANDLE, "module %p", mod);
	return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(void **mod, const void *image)
{
	CUresult r = fk_begin("cuModuleLoadData", FK_CTX);

	if (r)
		return fk_end(r);
	if (!mod || !image)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "module %p, "
				     "image %p", (void *)mod, image));
	if (emu_load())
		return fk_end(CUDA_ERROR_NOT_SUPPORTED);
	emu.loaded++;
	*mod = FK_MODULE;
	return fk_end(CUDA_SUCCESS);
}

CUresult cuModuleUnload(void *mod)
{
	CUresult r = fk_begin("cuModuleUnload", FK_CTX);

	if (!r)
		r = module_check(mod);
	if (r)
		return fk_end(r);
	emu.loaded--;
	return fk_end(CUDA_SUCCESS);
}

CUresult cuModuleGetFunction(void **f, void *mod, const char *name)
{
	CUresult r = fk_begin("cuModuleGetFunction", FK_CTX);

	if (!r)
		r = module_check(mod);
	if (r)
		return fk_end(r);
	if (!f || !name)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "hfunc %p, "
				     "name %p", (void *)f, (void *)name));
	*f = emu.find(name);
	return fk_end(*f ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND);
}

/* A kernel's pointer parameter: NULL or memory of this fake device. */
static int dev_ptr_ok(const void *p)
{
	return !p || fk_dev_ok((uintptr_t)p, 1, 1);
}

struct launch {
	void *blob;
	unsigned gx, gy, bx;
};

static void run_launch(void *arg)
{
	struct launch *l = arg;

	emu.run(l->blob, l->gx, l->gy, l->bx);	/* frees the blob */
	free(l);
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz,
			unsigned bx, unsigned by, unsigned bz, unsigned shmem,
			void *stream, void **params, void **extra)
{
	CUresult r = fk_begin("cuLaunchKernel", FK_CTX);
	struct launch *l;
	char why[200] = "";

	if (r)
		return fk_end(r);
	if (!f || !emu.lib)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_HANDLE, "function %p",
				     f));
	if (!gx || !gy || !gz || gy > 65535 || gz > 65535 || gz != 1 ||
	    !bx || !by || !bz || (unsigned long)bx * by * bz > 1024 ||
	    by != 1 || bz != 1 || shmem > 48 << 10 || !params || extra)
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "grid %ux%ux%u, "
				     "block %ux%ux%u, %u bytes of shared "
				     "memory, params %p, extra %p (the fake "
				     "takes 2-D grids and 1-D blocks)", gx, gy,
				     gz, bx, by, bz, shmem, (void *)params,
				     (void *)extra));
	if (!fk_stream_ok(stream))
		return fk_end(fk_bad(CUDA_ERROR_INVALID_HANDLE, "stream %p",
				     stream));
	l = calloc(1, sizeof(*l));
	if (!l)
		return fk_end(CUDA_ERROR_OUT_OF_MEMORY);
	l->blob = emu.pack(f, params, dev_ptr_ok, why, sizeof(why));
	if (!l->blob) {
		free(l);
		return fk_end(fk_bad(CUDA_ERROR_INVALID_VALUE, "launch: %s",
				     why));
	}
	l->gx = gx, l->gy = gy, l->bx = bx;
	r = fk_stream_call(stream, run_launch, l);
	return fk_end(r);
}

/* ---- cuBLAS ------------------------------------------------------------- */

struct fk_blas {
	void *stream;
};

/* cuInit done (the real one initialises the runtime, which finds the
 * primary context itself: no current context needed) */
int cublasCreate_v2(struct fk_blas **h)
{
	CUresult r = fk_begin("cublasCreate_v2", FK_INIT);

	if (r) {
		fk_end(r);
		return CUBLAS_STATUS_NOT_INITIALIZED;
	}
	*h = calloc(1, sizeof(**h));
	fk_end(CUDA_SUCCESS);
	return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_INITIALIZED;
}

int cublasDestroy_v2(struct fk_blas *h)
{
	free(h);
	return CUBLAS_STATUS_SUCCESS;
}

int cublasGetVersion_v2(struct fk_blas *h, int *v)
{
	*v = 130000;
	return CUBLAS_STATUS_SUCCESS;
}

int cublasSetStream_v2(struct fk_blas *h, void *stream)
{
	h->stream = stream;
	return CUBLAS_STATUS_SUCCESS;
}

struct sgemm {
	int ta, tb, m, n, k, lda, ldb, ldc;
	float alpha, beta;
	const float *A, *B;
	float *C;
};

/* column-major C = alpha op(A) op(B) + beta C, k in order */
static void run_sgemm(void *arg)
{
	struct sgemm *g = arg;

	for (int j = 0; j < g->n; j++)
		for (int i = 0; i < g->m; i++) {
			float s = 0, *c = &g->C[i + (size_t)j * g->ldc];

			for (int p = 0; p < g->k; p++)
				s += (g->ta ? g->A[p + (size_t)i * g->lda] :
					      g->A[i + (size_t)p * g->lda]) *
				     (g->tb ? g->B[j + (size_t)p * g->ldb] :
					      g->B[p + (size_t)j * g->ldb]);
			*c = g->alpha * s + (g->beta != 0 ? g->beta * *c : 0);
		}
	free(g);
}

/* [p, p + ld * (cols - 1) + rows) floats: device memory? */
static int operand_ok(const float *p, int rows, int cols, int ld)
{
	if (!rows || !cols)
		return 1;
	return fk_dev_ok((uintptr_t)p, ((size_t)ld * (cols - 1) + rows) *
			 sizeof(float), 1);
}

int cublasSgemm_v2(struct fk_blas *h, int ta, int tb, int m, int n, int k,
		   const float *alpha, const float *A, int lda,
		   const float *B, int ldb, const float *beta, float *C,
		   int ldc)
{
	CUresult r = fk_begin("cublasSgemm_v2", FK_CTX);
	int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
	struct sgemm *g;

	if (r) {
		fk_end(r);
		return CUBLAS_STATUS_NOT_INITIALIZED;
	}
	if (!h || !alpha || !beta || (ta != 0 && ta != 1) ||
	    (tb != 0 && tb != 1) || m < 0 || n < 0 || k < 0 ||
	    lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) ||
	    ldc < (m > 1 ? m : 1)) {
		fk_end(CUDA_SUCCESS);
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	if (!operand_ok(A, ar, ac, lda) || !operand_ok(B, br, bc, ldb) ||
	    !operand_ok(C, m, n, ldc)) {
		fk_bad(0, "cublasSgemm_v2 %dx%dx%d: an operand is not device "
		       "memory (A %p, B %p, C %p)", m, n, k, (void *)A,
		       (void *)B, (void *)C);
		fk_end(CUDA_SUCCESS);
		return CUBLAS_STATUS_EXECUTION_FAILED;
	}
	g = malloc(sizeof(*g));
	if (!g) {
		fk_end(CUDA_SUCCESS);
		return CUBLAS_STATUS_EXECUTION_FAILED;
	}
	*g = (struct sgemm){ ta, tb, m, n, k, lda, ldb, ldc, *alpha, *beta,
			     A, B, C };
	r = fk_stream_call(h->stream, run_sgemm, g);
	fk_end(r);
	return r ? CUBLAS_STATUS_EXECUTION_FAILED : CUBLAS_STATUS_SUCCESS;
}

