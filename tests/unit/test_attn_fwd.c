// SPDX-License-Identifier: MIT
/*
 * test_attn_fwd — hk_attn_fwd against fp64 and naive fp32 (attn_ref.h) on
 * every ISA path this CPU has: N in {1, 63, 64, 65, 1000}, d in {32, 33,
 * 64, 80, 128, 256}, causal and not, GQA, Nq != Nk (bottom-right causal,
 * dead rows), bf16, a permuted block table (bit-identical to dense), thread
 * count independence, bad arguments, and the bf16 conversions of each path
 * bit for bit.
 */
#include <sys/syscall.h>
#include <unistd.h>

#include "unit/attn_ref.h"

static const struct acase cases[] = {
	/* B  H Hkv  Nq    Nk    d  causal dtype bs */
	{ 1, 2, 2, 1, 1, 32, 0, HK_F32, 0 },
	{ 1, 2, 2, 1, 1, 64, 1, HK_F32, 0 },
	{ 2, 2, 2, 63, 63, 80, 1, HK_F32, 0 },
	{ 1, 2, 2, 64, 64, 256, 0, HK_F32, 0 },
	{ 1, 3, 3, 65, 65, 128, 1, HK_F32, 0 },
	{ 1, 2, 2, 65, 65, 33, 0, HK_F32, 0 },
	{ 1, 1, 1, 1000, 1000, 64, 1, HK_F32, 0 },
	{ 1, 1, 1, 1000, 1000, 32, 0, HK_F32, 0 },
	{ 1, 4, 2, 65, 65, 64, 1, HK_F32, 0 },		/* GQA */
	{ 2, 6, 1, 40, 40, 32, 0, HK_F32, 0 },		/* MQA */
	{ 1, 2, 2, 37, 100, 64, 1, HK_F32, 0 },		/* Nq < Nk */
	{ 1, 2, 1, 100, 37, 80, 1, HK_F32, 0 },		/* dead rows */
	{ 1, 2, 2, 130, 130, 64, 1, HK_BF16, 0 },
	{ 1, 2, 2, 65, 200, 128, 0, HK_BF16, 0 },
	{ 2, 4, 2, 70, 150, 64, 1, HK_F32, 16 },	/* paged */
	{ 1, 2, 2, 65, 129, 80, 0, HK_F32, 5 },
	{ 1, 2, 1, 50, 300, 32, 1, HK_BF16, 64 },
	{ 1, 2, 2, 1, 1, 32, 0, HK_BF16, 0 },		/* bf16: every shape */
	{ 1, 2, 2, 64, 64, 256, 0, HK_BF16, 0 },
	{ 1, 2, 2, 65, 65, 33, 1, HK_BF16, 0 },
	{ 1, 1, 1, 1000, 1000, 64, 1, HK_BF16, 0 },
	{ 1, 4, 2, 65, 65, 80, 1, HK_BF16, 0 },
	{ 1, 2, 1, 100, 37, 96, 1, HK_BF16, 0 },	/* dead rows */
};

/* o, lse of one run of ours; fails the test on an error return. */
static void ours(const struct acase *c, const void *q, const void *k,
		 const void *v, void *o, float *lse, const int32_t *table,
		 int maxb)
{
	struct hk_attn a = ar_attn_paged(c, table, maxb);
	int r = hk_attn_fwd(&a, q, k, v, o, lse);

	if (r)
		t_fail_all("hk_attn_fwd: %d %s", r, hk_attn_strerror());
}

static void check_dead_rows(const struct acase *c, const float *o,
			    const float *lse, const char *name)
{
	int dead = 0, bad = 0;

	for (int bh = 0; bh < c->B * c->H; bh++)
		for (int i = 0; i < c->Nq; i++) {
			size_t row = (size_t)bh * c->Nq + i;

			if (ar_vis(c, i))
				continue;
			dead++;
			bad += !(lse[row] == -INFINITY);
			for (int x = 0; x < c->d; x++)
				bad += o[row * c->d + x] != 0;
		}
	if (dead)
		t_ok(!bad, "%s: %d dead rows give o = 0, lse = -inf", name,
		     dead);
}

