// SPDX-License-Identifier: MIT
/*
 * test_tensor_mapptr — a tensor's host address is stable, in both modes:
 * two maps of the same range return the same pointer, an overlapping
 * range base + offset, a map after the unmaps the same address again, and
 * writes through one are seen through the other; two tensors do not
 * share an address; after hmm_tensor_free (and hmm_close) the address is
 * no longer mapped in this process.
 */
#include <sys/mman.h>

#include "t.h"
#include "hmm_mode.h"

#include "hmm.h"

#define CHUNK	(64 << 10)
#define TBYTES	(1 << 20)

/* Is the page at p mapped in this process? */
static int mapped(const void *p)
{
	unsigned char v;

	return mincore((void *)((uintptr_t)p & ~4095ul), 4096, &v) == 0;
}

int main(void)
{
	struct hmm_tensor *t, *u;
	struct hmm_config cfg;
	void *p, *q, *r, *s, *o;
	int64_t n = TBYTES;
	struct hmm *h;
	char path[4200];

	hmm_test_config(&cfg, path, sizeof(path), 16 << 20, 4 << 20, CHUNK);
	hmm_test_mode(&cfg);
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	if (hmm_tensor_new(h, "a", HMM_DTYPE_U8, 1, &n, &t) ||
	    hmm_tensor_new(h, "b", HMM_DTYPE_U8, 1, &n, &u))
		t_fail_all("tensor: %s", hmm_last_error());

	if (hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_WRITE, &p) ||
	    hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &q) ||
	    hmm_map(t, 100000, 5000, HMM_TIER_HOST, HMM_WRITE, &r))
		t_fail_all("map: %s", hmm_last_error());
	t_ok(p == q, "two maps of the same range: the same pointer (%p, %p)",
	     p, q);
	t_ok(r == (uint8_t *)p + 100000, "an overlapping range: base + "
	     "offset (%p = %p + 100000)", r, p);
	memset(r, 0x77, 5000);
	t_ok(((uint8_t *)q)[100000] == 0x77 && ((uint8_t *)q)[104999] == 0x77
	     && ((uint8_t *)q)[99999] == 0, "a write through one is seen "
	     "through the other");
	if (hmm_map(u, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &o))
		t_fail_all("map b: %s", hmm_last_error());
	t_ok((uint8_t *)o + TBYTES <= (uint8_t *)p ||
	     (uint8_t *)p + TBYTES <= (uint8_t *)o, "another tensor: another "
	     "address range");
	t_eq(hmm_unmap(t, r), 0, "unmap the range");
	t_eq(hmm_unmap(t, q), 0, "unmap the second map");
	t_eq(hmm_unmap(t, p), 0, "unmap the first");
	t_eq(hmm_unmap(t, p), -EINVAL, "a third unmap of the pointer: -EINVAL");
	t_eq(hmm_unmap(u, o), 0, "unmap b");

	/* evicted and read back: the same address */
	hmm_evict(t, 0, HMM_ALL, HMM_TIER_HOST);
	hmm_wait(h, NULL);
	if (hmm_map(t, 99000, 2000, HMM_TIER_HOST, HMM_READ, &s))
		t_fail_all("map: %s", hmm_last_error());
	t_ok(s == (uint8_t *)p + 99000, "a map after an eviction: base + "
	     "offset again");
	t_ok(((uint8_t *)s)[999] == 0 && ((uint8_t *)s)[1000] == 0x77,
	     "with the bytes written");
	t_eq(hmm_unmap(t, s), 0, "unmap");

	t_ok(mapped(p), "the address is mapped while the tensor lives");
	t_eq(hmm_tensor_free(t), 0, "free a");
	t_ok(!mapped(p) || !mapped((uint8_t *)p + TBYTES - 1),
	     "after hmm_tensor_free its address is unmapped");
	if (hmm_map(u, 0, 4096, HMM_TIER_HOST, HMM_READ, &o))
		t_fail_all("map b: %s", hmm_last_error());
	hmm_unmap(u, o);
	hmm_close(h);	/* b still open: its mapping goes with the context */
	t_ok(!mapped(o), "after hmm_close a live tensor's address is "
	     "unmapped");
	return t_done();
}
