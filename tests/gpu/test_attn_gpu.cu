// SPDX-License-Identifier: MIT
/*
 * test_attn_gpu — hk_attn_fwd_cuda / hk_attn_bwd_cuda against the CPU
 * kernels (which test_attn_fwd / test_attn_bwd hold to an fp64 reference)
 * on the same inputs: fp32 (SIMT path) and bf16 (mma.sync forward) at
 * several d including odd ones, causal with Nq != Nk and dead rows, GQA,
 * a permuted block table (bit-identical to dense on the GPU too).
 * Exits 77 without a CUDA device.
 *
 * Tolerances, max |gpu - cpu| over a tensor, relative to max |cpu|
 * (attn_check.h's attn_close, which test_kern_emu shares): fp32 1e-4
 * (summation order and __expf); bf16 2e-2 (the tensor-core forward
 * rounds P to bf16 before P V, as FlashAttention-2 does, and the outputs
 * are bf16, 2^-8 relative each).
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk_attn.h"
#include "t.h"
#include "attn_check.h"

static const struct attn_case cases[] = {
	{ 1, 2, 2, 65, 65, 64, 1, HK_F32, 0 },
	{ 1, 4, 2, 100, 37, 80, 1, HK_F32, 0 },
	{ 2, 2, 2, 130, 200, 33, 0, HK_F32, 0 },
	{ 1, 2, 2, 64, 64, 256, 0, HK_F32, 0 },
	{ 1, 4, 2, 70, 150, 64, 1, HK_F32, 16 },
	{ 1, 2, 2, 130, 130, 64, 1, HK_BF16, 0 },
	{ 1, 2, 1, 65, 200, 128, 0, HK_BF16, 0 },
	{ 1, 2, 2, 100, 37, 80, 1, HK_BF16, 0 },
	{ 2, 2, 2, 33, 33, 32, 0, HK_BF16, 0 },
	{ 1, 2, 2, 300, 300, 96, 1, HK_BF16, 0 },
	{ 1, 4, 2, 70, 150, 32, 1, HK_BF16, 16 },
	{ 1, 2, 2, 65, 65, 33, 1, HK_BF16, 0 },
	{ 1, 8, 8, 1000, 1000, 128, 1, HK_BF16, 0 },
};

static uint64_t seed = 88172645463325252ull;

static float rnd(void)
{
	seed ^= seed << 13;
	seed ^= seed >> 7;
	seed ^= seed << 17;
	return (float)((seed >> 40) / (double)(1 << 23) - 1.0);
}

static uint16_t to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

/* Host buffer of n random values in dtype. */
static void *host_rand(size_t n, int dtype, float amp)
{
	size_t esz = dtype == HK_F32 ? 4 : 2;
	void *p = malloc(n * esz + 4);

	for (size_t i = 0; i < n; i++) {
		float x = amp * rnd();

		if (dtype == HK_F32)
			((float *)p)[i] = x;
		else
			((uint16_t *)p)[i] = to_bf16(x);
	}
	return p;
}

static void *dev_copy(const void *h, size_t bytes)
{
	void *d = NULL;

	if (cudaMalloc(&d, bytes + 4) != cudaSuccess)
		t_fail_all("cudaMalloc of %s failed", "a test buffer");
	cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice);
	return d;
}

static void *dev_back(const void *d, size_t bytes)
{
	void *h = malloc(bytes + 4);

	cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost);
	return h;
}

