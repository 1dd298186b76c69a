/* SPDX-License-Identifier: MIT */
/*
 * hk_attn.h — FlashAttention-2 forward and backward over raw pointers.
 *
 * Layout: q, o, dout, dq are [B][H][Nq][d]; k, v, dk, dv are [B][Hkv][Nk][d],
 * all dense row-major.  H must be a multiple of Hkv (grouped-query
 * attention: query head h reads kv head h / (H / Hkv)).  Softmax is over
 * the Nk keys of each query row, scaled by `scale` (0 means 1/sqrt(d)).
 * Causal masking is bottom-right aligned: query i sees keys
 * j <= i + (Nk - Nq), so when Nq > Nk the first Nq - Nk rows see nothing.
 * A row that sees no key gets o = 0, lse = -INFINITY, and zero gradients —
 * never NaN.
 *
 * Types: `dtype` applies to q, k, v, o, dout, dq, dk, dv (HK_F32 or
 * HK_BF16, bf16 written with round-to-nearest-even); lse and all
 * accumulation are fp32.  d is 1..256, any value (not only powers of two);
 * N is any length, 0 included.  bf16 on a CPU with AMX (hk_isa() ==
 * HK_ISA_AMX) multiplies on AMX tiles, and on one with AVX-512 and
 * AVX512-BF16 but no AMX with vdpbf16ps ("avx512bf16"): products of bf16
 * inputs are exact, and the probabilities P and score gradients dS are
 * rounded to bf16 (nearest even) before the products that take them, as
 * FlashAttention-2 does on GPUs; elsewhere, and for fp32, every product
 * is fp32 (bf16 inputs are converted to fp32 once, as they are packed).
 *
 * Paged K/V: with block_table != NULL, k and v are pools of blocks, each
 * block [Hkv][block_size][d]; token t of batch b lives in block
 * block_table[b * max_blocks + t / block_size], row t % block_size.  Any
 * block_size >= 1 works (tiles gather rows), so KV swapped in by hmm or
 * laid out by a paged cache is read in place.  The backward still writes
 * dk, dv dense [B][Hkv][Nk][d].  Tiles are always processed in logical
 * token order, so the result does not depend on where blocks live or in
 * which order they were filled: a permuted block table gives bit-identical
 * results.  The result also does not depend on the thread count.
 *
 * Memory, per call, freed before it returns: K transposed into tiles
 * (and V^T in the backward), one tile-sized slot per thread; the forward
 * converts each q tile that is not dense fp32 with d % 8 == 0 in its
 * slot.  In the backward D = rowsum(dout * o) (B*H*Nq floats) and, when
 * the key axis is split into chunks (B*Hkv < 8), fp32 copies of q and
 * dout (unless dense fp32, d % 8 == 0) and an fp32 dq accumulator of up
 * to 4 * B*H*Nq*d floats; otherwise, for bf16 or odd d, each thread's
 * slot also holds one kv head's q, dout and dq rows in fp32
 * (3 * H/Hkv * Nq * d floats).  All
 * O(N d), never Nq x Nk.  The amx path (bf16) also keeps 320 KiB of
 * operand buffers per thread that ran it, freed when the thread exits.
 *
 * Threading: each call runs on hk_parallel() (HK_THREADS threads), over
 * (batch, head, q-tile) items in the forward and (batch, kv-head, kv-chunk)
 * items in the backward.  Calls may come from several threads; they are
 * serialised by hk_parallel.  Do not call from inside an hk_parallel job
 * (its lock is not recursive).  Returns 0, -EINVAL (hk_attn_strerror()
 * names the field; nothing was written) or -ENOMEM.
 *
 * Example, causal self-attention in fp32 (the training case):
 *
 *	struct hk_attn a = { .B = B, .H = H, .Hkv = H, .Nq = N, .Nk = N,
 *			     .d = d, .causal = 1 };
 *	hk_attn_fwd(&a, q, k, v, o, lse);		// lse: B*H*N floats
 *	hk_attn_bwd(&a, q, k, v, o, lse, dout, dq, dk, dv);
 */
