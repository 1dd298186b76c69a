// SPDX-License-Identifier: MIT
/*
 * test_store_lock — one store, one context: a second hmm_open of a store
 * that a context of this process, of another process (fork) or hmmd has
 * open fails with -EBUSY naming the path and the holder's pid, and the
 * first context's data is untouched; after the holder closes (or dies),
 * the store opens again.
 */
#include "t.h"
#include "hmm_mode.h"

#include "hmm.h"

#define CHUNK	(64 << 10)
#define TBYTES	(256 << 10)

static struct hmm_config cfg;

/* A second open of cfg's store: 1 when it is -EBUSY naming path and pid. */
static int refused(const char *what, pid_t holder)
{
	char want[32];
	struct hmm *h2 = NULL;
	int r = hmm_open(&cfg, &h2);

	snprintf(want, sizeof(want), "pid %d", (int)holder);
	t_diag("%s: %d %s", what, r, hmm_last_error());
	if (!r)
		hmm_close(h2);
	return r == -EBUSY && strstr(hmm_last_error(), cfg.store_path) &&
	       strstr(hmm_last_error(), want);
}

static void fill(struct hmm_tensor *t, uint8_t v)
{
	void *p;

	if (hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_WRITE, &p))
		t_fail_all("map: %s", hmm_last_error());
	memset(p, v, TBYTES);
	hmm_unmap(t, p);
}

/* t read back from the store is all v. */
static int all(struct hmm *h, struct hmm_tensor *t, uint8_t v)
{
	uint8_t *p;
	void *vp;
	int i, ok = 1;

	hmm_evict(t, 0, HMM_ALL, HMM_TIER_HOST);
	hmm_wait(h, NULL);
	if (hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &vp)) {
		t_diag("map: %s", hmm_last_error());
		return 0;
	}
	p = vp;
	for (i = 0; i < TBYTES; i++)
		ok &= p[i] == v;
	hmm_unmap(t, vp);
	return ok;
}

int main(void)
{
	char path[4200];
	struct hmm_tensor *t;
	int64_t n = TBYTES;
	struct hmm *h;
	pid_t pid;
	int st;

	hmm_test_config(&cfg, path, sizeof(path), 16 << 20, 1 << 20, CHUNK);
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	if (hmm_tensor_new(h, "w", HMM_DTYPE_U8, 1, &n, &t))
		t_fail_all("tensor: %s", hmm_last_error());
	fill(t, 0x5a);
	t_eq(hmm_flush(h), 0, "flush the first context");

	t_ok(refused("same process", getpid()), "a second context of this "
	     "process: -EBUSY naming the path and this pid");
	cfg.flags = HMM_CONFIG_STORE_KEEP;
	t_ok(refused("same process, KEEP", getpid()), "with KEEP as well");
	cfg.flags = 0;
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(refused("child", getppid()) ? 0 : 1);
	t_ok(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	     WEXITSTATUS(st) == 0, "another process: -EBUSY naming the path "
	     "and the holder's pid");
	t_ok(all(h, t, 0x5a), "the first context still reads its data back "
	     "from the store");
	hmm_close(h);

	/* closed: the store opens again, and keeps what was flushed */
	cfg.flags = HMM_CONFIG_STORE_KEEP;
	if (hmm_open(&cfg, &h))
		t_fail_all("reopen after close: %s", hmm_last_error());
	if (hmm_tensor_open(h, "w", &t))
		t_fail_all("the flushed tensor is gone: %s", hmm_last_error());
	t_ok(all(h, t, 0x5a), "the flushed tensor is there, exact");
	hmm_close(h);
	cfg.flags = 0;

	/* hmmd holds its store */
	hmm_mode_start_(&cfg);
	snprintf(path, sizeof(path), "%s/hmmd.store", t_tmpdir());
	t_ok(refused("hmmd", hmm_mode_pid_), "a store hmmd has open: -EBUSY "
	     "naming the path and hmmd's pid");
	hmm_mode_stop_();
	cfg.flags = HMM_CONFIG_STORE_KEEP;
	h = NULL;
	t_eq(hmm_open(&cfg, &h), 0, "opens once hmmd is gone");
	if (h)
		hmm_close(h);
	return t_done();
}
