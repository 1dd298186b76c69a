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
 */
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

	run_torch(&cfg);
	return t_done();
}
