// SPDX-License-Identifier: MIT
/*
 * test_tensor_hostfd — HMM_CONFIG_HOST_SHARED: a tensor's host memory is
 * its own memfd (hmm_tensor_host_fd), another mapping of which sees the
 * mapped bytes with no copy; an evicted chunk is punched out of the memfd
 * (its blocks freed); without the flag the call is -ENOTSUP.
 *
 * In shared mode (HMM_TEST_MODE=shared, tests/unit/hmm_mode.h) the host
 * memory is hmmd's memfd: hmm_tensor_host_fd is -ENOTSUP, and what is
 * checked instead is the same property through hmmd: two maps of one
 * range return one pointer into hmmd's pages (no copy either way), and
 * an evicted range reads back from the store.
 */
#include <sys/mman.h>
#include <sys/stat.h>

#include "t.h"

#include "hmm.h"
#include "hmm_mode.h"

#define CHUNK	(64 << 10)
#define TBYTES	(4 * CHUNK)

static uint64_t blocks(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? ~0ull : (uint64_t)st.st_blocks * 512;
}

/* Shared mode: the memfd is hmmd's (see the top). */
static int shared_main(struct hmm_config *cfg)
{
	struct hmm_tensor *t;
	int64_t n = TBYTES;
	uint64_t off = 1;
	uint8_t *p, *q, want[CHUNK];
	struct hmm *h;
	int fd = -1;

	hmm_test_mode(cfg);
	if (hmm_open(cfg, &h) || hmm_tensor_new(h, "s", HMM_DTYPE_U8, 1, &n,
						&t))
		t_fail_all("open: %s", hmm_last_error());
	t_eq(hmm_tensor_host_fd(t, &fd, &off), -ENOTSUP, "shared mode: no "
	     "host fd here (%s)", hmm_last_error());
	if (hmm_map(t, CHUNK, CHUNK, HMM_TIER_HOST, HMM_WRITE, (void **)&p) ||
	    hmm_map(t, CHUNK, CHUNK, HMM_TIER_HOST, HMM_WRITE, (void **)&q))
		t_fail_all("map: %s", hmm_last_error());
	t_ok(p == q, "two maps of one range: one pointer, as embedded");
	t_fill(p, CHUNK, 7);
	t_fill(want, CHUNK, 7);
	t_ok(!memcmp(q, want, CHUNK), "writes through one show in the other "
	     "at once (hmmd's pages, no copy)");
	memset(q, 0x5a, 100);
	t_ok(p[0] == 0x5a && p[99] == 0x5a, "and the other way");
	t_eq(hmm_unmap(t, q), 0, "unmap one");
	t_eq(hmm_unmap(t, p), 0, "unmap the other");
	hmm_test_skip("memfd blocks: one chunk's memory, none after "
		      "eviction", "shared mode: the memfd is hmmd's and "
		      "the client holds no fd of it to fstat");
	t_eq(hmm_evict(t, 0, HMM_ALL, HMM_TIER_HOST), 0, "evict");
	t_eq(hmm_wait(h, t), 0, "wait");
	memset(want, 0x5a, 100);
	if (hmm_map(t, CHUNK, CHUNK, HMM_TIER_HOST, HMM_READ, (void **)&p))
		t_fail_all("map: %s", hmm_last_error());
	t_ok(!memcmp(p, want, CHUNK), "read back from the store");
	hmm_unmap(t, p);
	t_eq(hmm_tensor_free(t), 0, "free");
	hmm_close(h);
	return t_done();
}

int main(void)
{
	struct hmm_config cfg;
	struct hmm_tensor *t;
	char path[4200];
	int64_t n = TBYTES;
	uint64_t off = 1;
	uint8_t *p, *q, want[CHUNK];
	struct hmm *h;
	int fd = -1, r;

	hmm_test_config(&cfg, path, sizeof(path), 16 << 20, 1 << 20, CHUNK);
	if (hmm_test_shared())
		return shared_main(&cfg);

	/* default: anonymous memory */
	if (hmm_open(&cfg, &h) || hmm_tensor_new(h, "a", HMM_DTYPE_U8, 1, &n,
						 &t))
		t_fail_all("open: %s", hmm_last_error());
	t_eq(hmm_tensor_host_fd(t, &fd, &off), -ENOTSUP, "without "
	     "HMM_CONFIG_HOST_SHARED: -ENOTSUP (%s)", hmm_last_error());
	t_eq(hmm_tensor_host_fd(t, NULL, &off), -EINVAL, "no fd: -EINVAL");
	hmm_close(h);

	cfg.flags = 1u << 31;
	t_eq(hmm_open(&cfg, &h), -EINVAL, "unknown config flag: -EINVAL");
	cfg.flags = HMM_CONFIG_HOST_SHARED;
	if (hmm_open(&cfg, &h) || hmm_tensor_new(h, "s", HMM_DTYPE_U8, 1, &n,
						 &t))
		t_fail_all("open shared: %s", hmm_last_error());
	r = hmm_tensor_host_fd(t, &fd, &off);
	t_ok(r == 0 && fd >= 0 && off == 0, "host fd %d, offset %llu", fd,
	     (unsigned long long)off);
	if (r)
		t_fail_all("no fd: %s", hmm_last_error());
	t_eq(blocks(fd), 0, "a new tensor holds no memory");

	/* a second mapping of the fd is the same memory */
	q = mmap(NULL, TBYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	t_ok(q != MAP_FAILED, "the fd maps");
	if (q == MAP_FAILED)
		t_fail_all("mmap: %s", strerror(errno));
	if (hmm_map(t, CHUNK, CHUNK, HMM_TIER_HOST, HMM_WRITE, (void **)&p))
		t_fail_all("map: %s", hmm_last_error());
	t_fill(p, CHUNK, 7);
	t_fill(want, CHUNK, 7);
	t_ok(!memcmp(q + CHUNK, want, CHUNK), "writes through hmm_map show "
	     "in the other mapping at once");
	memset(q + CHUNK, 0x5a, 100);
	t_ok(p[0] == 0x5a && p[99] == 0x5a, "and the other way");
	t_eq(blocks(fd), CHUNK, "one chunk's memory in the memfd");
	t_eq(hmm_unmap(t, p), 0, "unmap");

	/* eviction writes it back and frees it from the memfd */
	t_eq(hmm_evict(t, 0, HMM_ALL, HMM_TIER_HOST), 0, "evict");
	t_eq(hmm_wait(h, t), 0, "wait");
	t_eq(blocks(fd), 0, "the evicted chunk was punched out");
	memset(want, 0x5a, 100);
	if (hmm_map(t, CHUNK, CHUNK, HMM_TIER_HOST, HMM_READ, (void **)&p))
		t_fail_all("map: %s", hmm_last_error());
	t_ok(!memcmp(p, want, CHUNK) && !memcmp(q + CHUNK, want, CHUNK),
	     "read back from the store, into the same pages");
	hmm_unmap(t, p);
	munmap(q, TBYTES);
	t_eq(hmm_tensor_free(t), 0, "free");
	hmm_close(h);
	return t_done();
}