static void run_case(const struct attn_case *c)
{
	struct hk_attn a = {};
	size_t esz = c->dtype == HK_F32 ? 4 : 2;
	size_t nq = (size_t)c->B * c->H * c->Nq * c->d;
	size_t nk = (size_t)c->B * c->Hkv * c->Nk * c->d;
	size_t nr = (size_t)c->B * c->H * c->Nq;
	void *q = host_rand(nq, c->dtype, 1.5f), *k = host_rand(nk, c->dtype, 1.5f);
	void *v = host_rand(nk, c->dtype, 1), *dout = host_rand(nq, c->dtype, 1);
	void *o = malloc(nq * esz + 4), *dq = malloc(nq * esz + 4);
	void *dk = malloc(nk * esz + 4), *dv = malloc(nk * esz + 4);
	float *lse = (float *)malloc(nr * 4 + 4);
	void *Q = dev_copy(q, nq * esz), *K = dev_copy(k, nk * esz);
	void *V = dev_copy(v, nk * esz), *DO = dev_copy(dout, nq * esz);
	void *O, *DQ, *DK, *DV, *L;
	char name[160];
	double tol = c->dtype == HK_F32 ? 1e-4 : 2e-2;

	snprintf(name, sizeof(name), "B%d H%d/%d Nq%d Nk%d d%d%s%s%s", c->B,
		 c->H, c->Hkv, c->Nq, c->Nk, c->d, c->causal ? " causal" : "",
		 c->dtype == HK_BF16 ? " bf16" : " f32", c->bs ? " paged" : "");
	a.B = c->B; a.H = c->H; a.Hkv = c->Hkv; a.Nq = c->Nq; a.Nk = c->Nk;
	a.d = c->d; a.causal = c->causal; a.dtype = c->dtype;
	cudaMalloc(&O, nq * esz + 4);
	cudaMalloc(&DQ, nq * esz + 4);
	cudaMalloc(&DK, nk * esz + 4);
	cudaMalloc(&DV, nk * esz + 4);
	cudaMalloc(&L, nr * 4 + 4);
	if (hk_attn_fwd(&a, q, k, v, o, lse) ||
	    hk_attn_bwd(&a, q, k, v, o, lse, dout, dq, dk, dv))
		t_fail_all("CPU attention: %s", hk_attn_strerror());
	for (int pass = 0; pass < 2; pass++) {
		char nm[200];
		int mma_d = c->d == 32 || c->d == 64 || c->d == 80 ||
			    c->d == 96 || c->d == 128;

		if (pass == 1) {	/* bf16 again on the SIMT kernels */
			if (c->dtype != HK_BF16 || !mma_d)
				break;
			setenv("HK_ATTN_SIMT", "1", 1);
		}
		snprintf(nm, sizeof(nm), "%s%s", name,
			 pass ? " (HK_ATTN_SIMT)" : "");
		t_eq(hk_attn_fwd_cuda(&a, Q, K, V, O, (float *)L, NULL), 0,
		     "%s: forward launches", nm);
		t_eq(hk_attn_bwd_cuda(&a, Q, K, V, O, (float *)L, DO, DQ, DK,
				      DV, NULL), 0, "%s: backward launches", nm);
		t_eq(cudaDeviceSynchronize(), cudaSuccess, "%s: kernels ran", nm);
		void *go = dev_back(O, nq * esz), *gq = dev_back(DQ, nq * esz);
		void *gk = dev_back(DK, nk * esz), *gv = dev_back(DV, nk * esz);
		float *gl = (float *)dev_back(L, nr * 4);

		attn_close(nm, "o", go, o, nq, c->dtype, tol);
		attn_lse_close(nm, gl, lse, nr, c->dtype);
		attn_close(nm, "dq", gq, dq, nq, c->dtype, tol);
		attn_close(nm, "dk", gk, dk, nk, c->dtype, tol);
		attn_close(nm, "dv", gv, dv, nk, c->dtype, tol);
		if (c->bs) {
			int nb = (c->Nk + c->bs - 1) / c->bs, tot = c->B * nb + 1;
			int32_t *tab = (int32_t *)malloc(tot * 4);
			void *pk, *pv, *PK, *PV, *TAB, *X[4], *h[4];
			size_t len[4] = { nq, nq, nk, nk };
			int same = 1;

			for (int i = 0; i < tot; i++)
				tab[i] = (i * 7 + 3) % tot;	/* a permutation */
			pk = attn_page(c, k, esz, tab, nb);
			pv = attn_page(c, v, esz, tab, nb);
			PK = dev_copy(pk, (size_t)tot * c->Hkv * c->bs * c->d * esz);
			PV = dev_copy(pv, (size_t)tot * c->Hkv * c->bs * c->d * esz);
			TAB = dev_copy(tab, tot * 4);
			for (int i = 0; i < 4; i++)
				cudaMalloc(&X[i], len[i] * esz + 4);
			a.block_table = (const int32_t *)TAB;
			a.block_size = c->bs;
			a.max_blocks = nb;
			hk_attn_fwd_cuda(&a, Q, PK, PV, X[0], NULL, NULL);
			hk_attn_bwd_cuda(&a, Q, PK, PV, O, (float *)L, DO, X[1],
					 X[2], X[3], NULL);
			cudaDeviceSynchronize();
			a.block_table = NULL;
			a.block_size = a.max_blocks = 0;
			for (int i = 0; i < 4; i++) {
				const void *ref[4] = { go, gq, gk, gv };

				h[i] = dev_back(X[i], len[i] * esz);
				same &= !memcmp(h[i], ref[i], len[i] * esz);
				free(h[i]);
				cudaFree(X[i]);
			}
			t_ok(same, "%s: permuted block table gives bit-identical "
			     "o, dq, dk, dv on the GPU", nm);
			free(tab); free(pk); free(pv);
			cudaFree(PK); cudaFree(PV); cudaFree(TAB);
		}
		unsetenv("HK_ATTN_SIMT");
		free(go); free(gq); free(gk); free(gv); free(gl);
	}
	free(q); free(k); free(v); free(dout); free(o); free(dq); free(dk);
	free(dv); free(lse);
	cudaFree(Q); cudaFree(K); cudaFree(V); cudaFree(DO); cudaFree(O);
	cudaFree(DQ); cudaFree(DK); cudaFree(DV); cudaFree(L);
}

int main(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0)
		t_skip_all("no CUDA device");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(&cases[i]);
	{
		struct hk_attn a = {};

		a.B = 1; a.H = 2; a.Nq = 4; a.Nk = 4; a.d = 300;
		t_eq(hk_attn_fwd_cuda(&a, NULL, NULL, NULL, NULL, NULL, NULL),
		     -EINVAL, "d = 300 is refused on the GPU path too");
	}
	return t_done();
}
