// SPDX-License-Identifier: MIT
/*
 * adamw.cu — the fused AdamW step on NVIDIA GPUs: hk_adamw_step_cuda(),
 * the contract of hk_adamw.h on device pointers, many tensors per launch.
 *
 * References:
 *  - PyTorch's multi_tensor_apply (aten/src/ATen/native/cuda/
 *    MultiTensorApply.cuh) and NVIDIA apex's multi_tensor_adam.cu: a
 *    table of tensors in the kernel's parameters, blocks mapped to
 *    (tensor, chunk), so one launch steps many small tensors.
 *  - karpathy/llm.c dev/cuda/adamw.cu: the layout of this file.
 *
 * Built by `make build/lib/libhk_cuda.a` for sm_80 and sm_90a:
 *	nvcc -O3 -std=c++17 -Iinclude -Ikernels/core -lineinfo
 *	     -gencode arch=compute_80,code=sm_80
 *	     -gencode arch=compute_90a,code=sm_90a -c kernels/core/cuda/adamw.cu
 * Validated bit for bit against the CPU scalar path (itself tested against
 * fp64 by tests/unit/test_adamw.c) by tests/gpu/test_adamw_gpu.cu, which
 * also prints the kernel's bandwidth against a 4-read/3-write copy kernel;
 * until a GPU runs that, tests/gpu/emu/test_kern_emu runs this file on
 * the CPU (HK_CUDA_EMU) against the same path.
 *
 * The arithmetic is that of kernels/core/cpu/adamw_ops.h, written with the
 * _rn intrinsics so that nvcc neither contracts nor approximates: each
 * element gives the same bits as the CPU paths.
 *
 * Kernel: 256 threads per block, 4 elements per thread per iteration
 * (one 16-byte load per fp32 array, 8-byte per bf16 array, when every
 * pointer of the tensor is aligned for it; element by element otherwise),
 * 4 iterations: a block owns 4096 consecutive elements of one tensor.
 * A launch carries up to HK_CU_MAX_T tensors; more are launched in turn.
 *
 * History:
 *  v1 (this file): vector loads, table of tensors, found-inf on device.
 *      Compiled for sm_80/sm_90a; not yet run on a GPU (none on the
 *      build machines): the GPU test prints its GB/s when run.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

extern "C" {
#include "hk_adamw.h"
#include "cpu/adamw_ops.h"
}

#define TPB		256	/* threads per block */
#define EPT		4	/* elements per thread per iteration */
#define ITERS		4
#define CHUNK		(TPB * EPT * ITERS)
#define HK_CU_MAX_T	24	/* tensors per launch (kernel params < 4 KiB) */

/* One tensor as the kernel sees it. */
struct cu_tensor {
	float *p;
	uint16_t *pb;		/* bf16 copy, or NULL */
	const void *g;
	void *m, *v;
	size_t n;
	unsigned block0;	/* its first block in the launch */
	int gbf, sbf;		/* grad, states are bf16 */
	int vec;		/* every pointer aligned for 4-wide access */
	struct hk_adamw_coef c;
};

/* The kernel's parameters: filled on the host, passed by value. */
struct cu_launch {
	int count;
	const int *found_inf;	/* device flag: nonzero -> no-op, or NULL */
	int *set_inf;		/* check kernel: where to write 1 */
	struct cu_tensor t[HK_CU_MAX_T];
};
static_assert(sizeof(struct cu_launch) <= 4096,
	      "kernel parameters are limited to 4 KiB before CUDA 12.1");

__device__ __forceinline__ float bf2f(uint16_t h)
{
	return __uint_as_float((uint32_t)h << 16);
}