static void run_case(const struct acase *c, const char *isa)
{
	size_t nq = (size_t)c->B * c->H * c->Nq, nk = (size_t)c->B * c->Hkv * c->Nk;
	int bf = c->dtype == HK_BF16, esz = bf ? 2 : 4;
	float *q = ar_fill(nq * c->d, 1.5f, bf), *k = ar_fill(nk * c->d, 1.5f, bf);
	float *v = ar_fill(nk * c->d, 1.0f, bf);
	double *o64 = malloc(nq * c->d * 8 + 8), *l64 = malloc(nq * 8 + 8);
	float *o32 = malloc(nq * c->d * 4 + 4), *l32 = malloc(nq * 4 + 4);
	float *lse = malloc(nq * 4 + 4), *of;
	void *qx = ar_to(q, nq * c->d, c->dtype), *kx = ar_to(k, nk * c->d, c->dtype);
	void *vx = ar_to(v, nk * c->d, c->dtype), *ox = malloc(nq * c->d * esz + 4);
	char name[160];

	ar_name(name, sizeof(name), c, isa);
	ar_ref64(c, q, k, v, NULL, o64, l64, NULL, NULL, NULL);
	ar_naive(c, q, k, v, NULL, o32, l32, NULL, NULL, NULL);
	ours(c, qx, kx, vx, ox, lse, NULL, 0);
	of = ar_from(ox, nq * c->d, c->dtype);
	ar_check("o", name, of, o32, o64, nq * c->d, bf, 0);
	{	/* lse: compare only live rows (dead ones checked below) */
		float *lo = malloc(nq * 4 + 4), *ln = malloc(nq * 4 + 4);
		double *lr = malloc(nq * 8 + 8);

		for (size_t i = 0; i < nq; i++) {
			int live = isfinite(l64[i]);

			lo[i] = live ? lse[i] : 0;
			ln[i] = live ? l32[i] : 0;
			lr[i] = live ? l64[i] : 0;
		}
		ar_check("lse", name, lo, ln, lr, nq, 0,
			 ar_lse_floor(c, q, k));
		free(lo);
		free(ln);
		free(lr);
	}
	check_dead_rows(c, of, lse, name);
	if (c->bs) {	/* the same K/V through a permuted block table */
		int mb;
		int32_t *tab = ar_table(c, &mb);
		void *pk = ar_place(c, kx, esz, tab, mb);
		void *pv = ar_place(c, vx, esz, tab, mb);
		void *o2 = malloc(nq * c->d * esz + 4);
		float *lse2 = malloc(nq * 4 + 4);

		ours(c, qx, pk, pv, o2, lse2, tab, mb);
		t_ok(!memcmp(o2, ox, nq * c->d * esz) &&
		     !memcmp(lse2, lse, nq * 4),
		     "%s: permuted block table (bs %d) bit-identical to dense",
		     name, c->bs);
		free(pk);
		free(pv);
		free(tab);
		free(o2);
		free(lse2);
	}
	free(q); free(k); free(v); free(o64); free(l64); free(o32); free(l32);
	free(lse); free(of); free(qx); free(kx); free(vx); free(ox);
}

/*
 * The bf16 conversions of the path, bit for bit: with q = k = 0 both keys
 * get p = 1, so o = (v0 + v1) / 2 exactly in fp32, and its bf16 is known.
 * The pairs make ties that round down and up (nearest even), infinities,
 * a NaN from inf - inf and a NaN input with a payload (both 0x7fc0), the
 * smallest normals (not subnormals: the bf16 products of amx and
 * avx512bf16 read those as zero); d = 43 runs the vector loops and their
 * tails.
 */
