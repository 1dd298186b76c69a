// SPDX-License-Identifier: MIT
/*
 * hmm-bench uvm — CUDA unified memory oversubscribed 1.5x, three ways:
 * a working set of 1.5x the device memory left free (--device-mem; the
 * rest of the GPU is held by a plain cuMemAlloc ballast) is swept by a
 * kernel (uvm_sweep.cu: +1 on every float) block after block in the same
 * order every pass:
 *   fault   one cuMemAllocManaged range, no hints: the driver's demand
 *           faulting and its own eviction;
 *   advise  the same with cuMemAdvise only: preferred location host,
 *           accessed by the GPU (hmm's uvm device sets the same);
 *   hmm     one hmm tensor per block on libhmm's "uvm" device with the
 *           schedule policy: each block mapped at the device (hmm
 *           prefetches the next ones, prefetch_depth ahead, and evicts
 *           within device_budget), swept, unmapped.
 * Each mode's pass time is the median of --passes timed passes after one
 * untimed (the one hmm records its schedule in); every block's first and
 * last floats are checked against the number of sweeps.  Fields:
 * fault_s, advise_s, hmm_s, ratio_fault_over_hmm (the target is >= 2).
 *
 * GPU only: without a driver, a GPU, managed memory or the kernel
 * (hmm-bench built without nvcc) it says which and exits 77.  The kernel
 * is launched through the driver API (cuda_abi.h's lists), so no CUDA
 * runtime is linked.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cuda_abi.h"
#include "hmm.h"

#define MiB	(1ull << 20)

extern const unsigned char hb_uvm_fatbin[] __attribute__((weak));

static struct {
#define F(field, name, sym, params)	CUresult (*field) params;
	HMM_CU_CALLS(F)
	HMM_CU_MANAGED_CALLS(F)
	HMM_CU_LAUNCH_CALLS(F)
#undef F
} cu;

static const struct { const char *sym; size_t off; } syms[] = {
#define S(field, name, sym, params)	{ sym, offsetof(__typeof__(cu), field) },
	HMM_CU_CALLS(S)
	HMM_CU_MANAGED_CALLS(S)
	HMM_CU_LAUNCH_CALLS(S)
#undef S
};

static CUfunction sweep_fn;
static CUdevice dev;

#define SKIP(...)	(fprintf(stderr, "hmm-bench uvm: SKIP " __VA_ARGS__), 77)

/* The driver, a GPU with managed memory and the kernel.  0, or 77 with
 * the reason printed. */
static int uvm_setup(CUcontext *ctx, CUmodule *mod)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	int n = 0, managed = 0, conc = 0;
	CUresult r;
	size_t i;

	if (!hb_uvm_fatbin)
		return SKIP("needs the sweep kernel: hmm-bench was built "
			    "without nvcc\n");
	if (!lib)
		return SKIP("needs a GPU: no driver (dlopen libcuda.so.1: "
			    "%s)\n", dlerror());
	for (i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(lib, syms[i].sym);

		if (!f)
			return SKIP("needs a GPU: the driver has no %s\n",
				    syms[i].sym);
		memcpy((char *)&cu + syms[i].off, &f, sizeof(f));
	}
	if (cu.Init(0) || cu.DeviceGetCount(&n) || n < 1)
		return SKIP("needs a GPU: cuInit or no device visible\n");
	if (cu.DeviceGet(&dev, 0) ||
	    cu.DeviceGetAttribute(&managed, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY,
				  dev) ||
	    cu.DeviceGetAttribute(&conc,
				  CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
				  dev) || !managed || !conc)
		return SKIP("needs a GPU with managed memory and concurrent "
			    "access\n");
	if (cu.DevicePrimaryCtxRetain(ctx, dev))
		return SKIP("needs a GPU: no context on device 0\n");
	if (cu.CtxSetCurrent(*ctx)) {
		cu.DevicePrimaryCtxRelease(dev);
		return SKIP("needs a GPU: no context on device 0\n");
	}
	r = cu.ModuleLoadData(mod, hb_uvm_fatbin);
	if (r || (r = cu.ModuleGetFunction(&sweep_fn, *mod, "hb_uvm_sweep"))) {
		const char *s = NULL;

		cu.GetErrorString(r, &s);
		fprintf(stderr, "hmm-bench uvm: the sweep kernel does not load "
			"on this GPU (built for sm_80 and sm_90a): %s: %s "
			"(%d)\n", *mod ? "cuModuleGetFunction hb_uvm_sweep" :
			"cuModuleLoadData", s ? s : "unknown error", r);
		if (*mod)
			cu.ModuleUnload(*mod);
		cu.DevicePrimaryCtxRelease(dev);
		return 1;
	}
	return 0;
}

