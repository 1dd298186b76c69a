/* SPDX-License-Identifier: MIT */
/*
 * hk_adamw.h — the fused AdamW optimizer step over raw arrays.
 *
 * One pass per element reads param, grad, m, v and writes param, m, v (and
 * a bf16 copy of param when asked): 28 bytes per parameter in fp32, the
 * least any AdamW can move.  The update is PyTorch's torch.optim.AdamW
 * (decoupled weight decay, amsgrad off, maximize off):
 *
 *	g  = grad / grad_scale
 *	p  = p * (1 - lr * weight_decay)
 *	m  = beta1 * m + (1 - beta1) * g
 *	v  = beta2 * v + (1 - beta2) * g * g
 *	bc1 = 1 - beta1^step,  bc2 = 1 - beta2^step
 *	p  = p - lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)
 *
 * Bias corrections and the other per-step constants are computed in double
 * then rounded to float once; each element is computed in fp32 with exact
 * IEEE sqrt and division (no reciprocal approximations) and fused
 * multiply-adds.  The scalar, AVX2 and AVX-512 paths give bit-identical
 * results, so does any thread count.
 *
 * Storage (the dtype pairs):
 *	fp32 params, fp32 states:	param f32, grad f32, states f32
 *	bf16 params, fp32 master:	param is the fp32 master, param_bf16
 *					is written (round to nearest even,
 *					NaN stays NaN), grad f32 or bf16,
 *					states f32
 *	bf16 states:			as above with state_dtype bf16: m and
 *					v are read as bf16, computed in fp32,
 *					stored rounded to nearest even
 * Any length; pointers need only the alignment of their element type (4
 * bytes for fp32, 2 for bf16), nothing more; arrays must not overlap.
 *
 * Non-finite gradients (mixed precision): the step is skipped, nothing
 * written, when args.found_inf is set by the caller, or when the flag
 * HK_ADAMW_CHECK_FINITE is given and some grad is inf or NaN (an extra
 * read of grad before the pass).  A trainer with many tensors calls
 * hk_adamw_check() over all of them first, or hk_adamw_step_many().
 *
 * Threading: the step runs on hk_parallel()'s pool (hk_threads() threads,
 * see hk.h), split on cache-line-aligned element ranges; small arrays
 * run on the caller alone.  The functions may be called from any thread;
 * concurrent calls are serialised by the pool.  The ISA is hk_isa()'s
 * (HK_ISA=scalar|avx2|avx512 lowers it).
 */
#ifndef HK_ADAMW_H
#define HK_ADAMW_H

#include <stddef.h>
#include <stdint.h>

/* Element types of grad and of the states. */
#define HK_ADAMW_F32	0
#define HK_ADAMW_BF16	1	/* uint16_t holding the top half of an fp32 */

/* args.flags */
#define HK_ADAMW_CHECK_FINITE	0x1u	/* skip the step if a grad is inf/NaN */
#define HK_ADAMW_F_ALL		0x1u

/* Return value of a step that was skipped for a non-finite gradient. */
#define HK_ADAMW_SKIPPED	1

/*
 * One tensor's step.  Filled by the caller (on its stack is fine), read
 * only during the call; the arrays belong to the caller.
 */
struct hk_adamw_args {
	size_t n;		/* elements in each array; 0 is a no-op */
	float *param;		/* (in/out) fp32 params or the fp32 master */
	uint16_t *param_bf16;	/* (out) bf16 copy of param, or NULL */
	const void *grad;	/* (in) n of grad_dtype */
	void *exp_avg;		/* (in/out) m, n of state_dtype */
	void *exp_avg_sq;	/* (in/out) v, n of state_dtype */
	int grad_dtype;		/* HK_ADAMW_F32 or HK_ADAMW_BF16 */
	int state_dtype;	/* HK_ADAMW_F32 or HK_ADAMW_BF16 */
	double lr;		/* >= 0 */
	double beta1, beta2;	/* in [0, 1) */
	double eps;		/* >= 0 */
	double weight_decay;	/* >= 0, decoupled: p *= 1 - lr * wd */
	int64_t step;		/* this step's number, 1 for the first */
	double grad_scale;	/* > 0: grads are divided by it; 0 means 1 */
	unsigned flags;		/* HK_ADAMW_CHECK_FINITE */
	int found_inf;		/* (in) nonzero: skip (e.g. another tensor) */
	const char *name;	/* tensor name for error details, or NULL */
};

