// SPDX-License-Identifier: MIT
/*
 * test_tensor_args — every bad argument gets -EINVAL (or the right errno)
 * with a detail string, and changes nothing: the tensor's bytes, the
 * mappings and the stats are the same after the failed call.  A tensor
 * larger than the context can hold is refused before its chunk table is
 * allocated (tensor.c: tensor_fits).
 */
#include <limits.h>
#include <sys/resource.h>

#include "t.h"
#include "hmm_mode.h"

#include "hmm.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

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

/* A "VmXXX:" line of /proc/self/status in KiB; -1 when absent. */
static long vm_kb(const char *key)
{
	char line[256];
	size_t n = strlen(key);
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':')
			kb = atol(line + n + 1);
	fclose(f);
	return kb;
}

/* The peak RSS restarts from the current one (VmHWM), where allowed. */
static void peak_reset(void)
{
	int fd = open("/proc/self/clear_refs", O_WRONLY);

	if (fd < 0)
		return;
	if (write(fd, "5", 1) != 1)
		t_diag("clear_refs: %s", strerror(errno));
	close(fd);
}

/*
 * Cap the address space at what it is now + 4 GiB, so that a chunk table
 * of tens of GB fails its calloc here instead of filling the machine
 * (none under a sanitizer: its shadow takes terabytes).  *old is what to
 * restore; returns 1 when capped.
 */
static int as_cap(struct rlimit *old)
{
	struct rlimit rl;
	long kb = vm_kb("VmSize");

	if (SANITIZED || kb < 0 || getrlimit(RLIMIT_AS, old))
		return 0;
	rl = *old;
	rl.rlim_cur = ((rlim_t)kb << 10) + (4ull << 30);
	if (old->rlim_max != RLIM_INFINITY && rl.rlim_cur > old->rlim_max)
		rl.rlim_cur = old->rlim_max;
	return setrlimit(RLIMIT_AS, &rl) == 0;
}

/* -ENOMEM for a tensor of bytes (U8) named name, with a detail naming
 * it and containing why (NULL: any), and no tensor made. */
static void expect_refused(struct hmm *c, const char *name, int64_t bytes,
			   const char *why, const char *what)
{
	struct hmm_tensor *x = NULL;
	int r = hmm_tensor_new(c, name, HMM_DTYPE_U8, 1, &bytes, &x);

	expect_err(r, -ENOMEM, what);
	t_ok(x == NULL, "%s: no tensor", what);
	t_ok(strstr(hmm_last_error(), name) &&
	     (!why || strstr(hmm_last_error(), why)),
	     "%s: the detail names it and says '%s'", what,
	     why ? why : "why");
	/* hmmd's own name for it ("c7/huge") is nothing the caller knows */
	t_ok(!strchr(hmm_last_error(), '/'), "%s: only by the caller's "
	     "name", what);
	if (r == 0)
		hmm_tensor_free(x);
}

/*
 * Sizes the context can never hold.  Here: 4 MiB of host budget, no
 * store, no device (hmmd: its 256 MiB store and 4 MiB).  The chunk table
 * is about 300 bytes a chunk, all of it written at creation: a 64 GiB
 * tensor of 64 KiB chunks made it 300 MiB of RSS before it was refused,
 * and one of 2^46 bytes (the largest hmm_tensor_new takes) 300 GiB.
 */
static void too_big(struct hmm_tensor *t, const struct hmm_stats *st0,
		    int sh)
{
	struct hmm_tensor *x;
	struct rlimit old;
	const char *whose = sh ? "more than hmmd can ever hold" :
			    "more than this context can ever hold";
	int64_t n;
	long kb0, kb1;
	int capped;

	peak_reset();
	kb0 = vm_kb("VmHWM");
	expect_refused(h, "huge", 64ll << 30, whose,
		       "a 64 GiB tensor in a 4 MiB context");
	kb1 = vm_kb("VmHWM");
	t_ok(kb0 >= 0 && kb1 >= 0 && kb1 - kb0 < (32 << 10),
	     "refused before its chunk table: peak RSS +%ld KiB", kb1 - kb0);
	check_unchanged(t, st0, "64 GiB tensor");

	capped = as_cap(&old);
	expect_refused(h, "max", 1ll << 46, whose,
		       "a 2^46-byte tensor in a 4 MiB context");
	if (capped)
		setrlimit(RLIMIT_AS, &old);
	check_unchanged(t, st0, "2^46-byte tensor");

	if (sh) {
		hmm_test_skip("a tensor of the host budget + 1", "shared "
			      "mode: hmmd has a store");
		return;
	}
	expect_refused(h, "over", (4 << 20) + 1, "can ever hold",
		       "a tensor of the host budget + 1, no store");
	n = 4 << 20;
	t_eq(hmm_tensor_new(h, "fits", HMM_DTYPE_U8, 1, &n, &x), 0,
	     "a tensor of the whole host budget, no store: made");
	t_eq(hmm_tensor_free(x), 0, "and freed");
}

