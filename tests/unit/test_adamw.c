// SPDX-License-Identifier: MIT
/*
 * test_adamw.c — the fused AdamW kernel (kernels/core/hk_adamw.h) against
 * an fp64 reference, elementwise, on every ISA path this CPU runs.
 *
 * The bound.  Each step is checked against the fp64 step taken from the
 * kernel's own state before it, so the bound is that of one step: with
 * u = 2^-24 and every constant rounded to float once (relative error u),
 *	m:  8u (|b1 m0| + |(1-b1) g|)	(5 roundings: two constants, the
 *					 product, the fma, the grad scale)
 *	v:  8u v			(all terms positive; 6 roundings)
 *	p:  3u |p0 decay| + step_size (tol_m + 12u |m|) / d + 2u |p|
 *					(d = sqrt(v)/sqrt(bc2) + eps carries
 *					 at most 7u; the division, step size
 *					 and the final fma one u each)
 * plus 2^-146 for underflow, plus half a bf16 ulp (2^-8 |x|) for a state
 * stored as bf16.  The 10-step trajectory is checked too, against an
 * fp64 run from the same start, with those bounds carried forward
 * (error of m scaled by b1 each step, of v by b2, of p by decay, the
 * change of d bounded by ibc2 min(Ev / 2 sqrt v, sqrt Ev)), times 2 for
 * the second-order terms.  The bf16 copy of p is checked bit for bit.
 *
 * t: the ISA paths are forced with hk_adamw_force_isa(); HK_ISA in the
 * environment is checked in a child.
 */
#include <math.h>

#include "hk.h"
#include "hk_adamw.h"
#include "t.h"
#include "unit/adamw_ref.h"

#define U	0x1p-24
#define TINY	0x1p-146
#define HU	0x1p-8		/* half a bf16 ulp, relative */
#define STEPS	10

static double rd(const void *b, int dt, size_t i)
{
	return dt ? hk_bf16_to_f32(((const uint16_t *)b)[i])
		  : ((const float *)b)[i];
}

static void wr(void *b, int dt, size_t i, double x)
{
	if (dt)
		((uint16_t *)b)[i] = hk_bf16_from_f32((float)x);
	else
		((float *)b)[i] = (float)x;
}

/* A buffer whose start is `mis` bytes past a 64-byte boundary. */
struct buf {
	void *raw, *p;
};

static void *buf_new(struct buf *b, size_t bytes, size_t mis)
{
	b->raw = malloc(bytes + 128);
	if (!b->raw)
		t_fail_all("malloc %zu", bytes);
	b->p = (char *)(((uintptr_t)b->raw + 63) & ~(uintptr_t)63) + mis;
	return b->p;
}

/* fp64 step of one element; returns the one-step bounds in t[]. */
static void ref_step(const struct variant *vr, int64_t step, double p0,
		     double gi, double m0, double v0, double out[3],
		     double tol[3], double *d_out)
{
	double b1 = vr->b1, b2 = vr->b2;
	double bc1 = 1 - pow(b1, step), bc2 = 1 - pow(b2, step);
	double g = gi / (vr->scale > 0 ? vr->scale : 1);
	double pd = p0 * (1 - vr->lr * vr->wd), ss = vr->lr / bc1;
	double m = b1 * m0 + (1 - b1) * g, v = b2 * v0 + (1 - b2) * g * g;
	double d = sqrt(v) / sqrt(bc2) + vr->eps;
	double p = pd - ss * m / d;

	out[0] = p;
	out[1] = m;
	out[2] = v;
	tol[1] = 8 * U * (fabs(b1 * m0) + fabs((1 - b1) * g)) + TINY;
	tol[2] = 8 * U * v + TINY;
	tol[0] = 3 * U * fabs(pd) + ss * (tol[1] + 12 * U * fabs(m)) / d +
		 2 * U * fabs(p) + TINY;
	if (d_out)
		*d_out = d;
}

