/* SPDX-License-Identifier: MIT */
/*
 * attn.h — causal self-attention for the GPT block, over the block's
 * fused qkv rows.
 *
 * qkv is [B*T][3*d] (q | k | v, head h at columns h*hd .. h*hd+hd-1 of
 * each third); out is [B*T][d].  The work buffer `w` holds the packed
 * [B][H][T][hd] copies the kernel reads, the output and the log-sum-exp:
 * attn_work_floats() floats, owned by the caller and kept between the
 * forward and the backward of the same block.
 *
 * The math is kernels/core's FlashAttention (hk_attn.h), deterministic
 * for any thread count.  Returns 0 or -errno.
 */
#ifndef HMM_TRAIN_ATTN_H
#define HMM_TRAIN_ATTN_H

#include <stddef.h>

size_t attn_work_floats(int B, int T, int d, int H);
int attn_fwd(float *out, float *w, const float *qkv, int B, int T, int d,
	     int H);
/* dqkv written (not added) from dout; w as left by attn_fwd. */
int attn_bwd(float *dqkv, float *w, const float *dout, int B, int T, int d,
	     int H);
const char *attn_impl(void);	/* "hk_attn" */

#endif /* HMM_TRAIN_ATTN_H */
