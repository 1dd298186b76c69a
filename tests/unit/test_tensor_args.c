// SPDX-License-Identifier: MIT
/*
 * test_tensor_args — every bad argument gets -EINVAL (or the right errno)
 * with a detail string, and changes nothing: the tensor's bytes, the
 * mappings and the stats are the same after the failed call.
 */
#include "t.h"
#include "hmm_mode.h"

#include "hmm.h"

static struct hmm *h;

static void expect_err(int r, int want, const char *what)
{
	t_eq(r, want, "%s -> %s", what, hmm_strerror(want));
	t_ok(r == 0 || *hmm_last_error(), "%s has a detail: %s", what,
	     hmm_last_error());
}

static void check_unchanged(struct hmm_tensor *t, const struct hmm_stats *st0,
			    const char *what)
{
	struct hmm_stats st;
	uint8_t *p, want[4096];
	int r;

	hmm_stats(h, &st);
	t_eq(st.tier[HMM_TIER_HOST].pinned, st0->tier[HMM_TIER_HOST].pinned,
	     "%s: pinned bytes unchanged", what);
	t_eq(st.tensors, st0->tensors, "%s: tensor count unchanged", what);
	r = hmm_map(t, 0, 4096, HMM_TIER_HOST, HMM_READ, (void **)&p);
	t_fill(want, sizeof(want), 42);
	t_ok(r == 0 && !memcmp(p, want, sizeof(want)),
	     "%s: contents unchanged", what);
	if (r == 0)
		hmm_unmap(t, p);
}