struct arrays {
	size_t n;
	struct buf bp, bg, bm, bv, bh;
	float *p;
	void *g, *m, *v;
	uint16_t *h;
};

static void arrays_new(struct arrays *a, const struct variant *vr, size_t n,
		       int mis)
{
	size_t gs = vr->gdt ? 2 : 4, ss = vr->sdt ? 2 : 4;

	a->n = n;
	/* misaligned: off any 32- and 64-byte boundary, each differently,
	 * but aligned to the element (the API asks for that) */
	a->p = buf_new(&a->bp, n * 4, mis ? 4 : 0);
	a->g = buf_new(&a->bg, n * gs, mis ? 12 / (4 / gs) : 0);
	a->m = buf_new(&a->bm, n * ss, mis ? 20 / (4 / ss) : 0);
	a->v = buf_new(&a->bv, n * ss, mis ? 28 / (4 / ss) : 0);
	a->h = vr->pout ? buf_new(&a->bh, n * 2, mis ? 14 : 0) : NULL;
}

static void arrays_free(struct arrays *a)
{
	free(a->bp.raw);
	free(a->bg.raw);
	free(a->bm.raw);
	free(a->bv.raw);
	if (a->h)
		free(a->bh.raw);
}

static struct hk_adamw_args args_of(const struct variant *vr,
				    struct arrays *a, int64_t step)
{
	struct hk_adamw_args r = adamw_ref_args(vr, a->n, step);

	r.param = a->p;
	r.param_bf16 = a->h;
	r.grad = a->g;
	r.exp_avg = a->m;
	r.exp_avg_sq = a->v;
	return r;
}

static void init_state(const struct variant *vr, struct arrays *a,
		       uint64_t seed)
{
	for (size_t i = 0; i < a->n; i++) {
		double m = frand(&seed) * 1e-3;

		a->p[i] = (float)(2 * frand(&seed));
		wr(a->m, vr->sdt, i, m);
		wr(a->v, vr->sdt, i, m * m * (1 + fabs(frand(&seed))));
	}
}

/* fp64 trajectory and its carried error bound, per element. */
struct traj {
	double *p, *m, *v, *ep, *em, *ev;
};

static void traj_step(const struct variant *vr, struct traj *tr, size_t i,
		      int64_t step, double g)
{
	double out[3], tol[3], d, ed, ibc2, ev, em;
	double bc2 = 1 - pow(vr->b2, step);

	ref_step(vr, step, tr->p[i], g, tr->m[i], tr->v[i], out, tol, &d);
	ibc2 = 1 / sqrt(bc2);
	em = vr->b1 * tr->em[i] + tol[1] + (vr->sdt ? HU * fabs(out[1]) : 0);
	ev = vr->b2 * tr->ev[i] + tol[2] + (vr->sdt ? HU * out[2] : 0);
	ed = out[2] > 0 ? fmin(ev / (2 * sqrt(out[2])), sqrt(ev)) : sqrt(ev);
	ed *= ibc2;
	tr->ep[i] = fabs(1 - vr->lr * vr->wd) * tr->ep[i] + tol[0] +
		    vr->lr / (1 - pow(vr->b1, step)) *
			    (em / d + fabs(out[1]) * ed / (d * d));
	tr->em[i] = em;
	tr->ev[i] = ev;
	tr->p[i] = out[0];
	tr->m[i] = out[1];
	tr->v[i] = out[2];
}

/*
 * Ten steps of one variant at one length; returns the worst error/bound
 * ratio over all checks (<= 1 passes), or 99 when the bf16 copy of p
 * differs from rounding p, or the call failed.
 */
