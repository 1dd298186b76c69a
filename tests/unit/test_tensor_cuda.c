// SPDX-License-Identifier: MIT
/*
 * test_tensor_cuda — the "cuda" device tier (libhmm/src/engine/dev_cuda.c).
 *
 * On a real GPU, or on the fake driver (tests/fakecuda, put first with
 * LD_LIBRARY_PATH by tests/integration/test_cuda_fake.sh):
 *  - tensors 4x the device budget are written on the host, mapped
 *    READ|WRITE at the device (host -> device copies; the chunks become
 *    dirty there), pushed out by the next ones (device -> host copies,
 *    then the store) and read back exact on the host, while a thread
 *    samples the device tier's resident bytes against the budget;
 *  - chunks 4x the staging buffers (four pieces per copy, the buffers
 *    reused within one copy) and a tensor whose last chunk is smaller
 *    than the granularity;
 *  - two threads cycling their own tensors through the device at once;
 *  - config.chunk_bytes not a multiple of the granularity: -EINVAL
 *    naming chunk_bytes.
 * On the fake only: bytes written at the device (through the pointer:
 * it is host memory there) come back on the host, the driver's own
 * count of device bytes never passes the budget, libhmm leaves no
 * context current on the application's thread (it must not change the
 * caller's CUDA state), and the driver saw no contract violation and no
 * leak.
 *
 * Modes for the fake (argv[1]; skipped without it): "fail" expects
 * FAKECUDA_FAIL=<entry>:N failing one driver call while each tensor is
 * mapped read-write at the device, then read at the host: the one
 * libhmm call that needed it (a map; in shared mode, where a device map
 * is staged, maybe an unmap's copy back) fails with -ENOMEM/-EIO naming
 * its tensor, the same call works after, every tensor's bytes stay
 * intact; "evictfail" expects cuMemcpyDtoHAsync_v2 to fail under an
 * eviction (see mode_evictfail); "openfail CALL" expects an
 * out-of-memory failure of CALL during hmm_open — -ENOMEM naming it,
 * and the next open works; "gran" expects FAKECUDA_GRAN above 2 MiB —
 * hmm_open says -EINVAL naming chunk_bytes; "nobudget" runs the cycle
 * with config.device_budget 0 (the device's own: FAKECUDA_MEM small).
 *
 * Without a GPU or driver: skipped (77), with the reason.
 *
 * t: tsan (built under TSan too; test_cuda_fake.sh runs that build on
 * the fake as well)
 */
#include <dlfcn.h>

#include "t.h"

#include "fakecuda/fakecuda.h"
#include "hmm.h"
#include "hmm_mode.h"
#include "dev_t.h"

#define MiB	(1ull << 20)

static fakecuda_stats_fn fake;		/* set when the fake is loaded */

static void fake_find(void)
{
	void *l = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

	if (l) {
		fake = (fakecuda_stats_fn)dlsym(l, "fakecuda_stats");
		dlclose(l);
	}
}

static char path[4200];		/* the open context's store */

static int cuda_open(struct hmm **h, const char *name, uint32_t chunk,
		     uint64_t dev_budget)
{
	struct hmm_config cfg;

	snprintf(path, sizeof(path), "%s/%s", t_tmpdir(), name);
	hmm_config_default(&cfg);
	cfg.store_path = path;
	cfg.store_size = 128 * MiB;
	cfg.host_budget = 32 * MiB;
	cfg.chunk_bytes = chunk;
	cfg.device = "cuda";
	cfg.device_budget = dev_budget;
	hmm_test_mode(&cfg);
	return hmm_open(&cfg, h);
}

static struct hmm *open_or_skip(const char *name, uint32_t chunk,
				uint64_t dev_budget)
{
	struct hmm *h;

	t_dev_opened(cuda_open(&h, name, chunk, dev_budget), "no GPU");
	fake_find();
	return h;
}

/* The disk is shared: no store is left behind. */
static void cuda_close(struct hmm *h)
{
	hmm_close(h);
	unlink(path);
}

/* The fake's count of device bytes (cuMemCreate'd), for the sampler. */
static uint64_t fake_dev_used(void)
{
	struct fakecuda_stats fs;

	fake(&fs);
	return fs.dev_used;
}

