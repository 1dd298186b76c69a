/* SPDX-License-Identifier: MIT */
/*
 * blas.h — matrix products for hmm-train, and the OpenBLAS setup.
 *
 * gemm(): C = alpha * op(A) op(B) + beta * C, row-major, op = transpose
 * when ta / tb is set; M x K times K x N.  It splits C into fixed row (or
 * column) bands, one cblas_sgemm per band on hk_parallel(), with OpenBLAS
 * itself single-threaded: one thread pool in the process, and every
 * element of C is computed by one call with the same K order, so results
 * are the same run after run.
 *
 * blas_setup(argv): call first thing in main().  Debian's OpenBLAS 0.3.21
 * can pick a pre-AVX2 core type on newer AMD CPUs; when the core it chose
 * is not an AVX2 one and the CPU has AVX2+FMA, it sets OPENBLAS_CORETYPE
 * and re-executes the program (OpenBLAS reads it only when it loads).
 * It says so on `log` before the re-exec, and again after it (which core
 * now runs); when OpenBLAS chose well it prints nothing (the progress
 * header names the core).
 * Returns 0 (it returns only when no re-exec was needed or it failed).
 */
#ifndef HMM_TRAIN_BLAS_H
#define HMM_TRAIN_BLAS_H

#include <stdio.h>

void gemm(int ta, int tb, int M, int N, int K, float alpha,
	  const float *A, int lda, const float *B, int ldb, float beta,
	  float *C, int ldc);

int blas_setup(char **argv, FILE *log);
const char *blas_core(void);	/* OpenBLAS's core name, "" if unknown */

#endif /* HMM_TRAIN_BLAS_H */