/*
 * A context that could hold 2^46 bytes (a "sim" device of that budget:
 * address space only) still refuses a chunk table larger than the
 * machine's memory (2^30 chunks of 64 KiB: 300 GiB).  Under the
 * address-space cap its calloc would fail anyway, so the test holds on a
 * machine with more memory than that too.
 */
static void table_too_big(const struct hmm_config *base, int sh)
{
	struct hmm_config cfg = *base;
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	struct rlimit old;
	struct hmm *c;
	int capped;

	cfg.device = "sim";
	cfg.device_budget = 1ull << 46;
	if (hmm_open(&cfg, &c))
		t_fail_all("sim context: %s", hmm_last_error());
	capped = as_cap(&old);
	if (!capped && (double)pages * psize >= 256.0 * (1ull << 30)) {
		hmm_test_skip("a 300 GiB chunk table", "no address-space "
			      "cap and 256 GiB of memory or more");
	} else {
		expect_refused(c, "max", 1ll << 46, sh ? NULL : "chunk table",
			       "a 2^46-byte tensor in a 2^46-byte device");
	}
	if (capped)
		setrlimit(RLIMIT_AS, &old);
	hmm_close(c);
}

/* A map larger than the whole host budget can never succeed (the
 * tensor fits the context: its device budget holds the rest). */
static void map_past_budget(const struct hmm_config *base)
{
	struct hmm_config cfg = *base;
	struct hmm_tensor *big;
	struct hmm_stats st;
	int64_t n = 8 << 20;
	struct hmm *c;
	void *p;

	cfg.device = "sim";
	cfg.device_budget = 8 << 20;
	if (hmm_open(&cfg, &c))
		t_fail_all("sim context: %s", hmm_last_error());
	if (hmm_tensor_new(c, "big", HMM_DTYPE_U8, 1, &n, &big))
		t_fail_all("big: %s", hmm_last_error());
	expect_err(hmm_map(big, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p),
		   -ENOMEM, "map larger than the host budget");
	hmm_stats(c, &st);
	t_eq(st.tier[HMM_TIER_HOST].pinned, 0, "too big: nothing pinned");
	hmm_close(c);
}

/*
 * What a closed context held is released when hmm_close returns: 256
 * tensors made and 16 of them mapped in a second context, then its
 * close, and the tensor count is what it was.  In shared mode the count
 * is hmmd's, and hmm_close once returned when it hung up, before hmmd
 * had freed the connection's tensors (seen as a flaky count here).
 */
static void close_releases(const struct hmm_config *cfg, struct hmm *h)
{
	struct hmm_stats st0, st;
	struct hmm_tensor *x;
	int64_t n = 64 << 10;
	struct hmm *c;
	void *p;
	int i;

	hmm_stats(h, &st0);
	if (hmm_open(cfg, &c))
		t_fail_all("second context: %s", hmm_last_error());
	for (i = 0; i < 256; i++)
		if (hmm_tensor_new(c, "gone", HMM_DTYPE_U8, 1, &n, &x) ||
		    (i % 16 == 1 && hmm_map(x, 0, HMM_ALL, HMM_TIER_HOST,
				      HMM_DISCARD, &p)))
			t_fail_all("gone %d: %s", i, hmm_last_error());
	hmm_close(c);
	hmm_stats(h, &st);
	t_eq(st.tensors, st0.tensors, "a closed context's 256 tensors are "
	     "freed when hmm_close returns");
	t_eq(st.tier[HMM_TIER_HOST].pinned, st0.tier[HMM_TIER_HOST].pinned,
	     "and its maps' pins");
}

/*
 * A tensor saved in the store opens whatever the budgets are now: its
 * data is already in the store (here 8 MiB, one chunk written, reopened
 * with a 3 MiB store and 1 MiB of host budget), while a new one of its
 * size is refused there.
 */
