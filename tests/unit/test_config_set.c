// SPDX-License-Identifier: MIT
/*
 * test_config_set.c — hmm_config_set / _get / _key: every field by name
 * lands in the struct exactly as an assignment would, every refusal is
 * -EINVAL naming the key or the value and changes nothing, and a config
 * set by name opens a context.
 */
#include <stdlib.h>

#include "hmm.h"
#include "t.h"

static void set_ok(struct hmm_config *c, const char *k, const char *v)
{
	int r = hmm_config_set(c, k, v);

	t_eq(r, 0, "set %s = '%s'%s%s", k, v ? v : "(null)", r ? ": " : "",
	     r ? hmm_last_error() : "");
}

static void get_is(const struct hmm_config *c, const char *k,
		   const char *want)
{
	char buf[128];
	int n = hmm_config_get(c, k, buf, sizeof(buf));

	t_ok(n == (int)strlen(want) && !strcmp(buf, want),
	     "get %s is '%s' (got '%s', %d)", k, want, n >= 0 ? buf : "", n);
}

/* A refusal: -EINVAL, the detail names `names`, the config unchanged. */
static void set_bad(struct hmm_config *c, const char *k, const char *v,
		    const char *names)
{
	struct hmm_config before = *c;
	int r = hmm_config_set(c, k, v);

	t_eq(r, -EINVAL, "set %s = '%s' is refused", k ? k : "(null)",
	     v ? v : "(null)");
	t_ok(strstr(hmm_last_error(), names) != NULL,
	     "its detail names '%s' (%s)", names, hmm_last_error());
	t_ok(!memcmp(&before, c, sizeof(before)), "the config is unchanged");
}

/* A buffer's cap is any size_t, past INT_MAX too: every key writes its
 * value, as for a small cap (flags once wrote nothing there). */
static void big_cap(struct hmm_config *c)
{
	static const char *const keys[] = { "flags", "wait_ms", "device",
					     "policy" };
	uint32_t flags = c->flags;
	char a[64], b[64];

	c->flags = HMM_CONFIG_STORE_KEEP | HMM_CONFIG_HOST_SHARED;
	for (unsigned i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		int n, m;

		memset(a, 'X', sizeof(a));
		memset(b, 'X', sizeof(b));
		n = hmm_config_get(c, keys[i], a, SIZE_MAX);
		m = hmm_config_get(c, keys[i], b, sizeof(b));
		t_ok(n == m && n > 0 && !strcmp(a, b), "get %s with cap "
		     "SIZE_MAX is '%s' as with cap 64 ('%.*s', %d)", keys[i],
		     b, n > 0 && n < 64 ? n : 0, a, n);
	}
	c->flags = flags;
}

