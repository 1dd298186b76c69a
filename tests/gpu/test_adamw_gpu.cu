// SPDX-License-Identifier: MIT
/*
 * test_adamw_gpu.cu — hk_adamw_step_cuda() against the CPU scalar path,
 * bit for bit (the CPU path is tested against fp64 in
 * tests/unit/test_adamw.c; the GPU kernel does the same fp32 operations
 * with the _rn intrinsics, so any difference is a bug, not rounding).
 *
 * Checks: each storage variant over lengths 1, 15, 16, 17, 1023,
 * 2^20 + 3 as one batch (one launch), with 16-byte aligned pointers (the
 * vector path) and pointers one element off (the element path), 10
 * steps; 40 tensors in one call (more than one launch); the found-inf
 * flag on the device (check, preset, missing).  Exits 77 when there is no
 * CUDA device.  Its speed: tests/gpu/bench_adamw_gpu.cu.  The variants
 * and the random data are test_adamw.c's (tests/unit/adamw_ref.h).
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "hk.h"
#include "hk_adamw.h"
}
#include "t.h"
#include "unit/adamw_ref.h"

/* A CUDA call that must succeed: else the test bails out (exit 1). */
#define CK(x)								\
	do {								\
		cudaError_t e_ = (x);					\
		if (e_ != cudaSuccess)					\
			t_fail_all("%s: %s", #x, cudaGetErrorString(e_)); \
	} while (0)

/*
 * One tensor, on the host (the CPU reference runs on it) and on the
 * device.  The device arrays sit `off` elements into 256-byte aligned
 * allocations.  Owned by the test; tensor_free() releases both sides.
 */
struct tensor {
	size_t n, gs, ss;
	char *h[5];		/* host: p, g, m, v, pb */
	char *d[5];		/* device, offset */
	char *draw[5];		/* device, as allocated */
	struct hk_adamw_args ha, da;
};

static void tensor_new(struct tensor *t, const struct variant *vr, size_t n,
		       int off, uint64_t seed)
{
	memset(t, 0, sizeof(*t));
	t->n = n;
	for (int k = 0; k < 5; k++) {
		size_t bytes = (n + 8) * adamw_ref_elsize(vr, k);

		if (k == 4 && !vr->pout)
			continue;
		t->h[k] = (char *)calloc(1, bytes);
		if (!t->h[k])
			t_fail_all("malloc %zu", bytes);
		CK(cudaMalloc((void **)&t->draw[k], bytes));
		t->d[k] = t->draw[k] + off * adamw_ref_elsize(vr, k);
	}
	adamw_ref_start(vr, n, seed, t->h[0], t->h[2], t->h[3]);
	for (int k = 0; k < 5; k++)
		if (t->h[k])
			CK(cudaMemcpy(t->d[k], t->h[k],
				      n * adamw_ref_elsize(vr, k),
				      cudaMemcpyHostToDevice));
	t->ha = adamw_ref_args(vr, n, 1);
	t->da = t->ha;
	t->ha.param = (float *)t->h[0];
	t->ha.grad = t->h[1];
	t->ha.exp_avg = t->h[2];
	t->ha.exp_avg_sq = t->h[3];
	t->ha.param_bf16 = (uint16_t *)t->h[4];
	t->da.param = (float *)t->d[0];
	t->da.grad = t->d[1];
	t->da.exp_avg = t->d[2];
	t->da.exp_avg_sq = t->d[3];
	t->da.param_bf16 = (uint16_t *)t->d[4];
}

static void tensor_free(struct tensor *t)
{
	for (int k = 0; k < 5; k++) {
		free(t->h[k]);
		if (t->draw[k])
			CK(cudaFree(t->draw[k]));
	}
}

/* New grads on both sides: wide magnitudes, some zeros. */
static void tensor_grads(struct tensor *t, const struct variant *vr,
			 uint64_t seed)
{
	double sc = vr->scale ? vr->scale : 1;

	for (size_t i = 0; i < t->n; i++) {
		double g = grand(&seed);

		if (vr->gdt)
			((uint16_t *)t->h[1])[i] =
				hk_bf16_from_f32((float)(g * sc));
		else
			((float *)t->h[1])[i] = (float)(g * sc);
	}
	CK(cudaMemcpy(t->d[1], t->h[1], t->n * adamw_ref_elsize(vr, 1),
		      cudaMemcpyHostToDevice));
}

/* 1 if the device arrays equal the host ones byte for byte; else prints
 * the first difference. */
static int tensor_same(const struct tensor *t, const struct variant *vr)
{
	static const char *names[5] = { "p", "g", "m", "v", "pb" };
	int same = 1;

	for (int k = 0; k < 5 && same; k++) {
		size_t es = adamw_ref_elsize(vr, k), bytes = t->n * es;
		char *back;

		if (!t->h[k])
			continue;
		back = (char *)malloc(bytes);
		CK(cudaMemcpy(back, t->d[k], bytes, cudaMemcpyDeviceToHost));
		for (size_t i = 0; i < t->n; i++) {
			if (memcmp(back + i * es, t->h[k] + i * es, es)) {
				uint32_t a = 0, b = 0;

				memcpy(&a, back + i * es, es);
				memcpy(&b, t->h[k] + i * es, es);
				t_diag("n=%zu %s[%zu]: gpu 0x%08x cpu 0x%08x",
				       t->n, names[k], i, a, b);
				same = 0;
				break;
			}
		}
		free(back);
	}
	return same;
}

static void test_batches(void)
{
	static const size_t lens[] = { 1, 15, 16, 17, 1023, (1 << 20) + 3 };
	enum { NL = sizeof(lens) / sizeof(lens[0]) };

	for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
		const struct variant *vr = &variants[v];

		for (int off = 0; off < 2; off++) {
			struct tensor t[NL];
			struct hk_adamw_args da[NL];
			int rc = 0, same = 1;

			for (int i = 0; i < NL; i++)
				tensor_new(&t[i], vr, lens[i], off,
					   v * 100 + i);
			for (int64_t s = 1; s <= 10; s++) {
				for (int i = 0; i < NL; i++) {
					tensor_grads(&t[i], vr, s * 1000 + i);
					t[i].ha.step = t[i].da.step = s;
					da[i] = t[i].da;
					rc |= hk_adamw_step(&t[i].ha);
				}
				rc |= hk_adamw_step_cuda(da, NL, NULL, NULL);
			}
			CK(cudaDeviceSynchronize());
			for (int i = 0; i < NL; i++)
				same &= tensor_same(&t[i], vr);
			t_ok(rc == 0 && same, "%s, %s pointers: 6 lengths in "
			     "one call, 10 steps = CPU bit for bit", vr->name,
			     off ? "element-aligned" : "16-byte aligned");
			for (int i = 0; i < NL; i++)
				tensor_free(&t[i]);
		}
	}
}

