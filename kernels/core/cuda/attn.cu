// SPDX-License-Identifier: MIT
/*
 * attn.cu — FlashAttention-2 forward and backward on NVIDIA GPUs, the
 * contract of hk_attn.h on device pointers (hk_attn_fwd_cuda,
 * hk_attn_bwd_cuda).
 *
 * Built by `make` for sm_80 and sm_90a (NVFLAGS in the Makefile):
 *	nvcc -O3 -std=c++17 -Ikernels/core -gencode arch=compute_80,code=sm_80
 *	     -gencode arch=compute_90a,code=sm_90a -c kernels/core/cuda/attn.cu
 * Validated against the CPU kernels (themselves tested against fp64) by
 * tests/gpu/test_attn_gpu.cu; timed by tests/gpu/bench_attn_gpu.cu.
 *
 * Kernels, picked per call:
 *  - bf16 with d in {32, 64, 80, 96, 128} on sm_80+: the tensor-core
 *    forward and backward of attn_mma.cu (mma.sync.m16n8k16, fp32
 *    accumulators; see that file).
 *  - everything else (fp32, any d <= 256), or HK_ATTN_SIMT set: the SIMT
 *    kernels here.  fwd_simt: a warp per query row, each lane holding d/32
 *    of q and o, K/V tiles of 16 keys in shared memory, online softmax per
 *    tile.  bwd_dkdv: a warp per key row walks the query rows (and heads
 *    of the GQA group) that see it, recomputing P from lse, dK and dV in
 *    registers; bwd_dq: a warp per query row walks its keys.
 *  - both: d_rows computes D = rowsum(dout * o) first.  No atomics: each
 *    output row has one owner, results are deterministic.
 *
 * History: v1, SIMT everywhere plus the mma.sync forward and backward.
 * Not yet run on a GPU (no GPU on the machines this was written on):
 * tests/gpu/run.sh on a GPU machine is the first check, and its numbers
 * belong here.
 */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "hk_attn.h"

extern "C" int hk_attn_resolve(const struct hk_attn *a, struct hk_attn *out);
extern "C" int hk_attn_bad(const char *fmt, int v);

#include "attn_dev.cuh"

#include "attn_simt.cuh"

/* ---- host --------------------------------------------------------------- */

static int cuda_err(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	hk_attn_bad(what, (int)e);
	return -EIO;
}

/*
 * 1 if the tensor-core kernels (attn_mma.cu) take this call: bf16, a d
 * they were built for, a device with mma.sync bf16, and HK_ATTN_SIMT
 * unset (it forces the SIMT kernels, to compare or to rule them out).
 */
static int use_mma(const struct hk_attn *a)
{
	int dev, major = 0;

	if (a->dtype != HK_BF16 || !hk_attn_mma_d_ok(a->d) ||
	    getenv("HK_ATTN_SIMT"))
		return 0;
	if (cudaGetDevice(&dev) != cudaSuccess ||
	    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor,
				   dev) != cudaSuccess)
		return 0;
	return major >= 8;
}

extern "C" int hk_attn_fwd_cuda(const struct hk_attn *a0, const void *q,
				const void *k, const void *v, void *o,
				float *lse, void *stream)
{
	struct hk_attn a;
	cudaStream_t s = (cudaStream_t)stream;
	int r = hk_attn_resolve(a0, &a);

	if (r)
		return r;
	if (!a.B || !a.H || !a.Nq)
		return 0;
	if (!q || !o || (a.Nk && (!k || !v)))
		return hk_attn_bad("hk_attn_fwd_cuda: NULL q, k, v or o%.0d", 0);
	struct args g = make_args(&a);

	if (use_mma(&a)) {
		hk_attn_mma_fwd(g, q, k, v, o, lse, s);
	} else {
		dim3 grid((a.Nq + S_ROWS - 1) / S_ROWS, a.B * a.H);

		fwd_simt<<<grid, 32 * S_ROWS, 0, s>>>(g, q, k, v, o, lse);
	}
	return cuda_err(cudaGetLastError(),
			"hk_attn_fwd_cuda: launch failed (cudaError %d)");
}

extern "C" int hk_attn_bwd_cuda(const struct hk_attn *a0, const void *q,
				const void *k, const void *v, const void *o,
				const float *lse, const void *dout, void *dq,
				void *dk, void *dv, void *stream)
{
	struct hk_attn a;
	cudaStream_t s = (cudaStream_t)stream;
	size_t nq;
	float *D = NULL;
	int r = hk_attn_resolve(a0, &a);

	if (r)
		return r;
	if (!a.B || !a.H)
		return 0;
	if (a.Nq && (!q || !o || !lse || !dout || !dq))
		return hk_attn_bad("hk_attn_bwd_cuda: NULL q, o, lse, dout or "
				   "dq%.0d", 0);
	if (a.Nk && (!k || !v || !dk || !dv))
		return hk_attn_bad("hk_attn_bwd_cuda: NULL k, v, dk or dv%.0d",
				   0);
	struct args g = make_args(&a);

	nq = (size_t)a.B * a.H * a.Nq;
	r = cuda_err(cudaMallocAsync((void **)&D, (nq + 1) * sizeof(float), s),
		     "hk_attn_bwd_cuda: cudaMallocAsync of D (cudaError %d)");
	if (r)
		return r == -EIO ? -ENOMEM : r;
	if (nq)
		d_rows<<<(unsigned)((nq + S_ROWS - 1) / S_ROWS), 32 * S_ROWS, 0,
			 s>>>(g, o, dout, D);
	if (use_mma(&a)) {
		hk_attn_mma_bwd(g, q, k, v, lse, dout, D, dq, dk, dv, s);
	} else {
		dim3 gq((a.Nq + S_ROWS - 1) / S_ROWS, a.B * a.H);
		dim3 gk((a.Nk + S_ROWS - 1) / S_ROWS, a.B * a.Hkv);

		if (a.Nq)
			bwd_dq<<<gq, 32 * S_ROWS, 0, s>>>(g, q, k, v, lse, dout,
							  D, dq);
		if (a.Nk)
			bwd_dkdv<<<gk, 32 * S_ROWS, 0, s>>>(g, q, k, v, lse,
							    dout, D, dk, dv);
	}
	r = cuda_err(cudaGetLastError(),
		     "hk_attn_bwd_cuda: launch failed (cudaError %d)");
	cudaFreeAsync(D, s);
	return r;
}
