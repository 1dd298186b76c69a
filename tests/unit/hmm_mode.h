/* SPDX-License-Identifier: MIT */
/*
 * hmm_mode.h — run a libhmm test in either mode.  With HMM_TEST_MODE=
 * shared, hmm_test_mode(&cfg) starts $HMM_BUILD/bin/hmmd (build/bin/hmmd)
 * once per process on a socket and store in t_tmpdir(), with cfg's chunk
 * size, host budget and wait_ms as its global ones (the client's host
 * quota is then the whole budget), and sets cfg.daemon to it;
 * the daemon gets SIGTERM at exit.  Otherwise it changes nothing.
 * hmm_test_skip(what, why) prints a TAP skip line for a check that cannot
 * hold in this mode; hmm_test_config() fills the usual store config;
 * hmm_test_region() opens a context with a region or skips the test;
 * hmm_test_pass(), hmm_test_fill(), hmm_test_same() and hmm_test_all()
 * write or check a tensor's bytes.
 * Include after t.h.  Single-threaded setup only.
 */
#ifndef HMM_MODE_H
#define HMM_MODE_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hmm.h"
#include "hmmd_t.h"

static pid_t hmm_mode_pid_;
static char hmm_mode_addr_[256];

static inline int hmm_test_shared(void)
{
	const char *m = getenv("HMM_TEST_MODE");

	return m && !strcmp(m, "shared");
}

static inline void hmm_test_skip(const char *what, const char *why)
{
	t_ok(1, "%s # SKIP %s", what, why);
}

static void hmm_mode_stop_(void)
{
	int st;

	if (hmm_mode_pid_ > 0) {
		kill(hmm_mode_pid_, SIGTERM);
		waitpid(hmm_mode_pid_, &st, 0);
		hmm_mode_pid_ = 0;
	}
}

static inline void hmm_mode_start_(const struct hmm_config *cfg)
{
	char bin[4096], dir[4096], sock[200], store[4200], logf[4200];
	char chunk[32], budget[32], wait[32];

	T_HMMD_PATHS(bin, dir, sock, store, logf, "hmmd");
	snprintf(chunk, sizeof(chunk), "%u",
		 cfg->chunk_bytes ? cfg->chunk_bytes : 2u << 20);
	snprintf(budget, sizeof(budget), "%llu",
		 (unsigned long long)cfg->host_budget);
	snprintf(wait, sizeof(wait), "%u", cfg->wait_ms ? cfg->wait_ms : 10000);
	{
		char *argv[] = { bin, "--socket", sock, "--store", store,
				 "--store-size", "256M", "--host-budget",
				 budget, "--chunk", chunk, "--wait-ms", wait,
				 "--module", "none", NULL };

		hmm_mode_pid_ = t_hmmd_spawn(bin, argv, logf, 0, NULL);
	}
	atexit(hmm_mode_stop_);
	t_hmmd_wait_listen(hmm_mode_pid_, sock, 20, logf);
	snprintf(hmm_mode_addr_, sizeof(hmm_mode_addr_), "unix:%s", sock);
	t_diag("shared mode: hmmd pid %d on %s", (int)hmm_mode_pid_, sock);
}

/*
 * The config most tests start from: libhmm's defaults with the store
 * file "store" in t_tmpdir() (its path written into path[len]) of
 * store_size bytes, host_budget, and chunk bytes (0: the default).
 */
static inline void hmm_test_config(struct hmm_config *cfg, char *path,
				   size_t len, uint64_t store_size,
				   uint64_t host_budget, uint32_t chunk)
{
	snprintf(path, len, "%s/store", t_tmpdir());
	hmm_config_default(cfg);
	cfg->store_path = path;
	cfg->store_size = store_size;
	cfg->host_budget = host_budget;
	if (chunk)
		cfg->chunk_bytes = chunk;
}

/*
 * Open *h with cfg and make a region of bytes in it: the region's
 * address.  A failed hmm_open or hmm_region_new fails the test, except
 * that a libhmm without userfaultfd (-ENOSYS, -EPERM) skips it.
 */
static inline void *hmm_test_region(const struct hmm_config *cfg,
				    uint64_t bytes, struct hmm **h)
{
	void *p;
	int r;

	if (hmm_open(cfg, h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	r = hmm_region_new(*h, bytes, &p);
	if (r == -ENOSYS || r == -EPERM)
		t_skip_all("userfaultfd unavailable: %s", hmm_last_error());
	if (r)
		t_fail_all("region: %s", hmm_last_error());
	return p;
}

/* Set cfg up for the mode in HMM_TEST_MODE (see above). */
static inline void hmm_test_mode(struct hmm_config *cfg)
{
	if (!hmm_test_shared())
		return;
	if (!hmm_mode_pid_)
		hmm_mode_start_(cfg);
	cfg->daemon = hmm_mode_addr_;
}

/*
 * Write (write = 1) or check bytes of t from offset 0, chunk bytes at a
 * time through hmm_map, against t_fill(seed): 0 when every byte was as
 * expected (or written), 1 on the first chunk that differs, or the
 * map's -errno.
 */
static inline int hmm_test_pass(struct hmm_tensor *t, uint64_t bytes,
				uint64_t chunk, uint64_t seed, int write)
{
	uint8_t *want = malloc(bytes ? bytes : 1);
	int bad = 0;

	if (!want)
		return -ENOMEM;
	t_fill(want, bytes, seed);
	for (uint64_t o = 0; o < bytes && !bad; o += chunk) {
		uint64_t len = bytes - o < chunk ? bytes - o : chunk;
		void *p;
		int r = hmm_map(t, o, len, HMM_TIER_HOST,
				write ? HMM_DISCARD : HMM_READ, &p);

		if (r) {
			bad = r;
			break;
		}
		if (write)
			memcpy(p, want + o, len);
		else
			bad = memcmp(p, want + o, len) != 0;
		hmm_unmap(t, p);
	}
	free(want);
	return bad;
}

/* 1 when the whole of t (bytes long) maps at the host in one piece and
 * reads as t_fill(seed), else 0. */
static inline int hmm_test_same(struct hmm_tensor *t, uint64_t bytes,
				uint64_t seed)
{
	return hmm_test_pass(t, bytes, bytes, seed, 0) == 0;
}

/* Write t's first bytes from t_fill(seed) in one map: 0 or the map's
 * -errno (hmm_test_pass). */
static inline int hmm_test_fill(struct hmm_tensor *t, uint64_t bytes,
				uint64_t seed)
{
	return hmm_test_pass(t, bytes, bytes, seed, 1);
}

/* Whether every one of t's first bytes reads v, through one host map
 * (a map that fails fails the test). */
static inline int hmm_test_all(struct hmm_tensor *t, uint64_t bytes,
			       uint8_t v)
{
	uint8_t *p;
	int ok = 1;

	if (hmm_map(t, 0, bytes, HMM_TIER_HOST, HMM_READ, (void **)&p))
		t_fail_all("map %s at the host: %s", hmm_tensor_name(t),
			   hmm_last_error());
	for (uint64_t i = 0; i < bytes && ok; i++)
		ok = p[i] == v;
	hmm_unmap(t, p);
	return ok;
}

#endif /* HMM_MODE_H */