static void test_many(void)
{
	enum { NT = 40 };
	const struct variant *vr = &variants[2];
	struct tensor t[NT];
	struct hk_adamw_args da[NT];
	int rc = 0, same = 1;

	for (int i = 0; i < NT; i++) {
		tensor_new(&t[i], vr, 1 + 997 * i, i & 1, i);
		tensor_grads(&t[i], vr, 50 + i);
		da[i] = t[i].da;
		rc |= hk_adamw_step(&t[i].ha);
	}
	rc |= hk_adamw_step_cuda(da, NT, NULL, NULL);
	CK(cudaDeviceSynchronize());
	for (int i = 0; i < NT; i++)
		same &= tensor_same(&t[i], vr);
	t_ok(rc == 0 && same, "%d tensors in one call (several launches) = CPU",
	     NT);
	for (int i = 0; i < NT; i++)
		tensor_free(&t[i]);
}

static void test_found_inf(void)
{
	const struct variant *vr = &variants[4];
	struct tensor t[3];
	struct hk_adamw_args da[3];
	int *flag, h = 0, same = 1;

	CK(cudaMalloc((void **)&flag, sizeof(int)));
	for (int i = 0; i < 3; i++) {
		tensor_new(&t[i], vr, 5000 + 3 * i, i == 1, i);
		tensor_grads(&t[i], vr, 10 + i);
		da[i] = t[i].da;
		da[i].flags = HK_ADAMW_CHECK_FINITE;
	}
	((uint16_t *)t[2].h[1])[4999] = 0x7fc0;		/* NaN */
	CK(cudaMemcpy(t[2].d[1], t[2].h[1], 2 * t[2].n,
		      cudaMemcpyHostToDevice));
	CK(cudaMemset(flag, 0, sizeof(int)));
	t_ok(hk_adamw_step_cuda(da, 3, flag, NULL) == 0, "check: enqueued");
	CK(cudaMemcpy(&h, flag, sizeof(int), cudaMemcpyDeviceToHost));
	t_ok(h == 1, "check: a NaN grad in the third tensor sets the flag");
	for (int i = 0; i < 3; i++)	/* the host side: as it was */
		same &= tensor_same(&t[i], vr);
	t_ok(same, "check: no tensor touched");
	for (int i = 0; i < 3; i++)
		da[i].flags = 0;
	t_ok(hk_adamw_step_cuda(da, 3, flag, NULL) == 0 &&
	     cudaDeviceSynchronize() == cudaSuccess,
	     "preset flag: enqueued");
	same = 1;
	for (int i = 0; i < 3; i++)
		same &= tensor_same(&t[i], vr);
	t_ok(same, "preset flag: no tensor touched");
	da[0].flags = HK_ADAMW_CHECK_FINITE;
	t_ok(hk_adamw_step_cuda(da, 3, NULL, NULL) == -EINVAL,
	     "CHECK_FINITE without a flag: -EINVAL (%s)", hk_adamw_error());
	da[0].flags = 0;
	da[1].found_inf = 1;
	t_ok(hk_adamw_step_cuda(da, 3, NULL, NULL) == HK_ADAMW_SKIPPED,
	     "args.found_inf: HK_ADAMW_SKIPPED, nothing enqueued");
	CK(cudaFree(flag));
	for (int i = 0; i < 3; i++)
		tensor_free(&t[i]);
}

int main(void)
{
	int count = 0;

	if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0)
		t_skip_all("no CUDA device");
	hk_adamw_force_isa(HK_ISA_SCALAR);	/* the reference path */
	test_batches();
	test_many();
	test_found_inf();
	return t_done();
}