int main(void)
{
	struct hmm_config cfg;
	struct hmm_tensor *t, *bad = NULL;
	struct hmm_stats st0;
	int64_t shape[2] = { 64, 1024 }, zero[2] = { 0, 4 };
	void *p, *q;
	int r, sh = hmm_test_shared();

	hmm_config_default(&cfg);
	cfg.host_budget = 4 << 20;
	cfg.chunk_bytes = 64 << 10;

	/* config */
	cfg.daemon = "/run/hmmd.sock";
	expect_err(hmm_open(&cfg, &h), -EINVAL, "daemon address without "
		   "unix:");
	cfg.daemon = "unix:/nonexistent/hmmd.sock";
	expect_err(hmm_open(&cfg, &h), -ENOENT, "daemon socket missing");
	cfg.daemon = NULL;
	hmm_test_mode(&cfg);	/* HMM_TEST_MODE=shared: through hmmd */
	cfg.chunk_bytes = 1000;
	expect_err(hmm_open(&cfg, &h), -EINVAL, "chunk_bytes 1000");
	cfg.chunk_bytes = 64 << 10;
	cfg.device = "tpu";
	expect_err(hmm_open(&cfg, &h), -EINVAL, "device tpu");
	cfg.device = "cuda";
	r = hmm_open(&cfg, &h);
	if (r == 0)
		hmm_close(h);
	t_ok(r == 0 || r == -ENODEV, "device cuda: opens or -ENODEV (%s)",
	     hmm_last_error());
	cfg.device = "none";
	cfg.host_budget = 0;
	expect_err(hmm_open(&cfg, &h), -EINVAL, "host_budget 0");
	cfg.host_budget = 4 << 20;
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());

	/* tensors */
	expect_err(hmm_tensor_new(h, "x", 99, 2, shape, &bad), -EINVAL,
		   "unknown dtype");
	expect_err(hmm_tensor_new(h, "x", HMM_DTYPE_F32, 2, zero, &bad),
		   -EINVAL, "zero size");
	expect_err(hmm_tensor_new(h, "x", HMM_DTYPE_F32, 0, shape, &bad),
		   -EINVAL, "ndim 0");
	expect_err(hmm_tensor_new(h, "", HMM_DTYPE_F32, 2, shape, &bad),
		   -EINVAL, "empty name");
	int64_t huge[2] = { INT64_MAX / 2, 16 };
	expect_err(hmm_tensor_new(h, "x", HMM_DTYPE_F32, 2, huge, &bad),
		   -EOVERFLOW, "size overflow");
	t_ok(bad == NULL, "failed tensor_new leaves *out alone");

	if (hmm_tensor_new(h, "w", HMM_DTYPE_F32, 2, shape, &t))
		t_fail_all("tensor: %s", hmm_last_error());
	t_eq(hmm_tensor_bytes(t), 64 * 1024 * 4, "bytes = 64*1024*4");
	t_eq(hmm_dtype_size(HMM_DTYPE_BF16), 2, "bf16 is 2 bytes");
	t_eq(hmm_dtype_size(1234), 0, "unknown dtype is 0 bytes");
	if (hmm_map(t, 0, 4096, HMM_TIER_HOST, HMM_WRITE, &p))
		t_fail_all("map: %s", hmm_last_error());
	t_fill(p, 4096, 42);
	hmm_unmap(t, p);
	struct hmm_tensor *big;
	int64_t bshape[1] = { 8 << 20 };
	if (hmm_tensor_new(h, "big", HMM_DTYPE_U8, 1, bshape, &big))
		t_fail_all("big: %s", hmm_last_error());
	hmm_stats(h, &st0);

	/* map */
	expect_err(hmm_map(t, 256 << 10, 1, HMM_TIER_HOST, HMM_READ, &p),
		   -EINVAL, "offset past end");
	check_unchanged(t, &st0, "offset past end");
	expect_err(hmm_map(t, 4096, 256 << 10, HMM_TIER_HOST, HMM_READ, &p),
		   -EINVAL, "range past end");
	check_unchanged(t, &st0, "range past end");
	expect_err(hmm_map(t, 0, 0, HMM_TIER_HOST, HMM_READ, &p), -EINVAL,
		   "zero length");
	expect_err(hmm_map(t, 0, HMM_ALL, HMM_TIER_DEVICE, HMM_READ, &p),
		   -EINVAL, "map at the device tier with no backend");
	check_unchanged(t, &st0, "device map");
	expect_err(hmm_map(t, 0, HMM_ALL, HMM_TIER_STORE, HMM_READ, &p),
		   -EINVAL, "map at the store tier");
	expect_err(hmm_map(t, 0, HMM_ALL, 7, HMM_READ, &p), -EINVAL,
		   "map at tier 7");
	expect_err(hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, 0, &p), -EINVAL,
		   "access 0");
	expect_err(hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, 0x80, &p), -EINVAL,
		   "access 0x80");
	expect_err(hmm_map(NULL, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p),
		   -EINVAL, "NULL tensor");
	check_unchanged(t, &st0, "bad access");

	/* a map larger than the whole budget can never succeed */
	expect_err(hmm_map(big, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p),
		   -ENOMEM, "map larger than the host budget");
	check_unchanged(t, &st0, "too big");

	/* unmap */
	if (hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p))
		t_fail_all("map: %s", hmm_last_error());
	expect_err(hmm_tensor_free(t), -EBUSY, "free while mapped");
	t_eq(hmm_unmap(t, p), 0, "unmap");
	expect_err(hmm_unmap(t, p), -EINVAL, "unmap twice");
	q = (char *)p + 8;
	expect_err(hmm_unmap(t, q), -EINVAL, "unmap of a pointer never mapped");
	check_unchanged(t, &st0, "unmap twice");

	/* async calls validate too */
	expect_err(hmm_prefetch(t, 1 << 30, 1, HMM_TIER_HOST), -EINVAL,
		   "prefetch past end");
	if (sh) {
		hmm_test_skip("evict host with no store", "shared mode: "
			      "hmmd always has a store");
		hmm_test_skip("flush with no store", "shared mode: hmmd "
			      "always has a store");
	} else {
		expect_err(hmm_evict(t, 0, HMM_ALL, HMM_TIER_HOST), -EINVAL,
			   "evict host with no store");
		expect_err(hmm_flush(h), -ENODEV, "flush with no store");
	}
	expect_err(hmm_step_end(h), -EINVAL, "step_end without begin");
	t_eq(hmm_step_begin(h), 0, "step_begin");
	expect_err(hmm_step_begin(h), -EINVAL, "step_begin twice");
	t_eq(hmm_step_end(h), 0, "step_end");
	check_unchanged(t, &st0, "async");

	/* both modes have regions (shared mode: userfaultfd or hmmk.ko in
	   the client, evicted blocks in hmmd: region.c) */
	expect_err(hmm_region_advise(h, &r, 4096, HMM_ADVISE_COLD), -EINVAL,
		   "advise outside any region");

	char js[4096];
	r = hmm_stats_json(h, js, sizeof(js));
	t_ok(r > 0 && r < (int)sizeof(js) && js[0] == '{' && js[r - 1] == '}',
	     "stats json is one object (%d bytes)", r);
	r = hmm_stats_json(h, js, 10);
	t_ok(r > 10 && strlen(js) == 9, "stats json cut at cap, returns "
	     "the length needed");

	t_eq(hmm_tensor_free(big), 0, "free big");
	t_eq(hmm_tensor_free(t), 0, "free");
	hmm_close(h);
	return t_done();
}
