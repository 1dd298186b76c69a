// SPDX-License-Identifier: MIT
/*
 * test_hmm_remote — the hmm.h-shaped shared-mode calls of
 * libhmm/src/remote/rtensor.c (what shared mode forwards to when
 * hmm_config.daemon is set) against a real hmmd on a temporary socket:
 * open from a config, make, map, write, read back, flush, reopen a
 * persistent tensor by name from a second context, stats, a region,
 * free; WAIT
 * (hmm_wait) until a prefetch in hmmd is done; a map past the client's
 * own quota waits for the unmap another thread of it makes, while its
 * other calls go on over the same connection; a QUOTA_SET below hmmd's
 * chunk is refused, naming both.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "t.h"
#include "hmmd_t.h"
#include "rtensor.h"
#include "err.h"

static char hmmd[4096], dir[4096], sock[4096], store[4096], logf[4096];

static pid_t start(void)
{
	char *argv[] = { hmmd, "--socket", sock, "--store", store,
			 "--store-size", "32M", "--host-budget", "4M",
			 "--chunk", "64K", NULL };
	pid_t pid = t_hmmd_spawn(hmmd, argv, logf, 0, NULL);

	t_hmmd_wait_listen(pid, sock, 20, logf);
	return pid;
}

/* The resident host bytes of tensor id, by LIST; ~0 when not found. */
static uint64_t host_resident(struct hmm_client *c, uint64_t id)
{
	struct hmm_proto_list_reply r;

	if (hmm_client_list(c, HMM_PROTO_LIST_TENSORS, id, &r) || r.id != id)
		return ~0ull;
	return r.a[HMM_TIER_HOST];
}

/* Prefetch, then WAIT: the tensor is all on the host when WAIT answers. */
static void test_wait(struct hmm_client *c, struct hmm_remote_tensor *t)
{
	t_eq(hmm_client_evict(c, t->t.id, 0, HMM_ALL, HMM_TIER_HOST), 0,
	     "evict emb");
	t_eq(host_resident(c, t->t.id), 0, "emb: nothing on the host");
	t_eq(hmm_client_prefetch(c, t->t.id, 0, HMM_ALL, HMM_TIER_HOST), 0,
	     "prefetch emb (started, not done)");
	t_eq(hmm_remote_wait(c, t), 0, "WAIT for emb");
	t_eq(host_resident(c, t->t.id), t->t.bytes, "after WAIT: emb all on "
	     "the host");
	t_eq(hmm_remote_wait(c, NULL), 0, "WAIT for all the client's "
	     "tensors");
	t_eq(hmm_client_wait(c, 999999), -ENOENT, "WAIT for a tensor not "
	     "held: -ENOENT");
}

struct waiter {
	struct hmm_remote_tensor *t;
	int ret, done;		/* done: __atomic */
};

static void *quota_mapper(void *arg)
{
	struct waiter *w = arg;
	void *p;

	w->ret = hmm_remote_map(w->t, 0, 65536, HMM_TIER_HOST, HMM_READ, &p);
	if (!w->ret)
		hmm_remote_unmap(w->t, p);
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* A client whose quota is pinned full: a second thread's map waits in
 * hmmd (back-pressure, not -EDQUOT) while this thread's calls go on, and
 * goes through when this thread unmaps. */
static void test_quota_wait(struct hmm_config *cfg)
{
	int64_t shape[1] = { (1 << 20) / 4 };
	struct hmm_remote_tensor *t;
	struct hmm_stats st;
	struct hmm_client *c;
	struct waiter w = { 0 };
	pthread_t thr;
	void *p;
	int i;

	cfg->host_budget = 1 << 20;
	if (hmm_remote_open(cfg, &c) ||
	    hmm_remote_tensor_new(c, "q", HMM_DTYPE_F32, 1, shape, 0, &t) ||
	    hmm_remote_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_WRITE, &p))
		t_fail_all("quota client: %s", hmm_last_error());
	w.t = t;
	pthread_create(&thr, NULL, quota_mapper, &w);
	usleep(200 * 1000);
	t_eq(__atomic_load_n(&w.done, __ATOMIC_ACQUIRE), 0, "quota 1 MiB "
	     "pinned full: another thread's map waits");
	for (i = 0; i < 3; i++)
		if (hmm_remote_stats(c, &st))
			break;
	t_eq(i, 3, "meanwhile this thread's calls go through on the same "
	     "connection");
	t_eq(__atomic_load_n(&w.done, __ATOMIC_ACQUIRE), 0, "and the map "
	     "still waits");
	t_eq(hmm_remote_unmap(t, p), 0, "unmap: room in the quota");
	pthread_join(thr, NULL);
	t_eq(w.ret, 0, "the waiting map goes through");
	t_eq(hmm_remote_tensor_free(t), 0, "free q");
	hmm_client_close(c);
}

