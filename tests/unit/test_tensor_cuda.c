// SPDX-License-Identifier: MIT
/*
 * test_tensor_cuda — the "cuda" device tier on a real GPU: tensors 4x the
 * device budget are written on the host, mapped READ|WRITE at the device
 * (host -> device copies; the chunks become dirty there), pushed out by
 * the next ones (device -> host copies, then the store) and read back
 * exact on the host.  Skipped (77) without a GPU or driver, with the
 * reason.
 */
#include "t.h"

#include "hmm.h"

#define NT	8
#define TB	(8 << 20)

int main(void)
{
	struct hmm_config cfg;
	struct hmm_tensor *ts[NT];
	struct hmm_stats st;
	struct hmm *h;
	int64_t n = TB;
	uint8_t *want = malloc(TB);
	char path[4200];
	void *p;
	int i, r, ok;

	snprintf(path, sizeof(path), "%s/store", t_tmpdir());
	hmm_config_default(&cfg);
	cfg.store_path = path;
	cfg.store_size = 256 << 20;
	cfg.host_budget = 32 << 20;
	cfg.device = "cuda";
	cfg.device_budget = 16 << 20;
	r = hmm_open(&cfg, &h);
	if (r == -ENODEV)
		t_skip_all("no GPU: %s", hmm_last_error());
	if (r)
		t_fail_all("hmm_open: %s", hmm_last_error());
	for (i = 0; i < NT; i++) {
		char name[16];

		snprintf(name, sizeof(name), "g%d", i);
		if (hmm_tensor_new(h, name, HMM_DTYPE_U8, 1, &n, &ts[i]))
			t_fail_all("tensor: %s", hmm_last_error());
		if (hmm_map(ts[i], 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD, &p))
			t_fail_all("map: %s", hmm_last_error());
		t_fill(p, TB, 50 + i);
		hmm_unmap(ts[i], p);
	}
	/* to the device and back, through the 16 MiB budget */
	ok = 1;
	for (i = 0; i < NT; i++) {
		r = hmm_map(ts[i], 0, HMM_ALL, HMM_TIER_DEVICE, HMM_READ |
			    HMM_WRITE, &p);
		ok &= r == 0;
		if (r == 0)
			hmm_unmap(ts[i], p);	/* now dirty at the device */
	}
	t_ok(ok, "mapped %d x 8 MiB at the device (read + write)", NT);
	ok = 1;
	for (i = 0; i < NT; i++) {
		if (hmm_map(ts[i], 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p)) {
			ok = 0;
			continue;
		}
		t_fill(want, TB, 50 + i);
		ok &= !memcmp(p, want, TB);
		hmm_unmap(ts[i], p);
	}
	t_ok(ok, "device-dirty tensors come back exact through D2H and the "
	     "store");
	hmm_stats(h, &st);
	t_ok(st.tier[HMM_TIER_DEVICE].peak <= cfg.device_budget,
	     "device peak %llu within budget", (unsigned long long)
	     st.tier[HMM_TIER_DEVICE].peak);
	t_ok(st.tier[HMM_TIER_DEVICE].bytes_in >= (uint64_t)NT * TB &&
	     st.tier[HMM_TIER_DEVICE].bytes_out > 0, "copies both ways "
	     "(%llu in, %llu out)",
	     (unsigned long long)st.tier[HMM_TIER_DEVICE].bytes_in,
	     (unsigned long long)st.tier[HMM_TIER_DEVICE].bytes_out);
	hmm_close(h);
	free(want);
	return t_done();
}