/* ---- 4x the budget through the device -------------------------------- */

#define NT	8
#define TB	(8 * MiB)

/* budget 0: the device's own (90% of what cuMemGetInfo says is free) */
static void test_cycle(uint64_t budget)
{
	struct t_dev_sampler smp = { 0 };
	struct hmm_tensor *ts[NT];
	struct fakecuda_stats fs;
	struct hmm_stats st;
	struct hmm *h;
	void *p;
	int i, r, ok;

	h = open_or_skip("store-cycle", 0, budget);
	t_diag("driver: %s", fake ? "the fake (tests/fakecuda)" : "real");
	hmm_stats(h, &st);
	smp.budget = st.tier[HMM_TIER_DEVICE].capacity;
	if (budget && smp.budget != budget)
		t_fail_all("device capacity %llu, not the budget %llu",
			   (unsigned long long)smp.budget,
			   (unsigned long long)budget);
	for (i = 0; i < NT; i++) {
		char name[16];

		snprintf(name, sizeof(name), "g%d", i);
		ts[i] = t_dev_filled(h, name, TB, 50 + i);
	}
	smp.h = h;
	smp.fake_bytes = fake ? fake_dev_used : NULL;
	t_dev_sampler_start(&smp);
	ok = 1;
	for (i = 0; i < NT; i++) {
		r = hmm_map(ts[i], 0, HMM_ALL, HMM_TIER_DEVICE, HMM_READ |
			    HMM_WRITE, &p);
		ok &= r == 0;
		/* a write at the device, in the last chunk: the one whose
		 * host -> device copy finished last */
		if (r == 0 && fake && i % 2)
			memset((char *)p + TB - 4096, 0xa0 + i, 4096);
		if (r == 0)
			hmm_unmap(ts[i], p);	/* now dirty at the device */
	}
	t_ok(ok, "mapped %d x 8 MiB at the device (read + write)", NT);
	ok = 1;
	for (i = 0; i < NT; i++) {
		uint8_t *want = malloc(TB);

		if (hmm_map(ts[i], 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p)) {
			ok = 0;
			free(want);
			continue;
		}
		t_fill(want, TB, 50 + i);
		if (fake && i % 2)
			memset(want + TB - 4096, 0xa0 + i, 4096);
		ok &= !memcmp(p, want, TB);
		hmm_unmap(ts[i], p);
		free(want);
	}
	t_ok(ok, "device-dirty tensors come back exact through D2H and the "
	     "store%s", fake ? " (with the bytes written at the device)" :
	     "");
	t_dev_sampler_stop(&smp);
	hmm_stats(h, &st);
	t_ok(st.tier[HMM_TIER_DEVICE].peak <= smp.budget && !smp.over,
	     "device peak %llu within the %llu-byte budget%s, %u samples, "
	     "%u over", (unsigned long long)st.tier[HMM_TIER_DEVICE].peak,
	     (unsigned long long)smp.budget, budget ? "" : " (the "
	     "device's own)", smp.samples, smp.over);
	t_ok(st.tier[HMM_TIER_DEVICE].bytes_in >= (uint64_t)NT * TB &&
	     st.tier[HMM_TIER_DEVICE].bytes_out > 0, "copies both ways "
	     "(%llu in, %llu out)",
	     (unsigned long long)st.tier[HMM_TIER_DEVICE].bytes_in,
	     (unsigned long long)st.tier[HMM_TIER_DEVICE].bytes_out);
	if (fake) {
		fake(&fs);
		t_ok(fs.dev_peak <= smp.budget && !smp.fake_over, "the "
		     "driver's device bytes peaked at %llu, within the "
		     "budget", (unsigned long long)fs.dev_peak);
		t_ok(!fs.ctx_current, "libhmm left the application's thread "
		     "without a context current (%llu stacked)",
		     (unsigned long long)fs.ctx_current);
	}
	cuda_close(h);
}

/* ---- multi-piece copies and a tail chunk under the granularity -------- */

#define NB	3
#define BC	(16 * MiB)		/* 4 staging pieces per copy */
#define BB	(BC + 12288)		/* a 16 MiB chunk and a 12 KiB one */