static double run_case(const struct variant *vr, size_t n, int mis,
		       uint64_t seed)
{
	struct arrays a;
	struct traj tr;
	double worst = 0, *prev = malloc(n * 3 * sizeof(double));
	double *all = calloc(n * 6, sizeof(double));

	if (!prev || !all)
		t_fail_all("malloc");
	tr = (struct traj){ all, all + n, all + 2 * n, all + 3 * n,
			    all + 4 * n, all + 5 * n };
	arrays_new(&a, vr, n, mis);
	init_state(vr, &a, seed);
	for (size_t i = 0; i < n; i++) {
		tr.p[i] = a.p[i];
		tr.m[i] = rd(a.m, vr->sdt, i);
		tr.v[i] = rd(a.v, vr->sdt, i);
	}
	for (int64_t step = 1; step <= STEPS; step++) {
		struct hk_adamw_args args = args_of(vr, &a, step);

		for (size_t i = 0; i < n; i++) {
			double g = grand(&seed) * (vr->scale ? vr->scale : 1);

			wr(a.g, vr->gdt, i, g);
			prev[3 * i] = a.p[i];
			prev[3 * i + 1] = rd(a.m, vr->sdt, i);
			prev[3 * i + 2] = rd(a.v, vr->sdt, i);
		}
		if (hk_adamw_step(&args) != 0) {
			t_diag("step: %s", hk_adamw_error());
			worst = 99;
			break;
		}
		for (size_t i = 0; i < n; i++) {
			double out[3], tol[3], got[3], g = rd(a.g, vr->gdt, i);

			ref_step(vr, step, prev[3 * i], g, prev[3 * i + 1],
				 prev[3 * i + 2], out, tol, NULL);
			got[0] = a.p[i];
			got[1] = rd(a.m, vr->sdt, i);
			got[2] = rd(a.v, vr->sdt, i);
			for (int k = 0; k < 3; k++) {
				double t = tol[k];

				if (k && vr->sdt)
					t += HU * (fabs(out[k]) + t);
				worst = fmax(worst, fabs(got[k] - out[k]) / t);
				if (!(fabs(got[k] - out[k]) <= t))
					worst = fmax(worst, 2);
			}
			if (a.h && a.h[i] != hk_bf16_from_f32(a.p[i]))
				worst = 99;
			traj_step(vr, &tr, i, step, g);
		}
	}
	for (size_t i = 0; i < n && worst < 99; i++) {
		double e = fabs(a.p[i] - tr.p[i]) / (2 * tr.ep[i] + TINY);

		e = fmax(e, fabs(rd(a.m, vr->sdt, i) - tr.m[i]) /
				    (2 * tr.em[i] + TINY));
		e = fmax(e, fabs(rd(a.v, vr->sdt, i) - tr.v[i]) /
				    (2 * tr.ev[i] + TINY));
		if (e > 1)
			t_diag("trajectory at %zu: p %.9g vs %.9g bound %.3g",
			       i, a.p[i], tr.p[i], 2 * tr.ep[i]);
		worst = fmax(worst, e);
	}
	arrays_free(&a);
	free(prev);
	free(all);
	return worst;
}

static void test_reference(int isa)
{
	static const size_t lens[] = { 1, 15, 16, 17, 1023, (1 << 20) + 3 };

	for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
		for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			for (int mis = 0; mis < 2; mis++) {
				double w;

				if (lens[l] > 4096 && !mis)
					continue;	/* misaligned only */
				w = run_case(&variants[v], lens[l], mis,
					     v * 1000 + l * 10 + mis);
				t_ok(w <= 1, "%s: %s, n=%zu%s, %d steps vs "
				     "fp64 (worst %.2f of bound)",
				     hk_isa_name(isa), variants[v].name,
				     lens[l], mis ? " misaligned" : "",
				     STEPS, w);
			}
		}
	}
}

/* Round to nearest even the slow way: the two neighbours, compared in
 * double (exact here). */
static uint16_t slow_bf16(uint32_t u)
{
	float f;
	uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
	double dlo, dhi;

	memcpy(&f, &u, 4);
	if (isnan(f))
		return (uint16_t)(lo | 0x40);
	if (isinf(f))
		return lo;
	dlo = fabs(f - (double)hk_bf16_to_f32(lo));
	dhi = fabs((double)hk_bf16_to_f32(hi) - f);
	if (isinf(hk_bf16_to_f32(hi)))	/* above the largest: as if 2^128 */
		dhi = ldexp(1, 128) - fabs(f);
	if (dlo < dhi || (dlo == dhi && !(lo & 1)))
		return lo;
	return hi;
}

