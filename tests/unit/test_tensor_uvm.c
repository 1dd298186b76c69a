// SPDX-License-Identifier: MIT
/*
 * test_tensor_uvm — the "uvm" device tier (libhmm/src/engine/dev_uvm.c):
 * tensors whose device range is CUDA managed memory that hmm moves.
 *
 * On a real GPU, or on the fake driver (tests/fakecuda, put first with
 * LD_LIBRARY_PATH by tests/integration/test_uvm_fake.sh):
 *  - tensors 3x the device budget are written on the host, mapped
 *    READ|WRITE at the device, written there through the pointer (managed
 *    memory: the host may touch it too), pushed out by the next ones (on
 *    to the store past the host budget) and read back exact on the host,
 *    while a thread samples the device tier's resident bytes against the
 *    budget;
 *  - where the driver says each range is (cuMemRangeGetAttribute): a
 *    mapped tensor was last prefetched to the GPU, an evicted one back to
 *    the host, or, where the driver discards (CUDA 13; the fake unless
 *    FAKECUDA_NODISCARD=1), its device pages discarded and nothing moved
 *    back; every range is advised preferred on the host and accessed
 *    by the GPU (so the driver's fault path migrates nothing itself);
 *  - the schedule policy (embedded mode): in a replayed step, the next
 *    tensors were prefetched to the GPU before they are mapped;
 *  - a region (embedded mode): managed memory with the same advice,
 *    written in place on the host, moved to the GPU by WILLNEED (evicting
 *    a tensor to stay within the budget) and back by COLD, one block
 *    alone, bytes intact, its device bytes given back at the free.
 * On the fake only: the driver's count of device-resident managed bytes
 * never passes the budget and it never had to evict anything itself;
 * libhmm leaves no context current on the application's thread; no
 * contract violation, no leak.
 *
 * Modes (argv[1], fake only): "fail" expects FAKECUDA_FAIL on
 * cuMemPrefetchAsync_v2 (with FAKECUDA_NODISCARD=1),
 * cuMemDiscardAndPrefetchBatchAsync or cuMemAllocManaged: the one call that needed it
 * fails naming its tensor, the next works, no byte is lost; "nomanaged"
 * expects FAKECUDA_NOMANAGED=1: hmm_open says -ENODEV, "lacks managed
 * memory".  Without a GPU or driver: skipped (77), with the reason.
 *
 * t: tsan
 */
#include <dlfcn.h>

#include "t.h"

#include "fakecuda/fakecuda.h"
#include "hmm.h"
#include "hmm_mode.h"
#include "dev_t.h"

#define MiB	(1ull << 20)
#define CU_LAST_PREFETCH	4	/* CU_MEM_RANGE_ATTRIBUTE_* */
#define CU_PREFERRED		2
#define CU_ACCESSED_BY		3
#define CU_CPU			(-1)	/* CU_DEVICE_CPU */

/* dev_stage.c */
#define WHY_SHARED "shared mode: a device map is staged through hmmd and " \
	"its managed range freed at the unmap; nothing stays at the device"

/* What the test asks the driver itself (real or fake), by dlsym. */
static struct {
	fakecuda_stats_fn stats;	/* the fake only */
	int discards;			/* libhmm discards, not prefetches
					   back (dev_uvm.c's tensors) */
	int (*attr)(void *, size_t, int, unsigned long long, size_t);
	int (*retain)(void **, int);
	int (*release)(int);
	int (*push)(void *);
	int (*pop)(void **);
	void *ctx;
} drv;