/*
 * hk_adamw_step(a): one AdamW step over a->n elements.
 * Returns 0 when the step was taken, HK_ADAMW_SKIPPED (1) when it was
 * skipped (a->found_inf, or a non-finite grad under CHECK_FINITE: then
 * every array is untouched), -EINVAL for bad arguments (detail in
 * hk_adamw_error(); nothing written).
 */
int hk_adamw_step(const struct hk_adamw_args *a);

/*
 * hk_adamw_step_many(a, count): one step over count tensors as one
 * optimizer step: all arguments are validated first, then if any tensor
 * has found_inf set, or CHECK_FINITE in its flags and a non-finite grad,
 * no tensor is touched and HK_ADAMW_SKIPPED is returned.  Else 0.
 */
int hk_adamw_step_many(const struct hk_adamw_args *a, size_t count);

/*
 * hk_adamw_check(a, count): 1 if any grad of the count tensors holds an
 * inf or NaN, else 0; -EINVAL for bad arguments.  Reads grads only.
 */
int hk_adamw_check(const struct hk_adamw_args *a, size_t count);

/*
 * hk_adamw_nonfinite(x, dtype, n): 1 if any of the n elements of x
 * (HK_ADAMW_F32 or HK_ADAMW_BF16) is inf or NaN, else 0; -EINVAL for a
 * bad dtype or a NULL x with n > 0.  For streaming callers that check
 * grads piece by piece (kernels/bind/offload.c).
 */
int hk_adamw_nonfinite(const void *x, int dtype, size_t n);

/* The calling thread's detail of its latest -EINVAL ("" if none). */
const char *hk_adamw_error(void);

/* Name of the path hk_adamw_step() uses now: "scalar", "avx2", "avx512". */
const char *hk_adamw_isa(void);

/*
 * Tests and benchmarks: use the path of one ISA (HK_ISA_SCALAR,
 * HK_ISA_AVX2, HK_ISA_AVX512) from now on, or -1 for hk_isa()'s choice.
 * Returns 0, or -ENOTSUP when this CPU cannot run it.  Not thread-safe
 * against steps in flight.
 */
int hk_adamw_force_isa(int isa);

#ifndef HK_BF16_CONV	/* shared by any kernel header that needs them */
#define HK_BF16_CONV
/*
 * CUDA (kernels/core/cuda/adamw.cu, in libhk_cuda.a): the same step over
 * count tensors whose arrays are device (or managed) pointers, enqueued
 * on `stream` (a cudaStream_t; NULL = the default stream), many tensors
 * per launch, the same bits as the CPU paths.  found_inf is a device int
 * or NULL: when set, the step kernel reads it and does nothing if it is
 * nonzero (a flag the trainer's own unscale pass may have set); tensors
 * with HK_ADAMW_CHECK_FINITE first have their grads checked on the device
 * and the flag set to 1 if one is inf/NaN (then found_inf is required).
 * The caller zeroes the flag before the step and reads it after the
 * stream syncs to learn whether the step was skipped.
 * Returns 0 when enqueued, HK_ADAMW_SKIPPED if some args.found_inf is set
 * (nothing enqueued), -EINVAL for bad arguments, -EIO when a launch
 * failed (detail in hk_adamw_error()).  Threading as for CUDA streams.
 */
int hk_adamw_step_cuda(const struct hk_adamw_args *a, size_t count,
		       int *found_inf, void *stream);

/* fp32 -> bf16, round to nearest even; NaN stays NaN (quieted), the sign
 * kept; values past the largest bf16 round to infinity as IEEE says. */
static inline uint16_t hk_bf16_from_f32(float f)
{
	union { float f; uint32_t u; } x = { f };

	if ((x.u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x.u >> 16) | 0x40u);
	x.u += 0x7fffu + ((x.u >> 16) & 1u);
	return (uint16_t)(x.u >> 16);
}

/* bf16 -> fp32, exact. */
static inline float hk_bf16_to_f32(uint16_t h)
{
	union { uint32_t u; float f; } x = { (uint32_t)h << 16 };

	return x.f;
}
#endif /* HK_BF16_CONV */

#endif /* HK_ADAMW_H */
