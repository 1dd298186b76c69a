// SPDX-License-Identifier: MIT
/*
 * bench_attn_gpu — times hk_attn_fwd_cuda / hk_attn_bwd_cuda at B=1, H=8,
 * N=2048 and N=8192, d=64 and 128, bf16 and fp32, causal off; one JSON
 * line per (pass, shape, dtype) with TFLOP/s counted as in hmm-bench attn
 * (forward 4 N^2 d per head, backward 2.5x).  Median of 10 after a warm
 * up, cudaEvent timing.  A benchmark, not a test: exits 0 unless a call
 * fails; 77 without a CUDA device.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "hk_attn.h"

#define REPS 10

static int cmpf(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

static int one(int N, int d, int dtype)
{
	struct hk_attn a = {};
	size_t esz = dtype == HK_F32 ? 4 : 2, n = (size_t)8 * N * d;
	void *q, *k, *v, *o, *dq, *dk, *dv, *dout;
	float *lse, tf[REPS], tb[REPS];
	cudaEvent_t e0, e1, e2;
	double flop = 4.0 * N * N * d * 8;

	a.B = 1; a.H = 8; a.Nq = N; a.Nk = N; a.d = d; a.dtype = dtype;
	cudaMalloc(&q, n * esz); cudaMalloc(&k, n * esz);
	cudaMalloc(&v, n * esz); cudaMalloc(&o, n * esz);
	cudaMalloc(&dq, n * esz); cudaMalloc(&dk, n * esz);
	cudaMalloc(&dv, n * esz); cudaMalloc(&dout, n * esz);
	cudaMalloc(&lse, (size_t)8 * N * 4);
	cudaMemset(q, 0, n * esz); cudaMemset(k, 0, n * esz);
	cudaMemset(v, 0, n * esz); cudaMemset(dout, 0, n * esz);
	cudaEventCreate(&e0); cudaEventCreate(&e1); cudaEventCreate(&e2);
	for (int r = -1; r < REPS; r++) {
		cudaEventRecord(e0);
		if (hk_attn_fwd_cuda(&a, q, k, v, o, lse, NULL))
			return 1;
		cudaEventRecord(e1);
		if (hk_attn_bwd_cuda(&a, q, k, v, o, lse, dout, dq, dk, dv, NULL))
			return 1;
		cudaEventRecord(e2);
		cudaEventSynchronize(e2);
		if (r >= 0) {
			cudaEventElapsedTime(&tf[r], e0, e1);
			cudaEventElapsedTime(&tb[r], e1, e2);
		}
	}
	qsort(tf, REPS, sizeof(float), cmpf);
	qsort(tb, REPS, sizeof(float), cmpf);
	printf("{\"bench\":\"attn_gpu\",\"pass\":\"fwd\",\"dtype\":\"%s\",\"N\":%d,"
	       "\"d\":%d,\"ms\":%.3f,\"tflops\":%.2f}\n",
	       dtype == HK_F32 ? "f32" : "bf16", N, d, tf[REPS / 2],
	       flop / (tf[REPS / 2] * 1e-3) * 1e-12);
	printf("{\"bench\":\"attn_gpu\",\"pass\":\"bwd\",\"dtype\":\"%s\",\"N\":%d,"
	       "\"d\":%d,\"ms\":%.3f,\"tflops\":%.2f}\n",
	       dtype == HK_F32 ? "f32" : "bf16", N, d, tb[REPS / 2],
	       2.5 * flop / (tb[REPS / 2] * 1e-3) * 1e-12);
	cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(o); cudaFree(dq);
	cudaFree(dk); cudaFree(dv); cudaFree(dout); cudaFree(lse);
	return cudaGetLastError() != cudaSuccess;
}

int main(void)
{
	int n = 0, r = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
		printf("1..0 # SKIP no CUDA device\n");
		return 77;
	}
	for (int N = 2048; N <= 8192; N *= 4)
		for (int d = 64; d <= 128; d *= 2)
			for (int t = HK_BF16; t >= HK_F32; t--)
				r |= one(N, d, t);
	return r;
}