static void open_saved(void)
{
	struct hmm_config cfg;
	struct hmm_tensor *x;
	char path[4200];
	int64_t n = 8 << 20;
	struct hmm *c;
	void *p;

	hmm_test_config(&cfg, path, sizeof(path), 3 << 20, 8 << 20, 64 << 10);
	cfg.flags = HMM_CONFIG_STORE_FORMAT;
	if (hmm_open(&cfg, &c))
		t_fail_all("store context: %s", hmm_last_error());
	if (hmm_tensor_new(c, "saved", HMM_DTYPE_U8, 1, &n, &x) ||
	    hmm_map(x, 4 << 20, 64 << 10, HMM_TIER_HOST, HMM_DISCARD, &p))
		t_fail_all("saved: %s", hmm_last_error());
	t_fill(p, 64 << 10, 7);
	hmm_unmap(x, p);
	t_eq(hmm_flush(c), 0, "flush the 8 MiB tensor");
	hmm_close(c);

	cfg.flags = HMM_CONFIG_STORE_KEEP;
	cfg.host_budget = 1 << 20;
	if (hmm_open(&cfg, &c))
		t_fail_all("reopen: %s", hmm_last_error());
	expect_refused(c, "new", n, "can ever hold",
		       "a new 8 MiB tensor in a 4 MiB context");
	x = NULL;
	if (!t_eq(hmm_tensor_open(c, "saved", &x), 0, "the saved 8 MiB "
		  "tensor opens there"))
		t_diag("%s", hmm_last_error());
	if (x) {
		uint8_t want[64 << 10];

		t_fill(want, sizeof(want), 7);
		p = NULL;
		t_ok(hmm_map(x, 4 << 20, 64 << 10, HMM_TIER_HOST, HMM_READ,
			     &p) == 0 && !memcmp(p, want, sizeof(want)),
		     "its written chunk reads back");
		if (p)
			hmm_unmap(x, p);
	}
	hmm_close(c);
}

/*
 * A name with a control byte is refused in both modes, by hmm_tensor_new
 * and hmm_tensor_open alike (not by hmmd's wire check: the detail is
 * the tensor's), naming the field and the byte.
 */
static void bad_names(void)
{
	static const struct {
		const char *name, *why;
	} bad[] = {
		{ "a\nb", "control character 0x0a at byte 1" },
		{ "\x7fx", "control character 0x7f at byte 0" },
		{ "tab\t", "control character 0x09 at byte 3" },
	};
	struct hmm_tensor *x = NULL;
	int64_t n = 4096;
	char what[128];

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(what, sizeof(what), "tensor_new, name with %s",
			 bad[i].why);
		expect_err(hmm_tensor_new(h, bad[i].name, HMM_DTYPE_U8, 1, &n,
					  &x), -EINVAL, what);
		t_ok(strstr(hmm_last_error(), "hmm_tensor_new: name") &&
		     strstr(hmm_last_error(), bad[i].why) &&
		     !strstr(hmm_last_error(), "message"), "the detail names "
		     "the name field and the byte: %s", hmm_last_error());
		snprintf(what, sizeof(what), "tensor_open, name with %s",
			 bad[i].why);
		expect_err(hmm_tensor_open(h, bad[i].name, &x), -EINVAL, what);
		t_ok(strstr(hmm_last_error(), "hmm_tensor_open: name") &&
		     strstr(hmm_last_error(), bad[i].why), "the same "
		     "detail: %s", hmm_last_error());
	}
	t_ok(x == NULL, "no tensor made");
}

/*
 * A zero dimension is -EINVAL wherever it is, even after dimensions whose
 * product overflows (before: -EOVERFLOW, for a tensor of 0 bytes); a
 * NULL shape and a name too long say so, not "ndim 2" or only the rule.
 */
static void shape_details(void)
{
	int64_t late0[3] = { 1ll << 40, 1ll << 40, 0 };
	struct hmm_tensor *x = NULL;
	char name[65];

	expect_err(hmm_tensor_new(h, "x", HMM_DTYPE_F32, 3, late0, &x),
		   -EINVAL, "a zero dimension after an overflowing product");
	t_ok(strstr(hmm_last_error(), "shape[2] = 0"), "the detail names "
	     "shape[2]: %s", hmm_last_error());
	expect_err(hmm_tensor_new(h, "x", HMM_DTYPE_F32, 2, NULL, &x),
		   -EINVAL, "a NULL shape");
	t_ok(strstr(hmm_last_error(), "shape is NULL"), "the detail names "
	     "the shape: %s", hmm_last_error());
	memset(name, 'n', 64);
	name[64] = 0;
	expect_err(hmm_tensor_new(h, name, HMM_DTYPE_F32, 1, late0, &x),
		   -EINVAL, "a name of 64 bytes");
	t_ok(strstr(hmm_last_error(), "hmm_tensor_new: name of 64 bytes"),
	     "the detail gives its length: %s", hmm_last_error());
	expect_err(hmm_tensor_open(h, name, &x), -EINVAL, "tensor_open, a "
		   "name of 64 bytes");
	t_ok(strstr(hmm_last_error(), "hmm_tensor_open: name of 64 bytes"),
	     "the same detail: %s", hmm_last_error());
	t_ok(x == NULL, "no tensor made");
}

/*
 * hmm_unmap(u, p) of a pointer p mapped through another tensor t is
 * -EINVAL naming u, and leaves t's pin: t stays mapped (-EBUSY to
 * free) until its own unmap.
 */