static uint16_t bf16_of_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, 4);
	return hk_bf16_from_f32(f);
}

static void test_bf16_rounding(void)
{
	static const uint32_t in[][2] = {
		{ 0x3f808000, 0x3f80 },	/* tie, even below */
		{ 0x3f818000, 0x3f82 },	/* tie, even above */
		{ 0x3f808001, 0x3f81 }, { 0x3f807fff, 0x3f80 },
		{ 0xbf818000, 0xbf82 },	/* negative tie */
		{ 0x00008000, 0x0000 },	/* subnormal tie to zero */
		{ 0x00018000, 0x0002 }, { 0x80008000, 0x8000 },
		{ 0x7f7fffff, 0x7f80 },	/* largest float rounds to inf */
		{ 0x7f7f7fff, 0x7f7f }, { 0x7f7f8000, 0x7f80 },
		{ 0x7f800000, 0x7f80 }, { 0xff800000, 0xff80 },
		{ 0x7fc00000, 0x7fc0 }, { 0xffc00000, 0xffc0 },
		{ 0x7f800001, 0x7fc0 },	/* signalling NaN, low payload */
		{ 0x7fffffff, 0x7fff },	/* would carry into the sign */
		{ 0xffffffff, 0xffff },
	};
	uint64_t seed = 42;
	size_t bad = 0, nan_bad = 0;

	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
		t_eq(bf16_of_bits(in[i][0]), in[i][1], "bf16(0x%08x) = 0x%04x",
		     in[i][0], in[i][1]);
	for (uint32_t hi = 0; hi < 0x10000; hi++) {
		static const uint32_t low[] = { 0x0000, 0x7fff, 0x8000,
						0x8001, 0xffff };

		for (int k = 0; k < 5; k++) {
			uint32_t u = hi << 16 | low[k];

			bad += bf16_of_bits(u) != slow_bf16(u);
		}
	}
	for (int i = 0; i < 1 << 20; i++) {
		uint32_t u = (uint32_t)t_rand(&seed);
		uint16_t h = bf16_of_bits(u);
		float f;

		memcpy(&f, &u, 4);
		bad += h != slow_bf16(u);
		if (isnan(f))
			nan_bad += !isnan(hk_bf16_to_f32(h)) ||
				   (h >> 15) != (u >> 31);
	}
	t_eq(bad, 0, "bf16 rounding = nearest-even reference on all ties "
	     "and 1M random floats");
	t_eq(nan_bad, 0, "NaN stays NaN with its sign");
}

/* Special values through the vector path: lr = 0 keeps p, so param_bf16
 * must be the rounding of p; beta1 = 0 makes m = g, stored as bf16. */
