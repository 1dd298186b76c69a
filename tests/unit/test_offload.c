// SPDX-License-Identifier: MIT
/*
 * test_offload — the offloaded AdamW step (kernels/bind/hk_offload.h) over
 * libhmm tensors four times larger than the host budget, with a store:
 *  - three steps give the same bytes as hk_adamw_step() in memory, for
 *    fp32, bf16 grads + bf16 copy of p, and bf16 states; depth 1, 2, 5;
 *  - the store was used (write-backs, reads), the budget never exceeded,
 *    the bf16 copy mapped with DISCARD (no read-in);
 *  - a NaN grad under CHECK_FINITE, or found_inf, skips: nothing changes;
 *  - an injected store error at each of many points of a step comes back
 *    with a detail naming the tensor; every element is stepped once or
 *    not at all, and resuming from `done` ends bit-identical;
 *  - param_host / grad_host: the caller's fp32 weights and gradient
 *    stepped in place, only m and v streamed: the same bytes, the
 *    store used for m and v;
 *  - bad arguments: -EINVAL, a detail, nothing changed.
 *
 * t: tsan (the step's maps on this thread and hk_parallel's pool, the
 * I/O on libhmm's thread)
 */
#include <math.h>

#include "t.h"

#include "fault_inject.h"
#include "hk.h"
#include "hk_adamw.h"
#include "hk_offload.h"
#include "hmm.h"

#define CHUNK	(64u << 10)
#define N	(300000 + 5)		/* 4.8 MB over p, g, m, v in fp32 */
#define BUDGET	(1200u << 10)		/* a quarter of that */

static struct hmm *h;

/* Copy bytes in or out of a tensor a few chunks at a time. */
static int xfer(struct hmm_tensor *t, void *buf, uint64_t bytes, int in)
{
	const uint64_t step = 4 * CHUNK;

	for (uint64_t o = 0; o < bytes; o += step) {
		uint64_t len = bytes - o < step ? bytes - o : step;
		void *p;
		int r = hmm_map(t, o, len, HMM_TIER_HOST,
				in ? HMM_DISCARD : HMM_READ, &p);

		if (r)
			return r;
		if (in)
			memcpy(p, (char *)buf + o, len);
		else
			memcpy((char *)buf + o, p, len);
		hmm_unmap(t, p);
		hmm_evict(t, o, len, HMM_TIER_HOST);
	}
	return hmm_wait(h, t);
}

struct variant {
	const char *name;
	int gdt, sdt, pout;
};

static const struct variant variants[] = {
	{ "fp32", HK_ADAMW_F32, HK_ADAMW_F32, 0 },
	{ "bf16 grad, bf16 copy of p", HK_ADAMW_BF16, HK_ADAMW_F32, 1 },
	{ "bf16 grad and states, bf16 copy", HK_ADAMW_BF16, HK_ADAMW_BF16, 1 },
};

/* The reference arrays in memory and the same arrays as tensors. */
struct state {
	const struct variant *vr;
	size_t es[5];			/* p, pb, g, m, v */
	void *ref[5];
	struct hmm_tensor *t[5];
	struct hk_offload_adamw o;
	struct hk_adamw_args a;		/* the in-memory step */
};

static const char *const names[5] = { "p", "pb", "g", "m", "v" };

static double unit(uint64_t *seed)	/* in [0, 1) */
{
	return (double)(t_rand(seed) >> 11) * 0x1p-52;
}

