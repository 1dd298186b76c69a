// SPDX-License-Identifier: MIT
/*
 * test_gpu_plan — hmm-train --device cuda's plan, checked without a GPU
 * (gpu_plan.c): the device tensors' sizes in whole chunks from the
 * model's own layout (gpt_block_floats), the least budget (one layer's
 * backward: embeddings' p and g, a layer's p, the shared layer gradient)
 * and everything's, how many layers' parameters a budget keeps resident
 * (one more per layer_p of budget, clipped to the layers), bad budgets
 * and chunks refused with a message naming the sizes; and the device
 * arena: every array 256-byte aligned, inside [base, base + bytes), none
 * overlapping, the count-only carve's size equal to the carved one's,
 * and at least the floats the step's arrays need.  The row-major
 * products on cuBLAS's column-major call (gpu_blas.c), through a
 * column-major reference that refuses what cuBLAS refuses (a leading
 * dimension short of the stored operand's rows), against a row-major
 * one, every transpose pair, padded leading dimensions, beta 0 and 1.
 * Then the libraries
 * (gpu_lib.c): where no driver, GPU, launch calls or cuBLAS are, the
 * open fails with -ENODEV naming the first missing and leaves nothing
 * open; with an argument WORD (test_train_device.sh runs it on the fake
 * driver) the message must contain WORD.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu_priv.h"
#include "t.h"

/* model.c's products: never called by the plan */
void gemm(int ta, int tb, int M, int N, int K, float alpha, const float *A,
	  int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
	abort();
}

static uint64_t up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

struct piece { uint64_t at, bytes; };

static int cmp(const void *a, const void *b)
{
	const struct piece *x = a, *y = b;

	return x->at < y->at ? -1 : x->at > y->at;
}

static void check_arena(const struct gpt_config *c, uint64_t act_bytes)
{
	uint64_t n = (uint64_t)c->batch * c->ctx, d = c->d, base = 1ull << 40;
	int nl = c->layers, np = 0, bad = 0;
	struct gpu_arena a = { 0 };
	struct piece *p;
	uint64_t need;

	a.acts = calloc(nl, sizeof(*a.acts));
	a.x = calloc(nl + 1, sizeof(*a.x));
	p = calloc(12 * nl + nl + 1 + 13, sizeof(*p));
	if (!a.acts || !a.x || !p) {
		t_ok(0, "memory");
		return;
	}
	gpu_arena_carve(c, base, &a);
	t_eq(a.bytes, act_bytes, "carved arena %llu bytes = the plan's count",
	     (unsigned long long)a.bytes);
	for (int l = 0; l < nl; l++) {
		CUdeviceptr *s = &a.acts[l].h1;

		for (int k = 0; k < 12; k++)
			p[np++].at = s[k];
	}
	for (int l = 0; l <= nl; l++)
		p[np++].at = a.x[l];
	{
		CUdeviceptr *s = &a.dbig;

		for (int k = 0; k < 13; k++)
			p[np++].at = s[k];
	}
	qsort(p, np, sizeof(*p), cmp);
	for (int i = 0; i < np; i++) {
		uint64_t end = i + 1 < np ? p[i + 1].at : base + a.bytes;

		bad += p[i].at % 256 != 0 || end <= p[i].at ||
		       p[i].at < base || end > base + a.bytes;
	}
	t_eq(bad, 0, "%d arrays: aligned, in the arena, distinct", np);
	/* the step's floats: per layer 23 nd + 4 n + attention's lse,
	 * the inputs (layers + 1) nd, scratch 11 nd + 3 n + n V + B H T */
	need = 4 * ((uint64_t)nl * (23 * n * d + 4 * n +
				    (uint64_t)c->batch * c->heads * c->ctx) +
		    (nl + 1) * n * d + 11 * n * d + 3 * n + n * c->vocab +
		    (uint64_t)c->batch * c->heads * c->ctx) + 2 * 4 * n;
	t_ok(a.bytes >= need, "arena %llu bytes >= the %llu its arrays need",
	     (unsigned long long)a.bytes, (unsigned long long)need);
	free(a.acts);
	free(a.x);
	free(p);
}

/* cublasSgemm_v2's contract on host memory: column-major, op(A) m x k,
 * op(B) k x n, C m x n; 7 (CUBLAS_STATUS_INVALID_VALUE) on a bad shape */