static void drv_find(void)
{
	void *l = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

	if (!l)
		t_fail_all("libcuda.so.1 not loaded after hmm_open");
	drv.stats = (fakecuda_stats_fn)dlsym(l, "fakecuda_stats");
	*(void **)&drv.attr = dlsym(l, "cuMemRangeGetAttribute");
	*(void **)&drv.retain = dlsym(l, "cuDevicePrimaryCtxRetain");
	*(void **)&drv.release = dlsym(l, "cuDevicePrimaryCtxRelease_v2");
	*(void **)&drv.push = dlsym(l, "cuCtxPushCurrent_v2");
	*(void **)&drv.pop = dlsym(l, "cuCtxPopCurrent_v2");
	/* shared mode's staged maps (dev_stage.c) still prefetch */
	drv.discards = dlsym(l, "cuMemDiscardBatchAsync") &&
		       !(drv.stats && getenv("FAKECUDA_NODISCARD")) &&
		       !hmm_test_shared();
	dlclose(l);
	if (!drv.attr || !drv.retain || !drv.push || !drv.pop ||
	    drv.retain(&drv.ctx, 0))
		t_fail_all("the driver's attribute query or context calls");
}

/* One range attribute of [p, p + n) (an int), or -99 when the query
 * failed. */
static int where(void *p, size_t n, int attr)
{
	int v = -99, old;
	void *o;

	if (drv.push(drv.ctx))
		return -99;
	old = drv.attr(&v, 4, attr, (uintptr_t)p, n);
	drv.pop(&o);
	return old ? -99 : v;
}

static void drv_done(void)
{
	if (drv.ctx)
		drv.release(0);
	drv.ctx = NULL;
}

#define HOST_BUDGET	(16 * MiB)	/* under 3x the device's 8 MiB */

static char path[4200];

static int uvm_open(struct hmm **h, const char *name, uint64_t dev_budget,
		    uint32_t policy)
{
	struct hmm_config cfg;

	snprintf(path, sizeof(path), "%s/%s", t_tmpdir(), name);
	hmm_config_default(&cfg);
	cfg.store_path = path;
	cfg.store_size = 128 * MiB;
	cfg.host_budget = HOST_BUDGET;
	cfg.device = "uvm";
	cfg.device_budget = dev_budget;
	cfg.policy = policy;
	cfg.prefetch_depth = 2;
	cfg.wait_ms = 200;
	hmm_test_mode(&cfg);
	return hmm_open(&cfg, h);
}

static struct hmm *open_or_skip(const char *name, uint64_t budget,
				uint32_t policy)
{
	struct hmm *h;

	t_dev_opened(uvm_open(&h, name, budget, policy),
		     "no GPU with managed memory");
	if (!drv.attr)
		drv_find();
	return h;
}

static void uvm_close(struct hmm *h)
{
	hmm_close(h);
	unlink(path);
}

/* The fake's count of device-resident managed bytes, for the sampler. */
static uint64_t fake_managed_dev(void)
{
	struct fakecuda_stats fs;

	drv.stats(&fs);
	return fs.managed_dev;
}

/* ---- 3x the budget through the device --------------------------------- */

#define NT	6
#define TB	(4 * MiB)
#define BUDGET	(8 * MiB)