static void bf16_round_test(const char *isa)
{
	enum { D = 43 };
	static const uint16_t pairs[][2] = {
		{ 0x3f80, 0x3f81 },	/* 1 + 2^-8: tie, down to 0x3f80 */
		{ 0x3f81, 0x3f82 },	/* 1 + 3 2^-8: tie, up to 0x3f82 */
		{ 0xbf81, 0xbf82 },	/* negative tie, up to 0xbf82 */
		{ 0x7f80, 0x3f80 },	/* inf */
		{ 0xff80, 0xbf80 },	/* -inf */
		{ 0x7f80, 0xff80 },	/* inf - inf: NaN */
		{ 0x7fc1, 0x3f80 },	/* NaN in: NaN */
		{ 0x7f7f, 0x7f7f },	/* the largest finite: sum is inf */
		{ 0x0080, 0x0081 },	/* the smallest normal, a tie */
	};
	struct hk_attn a = { .B = 1, .H = 1, .Hkv = 1, .Nq = 1, .Nk = 2, .d = D,
			     .dtype = HK_BF16 };
	uint16_t q[D] = { 0 }, k[2 * D] = { 0 }, v[2 * D], o[D], want[D];
	float lse;
	int bad = -1, np = sizeof(pairs) / sizeof(pairs[0]);

	for (int x = 0; x < D; x++) {
		float m;

		v[x] = x < np ? pairs[x][0] : ar_bf16(ar_rand());
		v[D + x] = x < np ? pairs[x][1] : ar_bf16(ar_rand());
		m = (ar_f32(v[x]) + ar_f32(v[D + x])) / 2;
		want[x] = isnan(m) ? 0x7fc0 : ar_bf16(m);
	}
	if (hk_attn_fwd(&a, q, k, v, o, &lse))
		t_fail_all("hk_attn_fwd: %s", hk_attn_strerror());
	for (int x = D - 1; x >= 0; x--)
		if (o[x] != want[x])
			bad = x;
	t_ok(bad < 0, "%s (bf16 %s): o = bf16((v0 + v1) / 2) bit for bit, "
	     "ties to even, inf, NaN as 0x7fc0", isa,
	     hk_attn_isa_name(HK_BF16));
	if (bad >= 0)
		t_diag("column %d: got 0x%04x, want 0x%04x", bad, o[bad],
		       want[bad]);
}

static void run_isa(const char *isa)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(&cases[i], isa);
	bf16_round_test(isa);
}

/* 1 vs 3 threads: same bytes (items own disjoint outputs). */
static void threads_test(int dtype)
{
	struct acase c = { 2, 3, 3, 150, 150, 64, 1, dtype, 0 };
	size_t n = (size_t)c.B * c.H * c.Nq * c.d;
	int bf = dtype == HK_BF16, es = bf ? 2 : 4;
	float *qf = ar_fill(n, 1, bf), *kf = ar_fill(n, 1, bf);
	float *vf = ar_fill(n, 1, bf);
	void *q = ar_to(qf, n, dtype), *k = ar_to(kf, n, dtype);
	void *v = ar_to(vf, n, dtype);
	char *o1 = malloc(n * es), *o2 = malloc(n * es);
	float *l1 = malloc(n * 4), *l2 = malloc(n * 4);
	int th = hk_threads();

	hk_set_threads(1);
	ours(&c, q, k, v, o1, l1, NULL, 0);
	hk_set_threads(3);
	ours(&c, q, k, v, o2, l2, NULL, 0);
	hk_set_threads(th);
	t_ok(!memcmp(o1, o2, n * es) && !memcmp(l1, l2, c.B * c.H * c.Nq * 4),
	     "%s (%s): 1 and 3 threads give identical bytes",
	     bf ? "bf16" : "f32", hk_attn_isa_name(dtype));
	free(qf); free(kf); free(vf); free(q); free(k); free(v);
	free(o1); free(o2); free(l1); free(l2);
}

