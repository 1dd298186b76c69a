// SPDX-License-Identifier: MIT
/*
 * test_dlpack — hmm_dlpack_export describes a mapped tensor exactly
 * (data, shape, dtype, device) and its deleter unmaps it; then
 * tests/unit/test_dlpack.py imports one into PyTorch with
 * torch.utils.dlpack.from_dlpack through libhmm.so and checks the bytes
 * (skipped when /usr/bin/python3 has no torch or libhmm.so is not built).
 *
 * In shared mode (HMM_TEST_MODE=shared, tests/unit/hmm_mode.h) the same
 * checks run through hmmd, and the script connects to the same hmmd;
 * the device-tier export is then staged through hmmd's host tier
 * (libhmm/src/remote/dev_stage.c).
 *
 * hmm_close with exports alive: the context stays until the last
 * deleter, the exported bytes readable (embedded: the store stays locked
 * until then), including a deleter racing hmm_close on another thread.
 */
#include <pthread.h>
#include <libgen.h>
#include <stddef.h>

#include "t.h"

#include "dlpack.h"
#include "hmm.h"
#include "hmm_mode.h"

static void run_torch(const struct hmm_config *cfg)
{
	char exe[4096], lib[4300], cmd[9000], dmn[400] = "";
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int st;

	if (n <= 0) {
		t_ok(1, "torch.from_dlpack # SKIP no /proc/self/exe");
		return;
	}
	exe[n] = 0;
	/* <B>/tests/unit/test_dlpack -> <B>/lib/libhmm.so.0 */
	snprintf(lib, sizeof(lib), "%s/../../lib/libhmm.so.0",
		 dirname(exe));
	if (access(lib, R_OK) || access("/usr/bin/python3", X_OK) ||
	    access("tests/unit/test_dlpack.py", R_OK)) {
		t_ok(1, "torch.from_dlpack # SKIP no libhmm.so, python3 or "
		     "script here");
		return;
	}
	if (cfg->daemon)	/* shared mode: the same hmmd */
		snprintf(dmn, sizeof(dmn), " %zu '%s'",
			 offsetof(struct hmm_config, daemon), cfg->daemon);
	/* importing torch takes seconds, more on a loaded machine: bound it */
	snprintf(cmd, sizeof(cmd), "timeout 40 /usr/bin/python3 "
		 "tests/unit/test_dlpack.py "
		 "'%s' %zu %zu%s", lib, sizeof(struct hmm_config),
		 offsetof(struct hmm_config, host_budget), dmn);
	st = system(cmd);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
		t_ok(1, "torch.from_dlpack # SKIP torch absent");
		return;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 124) {
		t_ok(1, "torch.from_dlpack # SKIP python took over 40 s");
		return;
	}
	t_ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	     "torch.from_dlpack sees the tensor's bytes, and its deleter "
	     "unmaps");
}

/*
 * Close with an export alive: its bytes stay readable, the store stays
 * open (a second context on it gets -EBUSY) until the deleter, which
 * closes it (ASan: nothing touched after it is freed).
 */
static void close_deferred(const struct hmm_config *base)
{
	struct hmm_config cfg = *base, cfg2;
	char path[4096];
	int64_t n = 1024;
	struct hmm_tensor *t;
	DLManagedTensor *m;
	struct hmm *h, *h2;
	int32_t want[1024];
	void *p;
	int i;

	if (!cfg.daemon) {
		snprintf(path, sizeof(path), "%s/close.store", t_tmpdir());
		cfg.store_path = path;
		cfg.store_size = 16 << 20;
	}
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	if (hmm_tensor_new(h, "c", HMM_DTYPE_I32, 1, &n, &t) ||
	    hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD, &p))
		t_fail_all("tensor c: %s", hmm_last_error());
	for (i = 0; i < 1024; i++)
		want[i] = ((int32_t *)p)[i] = i * 7;
	hmm_unmap(t, p);
	t_eq(hmm_dlpack_export(t, HMM_TIER_HOST, HMM_READ | HMM_WRITE, &m), 0,
	     "export c");
	hmm_close(h);
	t_ok(!memcmp(m->dl_tensor.data, want, sizeof(want)),
	     "after hmm_close the export's bytes are still there");
	((int32_t *)m->dl_tensor.data)[3] = -1;	/* and writable */
	if (!cfg.daemon) {
		cfg2 = cfg;
		t_eq(hmm_open(&cfg2, &h2), -EBUSY,
		     "the store stays open until the deleter (%s)",
		     hmm_last_error());
	} else {
		hmm_test_skip("the store stays open", "hmmd's store");
	}
	m->deleter(m);
	if (!cfg.daemon) {
		t_eq(hmm_open(&cfg, &h2), 0,
		     "the deleter closed the store: it opens again");
		hmm_close(h2);
	}
}