static void test_cycle(void)
{
	struct t_dev_sampler smp = { .budget = BUDGET };
	struct hmm_tensor *ts[NT];
	struct fakecuda_stats fs;
	struct hmm_stats st;
	void *dp[NT] = { 0 };
	int i, ok = 1, on_gpu = 1, advised = 1, back = 1;
	struct hmm *h;

	h = open_or_skip("store-cycle", BUDGET, HMM_POLICY_LRU);
	t_diag("driver: %s", drv.stats ? "the fake (tests/fakecuda)" : "real");
	for (i = 0; i < NT; i++) {
		char name[16];

		snprintf(name, sizeof(name), "u%d", i);
		ts[i] = t_dev_filled(h, name, TB, 70 + i);
	}
	smp.h = h;
	smp.fake_bytes = drv.stats ? fake_managed_dev : NULL;
	t_dev_sampler_start(&smp);
	for (i = 0; i < NT; i++) {
		if (hmm_map(ts[i], 0, HMM_ALL, HMM_TIER_DEVICE, HMM_READ |
			    HMM_WRITE, &dp[i])) {
			t_diag("map u%d at the device: %s", i,
			       hmm_last_error());
			ok = 0;
			continue;
		}
		on_gpu &= where(dp[i], TB, CU_LAST_PREFETCH) == 0;
		advised &= where(dp[i], TB, CU_PREFERRED) == CU_CPU &&
			   where(dp[i], TB, CU_ACCESSED_BY) == 0;
		memset((char *)dp[i] + TB - 4096, 0xb0 + i, 4096);
		hmm_unmap(ts[i], dp[i]);	/* dirty at the device */
	}
	t_ok(ok, "mapped %d x 4 MiB at the device (read + write)", NT);
	t_ok(on_gpu, "each mapped range was last prefetched to the GPU");
	t_ok(advised, "each range is advised preferred on the host, "
	     "accessed by the GPU");
	if (hmm_test_shared()) {
		hmm_test_skip("the evicted tensors were prefetched back to the "
			      "host", WHY_SHARED);
	} else if (drv.discards) {
		t_ok(1, "the evicted tensors were discarded, not prefetched "
		     "back (the fake's counts below)");
	} else {
		for (i = 0; i + 2 < NT; i++)	/* the budget holds two */
			back &= dp[i] && where(dp[i], TB, CU_LAST_PREFETCH) ==
					 CU_CPU;
		t_ok(back, "the evicted tensors were prefetched back to the "
		     "host");
	}
	for (i = 0; i < NT; i++)
		ok &= t_dev_exact(ts[i], TB, 70 + i, 0xb0 + i);
	t_ok(ok, "device-dirty tensors come back exact on the host, with the "
	     "bytes written at the device");
	t_dev_sampler_stop(&smp);
	hmm_stats(h, &st);
	t_ok(st.tier[HMM_TIER_DEVICE].peak <= BUDGET && !smp.over,
	     "device peak %llu within the %llu-byte budget, %u samples, %u "
	     "over", (unsigned long long)st.tier[HMM_TIER_DEVICE].peak,
	     BUDGET, smp.samples, smp.over);
	t_ok(st.tier[HMM_TIER_HOST].peak <= HOST_BUDGET &&
	     st.tier[HMM_TIER_STORE].bytes_in > 0, "evicted host chunks went "
	     "on to the store (%llu bytes) within the %llu-byte host budget",
	     (unsigned long long)st.tier[HMM_TIER_STORE].bytes_in,
	     HOST_BUDGET);
	t_ok(st.tier[HMM_TIER_DEVICE].bytes_in >= NT * TB &&
	     st.tier[HMM_TIER_DEVICE].bytes_out > 0, "copies both ways (%llu "
	     "in, %llu out)",
	     (unsigned long long)st.tier[HMM_TIER_DEVICE].bytes_in,
	     (unsigned long long)st.tier[HMM_TIER_DEVICE].bytes_out);
	if (drv.stats) {
		drv.stats(&fs);
		t_ok(fs.managed_dev_peak <= BUDGET && !smp.fake_over &&
		     fs.managed_dev_peak >= TB, "the driver's device-resident "
		     "managed bytes peaked at %llu, within the budget",
		     (unsigned long long)fs.managed_dev_peak);
		t_eq(fs.driver_evicted, 0, "the driver never evicted on its "
		     "own");
		if (drv.discards)
			t_ok(fs.discarded >= (NT - 2) * TB &&
			     fs.prefetch_host == 0, "%llu bytes discarded at "
			     "the device, %llu moved back to the host",
			     (unsigned long long)fs.discarded,
			     (unsigned long long)fs.prefetch_host);
		else
			t_ok(fs.prefetch_host >= (NT - 2) * TB, "%llu bytes "
			     "moved back to the host by prefetch",
			     (unsigned long long)fs.prefetch_host);
		t_eq(fs.ctx_current, 0, "libhmm left no context current on "
		     "this thread");
	}
	uvm_close(h);
	if (drv.stats) {
		drv.stats(&fs);
		t_eq(fs.managed_bytes, 0, "every managed range freed at "
		     "hmm_close");
	}
}

/* ---- the schedule prefetches ahead -------------------------------------- */

#define NS	8
#define SB	(2 * MiB)		/* one chunk each */