/* QUOTA_SET of a host quota below hmmd's 64 KiB chunk: no map could be
 * admitted (a region's block evictions would fail, and its next access
 * get SIGBUS), so hmmd refuses it naming both, and the quota stays. */
static void test_quota_below_chunk(struct hmm_config *cfg)
{
	struct hmm_proto_stats_reply st;
	struct hmm_client *c;
	int ret;

	cfg->host_budget = 1 << 20;
	if (hmm_remote_open(cfg, &c))
		t_fail_all("quota client: %s", hmm_last_error());
	t_eq(hmm_client_chunk_bytes(c), 64 << 10, "hello: hmmd's chunk, "
	     "64 KiB");
	ret = hmm_client_quota_set(c, 0, (uint64_t[]){ 0, 32 << 10, 0 });
	t_eq(ret, -EINVAL, "QUOTA_SET host 32K, chunk 64K: -EINVAL");
	t_ok(strstr(hmm_last_error(), "host quota 32768 bytes") &&
	     strstr(hmm_last_error(), "chunk_bytes 65536"), "its detail "
	     "names the quota and the chunk: %s", hmm_last_error());
	t_ok(!hmm_client_stats(c, &st) &&
	     st.quota[HMM_TIER_HOST] == 1 << 20, "the host quota stays 1 MiB");
	t_eq(hmm_client_quota_set(c, 0, (uint64_t[]){ 0, 64 << 10, 0 }), 0,
	     "QUOTA_SET host 64K (a chunk): taken");
	t_ok(!hmm_client_stats(c, &st) &&
	     st.quota[HMM_TIER_HOST] == 64 << 10, "the host quota is 64 KiB");
	hmm_client_close(c);
}

