// SPDX-License-Identifier: MIT
/*
 * test_attn_bwd — hk_attn_bwd: dq, dk, dv against fp64 and a naive fp32
 * softmax backward (attn_ref.h) on every ISA path this CPU has, at N in
 * {1, 63, 64, 65, 1000}, d in {32, 64, 80, 128, 256}, causal and not,
 * GQA, Nq != Nk with dead rows, bf16, a permuted block table (bit-identical
 * to dense); thread-count independence; a central finite-difference check
 * of the gradients through hk_attn_fwd.
 */
#include "unit/attn_ref.h"

static const struct acase cases[] = {
	/* B  H Hkv  Nq    Nk    d  causal dtype bs */
	{ 1, 2, 2, 1, 1, 32, 1, HK_F32, 0 },
	{ 1, 2, 2, 63, 63, 80, 1, HK_F32, 0 },
	{ 1, 1, 1, 64, 64, 256, 0, HK_F32, 0 },
	{ 1, 2, 2, 65, 65, 128, 1, HK_F32, 0 },
	{ 1, 2, 2, 65, 65, 32, 0, HK_F32, 0 },
	{ 1, 1, 1, 1000, 1000, 32, 1, HK_F32, 0 },
	{ 1, 4, 2, 65, 130, 64, 1, HK_F32, 0 },		/* GQA, Nq < Nk */
	{ 2, 3, 1, 40, 40, 48, 0, HK_F32, 0 },		/* MQA */
	{ 1, 2, 1, 100, 37, 80, 1, HK_F32, 0 },		/* dead rows */
	{ 1, 2, 2, 130, 130, 64, 1, HK_BF16, 0 },
	{ 2, 4, 2, 70, 150, 64, 1, HK_F32, 16 },	/* paged */
	{ 1, 2, 1, 50, 130, 33, 0, HK_BF16, 7 },
	{ 1, 2, 2, 1, 1, 32, 1, HK_BF16, 0 },		/* bf16: every shape */
	{ 1, 1, 1, 64, 64, 256, 0, HK_BF16, 0 },
	{ 1, 1, 1, 1000, 1000, 128, 1, HK_BF16, 0 },
	{ 1, 4, 2, 65, 130, 80, 1, HK_BF16, 0 },
	{ 1, 2, 1, 100, 37, 96, 1, HK_BF16, 0 },
	/* B * Hkv >= 8: one chunk, dq summed in each item's slot */
	{ 2, 8, 4, 150, 300, 64, 1, HK_BF16, 0 },
	{ 1, 8, 8, 70, 200, 33, 0, HK_F32, 0 },
};

struct grads {
	void *dq, *dk, *dv;
};

static void ours_bwd(const struct acase *c, const void *q, const void *k,
		     const void *v, const void *o, const float *lse,
		     const void *dout, struct grads *g, const int32_t *table,
		     int maxb)
{
	struct hk_attn a = ar_attn_paged(c, table, maxb);
	int r = hk_attn_bwd(&a, q, k, v, o, lse, dout, g->dq, g->dk, g->dv);

	if (r)
		t_fail_all("hk_attn_bwd: %d %s", r, hk_attn_strerror());
}