static void state_new(struct state *s, const struct variant *vr,
		      uint64_t seed)
{
	uint32_t dt[5] = { HMM_DTYPE_F32, HMM_DTYPE_BF16,
			   vr->gdt ? HMM_DTYPE_BF16 : HMM_DTYPE_F32,
			   vr->sdt ? HMM_DTYPE_BF16 : HMM_DTYPE_F32,
			   vr->sdt ? HMM_DTYPE_BF16 : HMM_DTYPE_F32 };
	int64_t n = N;

	memset(s, 0, sizeof(*s));
	s->vr = vr;
	for (int k = 0; k < 5; k++) {
		if (k == 1 && !vr->pout)
			continue;
		s->es[k] = hmm_dtype_size(dt[k]);
		s->ref[k] = calloc(N, s->es[k]);
		if (!s->ref[k] ||
		    hmm_tensor_new(h, names[k], dt[k], 1, &n, &s->t[k]))
			t_fail_all("tensor %s: %s", names[k], hmm_last_error());
	}
	for (size_t i = 0; i < N; i++) {
		float p = (float)(unit(&seed) - 0.5);
		float m = p * 1e-3f, v = p * p * 1e-6f;

		((float *)s->ref[0])[i] = p;
		if (vr->sdt) {
			((uint16_t *)s->ref[3])[i] = hk_bf16_from_f32(m);
			((uint16_t *)s->ref[4])[i] = hk_bf16_from_f32(v);
		} else {
			((float *)s->ref[3])[i] = m;
			((float *)s->ref[4])[i] = v;
		}
	}
	for (int k = 0; k < 5; k++)
		if (s->t[k] && k != 2 &&
		    xfer(s->t[k], s->ref[k], (uint64_t)N * s->es[k], 1))
			t_fail_all("fill %s: %s", names[k], hmm_last_error());
	s->a = (struct hk_adamw_args){
		.n = N, .param = s->ref[0], .param_bf16 = s->ref[1],
		.grad = s->ref[2], .exp_avg = s->ref[3],
		.exp_avg_sq = s->ref[4],
		.grad_dtype = vr->gdt, .state_dtype = vr->sdt,
		.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8,
		.weight_decay = 0.1, .step = 1, .name = vr->name,
	};
	s->o = (struct hk_offload_adamw){
		.param = s->t[0], .param_bf16 = s->t[1], .grad = s->t[2],
		.exp_avg = s->t[3], .exp_avg_sq = s->t[4], .hp = s->a,
		.chunk_bytes = CHUNK,
	};
}

static void state_free(struct state *s)
{
	for (int k = 0; k < 5; k++) {
		if (s->t[k])
			hmm_tensor_free(s->t[k]);
		free(s->ref[k]);
	}
}

/* New grads, in the reference and in the tensor. */
static void state_grads(struct state *s, uint64_t seed)
{
	for (size_t i = 0; i < N; i++) {
		double g = (unit(&seed) - 0.5) * 0.1;

		if (s->vr->gdt)
			((uint16_t *)s->ref[2])[i] = hk_bf16_from_f32((float)g);
		else
			((float *)s->ref[2])[i] = (float)g;
	}
	if (xfer(s->t[2], s->ref[2], (uint64_t)N * s->es[2], 1))
		t_fail_all("grads: %s", hmm_last_error());
}

/* 1 if every tensor holds exactly the reference's bytes. */
static int state_same(struct state *s)
{
	int same = 1;

	for (int k = 0; k < 5 && same; k++) {
		uint64_t bytes = (uint64_t)N * s->es[k];
		void *back;

		if (!s->t[k])
			continue;
		back = malloc(bytes);
		if (!back || xfer(s->t[k], back, bytes, 0)) {
			t_diag("read back %s: %s", names[k], hmm_last_error());
			same = 0;
		} else if (memcmp(back, s->ref[k], bytes)) {
			const char *x = back, *y = s->ref[k];
			uint64_t b = 0;

			while (x[b] == y[b])
				b++;
			t_diag("%s differs at element %llu", names[k],
			       (unsigned long long)(b / s->es[k]));
			same = 0;
		}
		free(back);
	}
	return same;
}

static void set_step(struct state *s, int64_t step)
{
	s->a.step = step;
	s->o.hp.step = step;
	s->o.start = 0;
}

static void test_identical(void)
{
	static const unsigned depths[] = { 1, 2, 5 };

	for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
		struct hmm_stats st0, st1;
		struct state s;
		int rc = 0;

		state_new(&s, &variants[v], v + 1);
		hmm_stats(h, &st0);
		for (int step = 1; step <= 3; step++) {
			state_grads(&s, 100 * v + step);
			set_step(&s, step);
			s.o.depth = depths[step - 1];
			rc |= hk_offload_adamw_step(h, &s.o);
			if (rc)
				t_diag("%s", hk_offload_error());
			rc |= hk_adamw_step(&s.a);
		}
		hmm_stats(h, &st1);
		t_ok(!rc && s.o.done == N, "%s: 3 offloaded steps (depth 1, "
		     "2, 5) ran", variants[v].name);
		t_ok(state_same(&s), "%s: bit-identical to the in-memory step",
		     variants[v].name);
		t_ok(st1.tier[HMM_TIER_STORE].bytes_in >
			     st0.tier[HMM_TIER_STORE].bytes_in &&
		     st1.tier[HMM_TIER_STORE].bytes_out >
			     st0.tier[HMM_TIER_STORE].bytes_out,
		     "%s: the steps went through the store (%llu B written, "
		     "%llu B read)", variants[v].name,
		     (unsigned long long)(st1.tier[HMM_TIER_STORE].bytes_in -
					  st0.tier[HMM_TIER_STORE].bytes_in),
		     (unsigned long long)(st1.tier[HMM_TIER_STORE].bytes_out -
					  st0.tier[HMM_TIER_STORE].bytes_out));
		t_ok(st1.tier[HMM_TIER_HOST].peak <= BUDGET,
		     "%s: host peak %llu <= budget %u", variants[v].name,
		     (unsigned long long)st1.tier[HMM_TIER_HOST].peak, BUDGET);
		if (variants[v].pout)
			t_ok(st1.discard_skips > st0.discard_skips,
			     "%s: the bf16 copy is mapped DISCARD (%llu "
			     "read-ins saved)", variants[v].name,
			     (unsigned long long)(st1.discard_skips -
						  st0.discard_skips));
		state_free(&s);
	}
}