/* One sweep of [p, p + bytes), waited for.  0 or the CUresult. */
static CUresult sweep(CUdeviceptr p, uint64_t bytes)
{
	unsigned long long n4 = bytes / 16;
	void *args[] = { &p, &n4 };
	CUresult r = cu.LaunchKernel(sweep_fn, 1024, 1, 1, 256, 1, 1, 0, NULL,
				     args, NULL);

	return r ? r : cu.CtxSynchronize();
}

static int blocks_ok(const float *base, uint64_t block, int nb, float want)
{
	int i;

	for (i = 0; i < nb; i++) {
		const float *b = base + i * (block / 4);

		if (b[0] != want || b[block / 4 - 1] != want)
			return 0;
	}
	return 1;
}

/* fault / advise: one managed range.  The median pass in *s; 0 or 1. */
static int run_managed(uint64_t ws, uint64_t block, int passes, int advise,
		       double *s)
{
	CUmemLocation host = { CU_MEM_LOCATION_TYPE_HOST, 0 };
	CUmemLocation gpu = { CU_MEM_LOCATION_TYPE_DEVICE, dev };
	int nb = ws / block, pass, i, bad = 0;
	double *t = calloc(passes, sizeof(*t));
	CUdeviceptr p;

	if (!t || cu.MemAllocManaged(&p, ws, CU_MEM_ATTACH_GLOBAL)) {
		fprintf(stderr, "hmm-bench uvm: cuMemAllocManaged %llu bytes "
			"failed\n", (unsigned long long)ws);
		free(t);
		return 1;
	}
	memset((void *)(uintptr_t)p, 0, ws);	/* first touch: the host */
	if (advise &&
	    (cu.MemAdvise(p, ws, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, host) ||
	     cu.MemAdvise(p, ws, CU_MEM_ADVISE_SET_ACCESSED_BY, gpu)))
		bad = 1;
	for (pass = 0; pass <= passes && !bad; pass++) {
		double t0 = bench_now();

		for (i = 0; i < nb && !bad; i++)
			bad = sweep(p + (uint64_t)i * block, block) != 0;
		if (pass)
			t[pass - 1] = bench_now() - t0;
	}
	if (!bad && !blocks_ok((const float *)(uintptr_t)p, block, nb,
			       passes + 1)) {
		fprintf(stderr, "hmm-bench uvm: %s: wrong values after the "
			"sweeps\n", advise ? "advise" : "fault");
		bad = 1;
	}
	cu.MemFree(p);
	*s = bench_median(t, passes);
	free(t);
	return bad;
}

/* hmm: one tensor per block on the uvm device.  0 or 1. */
static int run_hmm(uint64_t ws, uint64_t block, uint64_t budget, int passes,
		   double *s, struct hmm_stats *st)
{
	int nb = ws / block, pass, i, bad = 0;
	struct hmm_tensor **ts = calloc(nb, sizeof(*ts));
	double *t = calloc(passes, sizeof(*t));
	struct hmm_config cfg;
	struct hmm *h = NULL;
	void *p;

	hmm_config_default(&cfg);
	cfg.host_budget = ws + 256 * MiB;	/* no store: all on the host */
	cfg.device = "uvm";
	cfg.device_budget = budget;
	cfg.policy = HMM_POLICY_SCHEDULE;
	cfg.prefetch_depth = 2 * block / (2 * MiB);	/* two blocks */
	if (!ts || !t || hmm_open(&cfg, &h)) {
		fprintf(stderr, "hmm-bench uvm: hmm_open: %s\n",
			hmm_last_error());
		bad = 1;
	}
	for (i = 0; i < nb && !bad; i++) {
		int64_t n = block / 4;
		char name[32];

		snprintf(name, sizeof(name), "b%d", i);
		bad = hmm_tensor_new(h, name, HMM_DTYPE_F32, 1, &n, &ts[i]) ||
		      hmm_map(ts[i], 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD,
			      &p);
		if (!bad) {
			memset(p, 0, block);
			hmm_unmap(ts[i], p);
		}
	}
	for (pass = 0; pass <= passes && !bad; pass++) {
		double t0 = bench_now();

		hmm_step_begin(h);
		for (i = 0; i < nb && !bad; i++) {
			p = NULL;
			bad = hmm_map(ts[i], 0, HMM_ALL, HMM_TIER_DEVICE,
				      HMM_READ | HMM_WRITE, &p) ||
			      sweep((uintptr_t)p, block);
			if (p)
				hmm_unmap(ts[i], p);
		}
		hmm_step_end(h);
		if (pass)
			t[pass - 1] = bench_now() - t0;
	}
	for (i = 0; i < nb && !bad; i++) {
		if (hmm_map(ts[i], 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p)) {
			bad = 1;
			break;
		}
		bad = !blocks_ok(p, block, 1, passes + 1);
		hmm_unmap(ts[i], p);
	}
	if (bad)
		fprintf(stderr, "hmm-bench uvm: hmm: %s\n", hmm_last_error()[0]
			? hmm_last_error() : "wrong values after the sweeps");
	if (h) {
		hmm_stats(h, st);
		hmm_close(h);
	}
	*s = bench_median(t, passes);
	free(t);
	free(ts);
	return bad;
}