static void unmap_other(struct hmm_tensor *t, void *p,
			const struct hmm_stats *st0)
{
	struct hmm_tensor *u;
	struct hmm_stats st;
	int64_t n = 4096;

	if (hmm_tensor_new(h, "u", HMM_DTYPE_U8, 1, &n, &u))
		t_fail_all("tensor u: %s", hmm_last_error());
	expect_err(hmm_unmap(u, p), -EINVAL, "unmap of w's pointer "
		   "through tensor u");
	t_ok(strstr(hmm_last_error(), "tensor u:") &&
	     strstr(hmm_last_error(), "not mapped"), "the detail names "
	     "tensor u: %s", hmm_last_error());
	hmm_stats(h, &st);
	t_ok(st.tier[HMM_TIER_HOST].pinned > st0->tier[HMM_TIER_HOST].pinned,
	     "w's pin is kept (%llu bytes pinned)",
	     (unsigned long long)st.tier[HMM_TIER_HOST].pinned);
	expect_err(hmm_tensor_free(t), -EBUSY, "w still mapped: free is "
		   "-EBUSY");
	t_eq(hmm_tensor_free(u), 0, "free u");
}

/* Any int has a text, INT_MIN too (it has no negation). */
static void strerror_any(void)
{
	static const int e[] = { INT_MIN, INT_MIN + 1, -1, 1, INT_MAX };

	for (unsigned i = 0; i < sizeof(e) / sizeof(e[0]); i++) {
		const char *s = hmm_strerror(e[i]);

		t_ok(s && *s, "hmm_strerror(%d): '%s'", e[i], s ? s : "");
	}
	t_ok(!strcmp(hmm_strerror(-EINVAL), "invalid argument"),
	     "hmm_strerror(-EINVAL) is still its text");
}

/*
 * Shared mode: a tensor the context can hold (hmmd's capacities) but
 * over this client's store quota in hmmd (config.store_size at hello)
 * is -EDQUOT, a distinct error from the -ENOMEM of too big a tensor.
 */
static void store_quota(const struct hmm_config *base)
{
	struct hmm_config cfg = *base;
	struct hmm_tensor *x = NULL;
	int64_t n = 2 << 20;
	struct hmm *c;

	cfg.store_size = 1 << 20;
	if (hmm_open(&cfg, &c))
		t_fail_all("context of store quota 1 MiB: %s",
			   hmm_last_error());
	expect_err(hmm_tensor_new(c, "q", HMM_DTYPE_U8, 1, &n, &x), -EDQUOT,
		   "a 2 MiB tensor over a 1 MiB store quota");
	t_ok(x == NULL && strstr(hmm_last_error(), "quota"), "no tensor, "
	     "the detail says the quota: %s", hmm_last_error());
	n = 512 << 10;
	t_eq(hmm_tensor_new(c, "q", HMM_DTYPE_U8, 1, &n, &x), 0,
	     "a 512 KiB one is made");
	hmm_close(c);
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
	cfg.numa_node = -5;	/* -1 is "local", no other negative a node */
	expect_err(hmm_open(&cfg, &h), -EINVAL, "numa_node -5");
	t_ok(strstr(hmm_last_error(), "config.numa_node"), "naming "
	     "config.numa_node: %s", hmm_last_error());
	cfg.numa_node = -1;
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
	bad_names();
	int64_t huge[2] = { INT64_MAX / 2, 16 };
	expect_err(hmm_tensor_new(h, "x", HMM_DTYPE_F32, 2, huge, &bad),
		   -EOVERFLOW, "size overflow");
	shape_details();
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
	hmm_stats(h, &st0);
	too_big(t, &st0, sh);
	table_too_big(&cfg, sh);
	map_past_budget(&cfg);
	close_releases(&cfg, h);
	if (sh)
		hmm_test_skip("a saved tensor opens past the budgets",
			      "shared mode: hmmd's store");
	else
		open_saved();

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

	/* unmap */
	if (hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p))
		t_fail_all("map: %s", hmm_last_error());
	expect_err(hmm_tensor_free(t), -EBUSY, "free while mapped");
	unmap_other(t, p, &st0);
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
	/* as snprintf: no buffer and cap 0 asks for the length */
	t_eq(hmm_stats_json(h, NULL, 0), r, "stats json, NULL and cap 0: "
	     "the length needed");
	expect_err(hmm_stats_json(h, NULL, 10), -EINVAL, "stats json, "
		   "NULL buffer of cap 10");
	t_ok(strstr(hmm_last_error(), "hmm_stats_json"), "naming the call");
	expect_err(hmm_stats_json(NULL, js, sizeof(js)), -EINVAL,
		   "stats json of no context");
	strerror_any();
	if (sh)
		store_quota(&cfg);
	else
		hmm_test_skip("a tensor over the store quota: -EDQUOT",
			      "embedded: no quota");

	t_eq(hmm_tensor_free(t), 0, "free");
	hmm_close(h);
	return t_done();
}