static void test_special_values(int isa)
{
	static const uint32_t sp[] = {
		0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff, 0xbf818000,
		0x00008000, 0x00018000, 0x80008000, 0x7f7fffff, 0x7f7f8000,
		0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7fffffff,
		0x00000000, 0x80000000, 0x00000001, 0x807fffff, 0x3f800000,
	};
	enum { N = 37 };
	struct buf bp, bg, bm, bv, bh;
	float *p = buf_new(&bp, N * 4, 4), *g = buf_new(&bg, N * 4, 8);
	uint16_t *m = buf_new(&bm, N * 2, 2), *v = buf_new(&bv, N * 2, 6);
	uint16_t *h = buf_new(&bh, N * 2, 10);
	struct hk_adamw_args a = {
		.n = N, .param = p, .param_bf16 = h, .grad = g,
		.exp_avg = m, .exp_avg_sq = v,
		.grad_dtype = HK_ADAMW_F32, .state_dtype = HK_ADAMW_BF16,
		.lr = 0, .beta1 = 0, .beta2 = 0.5, .eps = 1, .step = 1,
	};
	uint32_t before[N];
	int bad_p = 0, bad_h = 0, bad_m = 0;

	for (int i = 0; i < N; i++) {
		before[i] = sp[i % 20];
		memcpy(&p[i], &before[i], 4);
		memcpy(&g[i], &sp[(i + 7) % 20], 4);
		m[i] = v[i] = 0;
	}
	t_eq(hk_adamw_step(&a), 0, "%s: step over special values",
	     hk_isa_name(isa));
	for (int i = 0; i < N; i++) {
		uint32_t u, gu;
		float fg;

		memcpy(&u, &p[i], 4);
		memcpy(&gu, &g[i], 4);
		memcpy(&fg, &g[i], 4);
		if (!isnan(p[i]) && !isinf(g[i]) && !isnan(g[i]))
			bad_p += u != before[i];
		bad_h += h[i] != hk_bf16_from_f32(p[i]);
		if (isnan(fg))
			bad_m += !isnan(hk_bf16_to_f32(m[i]));
		else	/* 0 * m + (-0) is +0 */
			bad_m += m[i] != slow_bf16(fg == 0 ? 0 : gu);
	}
	t_eq(bad_p, 0, "%s: lr 0 keeps p bit for bit", hk_isa_name(isa));
	t_eq(bad_h, 0, "%s: bf16 copy of p rounds to nearest even, NaN kept",
	     hk_isa_name(isa));
	t_eq(bad_m, 0, "%s: bf16 state m = g rounds to nearest even, NaN kept",
	     hk_isa_name(isa));
	free(bp.raw);
	free(bg.raw);
	free(bm.raw);
	free(bv.raw);
	free(bh.raw);
}

static int same(const struct arrays *a, const struct arrays *b,
		const struct variant *vr)
{
	size_t ss = vr->sdt ? 2 : 4;

	return !memcmp(a->p, b->p, a->n * 4) &&
	       !memcmp(a->m, b->m, a->n * ss) &&
	       !memcmp(a->v, b->v, a->n * ss) &&
	       (!a->h || !memcmp(a->h, b->h, a->n * 2));
}

static void arrays_copy(struct arrays *dst, const struct arrays *src,
			const struct variant *vr)
{
	size_t gs = vr->gdt ? 2 : 4, ss = vr->sdt ? 2 : 4;

	memcpy(dst->p, src->p, src->n * 4);
	memcpy(dst->g, src->g, src->n * gs);
	memcpy(dst->m, src->m, src->n * ss);
	memcpy(dst->v, src->v, src->n * ss);
	if (src->h)
		memcpy(dst->h, src->h, src->n * 2);
}

static void fill_grads(const struct variant *vr, struct arrays *a,
		       uint64_t seed)
{
	for (size_t i = 0; i < a->n; i++)
		wr(a->g, vr->gdt, i, grand(&seed));
}