int main(void)
{
	struct hmm_config *c = hmm_config_new(), d;
	const char *store = "/x/store", *dmn = "unix:/x/s";
	struct hmm_tensor *t;
	struct hmm *h;
	char buf[8];
	unsigned n;

	if (!c)
		t_fail_all("hmm_config_new: out of memory");
	hmm_config_default(&d);
	t_ok(!memcmp(c, &d, sizeof(d)), "hmm_config_new holds the defaults");

	/* every key is listed, and each of them reads back */
	for (n = 0; hmm_config_key(n); n++)
		t_ok(hmm_config_get(c, hmm_config_key(n), NULL, 0) >= 0,
		     "key %u '%s' reads", n, hmm_config_key(n));
	t_eq(n, 20, "20 keys: every field of struct hmm_config");

	set_ok(c, "host_budget", "2G");
	t_ok(c->host_budget == 2ull << 30, "host_budget is 2 GiB");
	set_ok(c, "store_size", "3MiB");
	t_ok(c->store_size == 3ull << 20, "store_size is 3 MiB");
	set_ok(c, "device_budget", "4096");
	t_eq(c->device_budget, 4096, "device_budget is 4096");
	set_ok(c, "sim_bandwidth", "1G");
	t_ok(c->sim_bandwidth == 1ull << 30, "sim_bandwidth is 1 GiB/s");
	set_ok(c, "chunk_bytes", "64K");
	t_eq(c->chunk_bytes, 64 << 10, "chunk_bytes is 64 KiB");
	set_ok(c, "prefetch_depth", "7");
	t_eq(c->prefetch_depth, 7, "prefetch_depth is 7");
	set_ok(c, "wait_ms", "250");
	t_eq(c->wait_ms, 250, "wait_ms is 250");
	set_ok(c, "numa_node", "-1");
	t_eq(c->numa_node, -1, "numa_node is -1");
	set_ok(c, "device_index", "3");
	t_eq(c->device_index, 3, "device_index is 3");
	set_ok(c, "policy", "schedule");
	t_eq(c->policy, HMM_POLICY_SCHEDULE, "policy schedule");
	set_ok(c, "policy", "0");
	t_eq(c->policy, HMM_POLICY_LRU, "policy 0 is lru");
	set_ok(c, "flags", "store_keep,host_shared");
	t_eq(c->flags, HMM_CONFIG_STORE_KEEP | HMM_CONFIG_HOST_SHARED,
	     "flags store_keep,host_shared");
	get_is(c, "flags", "store_keep,host_shared");
	set_ok(c, "flags", "store_format");
	t_eq(c->flags, HMM_CONFIG_STORE_FORMAT, "flags store_format");
	get_is(c, "flags", "store_format");
	set_ok(c, "flags", "store_buffered|store_keep");
	t_eq(c->flags, HMM_CONFIG_STORE_BUFFERED | HMM_CONFIG_STORE_KEEP,
	     "flags joined by |");
	set_ok(c, "flags", "0");
	t_eq(c->flags, 0, "flags 0 clears them");
	get_is(c, "flags", "0");
	set_ok(c, "pool_bytes", "16M");
	t_eq(c->pool_bytes, 16 << 20, "pool_bytes is 16 MiB");
	get_is(c, "pool_bytes", "16777216");
	set_ok(c, "io_depth", "8");
	t_eq(c->io_depth, 8, "io_depth is 8");
	set_ok(c, "queue_depth", "128");
	t_eq(c->queue_depth, 128, "queue_depth is 128");
	get_is(c, "queue_depth", "128");
	set_ok(c, "kernel_threads", "6");
	t_eq(c->kernel_threads, 6, "kernel_threads is 6");
	set_ok(c, "store_path", store);
	t_ok(c->store_path == store, "store_path keeps the value's pointer");
	set_ok(c, "daemon", dmn);
	t_ok(c->daemon == dmn, "daemon set");
	set_ok(c, "daemon", NULL);
	t_ok(c->daemon == NULL, "daemon NULL clears it");
	set_ok(c, "device", "sim");
	set_ok(c, "trace_path", "/x/t.json");
	set_ok(c, "host_dir", "/x/shm");

	get_is(c, "host_budget", "2147483648");
	get_is(c, "chunk_bytes", "65536");
	get_is(c, "policy", "lru");
	get_is(c, "numa_node", "-1");
	get_is(c, "store_path", "/x/store");
	get_is(c, "daemon", "");
	get_is(c, "device", "sim");
	t_eq(hmm_config_get(c, "host_budget", buf, sizeof(buf)), 10,
	     "get returns the length it needs, as snprintf");
	t_ok(!strcmp(buf, "2147483"), "and cuts the value to the buffer");
	big_cap(c);
	t_eq(hmm_config_get(c, "wait_ms", NULL, 5), -EINVAL,
	     "get into no buffer of cap 5 is -EINVAL");
	t_ok(strstr(hmm_last_error(), "buffer") != NULL, "saying so (%s)",
	     hmm_last_error());

	set_bad(c, "host_budjet", "1G", "host_budjet");
	set_bad(c, NULL, "1G", "(null)");
	set_bad(c, "host_budget", "2Q", "2Q");
	set_bad(c, "host_budget", "", "host_budget");
	set_bad(c, "host_budget", NULL, "host_budget");
	set_bad(c, "host_budget", "99999999999T", "too large");
	set_bad(c, "chunk_bytes", "8G", "chunk_bytes");
	set_bad(c, "wait_ms", "-1", "-1");
	set_bad(c, "wait_ms", "4294967296", "wait_ms");
	set_bad(c, "prefetch_depth", "8K", "8K");
	set_bad(c, "numa_node", "1.5", "numa_node");
	set_bad(c, "policy", "fifo", "fifo");
	set_bad(c, "policy", "2", "policy");
	set_bad(c, "flags", "store_keep,turbo", "store_keep,turbo");
	/* an empty name between, before or after the separators */
	set_bad(c, "flags", "store_keep,", "empty");
	set_bad(c, "flags", "store_keep,,host_shared", "empty");
	set_bad(c, "flags", "|store_keep", "empty");
	set_bad(c, "flags", ",", "empty");
	/* a number with bits that are no flag: hmm_open would refuse it,
	 * and its read-back "store_buffered,...,999999984" did not parse
	 * (fuzz_api) */
	set_bad(c, "flags", "999999999", "bits that are no flag");
	set_bad(c, "flags", "16", "config.flags: '16'");
	set_ok(c, "flags", "15");
	get_is(c, "flags", "store_buffered,store_keep,host_shared,"
	       "store_format");
	set_ok(c, "flags", "0");
	set_bad(c, "reserved", "0", "reserved");
	set_bad(c, "pool_bytes", "8G", "too large");
	set_bad(c, "io_depth", "-1", "io_depth");
	set_bad(c, "queue_depth", "deep", "deep");
	set_bad(c, "kernel_threads", "2.5", "kernel_threads");
	t_eq(hmm_config_set(NULL, "host_budget", "1G"), -EINVAL,
	     "set on no config is -EINVAL");
	t_eq(hmm_config_get(NULL, "host_budget", buf, sizeof(buf)), -EINVAL,
	     "get on no config is -EINVAL");
	t_eq(hmm_config_get(c, "nope", buf, sizeof(buf)), -EINVAL,
	     "get of an unknown key is -EINVAL");
	t_ok(strstr(hmm_last_error(), "nope") != NULL, "naming it");

	/* a config made by name alone opens a context and works */
	hmm_config_free(c);
	c = hmm_config_new();
	set_ok(c, "host_budget", "8M");
	set_ok(c, "chunk_bytes", "1M");
	set_ok(c, "device", "none");
	if (t_eq(hmm_open(c, &h), 0, "hmm_open of a config set by name")) {
		int64_t s = 1 << 20;
		struct hmm_stats st;

		t_eq(hmm_tensor_new(h, "t", HMM_DTYPE_U8, 1, &s, &t), 0,
		     "a tensor");
		hmm_stats(h, &st);
		t_ok(st.tier[HMM_TIER_HOST].capacity == 8 << 20,
		     "the host budget set by name is the context's");
		hmm_close(h);
	}
	hmm_config_free(c);
	return t_done();
}
