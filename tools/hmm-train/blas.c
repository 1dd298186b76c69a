// SPDX-License-Identifier: MIT
/*
 * blas.c — gemm() over OpenBLAS in fixed bands, and the core-type fix for
 * Debian's OpenBLAS 0.3.21 (blas.h).
 *
 * Why the fix: OpenBLAS built with DYNAMIC_ARCH picks its kernels from
 * cpuid when the library loads; 0.3.21 does not know some newer AMD
 * family/model numbers and falls back to a generic SSE3 core (Prescott
 * or similar), which runs sgemm several times slower.  It honours
 * OPENBLAS_CORETYPE, but only at load time, hence the re-exec.
 */
#include <cblas.h>
#include <cpuid.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blas.h"
#include "hk.h"

char *openblas_get_corename(void);
void openblas_set_num_threads(int n);

struct gemm_job {
	int ta, tb, M, N, K, lda, ldb, ldc, by_rows;
	float alpha, beta;
	const float *A, *B;
	float *C;
};

static void gemm_part(void *arg, int i, int np)
{
	struct gemm_job *j = arg;
	size_t lo, hi;
	const float *A = j->A, *B = j->B;
	float *C = j->C;

	if (j->by_rows) {
		hk_split(j->M, i, np, 8, &lo, &hi);
		if (hi <= lo)
			return;
		A += j->ta ? lo : lo * j->lda;
		C += lo * j->ldc;
		cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans,
			    j->tb ? CblasTrans : CblasNoTrans, hi - lo, j->N,
			    j->K, j->alpha, A, j->lda, B, j->ldb, j->beta, C,
			    j->ldc);
	} else {
		hk_split(j->N, i, np, 16, &lo, &hi);
		if (hi <= lo)
			return;
		B += j->tb ? lo * j->ldb : lo;
		C += lo;
		cblas_sgemm(CblasRowMajor, j->ta ? CblasTrans : CblasNoTrans,
			    j->tb ? CblasTrans : CblasNoTrans, j->M, hi - lo,
			    j->K, j->alpha, A, j->lda, B, j->ldb, j->beta, C,
			    j->ldc);
	}
}

void gemm(int ta, int tb, int M, int N, int K, float alpha,
	  const float *A, int lda, const float *B, int ldb, float beta,
	  float *C, int ldc)
{
	struct gemm_job j = { ta, tb, M, N, K, lda, ldb, ldc, M >= N,
			      alpha, beta, A, B, C };
	int np = hk_threads();

	if ((long)M * N * K < 64 * 64 * 64)
		np = 1;
	hk_parallel(np, gemm_part, &j);
}

const char *blas_core(void)
{
	const char *c = openblas_get_corename();

	return c ? c : "";
}

static int cpu_has_avx2_fma(void)
{
	unsigned a, b, c, d;

	if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_FMA))
		return 0;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return 0;
	return !!(b & bit_AVX2);
}

static void cpu_vendor(char v[13], unsigned *family)
{
	unsigned a, b, c, d;

	memset(v, 0, 13);
	*family = 0;
	if (!__get_cpuid(0, &a, &b, &c, &d))
		return;
	memcpy(v, &b, 4);
	memcpy(v + 4, &d, 4);
	memcpy(v + 8, &c, 4);
	if (__get_cpuid(1, &a, &b, &c, &d)) {
		*family = (a >> 8) & 0xf;
		if (*family == 0xf)
			*family += (a >> 20) & 0xff;
	}
}

/* Cores OpenBLAS 0.3.21 may pick that use AVX2 + FMA kernels. */
static int core_is_avx2(const char *core)
{
	static const char *const good[] = {
		"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids",
		"Excavator", NULL
	};

	for (int i = 0; good[i]; i++)
		if (!strcasecmp(core, good[i]))
			return 1;
	return 0;
}

int blas_setup(char **argv, FILE *log)
{
	const char *core = blas_core(), *set = getenv("OPENBLAS_CORETYPE");
	char vendor[13];
	unsigned family;
	const char *want;

	openblas_set_num_threads(1);	/* gemm() splits; see blas.h */
	/* tests: pretend OpenBLAS chose this core (before any re-exec) */
	if (!set && getenv("HMM_TRAIN_BLAS_PRETEND"))
		core = getenv("HMM_TRAIN_BLAS_PRETEND");
	cpu_vendor(vendor, &family);
	if (core_is_avx2(core) || !cpu_has_avx2_fma()) {
		if (set)	/* the line before the re-exec said why */
			fprintf(log, "blas: OpenBLAS now runs core %s "
				"(OPENBLAS_CORETYPE=%s)\n", core, set);
		return 0;
	}
	want = strcmp(vendor, "AuthenticAMD") ? "Haswell" : "Zen";
	if (set) {
		fprintf(log, "blas: OpenBLAS core %s on %s family %u although "
			"OPENBLAS_CORETYPE=%s; matrix products will be slow\n",
			core, vendor, family, set);
		return 0;
	}
	fprintf(log, "blas: OpenBLAS picked core %s for this %s family %u CPU "
		"(it has AVX2+FMA); restarting with OPENBLAS_CORETYPE=%s\n",
		core, vendor, family, want);
	fflush(log);
	setenv("OPENBLAS_CORETYPE", want, 1);
	execv("/proc/self/exe", argv);
	fprintf(log, "blas: re-exec failed; continuing with core %s\n", core);
	return 0;
}
