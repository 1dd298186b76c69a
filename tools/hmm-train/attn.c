// SPDX-License-Identifier: MIT
/*
 * attn.c — causal self-attention for one GPT block (attn.h): packs qkv
 * into [B][H][T][hd] for kernels/core's FlashAttention (hk_attn.h), runs
 * it, unpacks.  The backward recomputes the probabilities from the saved
 * log-sum-exp.
 *
 * Work buffer layout, each [B][H][T][hd] unless said:
 *   q k v o | dq dk dv do | lse [B][H][T]
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "attn.h"
#include "hk_attn.h"

size_t attn_work_floats(int B, int T, int d, int H)
{
	return (size_t)B * T * d * 8 + (size_t)B * H * T;
}

/* dst[b][h][t][j] = src[(b*T+t)*ld + off + h*hd + j], or back. */
static void pack(float *dst, const float *src, int ld, int off, int B,
		 int T, int d, int H, int back)
{
	int hd = d / H;

	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++)
			for (int t = 0; t < T; t++) {
				float *p = dst + (((size_t)b * H + h) * T + t) * hd;
				float *s = (float *)src + ((size_t)b * T + t) * ld +
					   off + h * hd;

				if (back)
					memcpy(s, p, hd * sizeof(float));
				else
					memcpy(p, s, hd * sizeof(float));
			}
}

static void slots(float *w, int B, int T, int d, float **q, float **k,
		  float **v, float **o, float **dq, float **dk, float **dv,
		  float **dout, float **lse)
{
	size_t n = (size_t)B * T * d;

	*q = w, *k = w + n, *v = w + 2 * n, *o = w + 3 * n;
	*dq = w + 4 * n, *dk = w + 5 * n, *dv = w + 6 * n, *dout = w + 7 * n;
	*lse = w + 8 * n;
}

int attn_fwd(float *out, float *w, const float *qkv, int B, int T, int d,
	     int H)
{
	struct hk_attn a = { .B = B, .H = H, .Hkv = H, .Nq = T, .Nk = T,
			     .d = d / H, .causal = 1 };
	float *q, *k, *v, *o, *dq, *dk, *dv, *dout, *lse;
	int err;

	if (d % H)
		return -EINVAL;
	slots(w, B, T, d, &q, &k, &v, &o, &dq, &dk, &dv, &dout, &lse);
	pack(q, qkv, 3 * d, 0, B, T, d, H, 0);
	pack(k, qkv, 3 * d, d, B, T, d, H, 0);
	pack(v, qkv, 3 * d, 2 * d, B, T, d, H, 0);
	err = hk_attn_fwd(&a, q, k, v, o, lse);
	if (!err)
		pack(o, out, d, 0, B, T, d, H, 1);
	return err;
}

int attn_bwd(float *dqkv, float *w, const float *dout_rows, int B, int T,
	     int d, int H)
{
	struct hk_attn a = { .B = B, .H = H, .Hkv = H, .Nq = T, .Nk = T,
			     .d = d / H, .causal = 1 };
	float *q, *k, *v, *o, *dq, *dk, *dv, *dout, *lse;
	int err;

	slots(w, B, T, d, &q, &k, &v, &o, &dq, &dk, &dv, &dout, &lse);
	pack(dout, dout_rows, d, 0, B, T, d, H, 0);
	err = hk_attn_bwd(&a, q, k, v, o, lse, dout, dq, dk, dv);
	if (err)
		return err;
	pack(dq, dqkv, 3 * d, 0, B, T, d, H, 1);
	pack(dk, dqkv, 3 * d, d, B, T, d, H, 1);
	pack(dv, dqkv, 3 * d, 2 * d, B, T, d, H, 1);
	return 0;
}

const char *attn_impl(void)
{
	return "hk_attn";
}