#ifndef HK_ATTN_H
#define HK_ATTN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HK_F32	0
#define HK_BF16	1

/* Shape and options of one attention call; filled by the caller, read only. */
struct hk_attn {
	int B, H, Hkv;		/* batch, query heads, kv heads (0 means H) */
	int Nq, Nk;		/* query rows, key rows */
	int d;			/* head dimension, 1..256 */
	int dtype;		/* HK_F32 or HK_BF16 */
	int causal;		/* 1: bottom-right aligned causal mask */
	float scale;		/* softmax scale; 0 means 1/sqrt(d) */
	const int32_t *block_table;	/* NULL: dense k, v */
	int block_size;		/* tokens per block (paged only) */
	int max_blocks;		/* row stride of block_table (paged only) */
};

/*
 * o = softmax(scale * q k^T + mask) v, lse[b][h][i] = log sum_j exp(...)
 * (natural log, of the scaled scores).  lse may be NULL when no backward
 * follows.
 */
int hk_attn_fwd(const struct hk_attn *a, const void *q, const void *k,
		const void *v, void *o, float *lse);

/*
 * Gradients of the forward for upstream gradient dout: dq, dk, dv are
 * written (not accumulated).  o and lse must come from hk_attn_fwd with
 * the same arguments.
 */
int hk_attn_bwd(const struct hk_attn *a, const void *q, const void *k,
		const void *v, const void *o, const float *lse,
		const void *dout, void *dq, void *dk, void *dv);

/* A line naming what was wrong in the last -EINVAL of this thread. */
const char *hk_attn_strerror(void);

/*
 * Tests and benchmarks: run the CPU path of one ISA (HK_ISA_SCALAR,
 * HK_ISA_AVX2, HK_ISA_AVX512, HK_ISA_AMX) from now on, or -1 for the
 * default (hk_isa()).  Returns 0, or -ENOTSUP when this CPU cannot.  Not
 * thread-safe against calls in flight.  HK_ISA_AMX changes only bf16
 * calls (fp32 runs the AVX-512 path): their products run on AMX tiles
 * with P and dS rounded to bf16 (see above); HK_ISA_AVX512 runs bf16 on
 * vdpbf16ps where the CPU has AVX512-BF16, the same way.
 */
int hk_attn_force_isa(int isa);
/* The path the next call of this dtype will use: "scalar", "avx2",
 * "avx512", "avx512bf16" (bf16 only) or "amx" (bf16 only). */
const char *hk_attn_isa_name(int dtype);

/*
 * CUDA (kernels/core/cuda/, in libhk_cuda.a; link libhk.a after it): the
 * same contract on device pointers, enqueued on `stream` (a cudaStream_t;
 * NULL = default).  block_table, when set, is a device pointer.  Returns
 * 0, -EINVAL, -ENOMEM or -EIO (a CUDA error; hk_attn_strerror says
 * which).  On sm_80+ with dtype HK_BF16 and d in {32, 64, 80, 96, 128},
 * forward and backward run on tensor cores (mma.sync, P and dS rounded to
 * bf16 between the two products, as FlashAttention-2 does); every other
 * case, or HK_ATTN_SIMT set in the environment, runs fp32 SIMT kernels.
 * Deterministic (no atomics).  The backward allocates D with
 * cudaMallocAsync on the stream.
 */
int hk_attn_fwd_cuda(const struct hk_attn *a, const void *q, const void *k,
		     const void *v, void *o, float *lse, void *stream);
int hk_attn_bwd_cuda(const struct hk_attn *a, const void *q, const void *k,
		     const void *v, const void *o, const float *lse,
		     const void *dout, void *dq, void *dk, void *dv,
		     void *stream);

#ifdef __cplusplus
}
#endif

#endif /* HK_ATTN_H */