static void test_schedule(void)
{
	struct hmm_tensor *ts[NS];
	void *dp[NS] = { 0 };
	int i, step, ahead = 0, ok = 1;
	struct hmm *h;

	h = open_or_skip("store-sched", 3 * SB, HMM_POLICY_SCHEDULE);
	for (i = 0; i < NS; i++) {
		char name[16];

		snprintf(name, sizeof(name), "s%d", i);
		ts[i] = t_dev_filled(h, name, SB, 90 + i);
	}
	for (step = 0; step < 3; step++) {
		hmm_step_begin(h);
		for (i = 0; i < NS; i++) {
			void *p;

			if (step == 2 && i && dp[i] && !hmm_test_shared())
				ahead += where(dp[i], SB, CU_LAST_PREFETCH) ==
					 0;
			if (hmm_map(ts[i], 0, HMM_ALL, HMM_TIER_DEVICE,
				    HMM_READ, &p)) {
				ok = 0;
				continue;
			}
			dp[i] = p;
			hmm_unmap(ts[i], p);
		}
		hmm_step_end(h);
	}
	t_ok(ok, "3 steps of %d maps at a 3-chunk device", NS);
	if (hmm_test_shared())
		hmm_test_skip("the next tensors prefetched to the GPU ahead",
			      WHY_SHARED);
	else
		t_ok(ahead >= NS - 2, "replayed: %d of %d tensors were on the "
		     "GPU (prefetched) before their map", ahead, NS - 1);
	for (i = 0; i < NS; i++)
		ok &= t_dev_exact(ts[i], SB, 90 + i, -1);
	t_ok(ok, "bytes exact after the steps");
	uvm_close(h);
}

/* ---- a DISCARD map at the device, written at once ------------------------ */

/*
 * The pointer of a DISCARD|WRITE map at the device is written at once
 * (here from the host: managed memory), and read back through the host
 * tier after the unmap: nothing queued on the device's stream may land
 * after that write, neither the map's own populate nor the discard of
 * the same chunks evicted from the device just before.  (The fake runs
 * its discards in stream order, after a delay, and fills them with
 * 0xa5: a discard-and-place under the map, or a populate that did not
 * wait for the eviction's discard, loses the write.)
 */
static void test_discard_map(void)
{
	struct hmm_tensor *t;
	int64_t n = TB;
	uint8_t *p;
	struct hmm *h = open_or_skip("store-dmap", BUDGET, HMM_POLICY_LRU);

	if (hmm_tensor_new(h, "dm", HMM_DTYPE_U8, 1, &n, &t) ||
	    hmm_map(t, 0, HMM_ALL, HMM_TIER_DEVICE, HMM_WRITE | HMM_DISCARD,
		    (void **)&p))
		t_fail_all("DISCARD map at the device: %s", hmm_last_error());
	memset(p, 0x3c, TB);
	hmm_unmap(t, p);
	t_ok(hmm_test_all(t, TB, 0x3c), "a DISCARD map at the device, written "
	     "at once: its bytes come back");
	/* evicted from the device (discarded there), mapped DISCARD again */
	if (hmm_evict(t, 0, HMM_ALL, HMM_TIER_DEVICE) ||
	    hmm_wait(h, t) ||
	    hmm_map(t, 0, HMM_ALL, HMM_TIER_DEVICE, HMM_WRITE | HMM_DISCARD,
		    (void **)&p))
		t_fail_all("evict, DISCARD map again: %s", hmm_last_error());
	memset(p, 0x4d, TB);
	hmm_unmap(t, p);
	t_ok(hmm_test_all(t, TB, 0x4d), "evicted from the device and mapped "
	     "DISCARD there again, written at once: its bytes come back");
	uvm_close(h);
}

/* ---- a region: managed memory hmm moves on advice ---------------------- */

#define RB	(6 * MiB)

