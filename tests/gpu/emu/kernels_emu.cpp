// SPDX-License-Identifier: MIT
/*
 * kernels_emu.cpp — hmm-train's kernels (tools/hmm-train/gpu_kern.cu,
 * with attn_simt.cuh) and hmm-bench uvm's (uvm_sweep.cu) built for the
 * CPU under cuda_emu.h as a library the fake driver loads
 * (FAKECUDA_KERNELS, tests/fakecuda/launch.c), so that hmm-train
 * --device cuda and hmm-bench uvm run for real, launches and all, on
 * tests/fakecuda (test_train_emu.sh, test_bench_uvm.sh).
 *
 *	hk_emu_find(name)	a kernel by its extern "C" name, or NULL
 *	hk_emu_pack(k, params, ok, why, n)
 *				copies a launch's parameters (kernelParams:
 *				a pointer to each), each pointer parameter
 *				checked with ok(); NULL with why on a refusal
 *	hk_emu_run(blob, gx, gy, bx)
 *				runs the grid, then frees the blob
 *
 * The parameter list of each kernel comes from its own prototype (a
 * template over the function pointer), so a launch passing another
 * count or order of arguments than the kernel takes reads what the
 * driver would: whatever its kernelParams point at.
 */
#include "cuda_emu.h"

#include <tuple>
#include <type_traits>

#include "../../../tools/hmm-train/gpu_kern.cu"
#include "../../../tools/hmm-bench/uvm_sweep.cu"

namespace {

struct entry {
	const char *name;
	void *(*pack)(void **params, int (*ok)(const void *), char *why,
		      size_t n);
	void (*run)(void *blob, unsigned gx, unsigned gy, unsigned bx);
};

template <typename... P> struct kern {
	typedef std::tuple<typename std::decay<P>::type...> args_t;

	template <size_t... I>
	static int fill(args_t *t, void **params, int (*ok)(const void *),
			std::index_sequence<I...>)
	{
		int good = 1;

		((std::get<I>(*t) = *(typename std::tuple_element<I, args_t>::type *)
			params[I]), ...);
		((good &= !std::is_pointer<typename std::tuple_element<I,
			args_t>::type>::value ||
			ok((const void *)(uintptr_t)*(const uintptr_t *)params[I])),
		 ...);
		return good;
	}
};

template <typename... P>
static void *pack_for(void (*)(P...), void **params, int (*ok)(const void *),
		      char *why, size_t n, const char *name)
{
	typedef kern<P...> K;
	typename K::args_t *t = new typename K::args_t();

	if (!K::fill(t, params, ok, std::index_sequence_for<P...>())) {
		snprintf(why, n, "%s: a pointer parameter is not device memory",
			 name);
		delete t;
		return NULL;
	}
	return t;
}

template <typename... P>
static void run_for(void (*f)(P...), void *blob, unsigned gx, unsigned gy,
		    unsigned bx)
{
	typedef kern<P...> K;
	typename K::args_t *t = (typename K::args_t *)blob;

	hk_emu::launch(dim3(gx, gy), dim3(bx), [&] { std::apply(f, *t); });
	delete t;
}

#define E(fn)								\
	{ #fn,								\
	  [](void **p, int (*ok)(const void *), char *w, size_t n) {	\
		  return pack_for(fn, p, ok, w, n, #fn); },		\
	  [](void *b, unsigned gx, unsigned gy, unsigned bx) {		\
		  run_for(fn, b, gx, gy, bx); } },

const entry table[] = {
	E(gk_embed_fwd) E(gk_wte_bwd) E(gk_wpe_bwd) E(gk_ln_fwd)
	E(gk_ln_bwd_dx) E(gk_ln_bwd_dgdb) E(gk_bias_grad) E(gk_rows_init)
	E(gk_gelu_fwd) E(gk_gelu_bwd) E(gk_xent) E(gk_pack)
	E(fwd_simt) E(d_rows) E(bwd_dq) E(bwd_dkdv)
	E(hb_uvm_sweep)		/* hmm-bench uvm's */
};

struct blob {
	const entry *e;
	void *args;
};

} /* namespace */

extern "C" void *hk_emu_find(const char *name)
{
	for (const entry &e : table)
		if (!strcmp(e.name, name))
			return (void *)&e;
	return NULL;
}

extern "C" void *hk_emu_pack(void *k, void **params, int (*ok)(const void *),
			     char *why, size_t n)
{
	const entry *e = (const entry *)k;
	blob *b = new blob;

	b->e = e;
	b->args = e->pack(params, ok, why, n);
	if (!b->args) {
		delete b;
		return NULL;
	}
	return b;
}

extern "C" void hk_emu_run(void *p, unsigned gx, unsigned gy, unsigned bx)
{
	blob *b = (blob *)p;

	b->e->run(b->args, gx, gy, bx);
	delete b;
}
