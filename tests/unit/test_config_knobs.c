// SPDX-License-Identifier: MIT
/*
 * test_config_knobs — the I/O and thread knobs of struct hmm_config
 * (pool_bytes, io_depth, queue_depth, kernel_threads): each is set by
 * name, an out-of-range value is refused by hmm_open with -EINVAL naming
 * the key and the value, 0 resolves to the machine's default, and a set
 * value really governs the store: hmm_stats reports the pool and ring
 * actually made, and with io_depth = 1 evicting 16 chunks at once never
 * has more than one I/O in the store (io_inflight_peak), while the
 * default depth does have several.  numa_node too is refused by
 * hmm_open, naming it, when no such node exists (with a store or
 * without, where nothing else would ever notice).
 */
#include <unistd.h>

#include "t.h"

#include "hmm.h"
#include "hmm_mode.h"

#define CHUNK	(256u << 10)
#define NCHUNK	16

static char json[4096];	/* hmm_stats_json of the last run */

/* Open, evict NCHUNK written chunks at once, read them back; stats. */
static int run(struct hmm_config *cfg, struct hmm_stats *st)
{
	int64_t n = (int64_t)CHUNK * NCHUNK;
	struct hmm_tensor *t;
	struct hmm *h;
	uint8_t *p;
	int r, bad = 0;

	r = hmm_open(cfg, &h);
	if (r)
		return r;
	r = hmm_tensor_new(h, "t", HMM_DTYPE_U8, 1, &n, &t);
	if (!r)
		r = hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_WRITE,
			    (void **)&p);
	if (!r) {
		for (int64_t i = 0; i < n; i++)
			p[i] = (uint8_t)(i * 7 + i / CHUNK);
		hmm_unmap(t, p);
		r = hmm_evict(t, 0, HMM_ALL, HMM_TIER_HOST);
	}
	if (!r)
		r = hmm_wait(h, t);
	if (!r)
		r = hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ,
			    (void **)&p);
	if (!r) {
		for (int64_t i = 0; i < n; i++)
			bad += p[i] != (uint8_t)(i * 7 + i / CHUNK);
		hmm_unmap(t, p);
		t_eq(bad, 0, "the evicted chunks read back intact");
	}
	if (r)
		t_diag("run: %s", hmm_last_error());
	hmm_stats(h, st);
	hmm_stats_json(h, json, sizeof(json));
	hmm_close(h);
	return r;
}

static void open_bad(const char *key, const char *value, int store)
{
	struct hmm_config c;
	struct hmm *h = NULL;
	char path[4200];
	int r;

	hmm_test_config(&c, path, sizeof(path), 16 << 20, 8 << 20, CHUNK);
	if (!store)
		c.store_path = NULL;
	t_eq(hmm_config_set(&c, key, value), 0, "%s = %s is a number",
	     key, value);
	r = hmm_open(&c, &h);
	t_eq(r, -EINVAL, "hmm_open refuses %s = %s", key, value);
	t_ok(strstr(hmm_last_error(), key) && strstr(hmm_last_error(), value),
	     "naming both (%s)", hmm_last_error());
	if (!r)
		hmm_close(h);
	t_ok(access(path, F_OK) != 0, "and makes no store file");
}

int main(void)
{
	struct hmm_config c;
	struct hmm_stats st;
	char path[4200];
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (hmm_test_shared())
		t_skip_all("the knobs are hmmd's in shared mode "
			   "(tests/integration/test_hmmd_config.sh)");

	open_bad("pool_bytes", "5000", 1);
	open_bad("pool_bytes", "2147483648", 1);
	open_bad("io_depth", "4097", 1);
	open_bad("queue_depth", "5000", 1);
	open_bad("kernel_threads", "65", 1);
	open_bad("numa_node", "-2", 1);
	open_bad("numa_node", "4096", 1);
	open_bad("numa_node", "4096", 0);

	/* node 0 is on every machine */
	hmm_test_config(&c, path, sizeof(path), 16 << 20, 8 << 20, CHUNK);
	c.numa_node = 0;
	t_eq(run(&c, &st), 0, "numa_node 0: opens and runs");
	unlink(path);

	/* the defaults, resolved and reported */
	hmm_test_config(&c, path, sizeof(path), 16 << 20, 8 << 20, CHUNK);
	if (run(&c, &st))
		t_fail_all("default run failed");
	t_eq(st.pool_bytes, 4 << 20, "default pool: 4 MiB");
	t_eq(st.io_depth, 4, "default io_depth: 4");
	t_eq(st.queue_depth, 64, "default queue_depth: 64");
	t_eq(st.kernel_threads, cpus > 64 ? 64 : cpus,
	     "default kernel_threads: the online CPUs (%ld)", cpus);
	t_ok(st.io_inflight_peak > 1 && st.io_inflight_peak <= 4,
	     "at the default depth several I/Os were in flight (%llu)",
	     (unsigned long long)st.io_inflight_peak);
	unlink(path);

	/* set by name: each takes effect */
	hmm_test_config(&c, path, sizeof(path), 16 << 20, 8 << 20, CHUNK);
	t_eq(hmm_config_set(&c, "pool_bytes", "8M"), 0, "pool_bytes 8M");
	t_eq(hmm_config_set(&c, "io_depth", "1"), 0, "io_depth 1");
	t_eq(hmm_config_set(&c, "queue_depth", "2"), 0, "queue_depth 2");
	t_eq(hmm_config_set(&c, "kernel_threads", "3"), 0,
	     "kernel_threads 3");
	if (run(&c, &st))
		t_fail_all("knob run failed");
	t_eq(st.pool_bytes, 8 << 20, "the store's pool is 8 MiB");
	t_eq(st.queue_depth, 2, "its ring has 2 entries");
	t_eq(st.io_depth, 1, "io_depth 1 in use");
	t_eq(st.io_inflight_peak, 1, "never more than 1 I/O in the store");
	t_eq(st.kernel_threads, 3, "kernel_threads 3 reported");
	t_ok(strstr(json, "\"pool_bytes\":8388608,\"queue_depth\":2,"
		    "\"io_depth\":1,\"io_inflight_peak\":1,"
		    "\"kernel_threads\":3,\"store_buffers_registered\":") != NULL,
	     "hmm_stats_json says the same (%s)", json);
	unlink(path);

	/* a deep queue: io_depth 16 lets all 16 evictions go at once */
	hmm_test_config(&c, path, sizeof(path), 16 << 20, 8 << 20, CHUNK);
	c.io_depth = 16;
	if (run(&c, &st))
		t_fail_all("deep run failed");
	t_eq(st.queue_depth, 64, "queue_depth 0 with io_depth 16: 64");
	t_ok(st.io_inflight_peak > 4, "more than 4 in flight (%llu)",
	     (unsigned long long)st.io_inflight_peak);
	unlink(path);
	return t_done();
}