static void test_big_chunks(void)
{
	struct hmm_tensor *ts[NB];
	uint8_t *want = malloc(BB);
	struct hmm *h;
	void *p;
	int i, ok = 1;

	h = open_or_skip("store-big", BC, 40 * MiB);
	for (i = 0; i < NB; i++) {
		char name[16];

		snprintf(name, sizeof(name), "b%d", i);
		ts[i] = t_dev_filled(h, name, BB, 70 + i);
	}
	for (i = 0; i < NB; i++) {
		if (hmm_map(ts[i], 0, HMM_ALL, HMM_TIER_DEVICE, HMM_READ |
			    HMM_WRITE, &p)) {
			t_diag("map b%d: %s", i, hmm_last_error());
			ok = 0;
			continue;
		}
		if (fake)	/* the last piece of the big chunk, the tail */
			memset((char *)p + BC - 4096, 0xb0 + i, 8192);
		hmm_unmap(ts[i], p);
	}
	for (i = 0; i < NB; i++) {
		if (hmm_map(ts[i], 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p)) {
			ok = 0;
			continue;
		}
		t_fill(want, BB, 70 + i);
		if (fake)
			memset(want + BC - 4096, 0xb0 + i, 8192);
		ok &= !memcmp(p, want, BB);
		hmm_unmap(ts[i], p);
	}
	t_ok(ok, "16 MiB chunks (4 staging pieces) and 12 KiB tail chunks "
	     "round-trip exact through a 40 MiB device%s", fake ?
	     " (with bytes written at the device)" : "");
	cuda_close(h);
	free(want);
}

/* ---- two threads at once ---------------------------------------------- */

#define NTH	2
#define PER	4
#define TT	(4 * MiB)

struct worker {
	struct hmm_tensor *ts[PER];
	int id, bad;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int round, i;
	void *p;

	for (round = 0; round < 3; round++)
		for (i = 0; i < PER; i++) {
			int tier = (round + i) % 2 ? HMM_TIER_HOST :
				   HMM_TIER_DEVICE;

			if (hmm_map(w->ts[i], 0, HMM_ALL, tier, HMM_READ |
				    HMM_WRITE, &p)) {
				w->bad++;
				continue;
			}
			hmm_unmap(w->ts[i], p);
		}
	return NULL;
}

static void test_threads(void)
{
	struct worker w[NTH];
	struct hmm *h;
	int i, j, ok = 1, bad = 0;

	h = open_or_skip("store-threads", 0, 12 * MiB);
	for (i = 0; i < NTH; i++) {
		w[i].id = i;
		w[i].bad = 0;
		for (j = 0; j < PER; j++) {
			char name[16];

			snprintf(name, sizeof(name), "w%d.%d", i, j);
			w[i].ts[j] = t_dev_filled(h, name, TT,
						  100 + i * PER + j);
		}
	}
	pthread_t thr[NTH];

	for (i = 0; i < NTH; i++)
		pthread_create(&thr[i], NULL, worker_main, &w[i]);
	for (i = 0; i < NTH; i++) {
		pthread_join(thr[i], NULL);
		bad += w[i].bad;
	}
	for (i = 0; i < NTH; i++)
		for (j = 0; j < PER; j++)
			ok &= t_dev_exact(w[i].ts[j], TT, 100 + i * PER + j, -1);
	t_ok(!bad && ok, "2 threads x 4 tensors x 3 rounds through a 12 MiB "
	     "device: %d failed maps, bytes %s", bad, ok ? "exact" :
	     "WRONG");
	cuda_close(h);
}

/* ---- bad granularity -------------------------------------------------- */

static void test_small_chunks(void)
{
	struct hmm *h;
	int r = cuda_open(&h, "store-gran", 4096, 16 * MiB);

	if (r == 0)
		cuda_close(h);
	unlink(path);
	t_ok(r == -EINVAL && strstr(hmm_last_error(), "chunk_bytes"),
	     "chunk_bytes 4096 under the granularity: %d (%s)", r,
	     hmm_last_error());
}

/* ---- fake only: an injected cuMemCreate failure ------------------------ */

#define NF	4