/* Round to nearest even, NaN -> quiet NaN: hk_bf16_from_f32's bits. */
__device__ __forceinline__ uint16_t f2bf(float f)
{
	uint32_t u = __float_as_uint(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

/* adamw_ops.h's operations, in its order, each rounded to nearest. */
__device__ __forceinline__ void update(const struct hk_adamw_coef &c,
				       float &p, float g, float &m, float &v)
{
	float d;

	if (c.scaled)
		g = __fdiv_rn(g, c.scale);
	m = __fmaf_rn(c.b1, m, __fmul_rn(c.omb1, g));
	v = __fmaf_rn(c.b2, v, __fmul_rn(c.omb2, __fmul_rn(g, g)));
	d = __fmaf_rn(__fsqrt_rn(v), c.ibc2, c.eps);
	p = __fmaf_rn(-c.step_size, __fdiv_rn(m, d), __fmul_rn(p, c.decay));
}

__device__ __forceinline__ float ld1(const void *b, int bf, size_t i)
{
	return bf ? bf2f(((const uint16_t *)b)[i]) : ((const float *)b)[i];
}

__device__ __forceinline__ void st1(void *b, int bf, size_t i, float x)
{
	if (bf)
		((uint16_t *)b)[i] = f2bf(x);
	else
		((float *)b)[i] = x;
}

/* Four elements from i (a multiple of 4) with one access per array. */
__device__ __forceinline__ void ld4(const void *b, int bf, size_t i,
				    float x[4])
{
	if (bf) {
		uint2 h = *(const uint2 *)((const uint16_t *)b + i);

		x[0] = bf2f((uint16_t)h.x);
		x[1] = bf2f((uint16_t)(h.x >> 16));
		x[2] = bf2f((uint16_t)h.y);
		x[3] = bf2f((uint16_t)(h.y >> 16));
	} else {
		float4 f = *(const float4 *)((const float *)b + i);

		x[0] = f.x;
		x[1] = f.y;
		x[2] = f.z;
		x[3] = f.w;
	}
}

__device__ __forceinline__ uint2 pack4(const float x[4])
{
	return make_uint2((uint32_t)f2bf(x[0]) | (uint32_t)f2bf(x[1]) << 16,
			  (uint32_t)f2bf(x[2]) | (uint32_t)f2bf(x[3]) << 16);
}

__device__ __forceinline__ void st4(void *b, int bf, size_t i,
				    const float x[4])
{
	if (bf)
		*(uint2 *)((uint16_t *)b + i) = pack4(x);
	else
		*(float4 *)((float *)b + i) =
			make_float4(x[0], x[1], x[2], x[3]);
}

__device__ __forceinline__ void step4(const struct cu_tensor &t, size_t i)
{
	float p[4], g[4], m[4], v[4];

	ld4(t.p, 0, i, p);
	ld4(t.g, t.gbf, i, g);
	ld4(t.m, t.sbf, i, m);
	ld4(t.v, t.sbf, i, v);
#pragma unroll
	for (int k = 0; k < 4; k++)
		update(t.c, p[k], g[k], m[k], v[k]);
	st4(t.p, 0, i, p);
	if (t.pb)
		*(uint2 *)(t.pb + i) = pack4(p);
	st4(t.m, t.sbf, i, m);
	st4(t.v, t.sbf, i, v);
}

__device__ __forceinline__ void step1(const struct cu_tensor &t, size_t i)
{
	float p = t.p[i], g = ld1(t.g, t.gbf, i);
	float m = ld1(t.m, t.sbf, i), v = ld1(t.v, t.sbf, i);

	update(t.c, p, g, m, v);
	t.p[i] = p;
	if (t.pb)
		t.pb[i] = f2bf(p);
	st1(t.m, t.sbf, i, m);
	st1(t.v, t.sbf, i, v);
}

/* Which tensor this block belongs to (the table is short). */
__device__ __forceinline__ int tensor_of(const struct cu_launch &L)
{
	int k = 0;

	while (k + 1 < L.count && L.t[k + 1].block0 <= blockIdx.x)
		k++;
	return k;
}

__global__ void __launch_bounds__(TPB)
adamw_kernel(const __grid_constant__ struct cu_launch L)
{
	const struct cu_tensor &t = L.t[tensor_of(L)];
	size_t base = (size_t)(blockIdx.x - t.block0) * CHUNK;

	if (L.found_inf && *(volatile const int *)L.found_inf)
		return;
#pragma unroll
	for (int it = 0; it < ITERS; it++) {
		size_t i = base + ((size_t)it * TPB + threadIdx.x) * EPT;

		if (i >= t.n)
			break;
		if (t.vec && i + EPT <= t.n) {
			step4(t, i);
		} else {
			for (size_t j = i; j < i + EPT && j < t.n; j++)
				step1(t, j);
		}
	}
}

/* Sets *L.set_inf to 1 if any grad of the block's chunk is inf or NaN. */
__global__ void __launch_bounds__(TPB)
check_kernel(const __grid_constant__ struct cu_launch L)
{
	const struct cu_tensor &t = L.t[tensor_of(L)];
	size_t base = (size_t)(blockIdx.x - t.block0) * CHUNK;
	int bad = 0;

	for (int k = threadIdx.x; k < CHUNK; k += TPB) {
		size_t i = base + k;
		uint32_t e;

		if (i >= t.n)
			break;
		e = t.gbf ? (uint32_t)((const uint16_t *)t.g)[i] << 16
			  : __float_as_uint(((const float *)t.g)[i]);
		bad |= (e & 0x7f800000u) == 0x7f800000u;
	}
	if (__syncthreads_or(bad) && threadIdx.x == 0)
		*L.set_inf = 1;
}

static int aligned(const void *p, uintptr_t a)
{
	return ((uintptr_t)p & (a - 1)) == 0;
}

static void fill(struct cu_tensor *t, const struct hk_adamw_args *a,
		 unsigned block0)
{
	uintptr_t gal = a->grad_dtype ? 8 : 16, sal = a->state_dtype ? 8 : 16;

	t->p = a->param;
	t->pb = a->param_bf16;
	t->g = a->grad;
	t->m = a->exp_avg;
	t->v = a->exp_avg_sq;
	t->n = a->n;
	t->block0 = block0;
	t->gbf = a->grad_dtype == HK_ADAMW_BF16;
	t->sbf = a->state_dtype == HK_ADAMW_BF16;
	t->vec = aligned(a->param, 16) && aligned(a->param_bf16, 8) &&
		 aligned(a->grad, gal) && aligned(a->exp_avg, sal) &&
		 aligned(a->exp_avg_sq, sal);
	hk_adamw_coef_init(&t->c, a);
}

/*
 * The one launcher tests/gpu/emu leaves out (HK_CUDA_EMU): test_kern_emu
 * defines its own launch(), which runs the kernel on the CPU with this
 * grid and block, so that everything else here runs there as it is.
 */
#ifndef HK_CUDA_EMU
static int launch(const struct cu_launch *L, unsigned blocks, int check,
		  cudaStream_t s)
{
	cudaError_t e;

	if (!L->count)
		return 0;
	if (check)
		check_kernel<<<blocks, TPB, 0, s>>>(*L);
	else
		adamw_kernel<<<blocks, TPB, 0, s>>>(*L);
	e = cudaGetLastError();
	if (e != cudaSuccess) {
		hk_adamw_fail(NULL, "%s kernel launch: %s",
			      check ? "check" : "step", cudaGetErrorString(e));
		return -EIO;
	}
	return 0;
}
#else
static int launch(const struct cu_launch *L, unsigned blocks, int check,
		  cudaStream_t s);
#endif

/* Launch `check` or step kernels over the tensors, HK_CU_MAX_T at once;
 * with `check`, only those that asked for HK_ADAMW_CHECK_FINITE. */
static int run(const struct hk_adamw_args *a, size_t count, int *found_inf,
	       int check, cudaStream_t s)
{
	struct cu_launch L;
	unsigned blocks = 0;
	int err;

	memset(&L, 0, sizeof(L));
	L.found_inf = check ? NULL : found_inf;
	L.set_inf = found_inf;
	for (size_t i = 0; i < count; i++) {
		unsigned nb = (unsigned)((a[i].n + CHUNK - 1) / CHUNK);

		if (!a[i].n || (check && !(a[i].flags & HK_ADAMW_CHECK_FINITE)))
			continue;
		if (L.count == HK_CU_MAX_T || blocks > 0x7fffffffu - nb) {
			if ((err = launch(&L, blocks, check, s)))
				return err;
			L.count = 0;
			blocks = 0;
		}
		fill(&L.t[L.count++], &a[i], blocks);
		blocks += nb;
	}
	return launch(&L, blocks, check, s);
}

extern "C" int hk_adamw_step_cuda(const struct hk_adamw_args *a,
				  size_t count, int *found_inf, void *stream)
{
	int check = 0, err;

	if (count && !a)
		return hk_adamw_fail(NULL, "args is NULL");
	for (size_t i = 0; i < count; i++) {
		if ((err = hk_adamw_validate(&a[i])))
			return err;
		if (a[i].n > (size_t)CHUNK * 0x7fffffffu)
			return hk_adamw_fail(&a[i], "n %zu too large", a[i].n);
		check |= !!(a[i].flags & HK_ADAMW_CHECK_FINITE);
	}
	if (check && !found_inf)
		return hk_adamw_fail(&a[0], "HK_ADAMW_CHECK_FINITE needs a "
				     "device found_inf flag");
	for (size_t i = 0; i < count; i++)
		if (a[i].found_inf)
			return HK_ADAMW_SKIPPED;
	if (check && (err = run(a, count, found_inf, 1, (cudaStream_t)stream)))
		return err;
	return run(a, count, found_inf, 0, (cudaStream_t)stream);
}