static void run_case(const struct acase *c, const char *isa)
{
	size_t nq = (size_t)c->B * c->H * c->Nq * c->d;
	size_t nk = (size_t)c->B * c->Hkv * c->Nk * c->d;
	size_t nr = (size_t)c->B * c->H * c->Nq;
	int bf = c->dtype == HK_BF16, esz = bf ? 2 : 4;
	float *q = ar_fill(nq, 1.5f, bf), *k = ar_fill(nk, 1.5f, bf);
	float *v = ar_fill(nk, 1.0f, bf), *dout = ar_fill(nq, 1.0f, bf);
	double *o64 = malloc(nq * 8 + 8), *l64 = malloc(nr * 8 + 8);
	double *g64[3] = { malloc(nq * 8 + 8), malloc(nk * 8 + 8),
			   malloc(nk * 8 + 8) };
	float *o32 = malloc(nq * 4 + 4), *l32 = malloc(nr * 4 + 4);
	float *g32[3] = { malloc(nq * 4 + 4), malloc(nk * 4 + 4),
			  malloc(nk * 4 + 4) };
	void *qx = ar_to(q, nq, c->dtype), *kx = ar_to(k, nk, c->dtype);
	void *vx = ar_to(v, nk, c->dtype), *dox = ar_to(dout, nq, c->dtype);
	void *ox = malloc(nq * esz + 4);
	float *lse = malloc(nr * 4 + 4);
	struct grads g = { malloc(nq * esz + 4), malloc(nk * esz + 4),
			   malloc(nk * esz + 4) };
	struct hk_attn a = ar_attn(c);
	const char *gn[3] = { "dq", "dk", "dv" };
	size_t gl[3] = { nq, nk, nk };
	void *gp[3] = { g.dq, g.dk, g.dv };
	char name[160];
	double gmax = 0, lmax = 0;

	ar_name(name, sizeof(name), c, isa);
	ar_ref64(c, q, k, v, dout, o64, l64, g64[0], g64[1], g64[2]);
	ar_naive(c, q, k, v, dout, o32, l32, g32[0], g32[1], g32[2]);
	if (hk_attn_fwd(&a, qx, kx, vx, ox, lse))
		t_fail_all("hk_attn_fwd: %s", hk_attn_strerror());
	ours_bwd(c, qx, kx, vx, ox, lse, dox, &g, NULL, 0);
	for (int t = 0; t < 3; t++) {
		double m = ar_maxabs(g64[t], gl[t]);

		gmax = m > gmax ? m : gmax;
	}
	/* P is recomputed as exp(s scale - lse) from the fp32 lse the
	 * forward stored, whose rounding (half an ulp of |lse|) is a
	 * relative error of P that the naive fp32, which forms both in one
	 * order, may cancel: at N = 1 its P is exactly 1 and the avx512
	 * path's (FMA: s scale exact) 1 + 2^-23, 1.19e-7 in dv */
	for (size_t r = 0; r < nr; r++)
		if (isfinite(l64[r]) && fabs(l64[r]) > lmax)
			lmax = fabs(l64[r]);
	gmax *= 1 + lmax;
	for (int t = 0; t < 3; t++) {
		float *x = ar_from(gp[t], gl[t], c->dtype);
		int nan = 0;

		ar_check(gn[t], name, x, g32[t], g64[t], gl[t], bf, gmax);
		for (size_t i = 0; i < gl[t]; i++)
			nan += isnan(x[i]);
		if (c->Nq > c->Nk && c->causal)
			t_ok(!nan, "%s: %s has no NaN with dead rows", name,
			     gn[t]);
		free(x);
	}
	if (c->bs) {
		int mb;
		int32_t *tab = ar_table(c, &mb);
		void *pk = ar_place(c, kx, esz, tab, mb);
		void *pv = ar_place(c, vx, esz, tab, mb);
		struct grads h = { malloc(nq * esz + 4), malloc(nk * esz + 4),
				   malloc(nk * esz + 4) };

		ours_bwd(c, qx, pk, pv, ox, lse, dox, &h, tab, mb);
		t_ok(!memcmp(h.dq, g.dq, nq * esz) &&
		     !memcmp(h.dk, g.dk, nk * esz) &&
		     !memcmp(h.dv, g.dv, nk * esz),
		     "%s: permuted block table (bs %d) bit-identical to dense",
		     name, c->bs);
		free(pk); free(pv); free(tab); free(h.dq); free(h.dk); free(h.dv);
	}
	free(q); free(k); free(v); free(dout); free(o64); free(l64);
	free(o32); free(l32); free(qx); free(kx); free(vx); free(dox);
	free(ox); free(lse); free(g.dq); free(g.dk); free(g.dv);
	for (int t = 0; t < 3; t++) {
		free(g64[t]);
		free(g32[t]);
	}
}

static void run_isa(const char *isa)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(&cases[i], isa);
}

/* 1 vs 3 threads, and a split key axis (B*Hkv = 1): the same bytes. */
static void threads_test(int dtype)
{
	struct acase c = { 1, 2, 1, 300, 300, 64, 1, dtype, 0 };
	struct hk_attn a = ar_attn(&c);
	size_t n = (size_t)c.H * c.Nq * c.d, nk = (size_t)c.Nk * c.d;
	int bf = dtype == HK_BF16, es = bf ? 2 : 4;
	float *qf = ar_fill(n, 1, bf), *kf = ar_fill(nk, 1, bf);
	float *vf = ar_fill(nk, 1, bf), *df = ar_fill(n, 1, bf);
	void *q = ar_to(qf, n, dtype), *k = ar_to(kf, nk, dtype);
	void *v = ar_to(vf, nk, dtype), *dout = ar_to(df, n, dtype);
	char *o = malloc(n * es), *r1 = malloc((n + 2 * nk) * es);
	char *r2 = malloc((n + 2 * nk) * es);
	float *lse = malloc(c.H * c.Nq * 4);
	int th = hk_threads();

	hk_attn_fwd(&a, q, k, v, o, lse);
	hk_set_threads(1);
	hk_attn_bwd(&a, q, k, v, o, lse, dout, r1, r1 + n * es,
		    r1 + (n + nk) * es);
	hk_set_threads(3);
	hk_attn_bwd(&a, q, k, v, o, lse, dout, r2, r2 + n * es,
		    r2 + (n + nk) * es);
	hk_set_threads(th);
	t_ok(!memcmp(r1, r2, (n + 2 * nk) * es),
	     "backward %s (%s): 1 and 3 threads give identical bytes",
	     bf ? "bf16" : "f32", hk_attn_isa_name(dtype));
	free(qf); free(kf); free(vf); free(df);
	free(q); free(k); free(v); free(dout); free(o); free(lse);
	free(r1); free(r2);
}