static void test_region(void)
{
	struct fakecuda_stats fs0, fs;
	struct hmm_tensor *t;
	struct hmm_stats st;
	uint8_t *want = malloc(RB);
	void *p, *tp;
	struct hmm *h;
	int r;

	if (hmm_test_shared()) {
		hmm_test_skip("regions on the uvm device", "shared mode: "
			      "regions are hmmd's (userfaultfd or hmmk.ko)");
		free(want);
		return;
	}
	h = open_or_skip("store-region", BUDGET, HMM_POLICY_LRU);
	if (drv.stats)
		drv.stats(&fs0);
	t = t_dev_filled(h, "rt", TB, 11);
	if (hmm_map(t, 0, HMM_ALL, HMM_TIER_DEVICE, HMM_READ, &tp))
		t_fail_all("map rt: %s", hmm_last_error());
	hmm_unmap(t, tp);		/* 4 MiB at the device */
	r = hmm_region_new(h, RB, &p);
	t_ok(r == 0, "a 6 MiB region on the uvm device: %d %s", r,
	     r ? hmm_last_error() : "");
	if (r) {
		uvm_close(h);
		free(want);
		return;
	}
	t_ok(where(p, RB, CU_PREFERRED) == CU_CPU &&
	     where(p, RB, CU_ACCESSED_BY) == 0, "it is managed memory, "
	     "preferred on the host, accessed by the GPU");
	t_fill(want, RB, 12);
	memcpy(p, want, RB);		/* the host writes it in place */
	r = hmm_region_advise(h, p, RB, HMM_ADVISE_WILLNEED);
	hmm_stats(h, &st);
	t_ok(r == 0 && where(p, RB, CU_LAST_PREFETCH) == 0, "WILLNEED "
	     "prefetched it to the GPU: %d", r);
	t_ok(st.tier[HMM_TIER_DEVICE].resident <= BUDGET &&
	     st.tier[HMM_TIER_DEVICE].resident >= RB, "within the 8 MiB "
	     "budget (%llu resident: the tensor made room)",
	     (unsigned long long)st.tier[HMM_TIER_DEVICE].resident);
	r = hmm_region_advise(h, p, RB, HMM_ADVISE_COLD);
	hmm_stats(h, &st);
	t_ok(r == 0 && where(p, RB, CU_LAST_PREFETCH) == CU_CPU &&
	     st.tier[HMM_TIER_DEVICE].resident <= BUDGET - RB,
	     "COLD prefetched it back to the host and gave its bytes back "
	     "(%llu resident)",
	     (unsigned long long)st.tier[HMM_TIER_DEVICE].resident);
	t_ok(st.region_evictions == RB / (64 << 10), "%llu blocks counted "
	     "as evicted", (unsigned long long)st.region_evictions);
	t_ok(!memcmp(p, want, RB), "its bytes intact through both moves");
	r = hmm_region_advise(h, (char *)p + MiB, 64 << 10,
			      HMM_ADVISE_WILLNEED);
	t_ok(r == 0 && where((char *)p + MiB, 64 << 10, CU_LAST_PREFETCH) ==
	     0 && where(p, 64 << 10, CU_LAST_PREFETCH) == CU_CPU,
	     "WILLNEED of one block moves that block only");
	t_eq(hmm_region_advise(h, p, RB, 99), -EINVAL, "unknown advice: "
	     "-EINVAL (%s)", hmm_last_error());
	if (drv.stats) {
		drv.stats(&fs);
		t_ok(fs.managed_dev_peak <= BUDGET && !fs.driver_evicted,
		     "the driver's device bytes peaked at %llu, no eviction "
		     "of its own", (unsigned long long)fs.managed_dev_peak);
	}
	if (hmm_region_new(h, 10 * MiB, &tp) == 0) {
		r = hmm_region_advise(h, tp, 10 * MiB, HMM_ADVISE_WILLNEED);
		hmm_stats(h, &st);
		t_ok(r == -ENOMEM && strstr(hmm_last_error(), "region") &&
		     st.tier[HMM_TIER_DEVICE].resident <= BUDGET, "WILLNEED "
		     "of 10 MiB on an 8 MiB budget: -ENOMEM (%s), %llu "
		     "resident", hmm_last_error(),
		     (unsigned long long)st.tier[HMM_TIER_DEVICE].resident);
		t_eq(hmm_region_free(h, tp), 0, "free that region");
	} else {
		t_fail_all("a second region: %s", hmm_last_error());
	}
	t_eq(hmm_region_free(h, p), 0, "free the region");
	hmm_stats(h, &st);
	t_ok(st.tier[HMM_TIER_DEVICE].resident <= TB, "its block at the "
	     "GPU given back (%llu resident)",
	     (unsigned long long)st.tier[HMM_TIER_DEVICE].resident);
	if (drv.stats) {
		drv.stats(&fs);
		t_eq(fs.managed_bytes, fs0.managed_bytes + TB, "its managed "
		     "range freed");
	}
	t_ok(t_dev_exact(t, TB, 11, -1), "the tensor it evicted is exact");
	uvm_close(h);
	free(want);
}