static void bad_args(void)
{
	float q[64] = { 0 }, o[64], lse[2];
	struct hk_attn a = { .B = 1, .H = 2, .Hkv = 2, .Nq = 1, .Nk = 1, .d = 32 };
	struct hk_attn b;

	memset(o, 0x5a, sizeof(o));
	b = a;
	b.d = 0;
	t_eq(hk_attn_fwd(&b, q, q, q, o, lse), -EINVAL, "d = 0 is refused");
	t_ok(strstr(hk_attn_strerror(), "d = 0") != NULL,
	     "the error names d: %s", hk_attn_strerror());
	b.d = 257;
	t_eq(hk_attn_fwd(&b, q, q, q, o, lse), -EINVAL, "d = 257 is refused");
	b = a;
	b.Hkv = 3;
	t_eq(hk_attn_fwd(&b, q, q, q, o, lse), -EINVAL, "H %% Hkv != 0 refused");
	b = a;
	b.dtype = 7;
	t_eq(hk_attn_fwd(&b, q, q, q, o, lse), -EINVAL, "unknown dtype refused");
	b = a;
	b.scale = -1;
	t_eq(hk_attn_fwd(&b, q, q, q, o, lse), -EINVAL, "negative scale refused");
	b = a;
	b.block_table = (const int32_t *)q;
	b.block_size = 0;
	t_eq(hk_attn_fwd(&b, q, q, q, o, lse), -EINVAL, "block_size 0 refused");
	t_eq(hk_attn_fwd(&a, NULL, q, q, o, lse), -EINVAL, "NULL q refused");
	t_ok(((unsigned char *)o)[0] == 0x5a && ((unsigned char *)o)[255] == 0x5a,
	     "refused calls leave o untouched");
	b = a;
	b.Nk = 0;
	t_eq(hk_attn_fwd(&b, q, NULL, NULL, o, lse), 0, "Nk = 0 runs");
	t_ok(o[0] == 0 && o[63] == 0 && lse[0] == -INFINITY,
	     "Nk = 0: o = 0, lse = -inf");
}

/*
 * First thing in the process: hk_isa() leaves the AMX tile permission
 * alone (a granted process needs larger signal stacks); the first bf16
 * call on an AMX CPU asks for it and runs on tiles.
 */
static void amx_permission_test(void)
{
	struct acase c = { 1, 1, 1, 40, 40, 64, 1, HK_BF16, 0 };
	size_t n = (size_t)c.Nq * c.d;
	float *x = ar_fill(n, 1, 1), *lse = malloc(c.Nq * 4);
	void *q = ar_to(x, n, HK_BF16), *o = malloc(n * 2);
	unsigned long perm = 0;
	int isa = hk_isa();

	if (syscall(SYS_arch_prctl, 0x1022, &perm)) {	/* GET_XCOMP_PERM */
		t_ok(1, "# SKIP this kernel has no ARCH_GET_XCOMP_PERM");
		goto out;
	}
	t_ok(!(perm & (1ul << 18)), "hk_isa() = %s did not ask for the AMX "
	     "tiles (permitted 0x%lx)", hk_isa_name(isa), perm);
	if (isa != HK_ISA_AMX) {
		t_ok(1, "# SKIP this CPU has no AMX");
		goto out;
	}
	ours(&c, q, q, q, o, lse, NULL, 0);
	syscall(SYS_arch_prctl, 0x1022, &perm);
	t_ok((perm & (1ul << 18)) && !strcmp(hk_attn_isa_name(HK_BF16), "amx"),
	     "the first bf16 call got the tiles (permitted 0x%lx) and runs "
	     "on %s", perm, hk_attn_isa_name(HK_BF16));
out:
	free(x); free(lse); free(q); free(o);
}

int main(void)
{
	amx_permission_test();
	ar_each_isa(run_isa);
	threads_test(HK_F32);
	threads_test(HK_BF16);
	bad_args();
	return t_done();
}
