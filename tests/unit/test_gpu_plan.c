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
 * and at least the floats the step's arrays need.  Then the libraries
 * (gpu_lib.c): where no driver, GPU, launch calls or cuBLAS are, the
 * open fails with -ENODEV naming the first missing and leaves nothing
 * open; with an argument WORD (test_train_device.sh runs it on the fake
 * driver) the message must contain WORD.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

/* gpu_lib_open: 0 on a real GPU, else -ENODEV saying what is missing */
static void check_lib(const char *want)
{
	struct gpu_lib l;
	int r = gpu_lib_open(&l);

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

	r = gpu_plan_make(&c, ch, 0, &P, why, sizeof(why));
	check_arena(&c, P.act_bytes);
	c.batch = 3, c.ctx = 17, c.layers = 2;	/* odd sizes */
	r = gpu_plan_make(&c, 64 << 10, 0, &P, why, sizeof(why));
	t_eq(r, 0, "odd sizes, 64 KiB chunks");
	check_arena(&c, P.act_bytes);
	check_lib(argc > 1 ? argv[1] : NULL);
	return t_done();
}