/* ---- failures (the fake) ------------------------------------------------ */

static int mode_fail(void)
{
	struct hmm_tensor *ts[4] = { 0 };
	int i, r, failed = 0, named = 0, ok = 1;
	struct hmm *h;
	void *p;

	h = open_or_skip("store-fail", BUDGET, HMM_POLICY_LRU);
	if (!drv.stats)
		t_skip_all("mode fail needs the fake driver");
	for (i = 0; i < 4; i++) {
		char name[16];
		int64_t n = TB;

		snprintf(name, sizeof(name), "f%d", i);
		r = hmm_tensor_new(h, name, HMM_DTYPE_U8, 1, &n, &ts[i]);
		if (r) {	/* cuMemAllocManaged failed */
			failed++;
			named += strstr(hmm_last_error(), name) != NULL;
			r = hmm_tensor_new(h, name, HMM_DTYPE_U8, 1, &n,
					   &ts[i]);
			if (r)
				t_fail_all("again: %s", hmm_last_error());
		}
		if (hmm_map(ts[i], 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD,
			    &p))
			t_fail_all("%s", hmm_last_error());
		t_fill(p, TB, 30 + i);
		hmm_unmap(ts[i], p);
	}
	for (i = 0; i < 4; i++) {
		r = hmm_map(ts[i], 0, HMM_ALL, HMM_TIER_DEVICE, HMM_READ, &p);
		if (r) {	/* a prefetch failed */
			failed++;
			named += strstr(hmm_last_error(), hmm_tensor_name(ts[i]))
				 != NULL;
			t_diag("%d %s", r, hmm_last_error());
			r = hmm_map(ts[i], 0, HMM_ALL, HMM_TIER_DEVICE,
				    HMM_READ, &p);
		}
		ok &= r == 0;
		if (!r)
			hmm_unmap(ts[i], p);
	}
	t_eq(failed, 1, "exactly one call failed");
	t_eq(named, 1, "... naming its tensor");
	t_ok(ok, "the same call worked after");
	for (i = 0; i < 4; i++)
		ok &= t_dev_exact(ts[i], TB, 30 + i, -1);
	t_ok(ok, "every tensor's bytes intact");
	uvm_close(h);
	drv_done();
	rmdir(t_tmpdir());
	return t_done();
}

static int mode_nomanaged(void)
{
	struct hmm *h;
	int r = uvm_open(&h, "store-nm", BUDGET, HMM_POLICY_LRU);

	if (r == 0)
		uvm_close(h);
	unlink(path);
	rmdir(t_tmpdir());
	t_ok(r == -ENODEV && strstr(hmm_last_error(), "device uvm: ") &&
	     strstr(hmm_last_error(), "lacks managed memory"),
	     "no managed memory: -ENODEV naming it: %d (%s)", r,
	     hmm_last_error());
	return t_done();
}

int main(int argc, char **argv)
{
	struct fakecuda_stats fs;

	if (argc > 1 && !strcmp(argv[1], "fail"))
		return mode_fail();
	if (argc > 1 && !strcmp(argv[1], "nomanaged"))
		return mode_nomanaged();
	test_cycle();
	test_schedule();
	test_discard_map();
	test_region();
	rmdir(t_tmpdir());
	drv_done();
	if (drv.stats) {
		drv.stats(&fs);
		t_ok(!fs.violations && !fs.leaks, "the fake driver saw %llu "
		     "calls, %llu contract violations, %llu leaks",
		     (unsigned long long)fs.calls,
		     (unsigned long long)fs.violations,
		     (unsigned long long)fs.leaks);
	}
	return t_done();
}
