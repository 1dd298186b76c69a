// SPDX-License-Identifier: MIT
/*
 * attn.c — causal self-attention for one GPT block (attn.h): packs qkv
 * into [B][H][T][hd] for the kernel, runs it, unpacks.  The fallback
 * kernel (no hk_attn.h yet) is exact softmax attention per (batch, head),
 * parallel over those pairs, the backward recomputing probabilities from
 * the saved log-sum-exp, as FlashAttention does.
 *
 * Work buffer layout, each [B][H][T][hd] unless said:
 *   q k v o | dq dk dv do | lse [B][H][T]
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "attn.h"
#include "hk.h"
#ifndef HMM_TRAIN_NAIVE		/* -DHMM_TRAIN_NAIVE: the reference below */
#define HAVE_HK_ATTN 1
#endif
#ifdef HAVE_HK_ATTN
#include "hk_attn.h"
#endif

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

#ifndef HAVE_HK_ATTN
struct naive_job {
	float *q, *k, *v, *o, *dq, *dk, *dv, *dout, *lse;
	int T, hd;
};

static void naive_fwd_part(void *arg, int bh, int n)
{
	struct naive_job *j = arg;
	int T = j->T, hd = j->hd;
	size_t base = (size_t)bh * T * hd;
	float scale = 1.0f / sqrtf(hd), s[T];

	for (int i = 0; i < T; i++) {
		const float *qi = j->q + base + (size_t)i * hd;
		float *oi = j->o + base + (size_t)i * hd, m = -INFINITY, l = 0;

		for (int t = 0; t <= i; t++) {
			const float *kt = j->k + base + (size_t)t * hd;
			float acc = 0;

			for (int c = 0; c < hd; c++)
				acc += qi[c] * kt[c];
			s[t] = acc * scale;
			m = s[t] > m ? s[t] : m;
		}
		memset(oi, 0, hd * sizeof(float));
		for (int t = 0; t <= i; t++) {
			const float *vt = j->v + base + (size_t)t * hd;
			float p = expf(s[t] - m);

			l += p;
			for (int c = 0; c < hd; c++)
				oi[c] += p * vt[c];
		}
		for (int c = 0; c < hd; c++)
			oi[c] /= l;
		j->lse[(size_t)bh * T + i] = m + logf(l);
	}
}

static void naive_bwd_part(void *arg, int bh, int n)
{
	struct naive_job *j = arg;
	int T = j->T, hd = j->hd;
	size_t base = (size_t)bh * T * hd;
	float scale = 1.0f / sqrtf(hd);

	memset(j->dq + base, 0, sizeof(float) * T * hd);
	memset(j->dk + base, 0, sizeof(float) * T * hd);
	memset(j->dv + base, 0, sizeof(float) * T * hd);
	for (int i = 0; i < T; i++) {
		const float *qi = j->q + base + (size_t)i * hd;
		const float *oi = j->o + base + (size_t)i * hd;
		const float *doi = j->dout + base + (size_t)i * hd;
		float *dqi = j->dq + base + (size_t)i * hd;
		float lse = j->lse[(size_t)bh * T + i], D = 0;

		for (int c = 0; c < hd; c++)
			D += doi[c] * oi[c];
		for (int t = 0; t <= i; t++) {
			const float *kt = j->k + base + (size_t)t * hd;
			const float *vt = j->v + base + (size_t)t * hd;
			float *dkt = j->dk + base + (size_t)t * hd;
			float *dvt = j->dv + base + (size_t)t * hd;
			float sc = 0, dp = 0, p, ds;

			for (int c = 0; c < hd; c++) {
				sc += qi[c] * kt[c];
				dp += doi[c] * vt[c];
			}
			p = expf(sc * scale - lse);
			ds = p * (dp - D) * scale;
			for (int c = 0; c < hd; c++) {
				dvt[c] += p * doi[c];
				dqi[c] += ds * kt[c];
				dkt[c] += ds * qi[c];
			}
		}
	}
}
#endif

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
	float *q, *k, *v, *o, *dq, *dk, *dv, *dout, *lse;
	int err = 0;

	if (d % H)
		return -EINVAL;
	slots(w, B, T, d, &q, &k, &v, &o, &dq, &dk, &dv, &dout, &lse);
	pack(q, qkv, 3 * d, 0, B, T, d, H, 0);
	pack(k, qkv, 3 * d, d, B, T, d, H, 0);
	pack(v, qkv, 3 * d, 2 * d, B, T, d, H, 0);
#ifdef HAVE_HK_ATTN
	struct hk_attn a = { .B = B, .H = H, .Hkv = H, .Nq = T, .Nk = T,
			     .d = d / H, .causal = 1 };

	err = hk_attn_fwd(&a, q, k, v, o, lse);
#else
	struct naive_job j = { q, k, v, o, dq, dk, dv, dout, lse, T, d / H };

	hk_parallel(B * H, naive_fwd_part, &j);
#endif
	if (!err)
		pack(o, out, d, 0, B, T, d, H, 1);
	return err;
}

int attn_bwd(float *dqkv, float *w, const float *dout_rows, int B, int T,
	     int d, int H)
{
	float *q, *k, *v, *o, *dq, *dk, *dv, *dout, *lse;
	int err = 0;

	slots(w, B, T, d, &q, &k, &v, &o, &dq, &dk, &dv, &dout, &lse);
	pack(dout, dout_rows, d, 0, B, T, d, H, 0);
#ifdef HAVE_HK_ATTN
	struct hk_attn a = { .B = B, .H = H, .Hkv = H, .Nq = T, .Nk = T,
			     .d = d / H, .causal = 1 };

	err = hk_attn_bwd(&a, q, k, v, o, lse, dout, dq, dk, dv);
#else
	struct naive_job j = { q, k, v, o, dq, dk, dv, dout, lse, T, d / H };

	hk_parallel(B * H, naive_bwd_part, &j);
#endif
	if (err)
		return err;
	pack(dq, dqkv, 3 * d, 0, B, T, d, H, 1);
	pack(dk, dqkv, 3 * d, d, B, T, d, H, 1);
	pack(dv, dqkv, 3 * d, 2 * d, B, T, d, H, 1);
	return 0;
}

const char *attn_impl(void)
{
#ifdef HAVE_HK_ATTN
	return "hk_attn";
#else
	return "naive";
#endif
}