static cublasStatus_t cm_sgemm(cublasHandle_t h, cublasOperation_t ta,
			       cublasOperation_t tb, int m, int n, int k,
			       const float *alpha, const float *A, int lda,
			       const float *B, int ldb, const float *beta,
			       float *C, int ldc)
{
	if (m < 0 || n < 0 || k < 0 || lda < (ta ? k : m) || lda < 1 ||
	    ldb < (tb ? n : k) || ldb < 1 || ldc < m || ldc < 1)
		return CUBLAS_STATUS_INVALID_VALUE;
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++) {
			double s = 0;

			for (int p = 0; p < k; p++)
				s += (double)(ta ? A[p + (size_t)i * lda] :
					      A[i + (size_t)p * lda]) *
				     (tb ? B[j + (size_t)p * ldb] :
					   B[p + (size_t)j * ldb]);
			C[i + (size_t)j * ldc] = *alpha * s +
				(*beta ? *beta * C[i + (size_t)j * ldc] : 0);
		}
	return 0;
}

static void check_gemm(void)
{
	static const int dims[][3] = { { 5, 7, 3 }, { 1, 4, 9 }, { 6, 1, 2 },
				       { 8, 12, 16 } };
	struct hmm_cublas b = { .Sgemm = cm_sgemm };
	float A[400], B[400], C[400], R[400];
	uint64_t seed = 7;
	int bad = 0, calls = 0;

	for (size_t di = 0; di < sizeof(dims) / sizeof(dims[0]); di++)
	for (int ta = 0; ta < 2; ta++)
	for (int tb = 0; tb < 2; tb++)
	for (int pad = 0; pad < 3; pad += 2)
	for (int beta = 0; beta < 2; beta++) {
		int M = dims[di][0], N = dims[di][1], K = dims[di][2];
		/* row-major: A is M x K (K x M if ta), B K x N (N x K) */
		int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad;
		int ldc = N + pad, r;

		for (int i = 0; i < 400; i++) {
			A[i] = (float)(t_rand(&seed) % 17) - 8;
			B[i] = (float)(t_rand(&seed) % 13) - 6;
			C[i] = R[i] = (float)(t_rand(&seed) % 5);
		}
		for (int i = 0; i < M; i++)
			for (int j = 0; j < N; j++) {
				double s = 0;

				for (int p = 0; p < K; p++)
					s += (double)(ta ? A[p * lda + i] :
						      A[i * lda + p]) *
					     (tb ? B[j * ldb + p] :
						   B[p * ldb + j]);
				R[i * ldc + j] = 0.5f * s + beta * R[i * ldc + j];
			}
		r = gpu_gemm(&b, NULL, ta, tb, M, N, K, 0.5f,
			     (CUdeviceptr)(uintptr_t)A, lda,
			     (CUdeviceptr)(uintptr_t)B, ldb, (float)beta,
			     (CUdeviceptr)(uintptr_t)C, ldc);
		calls++;
		if (r) {
			t_diag("M %d N %d K %d ta %d tb %d: %s", M, N, K, ta,
			       tb, gpu_error());
			bad++;
			continue;
		}
		for (int i = 0; i < 400; i++)
			bad += C[i] != R[i];	/* small integers: exact */
	}
	t_eq(bad, 0, "%d row-major products through the column-major call: "
	     "accepted, and equal to the row-major reference", calls);
	{
		float one = 1;
		int r = gpu_gemm(&b, NULL, 0, 0, 4, 4, 4, one,
				 (CUdeviceptr)(uintptr_t)A, 3,
				 (CUdeviceptr)(uintptr_t)B, 4, 0,
				 (CUdeviceptr)(uintptr_t)C, 4);

		t_ok(r == -EIO && strstr(gpu_error(), "status 7"),
		     "a leading dimension short of a row: -EIO naming the "
		     "status (%s)", gpu_error());
	}
}

/* gpu_lib_open: 0 on a real GPU, else -ENODEV saying what is missing */
static void check_lib(const char *want)
{
	struct gpu_lib l;
	int r;

	/* a real GPU: the driver's and cuBLAS's own allocations would read
	 * as leaks under ASan; tests/gpu/run.sh runs the loader there */
	if (!want && !access("/dev/nvidiactl", F_OK)) {
		t_ok(1, "# SKIP a real GPU is here: tests/gpu/run.sh");
		return;
	}
	r = gpu_lib_open(&l);
	if (!r) {
		t_ok(l.handle && l.k.attn_fwd, "a GPU: cuBLAS and the kernels "
		     "loaded");
		gpu_lib_close(&l);
		return;
	}
	t_eq(r, -ENODEV, "no GPU here: gpu_lib_open -ENODEV (%s)",
	     gpu_error());
	t_ok(!l.cuda && !l.cublas && !l.ctx, "... and nothing left open");
	if (want)
		t_ok(strstr(gpu_error(), want) != NULL, "... naming %s", want);
	else
		t_ok(gpu_error()[0] != 0, "... with a message");
}