static void test_skip(void)
{
	struct state s;

	state_new(&s, &variants[1], 7);
	state_grads(&s, 8);
	((uint16_t *)s.ref[2])[N - 3] = 0x7fc0;	/* NaN near the end */
	if (xfer(s.t[2], s.ref[2], (uint64_t)N * 2, 1))
		t_fail_all("grads: %s", hmm_last_error());
	s.o.hp.flags = HK_ADAMW_CHECK_FINITE;
	t_eq(hk_offload_adamw_step(h, &s.o), HK_ADAMW_SKIPPED,
	     "a NaN grad under CHECK_FINITE skips the step");
	t_eq(s.o.done, 0, "done = 0");
	t_ok(state_same(&s), "nothing changed");
	s.o.hp.flags = 0;
	s.o.hp.found_inf = 1;
	t_eq(hk_offload_adamw_step(h, &s.o), HK_ADAMW_SKIPPED,
	     "found_inf skips the step");
	t_ok(state_same(&s), "nothing changed");
	state_free(&s);
}

/*
 * A fault at the f-th store operation of a step (or a burst from it): the
 * step fails or not;
 * if it stopped early, resuming from done finishes it; either way the
 * tensors end as the in-memory step made them.
 */
static void test_faults(void)
{
	struct state s;
	int seen_fail = 0, named = 1, resumed = 0, same_all = 1, ran = 0;
	int partial = 0;

	state_new(&s, &variants[2], 11);
	for (int f = 1; f <= 120; f += 7) {
		char spec[512];
		int r;

		state_grads(&s, 1000 + f);
		set_step(&s, 1 + f);
		/* one fault, or a burst that also fails map's own retry of
		 * a failed prefetch (so that a step stops early) */
		int len = 0;

		for (int k = 0; k < (f % 2 ? 1 : 16); k++)
			len += snprintf(spec + len, sizeof(spec) - len,
					"%seio@%d", k ? "," : "", f + k);
		if (hmm_fault_set(spec))
			t_fail_all("fault spec %s: %s", spec, hmm_last_error());
		r = hk_offload_adamw_step(h, &s.o);
		hmm_fault_set(NULL);
		hk_adamw_step(&s.a);
		ran++;
		if (r) {
			const char *d = hk_offload_error();

			seen_fail++;
			named &= r == -EIO && strstr(d, "offload") &&
				 (strstr(d, "'p'") || strstr(d, " p ") ||
				  strstr(d, " m ") || strstr(d, " v ") ||
				  strstr(d, " g ") || strstr(d, " pb ") ||
				  strstr(d, "param"));
			if (s.o.done < N) {
				if (!partial++)
					t_diag("stopped at %llu of %d: %s",
					       (unsigned long long)s.o.done,
					       N, d);
				s.o.start = s.o.done;
				resumed += hk_offload_adamw_step(h, &s.o) == 0;
			} else {
				resumed++;	/* write-back: flush retries */
			}
			if (!named)
				t_diag("f=%d: %d %s", f, r, d);
		}
		hmm_flush(h);
		same_all &= state_same(&s);
	}
	t_ok(seen_fail > 0 && partial > 0, "injected EIO failed %d of %d "
	     "steps (%d of them before the end)", seen_fail, ran, partial);
	t_ok(named, "each failure is -EIO with a detail naming the array");
	t_eq(resumed, seen_fail, "each failed step completed when resumed "
	     "from done");
	t_ok(same_all, "after every fault the tensors equal the in-memory "
	     "step, bit for bit");
	state_free(&s);
}