/* A skipped step must leave every byte as it was. */
static void test_found_inf(int isa)
{
	static const size_t ns[] = { 1003, (1 << 18) + 5 };
	static const float bad[] = { INFINITY, -INFINITY, NAN };
	const char *in = hk_isa_name(isa);

	for (int gdt = 0; gdt < 2; gdt++) {
		for (int k = 0; k < 2; k++) {
			struct variant vr = variants[gdt ? 4 : 0];
			struct arrays a, ref;
			size_t n = ns[k], pos[] = { 0, n / 2 + 3, n - 1 };
			int untouched = 1, rc_ok = 1, check_ok = 1;

			arrays_new(&a, &vr, n, 1);
			arrays_new(&ref, &vr, n, 0);
			init_state(&vr, &a, 7 + k);
			fill_grads(&vr, &a, 9 + k);
			arrays_copy(&ref, &a, &vr);
			for (int j = 0; j < 3; j++) {
				for (int b = 0; b < 3; b++) {
					struct hk_adamw_args args =
						args_of(&vr, &a, 3);
					double keep = rd(a.g, gdt, pos[j]);

					args.flags = HK_ADAMW_CHECK_FINITE;
					wr(a.g, gdt, pos[j], bad[b]);
					rc_ok &= hk_adamw_step(&args) ==
						 HK_ADAMW_SKIPPED;
					check_ok &=
						hk_adamw_check(&args, 1) == 1;
					untouched &= same(&a, &ref, &vr);
					wr(a.g, gdt, pos[j], keep);
				}
			}
			t_ok(rc_ok, "%s: %s grad, n=%zu: inf/-inf/NaN at "
			     "start, middle, end -> HK_ADAMW_SKIPPED", in,
			     gdt ? "bf16" : "fp32", n);
			t_ok(check_ok, "%s: hk_adamw_check finds each", in);
			t_ok(untouched, "%s: skipped steps left p, m, v and "
			     "the bf16 copy untouched", in);
			{
				struct hk_adamw_args args = args_of(&vr, &a, 3);

				args.flags = HK_ADAMW_CHECK_FINITE;
				args.found_inf = 1;
				t_eq(hk_adamw_step(&args), HK_ADAMW_SKIPPED,
				     "%s: found_inf from the caller skips", in);
				t_ok(same(&a, &ref, &vr),
				     "%s: and touches nothing", in);
				args.found_inf = 0;
				t_eq(hk_adamw_check(&args, 1), 0,
				     "%s: finite grads pass the check", in);
				t_eq(hk_adamw_step(&args), 0,
				     "%s: finite grads step", in);
				t_ok(!same(&a, &ref, &vr), "%s: and change p",
				     in);
			}
			arrays_free(&a);
			arrays_free(&ref);
		}
	}
}

/* One optimizer step over three tensors: one bad grad skips them all. */
static void test_step_many(void)
{
	const struct variant *vr = &variants[0];
	struct arrays a[3], ref[3];
	struct hk_adamw_args args[3];
	int untouched = 1, changed = 1;

	for (int i = 0; i < 3; i++) {
		arrays_new(&a[i], vr, 100 + 1000 * i, i & 1);
		arrays_new(&ref[i], vr, 100 + 1000 * i, 0);
		init_state(vr, &a[i], i);
		fill_grads(vr, &a[i], 10 + i);
		arrays_copy(&ref[i], &a[i], vr);
		args[i] = args_of(vr, &a[i], 1);
		args[i].flags = HK_ADAMW_CHECK_FINITE;
	}
	((float *)a[2].g)[555] = NAN;
	t_eq(hk_adamw_step_many(args, 3), HK_ADAMW_SKIPPED,
	     "step_many: a NaN in the third tensor skips the step");
	for (int i = 0; i < 3; i++)
		untouched &= same(&a[i], &ref[i], vr);
	t_ok(untouched, "step_many: no tensor touched");
	((float *)a[2].g)[555] = 0.5f;
	t_eq(hk_adamw_step_many(args, 3), 0, "step_many: finite grads step");
	for (int i = 0; i < 3; i++)
		changed &= !same(&a[i], &ref[i], vr);
	t_ok(changed, "step_many: every tensor changed");
	args[1].beta1 = 1;
	for (int i = 0; i < 3; i++)
		arrays_copy(&ref[i], &a[i], vr);
	t_eq(hk_adamw_step_many(args, 3), -EINVAL,
	     "step_many: bad args in the second tensor: -EINVAL");
	untouched = 1;
	for (int i = 0; i < 3; i++)
		untouched &= same(&a[i], &ref[i], vr);
	t_ok(untouched, "step_many: and no tensor touched");
	for (int i = 0; i < 3; i++) {
		arrays_free(&a[i]);
		arrays_free(&ref[i]);
	}
}