struct race {
	pthread_barrier_t go;
	DLManagedTensor *m;
};

static void *race_deleter(void *arg)
{
	struct race *r = arg;

	pthread_barrier_wait(&r->go);
	r->m->deleter(r->m);
	return NULL;
}

/* A deleter on another thread at the same time as hmm_close: whichever
 * is last closes the context, exactly once (ASan, and no hang). */
static void close_race(const struct hmm_config *cfg)
{
	int64_t n = 4096;
	struct hmm_tensor *t;
	struct race r;
	struct hmm *h;
	pthread_t th;
	int i;

	for (i = 0; i < 200; i++) {
		if (hmm_open(cfg, &h))
			t_fail_all("hmm_open: %s", hmm_last_error());
		if (hmm_tensor_new(h, "r", HMM_DTYPE_U8, 1, &n, &t) ||
		    hmm_dlpack_export(t, HMM_TIER_HOST, HMM_READ, &r.m))
			t_fail_all("export r: %s", hmm_last_error());
		pthread_barrier_init(&r.go, NULL, 2);
		if (pthread_create(&th, NULL, race_deleter, &r))
			t_fail_all("pthread_create");
		pthread_barrier_wait(&r.go);
		hmm_close(h);
		pthread_join(th, NULL);
		pthread_barrier_destroy(&r.go);
	}
	t_eq(i, 200, "hmm_close racing a deleter on another thread, 200 times");
}

int main(void)
{
	struct hmm_config cfg;
	struct hmm_tensor *t;
	DLManagedTensor *m, *m2;
	int64_t shape[3] = { 2, 3, 700 };
	struct hmm *h;
	void *p;
	int r;

	hmm_config_default(&cfg);
	cfg.host_budget = 16 << 20;
	cfg.device = "sim";
	cfg.device_budget = 16 << 20;
	hmm_test_mode(&cfg);
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	if (hmm_tensor_new(h, "w", HMM_DTYPE_BF16, 3, shape, &t))
		t_fail_all("tensor: %s", hmm_last_error());
	if (hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD, &p))
		t_fail_all("map: %s", hmm_last_error());
	t_fill(p, hmm_tensor_bytes(t), 5);
	hmm_unmap(t, p);

	r = hmm_dlpack_export(t, HMM_TIER_HOST, HMM_READ, &m);
	t_eq(r, 0, "export at the host tier");
	t_eq(m->dl_tensor.ndim, 3, "ndim");
	t_ok(m->dl_tensor.shape[0] == 2 && m->dl_tensor.shape[1] == 3 &&
	     m->dl_tensor.shape[2] == 700, "shape");
	t_ok(m->dl_tensor.dtype.code == kDLBfloat &&
	     m->dl_tensor.dtype.bits == 16 && m->dl_tensor.dtype.lanes == 1,
	     "dtype bf16");
	t_eq(m->dl_tensor.device.device_type, kDLCPU, "device CPU");
	t_ok(m->dl_tensor.strides == NULL && m->dl_tensor.byte_offset == 0,
	     "compact, no offset");
	{
		uint8_t want[2 * 3 * 700 * 2];

		t_fill(want, sizeof(want), 5);
		t_ok(!memcmp(m->dl_tensor.data, want, sizeof(want)),
		     "data holds the tensor's bytes");
	}
	t_eq(hmm_tensor_free(t), -EBUSY, "mapped while exported");
	r = hmm_dlpack_export(t, HMM_TIER_DEVICE, HMM_READ, &m2);
	t_eq(r, 0, "a second export at the (sim) device tier (%s)",
	     r ? hmm_last_error() : "");
	t_ok(r == 0 && !memcmp(m2->dl_tensor.data, m->dl_tensor.data,
			       hmm_tensor_bytes(t)),
	     "same bytes there");
	if (r == 0)
		m2->deleter(m2);
	m->deleter(m);
	t_eq(hmm_tensor_free(t), 0, "the deleters unmapped it: free works");

	int64_t s1 = 10;
	struct hmm_tensor *u;
	hmm_tensor_new(h, "u", HMM_DTYPE_U8, 1, &s1, &u);
	t_eq(hmm_dlpack_export(u, HMM_TIER_HOST, 0, &m), -EINVAL,
	     "bad access is refused: %s", hmm_last_error());
	t_eq(hmm_dlpack_export(NULL, HMM_TIER_HOST, HMM_READ, &m), -EINVAL,
	     "no tensor");
	hmm_close(h);

	close_deferred(&cfg);
	close_race(&cfg);
	run_torch(&cfg);
	return t_done();
}