/* The weights and gradient in the caller's memory, m and v streamed. */
static void test_host_arrays(void)
{
	struct hmm_stats st0, st1;
	float *p = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float));
	struct state s;
	int rc = 0;

	state_new(&s, &variants[0], 11);
	if (!p || !g)
		t_fail_all("out of memory");
	memcpy(p, s.ref[0], N * sizeof(float));
	s.o.param = s.o.grad = NULL;
	s.o.param_host = p;
	s.o.grad_host = g;
	s.o.host_n = N;
	hmm_stats(h, &st0);
	for (int step = 1; step <= 3; step++) {
		state_grads(&s, 700 + step);
		memcpy(g, s.ref[2], N * sizeof(float));
		set_step(&s, step);
		s.o.depth = step;
		rc |= hk_offload_adamw_step(h, &s.o);
		if (rc)
			t_diag("%s", hk_offload_error());
		rc |= hk_adamw_step(&s.a);
	}
	hmm_stats(h, &st1);
	t_ok(!rc && s.o.done == N, "host arrays: 3 steps ran");
	t_ok(!memcmp(p, s.ref[0], N * sizeof(float)),
	     "host arrays: the weights stepped in place, bit-identical");
	/* the param tensor was not used: give it the weights, so that
	 * state_same compares m and v (and those) */
	if (xfer(s.t[0], p, N * sizeof(float), 1))
		t_fail_all("p: %s", hmm_last_error());
	t_ok(state_same(&s), "host arrays: m and v bit-identical");
	t_ok(st1.tier[HMM_TIER_STORE].bytes_in >
		     st0.tier[HMM_TIER_STORE].bytes_in,
	     "host arrays: m and v went through the store");
	s.o.param = s.t[0];
	t_eq(hk_offload_adamw_step(h, &s.o), -EINVAL,
	     "param and param_host both: -EINVAL (%s)", hk_offload_error());
	s.o.param = NULL;
	s.o.param_host = NULL;
	t_eq(hk_offload_adamw_step(h, &s.o), -EINVAL,
	     "neither param nor param_host: -EINVAL");
	t_ok(state_same(&s) && !memcmp(p, s.ref[0], N * sizeof(float)),
	     "refused steps changed nothing");
	free(p);
	free(g);
	state_free(&s);
}

static void test_bad_args(void)
{
	struct state s;
	struct hk_offload_adamw o;
	struct hmm_tensor *small;
	int64_t n = N - 1;

	state_new(&s, &variants[0], 3);
	state_grads(&s, 4);
	if (hmm_tensor_new(h, "small", HMM_DTYPE_F32, 1, &n, &small))
		t_fail_all("small: %s", hmm_last_error());
	o = s.o;
	o.exp_avg_sq = small;
	t_eq(hk_offload_adamw_step(h, &o), -EINVAL, "v one element short: "
	     "-EINVAL");
	t_ok(strstr(hk_offload_error(), "small") != NULL, "detail: %s",
	     hk_offload_error());
	o = s.o;
	o.param_bf16 = s.t[0];
	t_eq(hk_offload_adamw_step(h, &o), -EINVAL,
	     "an F32 bf16 copy: -EINVAL");
	o = s.o;
	o.start = 5;
	t_eq(hk_offload_adamw_step(h, &o), -EINVAL, "start off a piece: "
	     "-EINVAL (%s)", hk_offload_error());
	o = s.o;
	o.hp.beta1 = 1;
	t_eq(hk_offload_adamw_step(h, &o), -EINVAL, "beta1 = 1: -EINVAL (%s)",
	     hk_offload_error());
	o = s.o;
	o.chunk_bytes = 1000;
	t_eq(hk_offload_adamw_step(h, &o), -EINVAL, "chunk_bytes 1000: "
	     "-EINVAL");
	o = s.o;
	o.chunk_bytes = 512u << 10;	/* 4 arrays: 2 MiB > BUDGET */
	t_eq(hk_offload_adamw_step(h, &o), -ENOMEM, "a piece larger than the "
	     "host budget: -ENOMEM");
	t_ok(strstr(hk_offload_error(), "2097152 bytes") &&
	     strstr(hk_offload_error(), "host budget of 1228800"),
	     "at once, naming both sizes: %s", hk_offload_error());
	t_ok(state_same(&s), "bad arguments changed nothing");
	hmm_tensor_free(small);
	state_free(&s);
}

int main(void)
{
	struct hmm_config cfg;
	char path[4200];

	snprintf(path, sizeof(path), "%s/offload.store", t_tmpdir());
	hmm_config_default(&cfg);
	cfg.store_path = path;
	cfg.store_size = 64 << 20;
	cfg.host_budget = BUDGET;
	cfg.chunk_bytes = CHUNK;
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	test_identical();
	test_skip();
	test_faults();
	test_host_arrays();
	test_bad_args();
	hmm_close(h);
	return t_done();
}