static void test_bad_args(void)
{
	const struct variant *vr = &variants[0];
	struct arrays a, ref;
	struct hk_adamw_args good, b;
	struct { const char *what, *word; } cases[] = {
		{ "grad NULL", "NULL" }, { "beta1 1", "beta1" },
		{ "beta2 -0.1", "beta2" }, { "step 0", "step" },
		{ "lr NaN", "lr" }, { "eps -1", "eps" },
		{ "weight_decay inf", "weight_decay" },
		{ "grad_scale -1", "grad_scale" },
		{ "grad_dtype 5", "grad_dtype" }, { "flags 0x10", "flags" },
		{ "exp_avg at an odd address", "aligned" },
	};
	int untouched = 1;

	arrays_new(&a, vr, 100, 0);
	arrays_new(&ref, vr, 100, 0);
	init_state(vr, &a, 1);
	fill_grads(vr, &a, 2);
	arrays_copy(&ref, &a, vr);
	good = args_of(vr, &a, 1);
	good.name = "layer0.w";
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		b = good;
		switch (i) {
		case 0: b.grad = NULL; break;
		case 1: b.beta1 = 1; break;
		case 2: b.beta2 = -0.1; break;
		case 3: b.step = 0; break;
		case 4: b.lr = NAN; break;
		case 5: b.eps = -1; break;
		case 6: b.weight_decay = INFINITY; break;
		case 7: b.grad_scale = -1; break;
		case 8: b.grad_dtype = 5; break;
		case 9: b.flags = 0x10; break;
		case 10: b.exp_avg = (char *)b.exp_avg + 1; break;
		}
		t_eq(hk_adamw_step(&b), -EINVAL, "%s: -EINVAL", cases[i].what);
		t_ok(strstr(hk_adamw_error(), cases[i].word) &&
		     strstr(hk_adamw_error(), "layer0.w"),
		     "%s: detail names it: %s", cases[i].what,
		     hk_adamw_error());
		untouched &= same(&a, &ref, vr);
	}
	t_ok(untouched, "bad arguments touched nothing");
	t_eq(hk_adamw_step(NULL), -EINVAL, "NULL args: -EINVAL");
	b = (struct hk_adamw_args){ .beta1 = 0.9, .beta2 = 0.99, .step = 1 };
	t_eq(hk_adamw_step(&b), 0, "n = 0 with NULL arrays is a no-op");
	arrays_free(&a);
	arrays_free(&ref);
}

/* Grads multiplied by a power of two and divided again are exact. */
static void test_scale_exact(void)
{
	struct variant vr = variants[0];
	struct arrays a, b;
	struct hk_adamw_args x, y;

	arrays_new(&a, &vr, 1023, 1);
	arrays_new(&b, &vr, 1023, 0);
	init_state(&vr, &a, 3);
	fill_grads(&vr, &a, 4);
	arrays_copy(&b, &a, &vr);
	for (size_t i = 0; i < 1023; i++)
		((float *)b.g)[i] *= 65536;
	x = args_of(&vr, &a, 2);
	y = args_of(&vr, &b, 2);
	y.grad_scale = 65536;
	t_ok(!hk_adamw_step(&x) && !hk_adamw_step(&y) && same(&a, &b, &vr),
	     "grads * 65536 with grad_scale 65536 = unscaled, bit for bit");
	arrays_free(&a);
	arrays_free(&b);
}