int main(void)
{
	char addr[4200];
	int64_t shape[2] = { 256, 1024 };	/* 1 MiB of f32 */
	struct hmm_remote_tensor *t, *t2;
	struct hmm_client *c, *c2;
	struct hmm_config cfg;
	struct hmm_stats st;
	uint8_t *want;
	size_t bytes = 256 * 1024 * 4;
	void *p;
	pid_t pid;
	int ret, stt;

	T_HMMD_PATHS(hmmd, dir, sock, store, logf, "r");
	pid = start();

	hmm_config_default(&cfg);
	t_eq(hmm_remote_open(&cfg, &c), -EINVAL, "no daemon in the config: "
	     "-EINVAL");
	snprintf(addr, sizeof(addr), "unix:%s", sock);
	cfg.daemon = addr;
	cfg.host_budget = 2 << 20;
	ret = hmm_remote_open(&cfg, &c);
	t_eq(ret, 0, "hmm_remote_open(daemon = \"unix:...\"): %s",
	     hmm_last_error());
	if (ret)
		t_fail_all("no client");
	ret = hmm_remote_tensor_new(c, "emb", HMM_DTYPE_F32, 2, shape,
				    HMM_PROTO_TENSOR_PERSIST, &t);
	t_eq(ret, 0, "tensor_new emb");
	if (ret)
		t_fail_all("no tensor: %s", hmm_last_error());
	t_eq(t->t.bytes, bytes, "emb: %zu bytes, shape kept", bytes);
	t_ok(t->t.ndim == 2 && t->t.shape[1] == 1024, "emb: 2 dims");
	t_eq(hmm_remote_map(t, 0, HMM_ALL, HMM_TIER_DEVICE, HMM_READ, &p),
	     -ENOTSUP, "a device map: -ENOTSUP");
	t_eq(hmm_remote_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p), 0,
	     "map READ");
	want = calloc(1, bytes);
	t_ok(!memcmp(p, want, bytes), "a new tensor reads zero");
	t_eq(hmm_remote_unmap(t, p), 0, "unmap");
	t_eq(hmm_remote_unmap(t, p), -EINVAL, "unmap twice: -EINVAL");
	t_fill(want, bytes, 5);
	ret = hmm_remote_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD, &p);
	t_eq(ret, 0, "map DISCARD");
	if (!ret) {
		memcpy(p, want, bytes);
		hmm_remote_unmap(t, p);
	}
	t_eq(hmm_client_flush(c), 0, "flush");

	ret = hmm_remote_open(&cfg, &c2);
	t_eq(ret, 0, "a second context");
	ret = ret ? ret : hmm_remote_tensor_open(c2, "emb", &t2);
	t_eq(ret, 0, "it opens emb by name: %s", ret ? hmm_last_error() : "");
	ret = ret ? ret : hmm_remote_map(t2, 4096, 8192, HMM_TIER_HOST,
					 HMM_READ, &p);
	t_ok(!ret && !memcmp(p, want + 4096, 8192),
	     "and reads what the first wrote");
	if (!ret) {
		hmm_remote_unmap(t2, p);
		free(t2);	/* a handle: the owner frees the tensor */
	}
	t_eq(hmm_remote_tensor_open(c2, "nope", &t2), -ENOENT,
	     "open of an unknown name: -ENOENT");
	t_eq(hmm_remote_stats(c, &st), 0, "stats");
	t_ok(st.tier[HMM_TIER_HOST].capacity == 4 << 20 && st.tensors >= 1,
	     "stats: hmmd's 4 MiB host tier, %llu tensors",
	     (unsigned long long)st.tensors);
	{	/* the same through hmm.h: hmm_open with config.daemon */
		struct hmm_tensor *ht;
		struct hmm *h;

		ret = hmm_open(&cfg, &h);
		t_eq(ret, 0, "hmm_open(daemon = \"unix:...\"): %s",
		     ret ? hmm_last_error() : "shared mode");
		if (!ret) {
			ret = hmm_tensor_open(h, "emb", &ht);
			t_eq(ret, 0, "hmm_tensor_open finds emb through hmmd");
			t_ok(!ret && hmm_tensor_bytes(ht) == bytes &&
			     hmm_tensor_ndim(ht) == 2, "with its size and "
			     "shape");
			ret = ret ? ret : hmm_map(ht, 0, HMM_ALL, HMM_TIER_HOST,
						  HMM_READ, &p);
			t_ok(!ret && !memcmp(p, want, bytes),
			     "hmm_map reads what hmm_remote_map wrote");
			if (!ret) {	/* both map hmmd's pages: no copy */
				void *w;
				int r2 = hmm_remote_map(t, 0, 4096,
							HMM_TIER_HOST,
							HMM_WRITE, &w);

				if (!r2)
					memset(w, 0xee, 64);
				t_ok(!r2 && ((uint8_t *)p)[0] == 0xee &&
				     ((uint8_t *)p)[63] == 0xee, "zero-copy: "
				     "another client's write shows at once "
				     "in this map");
				if (!r2)
					hmm_remote_unmap(t, w);
				t_eq(hmm_unmap(ht, p), 0, "hmm_unmap");
			}
			ret = hmm_region_new(h, 65536, &p);
			t_eq(ret, 0, "a region in shared mode: %s",
			     ret ? hmm_last_error() : "made");
			if (!ret) {
				memset(p, 0x3c, 65536);
				t_ok(((uint8_t *)p)[65535] == 0x3c,
				     "written and read through");
				t_eq(hmm_region_free(h, p), 0, "region freed");
			}
			hmm_close(h);	/* drops the handle, not emb */
		}
	}
	test_wait(c, t);
	t_eq(hmm_remote_tensor_free(t), 0, "free");
	test_quota_wait(&cfg);
	test_quota_below_chunk(&cfg);
	hmm_client_close(c2);
	hmm_client_close(c);
	free(want);
	kill(pid, SIGTERM);
	waitpid(pid, &stt, 0);
	t_ok(WIFEXITED(stt) && WEXITSTATUS(stt) == 0, "hmmd: exit 0");
	return t_done();
}