static const char usage[] =
	"usage: hmm-bench uvm [--device-mem SIZE (8G)] [--block SIZE (64M)] "
	"[--passes N (3)] [--json]\n"
	"  device-mem at least 64M; block a multiple of 2M; passes 1..100\n";

static int bench_uvm(int argc, char **argv)
{
	int64_t devmem = 8ll << 30, block = 64 * MiB;
	uint64_t ws, freeb = 0, total = 0;
	double fault_s = 0, advise_s = 0, hmm_s = 0;
	CUdeviceptr ballast = 0;
	struct hmm_stats st;
	int passes = 3, json = 0, r;
	CUcontext ctx;
	CUmodule mod = NULL;
	const struct bench_arg args[] = {
		{ "--device-mem", BA_SIZE, &devmem, 64 * MiB, 1ll << 50 },
		{ "--block", BA_SIZE, &block, 2 * MiB, 1ll << 40, 2 * MiB },
		{ "--passes", BA_INT, &passes, 1, 100 },
		{ "--json", BA_FLAG, &json },
		{ NULL }
	};

	bench_args("uvm", usage, argc, argv, args);
	r = uvm_setup(&ctx, &mod);
	if (r)
		return r;
	/* leave devmem free: the rest of the GPU is ballast */
	cu.MemGetInfo(&freeb, &total);
	r = 1;
	if (freeb < (uint64_t)devmem)
		fprintf(stderr, "hmm-bench uvm: %llu bytes free on the GPU, "
			"less than --device-mem\n", (unsigned long long)freeb);
	else if (freeb - devmem > 64 * MiB &&
		 cu.MemAlloc(&ballast, freeb - devmem))
		fprintf(stderr, "hmm-bench uvm: cannot hold the ballast\n");
	else
		r = 0;
	ws = (uint64_t)devmem * 3 / 2 / block * block;
	r = r || run_managed(ws, block, passes, 0, &fault_s) ||
	    run_managed(ws, block, passes, 1, &advise_s) ||
	    run_hmm(ws, block, (uint64_t)devmem / 10 * 8, passes, &hmm_s, &st);
	if (ballast)
		cu.MemFree(ballast);
	cu.ModuleUnload(mod);
	cu.DevicePrimaryCtxRelease(dev);
	if (r)
		return 1;
	printf("uvm: working set %llu MiB over %lld MiB of device memory, "
	       "%lld MiB blocks, median of %d passes\n",
	       (unsigned long long)(ws / MiB), (long long)(devmem / MiB),
	       (long long)(block / MiB), passes);
	printf("  fault %.3f s  advise %.3f s  hmm %.3f s  fault/hmm %.2f\n",
	       fault_s, advise_s, hmm_s, fault_s / hmm_s);
	if (json) {
		bench_json_begin(stdout, "uvm");
		bench_json_int(stdout, "device_mem", devmem);
		bench_json_int(stdout, "working_set", ws);
		bench_json_int(stdout, "block", block);
		bench_json_int(stdout, "passes", passes);
		bench_json_num(stdout, "fault_s", fault_s);
		bench_json_num(stdout, "advise_s", advise_s);
		bench_json_num(stdout, "hmm_s", hmm_s);
		bench_json_num(stdout, "ratio_fault_over_hmm",
			       fault_s / hmm_s);
		bench_json_int(stdout, "hmm_device_bytes_in",
			       st.tier[HMM_TIER_DEVICE].bytes_in);
		bench_json_int(stdout, "hmm_prefetch_hits", st.prefetch_hits);
		bench_json_end(stdout);
	}
	return 0;
}

HMM_BENCH(uvm, "CUDA unified memory 1.5x oversubscribed: demand faults, "
	  "advice, hmm's prefetch (GPU)", bench_uvm);