/* One call of mode_fail's round for tensor i, retried once if it fails:
 * 0 map at the device (read-write) and unmap there, 1 map at the host.
 * A failure is recorded in *f; returns 0 when the call (or its retry)
 * worked. */
struct fail_rec {
	int failed, named, ok, again;
	char err[512];
};

static int fail_round(struct hmm_tensor *t, int i, int step,
		      struct fail_rec *f)
{
	int tier = step ? HMM_TIER_HOST : HMM_TIER_DEVICE;
	unsigned access = step ? HMM_READ : HMM_READ | HMM_WRITE;
	int r, try, at_unmap = 0;
	char name[16];
	void *p;

	snprintf(name, sizeof(name), "f%d", i);
	for (try = 0; try < 2; try++) {
		r = at_unmap ? hmm_unmap(t, p) :
		    hmm_map(t, 0, HMM_ALL, tier, access, &p);
		if (r == 0 && !at_unmap) {
			r = hmm_unmap(t, p);
			/* shared mode: the copy back failed, still mapped */
			at_unmap = r != 0;
		}
		if (r == 0) {
			if (try)
				f->again = 1;
			return 0;
		}
		if (try)
			break;
		snprintf(f->err, sizeof(f->err), "%s", hmm_last_error());
		t_diag("%s f%d at the %s: %d %s", at_unmap ? "unmap" : "map",
		       i, step ? "host" : "device", r, f->err);
		if (f->failed < 0 && (r == -ENOMEM || r == -EIO)) {
			f->failed = i;
			f->named = strstr(f->err, name) != NULL;
		} else {
			f->ok = 0;
		}
	}
	return r;	/* the failure was one call: this is a second */
}

/* The failure modes' start: four 8 MiB tensors (one chunk each, two
 * staging pieces per copy) with dev_budget bytes of device. */
static struct hmm *fail_open(const char *mode, uint64_t dev_budget,
			     struct hmm_tensor **ts)
{
	char name[32];
	struct hmm *h;
	int i;

	snprintf(name, sizeof(name), "store-%s", mode);
	h = open_or_skip(name, 8 * MiB, dev_budget);
	if (!fake)
		t_skip_all("mode %s needs the fake driver", mode);
	for (i = 0; i < NF; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		ts[i] = t_dev_filled(h, name, TB, 200 + i);
	}
	return h;
}

/* ... and their end: no byte lost. */
static int fail_close(struct hmm *h, struct hmm_tensor **ts)
{
	int i, ok = 1;

	for (i = 0; i < NF; i++)
		ok &= t_dev_exact(ts[i], TB, 200 + i, -1);
	t_ok(ok, "every tensor's bytes intact");
	cuda_close(h);
	rmdir(t_tmpdir());
	return t_done();
}

static int mode_fail(void)
{
	struct fail_rec f = { .failed = -1, .ok = 1 };
	struct hmm_tensor *ts[NF];
	struct hmm *h = fail_open("fail", 32 * MiB, ts);
	int i;

	for (i = 0; i < NF; i++) {
		f.ok &= fail_round(ts[i], i, 0, &f) == 0;
		f.ok &= fail_round(ts[i], i, 1, &f) == 0;
	}
	t_ok(f.failed >= 0 && f.ok, "one call failed with -ENOMEM/-EIO "
	     "(tensor f%d), the rest worked", f.failed);
	t_ok(f.named, "its detail names the tensor: %s", f.err);
	t_ok(f.again, "the same call works once the driver does");
	return fail_close(h, ts);
}

/* ---- fake only: a failure while opening -------------------------------- */

/* FAKECUDA_FAIL=<entry>:<nth> with an out-of-memory failure while
 * hmm_open sets the device up: -ENOMEM (not "no GPU") naming the call,
 * everything undone (the fake counts any leak), and the next open,
 * with the driver working again, goes through. */
