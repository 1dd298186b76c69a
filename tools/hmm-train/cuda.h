/* SPDX-License-Identifier: MIT */
/*
 * cuda.h — hmm-train's GPU side, loaded at run time: the CUDA driver
 * (libcuda.so.1) and cuBLAS (cublas_dlopen: the toolkit's), so that the
 * binary links neither and runs where there is no GPU.
 *
 * cuda_probe() finds, in order, the driver, a GPU, and cuBLAS with a
 * handle made on it; on the first that is missing it writes what (and
 * the library's own words) to why and returns -ENODEV.  On success it
 * writes what it found to found and returns 0.  It keeps nothing: every
 * handle is released and both libraries are closed before it returns.
 *
 * hmm-train --device cuda probes first, so that what is missing is named
 * before any state is opened; the GPU step itself is gpu.h's (which
 * loads the same libraries again, and keeps them).  Threading: any one
 * thread.
 */
#ifndef HMM_TRAIN_CUDA_H
#define HMM_TRAIN_CUDA_H

#include <stddef.h>

int cuda_probe(char *why, size_t why_n, char *found, size_t found_n);

/*
 * dlopen cuBLAS: $HMM_CUBLAS when set, else libcublas.so.13, .12, then
 * the unversioned name (the toolkit's, newest first).  Returns the
 * handle and sets *name to the name that opened, or NULL with why
 * naming every name tried and the last dlerror().
 */
void *cublas_dlopen(const char **name, char *why, size_t why_n);

#endif /* HMM_TRAIN_CUDA_H */