/* L = sum(o * w) in double, from hk_attn_fwd. */
static double loss(const struct hk_attn *a, const float *q, const float *k,
		   const float *v, const float *w, float *o)
{
	size_t n = (size_t)a->B * a->H * a->Nq * a->d;
	double s = 0;

	if (hk_attn_fwd(a, q, k, v, o, NULL))
		t_fail_all("hk_attn_fwd: %s", hk_attn_strerror());
	for (size_t i = 0; i < n; i++)
		s += (double)o[i] * w[i];
	return s;
}

/*
 * Central differences, h = 1e-2: truncation ~h^2 |f'''| ~ 1e-5 and fp32
 * noise ~ 1e-6 / h = 1e-4 at this size, so |fd - g| <= 1e-3 + 1e-2 |g|.
 */
static void fd_test(void)
{
	struct acase c = { 1, 2, 1, 5, 7, 32, 1, HK_F32, 0 };
	struct hk_attn a = ar_attn(&c);
	size_t nq = (size_t)c.H * c.Nq * c.d, nk = (size_t)c.Nk * c.d;
	float *x[3] = { ar_fill(nq, 1.5f, 0), ar_fill(nk, 1.5f, 0),
			ar_fill(nk, 1, 0) };
	float *w = ar_fill(nq, 1, 0), *o = malloc(nq * 4);
	float *lse = malloc(c.H * c.Nq * 4);
	float *gq = malloc(nq * 4), *gk = malloc(nk * 4), *gv = malloc(nk * 4);
	float *gr[3] = { gq, gk, gv };
	size_t len[3] = { nq, nk, nk };
	const char *nm[3] = { "dq", "dk", "dv" };
	const float h = 1e-2f;

	hk_attn_fwd(&a, x[0], x[1], x[2], o, lse);
	hk_attn_bwd(&a, x[0], x[1], x[2], o, lse, w, gq, gk, gv);
	for (int t = 0; t < 3; t++) {
		double worst = 0;
		int bad = 0;

		for (size_t i = 0; i < len[t]; i += 7) {
			float keep = x[t][i];
			double lp, lm, fd, err;

			x[t][i] = keep + h;
			lp = loss(&a, x[0], x[1], x[2], w, o);
			x[t][i] = keep - h;
			lm = loss(&a, x[0], x[1], x[2], w, o);
			x[t][i] = keep;
			fd = (lp - lm) / (2 * (double)h);
			err = fabs(fd - gr[t][i]);
			worst = err > worst ? err : worst;
			bad += err > 1e-3 + 1e-2 * fabs(fd);
		}
		t_ok(!bad, "finite differences agree with %s (worst %.2g)",
		     nm[t], worst);
	}
	for (int t = 0; t < 3; t++)
		free(x[t]);
	free(w); free(o); free(lse); free(gq); free(gk); free(gv);
}

static void bad_args(void)
{
	float x[64] = { 0 }, lse[2] = { 0 };
	struct hk_attn a = { .B = 1, .H = 2, .Nq = 1, .Nk = 1, .d = 32 };

	t_eq(hk_attn_bwd(&a, x, x, x, x, NULL, x, x, x, x), -EINVAL,
	     "NULL lse is refused");
	a.d = 300;
	t_eq(hk_attn_bwd(&a, x, x, x, x, lse, x, x, x, x), -EINVAL,
	     "d = 300 is refused");
	{	/* no keys: dq = 0; no queries: dk = dv = 0 */
		float dq[64], dk[64], dv[64], l2[2] = { -INFINITY, -INFINITY };
		int zero = 1;

		memset(dq, 0x5a, sizeof(dq));
		a.d = 32;
		a.Nk = 0;
		t_eq(hk_attn_bwd(&a, x, NULL, NULL, x, l2, x, dq, NULL, NULL),
		     0, "Nk = 0 runs");
		for (int i = 0; i < 64; i++)
			zero &= dq[i] == 0;
		t_ok(zero, "Nk = 0: dq = 0");
		a.Nk = 1;
		a.Nq = 0;
		memset(dk, 0x5a, sizeof(dk));
		memset(dv, 0x5a, sizeof(dv));
		t_eq(hk_attn_bwd(&a, NULL, x, x, NULL, NULL, NULL, NULL, dk, dv),
		     0, "Nq = 0 runs");
		zero = 1;
		for (int i = 0; i < 32; i++)
			zero &= dk[i] == 0 && dv[i] == 0;
		t_ok(zero, "Nq = 0: dk = dv = 0");
	}
}

int main(void)
{
	ar_each_isa(run_isa);
	threads_test(HK_F32);
	threads_test(HK_BF16);
	fd_test();
	bad_args();
	return t_done();
}