static int mode_openfail(const char *call)
{
	struct hmm *h;
	int r = cuda_open(&h, "store-openfail", 0, 16 * MiB);

	fake_find();
	if (!fake) {
		rmdir(t_tmpdir());
		t_skip_all("mode openfail needs the fake driver");
	}
	if (r == 0)
		cuda_close(h);
	unlink(path);
	t_ok(r == -ENOMEM && strstr(hmm_last_error(), call), "hmm_open: "
	     "%d (%s), naming %s", r, hmm_last_error(), call);
	r = cuda_open(&h, "store-openfail", 0, 16 * MiB);
	t_ok(r == 0, "the next hmm_open works: %d %s", r,
	     r ? hmm_last_error() : "");
	if (r == 0)
		cuda_close(h);
	unlink(path);
	rmdir(t_tmpdir());
	return t_done();
}

/* ---- fake only: a granularity above chunk_bytes ------------------------ */

/* FAKECUDA_FAIL=cuMemcpyDtoHAsync_v2:N (or two in a row): the failure
 * hits an eviction's copy back, which no map waits for.  Every map
 * works (a first failure is retried at once; after a second that chunk
 * is no victim until written again, and the next one is taken),
 * hmm_wait reports it naming the tensor, and no byte is lost. */
static int mode_evictfail(void)
{
	struct hmm_tensor *ts[NF];
	struct hmm_stats st;
	struct hmm *h;
	int i, r, ok = 1;
	void *p;

	if (hmm_test_shared())
		t_skip_all("shared mode keeps nothing at the device between "
			   "maps: there is no eviction to fail");
	/* room for two of the four tensors at the device */
	h = fail_open("evictfail", 16 * MiB, ts);
	for (i = 0; i < NF; i++) {
		r = hmm_map(ts[i], 0, HMM_ALL, HMM_TIER_DEVICE, HMM_READ |
			    HMM_WRITE, &p);
		if (r) {
			t_diag("map f%d: %d %s", i, r, hmm_last_error());
			ok = 0;
			continue;
		}
		hmm_unmap(ts[i], p);
	}
	t_ok(ok, "every map at the device worked, evictions and all");
	r = hmm_wait(h, NULL);
	t_ok(r == -EIO && strstr(hmm_last_error(), "device to host") &&
	     strstr(hmm_last_error(), "(2)"),
	     "hmm_wait reports the failed copy back, the driver's error "
	     "named (2, out of memory): %d %s", r, hmm_last_error());
	t_eq(hmm_wait(h, NULL), 0, "once");
	hmm_stats(h, &st);
	t_ok(st.io_errors >= 1, "io_errors counted (%llu)",
	     (unsigned long long)st.io_errors);
	return fail_close(h, ts);
}

static int mode_gran(void)
{
	struct hmm *h;
	int r = cuda_open(&h, "store-gran", 0, 16 * MiB);

	if (r == -ENODEV) {
		rmdir(t_tmpdir());
		t_skip_all("no GPU: %s", hmm_last_error());
	}
	fake_find();
	if (!fake)
		t_skip_all("mode gran needs the fake driver");
	if (r == 0)
		cuda_close(h);
	unlink(path);
	t_ok(r == -EINVAL && strstr(hmm_last_error(), "chunk_bytes"),
	     "granularity above the 2 MiB chunks: %d (%s)", r,
	     hmm_last_error());
	rmdir(t_tmpdir());
	return t_done();
}

int main(int argc, char **argv)
{
	struct fakecuda_stats fs;

	if (argc > 1 && !strcmp(argv[1], "fail"))
		return mode_fail();
	if (argc > 1 && !strcmp(argv[1], "evictfail"))
		return mode_evictfail();
	if (argc > 1 && !strcmp(argv[1], "gran"))
		return mode_gran();
	if (argc > 2 && !strcmp(argv[1], "openfail"))
		return mode_openfail(argv[2]);
	if (argc > 1 && !strcmp(argv[1], "nobudget")) {
		test_cycle(0);	/* with FAKECUDA_MEM small */
		return t_done();
	}
	test_cycle(16 * MiB);
	test_big_chunks();
	test_threads();
	test_small_chunks();
	rmdir(t_tmpdir());
	if (fake) {
		fake(&fs);
		t_ok(!fs.violations && !fs.leaks, "the fake driver saw %llu "
		     "calls, %llu contract violations, %llu leaks",
		     (unsigned long long)fs.calls,
		     (unsigned long long)fs.violations,
		     (unsigned long long)fs.leaks);
	}
	return t_done();
}