/* Every ISA gives the same bits, for every storage variant. */
static void test_isa_identical(void)
{
	for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
		const struct variant *vr = &variants[v];
		struct arrays a, b;
		int ok = 1, runs = 0;

		arrays_new(&a, vr, 1027, 1);
		arrays_new(&b, vr, 1027, 0);
		init_state(vr, &a, v);
		fill_grads(vr, &a, v + 100);
		arrays_copy(&b, &a, vr);
		hk_adamw_force_isa(HK_ISA_SCALAR);
		for (int s = 1; s <= 3; s++) {
			struct hk_adamw_args x = args_of(vr, &b, s);

			hk_adamw_step(&x);
		}
		for (int isa = HK_ISA_AVX2; isa <= HK_ISA_AVX512; isa++) {
			struct arrays c;

			if (hk_adamw_force_isa(isa))
				continue;
			arrays_new(&c, vr, 1027, 1);
			arrays_copy(&c, &a, vr);
			for (int s = 1; s <= 3; s++) {
				struct hk_adamw_args x = args_of(vr, &c, s);

				hk_adamw_step(&x);
			}
			ok &= same(&c, &b, vr);
			runs++;
			arrays_free(&c);
		}
		hk_adamw_force_isa(-1);
		t_ok(ok && runs, "%s: %d vector path(s) = scalar, bit for bit",
		     vr->name, runs);
		arrays_free(&a);
		arrays_free(&b);
	}
}

static void test_threads_identical(void)
{
	const struct variant *vr = &variants[4];
	struct arrays a, b;
	struct hk_adamw_args x, y;
	int saved = hk_threads();

	arrays_new(&a, vr, (1 << 20) + 3, 1);
	arrays_new(&b, vr, (1 << 20) + 3, 0);
	init_state(vr, &a, 5);
	fill_grads(vr, &a, 6);
	arrays_copy(&b, &a, vr);
	x = args_of(vr, &a, 1);
	y = args_of(vr, &b, 1);
	hk_set_threads(1);
	hk_adamw_step(&x);
	hk_set_threads(2);
	hk_adamw_step(&y);
	hk_set_threads(saved);
	t_ok(same(&a, &b, vr), "1 and 2 threads give the same bits");
	arrays_free(&a);
	arrays_free(&b);
}

/* HK_ISA in the environment picks the path (in a child process). */
static void test_env_isa(void)
{
	char self[4096], cmd[4200], out[64];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (len <= 0) {
		t_ok(1, "# SKIP no /proc/self/exe");
		return;
	}
	self[len] = 0;
	for (int isa = HK_ISA_SCALAR; isa <= HK_ISA_AVX512; isa++) {
		const char *want = hk_isa_name(isa);
		FILE *f;

		while (!hk_isa_supported(isa) && isa > 0 &&
		       want == hk_isa_name(isa))
			want = hk_isa_name(isa - 1);	/* lowered only */
		snprintf(cmd, sizeof(cmd), "HK_ISA=%s '%s' --print-isa",
			 hk_isa_name(isa), self);
		f = popen(cmd, "r");
		out[0] = 0;
		if (f) {
			if (!fgets(out, sizeof(out), f))
				out[0] = 0;
			pclose(f);
		}
		out[strcspn(out, "\n")] = 0;
		if (!hk_isa_supported(isa) && isa == HK_ISA_AVX512)
			want = hk_isa_supported(HK_ISA_AVX2) ? "avx2"
							      : "scalar";
		t_ok(!strcmp(out, want), "HK_ISA=%s runs the %s path (got %s)",
		     hk_isa_name(isa), want, out);
	}
}

int main(int argc, char **argv)
{
	char ran[64];

	if (argc == 2 && !strcmp(argv[1], "--print-isa")) {
		puts(hk_adamw_isa());
		return 0;
	}
	ran[0] = 0;
	test_bf16_rounding();
	test_bad_args();
	test_scale_exact();
	test_step_many();
	test_env_isa();
	for (int isa = HK_ISA_SCALAR; isa <= HK_ISA_AVX512; isa++) {
		if (hk_adamw_force_isa(isa)) {
			t_ok(1, "# SKIP %s: this CPU does not run it",
			     hk_isa_name(isa));
			continue;
		}
		test_special_values(isa);
		test_found_inf(isa);
		test_reference(isa);
		strcat(ran, " ");
		strcat(ran, hk_adamw_isa());
	}
	hk_adamw_force_isa(-1);
	t_diag("ISA paths run against the fp64 reference:%s", ran);
	test_isa_identical();
	test_threads_identical();
	return t_done();
}