int main(int argc, char **argv)
{
	struct gpt_config c = { 256, 32, 64, 2, 8, 4 };	/* preset tiny */
	uint64_t ch = 2u << 20, lp, ep, min, all;
	struct gpu_plan P;
	size_t f[9];
	char why[512];
	int r;

	gpt_block_floats(&c, f);
	lp = up(f[0] * 4, ch);
	ep = up(f[c.layers] * 4, ch);
	min = 2 * ep + 2 * lp;
	all = min + (c.layers - 1) * lp;

	r = gpu_plan_make(&c, ch, 0, &P, why, sizeof(why));
	t_eq(r, 0, "budget 0: all");
	t_eq(P.layer_p, lp, "a layer's p: %llu bytes in chunks",
	     (unsigned long long)P.layer_p);
	t_eq(P.embed_p, ep, "the embeddings' p");
	t_eq(P.min_bytes, min, "least budget %llu", (unsigned long long)min);
	t_eq(P.all_bytes, all, "all resident %llu", (unsigned long long)all);
	t_eq(P.budget, all, "budget 0 is all");
	t_eq(P.resident_layers, c.layers, "... every layer resident");

	r = gpu_plan_make(&c, ch, min, &P, why, sizeof(why));
	t_ok(!r && P.resident_layers == 1, "the least budget: one layer "
	     "resident (%d)", P.resident_layers);
	r = gpu_plan_make(&c, ch, min + 3 * lp + lp / 2, &P, why, sizeof(why));
	t_ok(!r && P.resident_layers == 4, "least + 3.5 layers: 4 resident "
	     "(%d)", P.resident_layers);
	t_eq(P.budget, min + 3 * lp + lp / 2 - (lp / 2) % ch,
	     "... the budget in whole chunks");
	r = gpu_plan_make(&c, ch, 1ull << 40, &P, why, sizeof(why));
	t_ok(!r && P.budget == all && P.resident_layers == c.layers,
	     "a budget past everything is clipped to it");

	why[0] = 0;
	r = gpu_plan_make(&c, ch, min - 1, &P, why, sizeof(why));
	t_eq(r, -EINVAL, "one byte under the least: -EINVAL");
	{
		char want[64];

		snprintf(want, sizeof(want), "%llu", (unsigned long long)min);
		t_ok(strstr(why, "too small") && strstr(why, want),
		     "... saying so with the least (%s)", why);
	}
	r = gpu_plan_make(&c, 1000, 0, &P, why, sizeof(why));
	t_eq(r, -EINVAL, "a chunk not a multiple of 4096: -EINVAL");

	/* shapes the CUDA kernels cannot take, refused naming the field */
	{
		static const struct {
			struct gpt_config c;
			const char *what;
		} bad[] = {
			{ { 256, 32, 1024, 2, 2, 4 }, "per head" }, /* 512 */
			{ { 256, 32, 96, 5, 2, 4 }, "heads dividing" },
			{ { 256, 32, 64, 2, 2, 40000 }, "65535" },
			{ { 256, 1 << 20, 64, 2, 2, 16 }, "2^31" },
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			why[0] = 0;
			r = gpu_plan_make(&bad[i].c, ch, 0, &P, why,
					  sizeof(why));
			t_ok(r == -EINVAL && strstr(why, bad[i].what),
			     "d %d heads %d batch %d ctx %d: -EINVAL (%s)",
			     bad[i].c.d, bad[i].c.heads, bad[i].c.batch,
			     bad[i].c.ctx, why);
		}
		struct gpt_config w = c;

		w.d = 512, w.heads = 2;	/* 256 a head: the widest taken */
		t_eq(gpu_plan_make(&w, ch, 0, &P, why, sizeof(why)), 0,
		     "256 per head is taken");
	}

	r = gpu_plan_make(&c, ch, 0, &P, why, sizeof(why));
	check_arena(&c, P.act_bytes);
	c.batch = 3, c.ctx = 17, c.layers = 2;	/* odd sizes */
	r = gpu_plan_make(&c, 64 << 10, 0, &P, why, sizeof(why));
	t_eq(r, 0, "odd sizes, 64 KiB chunks");
	check_arena(&c, P.act_bytes);
	check_gemm();
	check_lib(argc > 1 ? argv[1] : NULL);
	return t_done();
}
