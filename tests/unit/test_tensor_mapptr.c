// SPDX-License-Identifier: MIT
/*
 * test_tensor_mapptr — a tensor's host address is stable, in both modes:
 * two maps of the same range return the same pointer, an overlapping
 * range base + offset, a map after the unmaps the same address again, and
 * writes through one are seen through the other; two tensors do not
 * share an address; after hmm_tensor_free (and hmm_close) the address is
 * no longer mapped in this process.  Two maps at one pointer: an unmap of
 * it ends the one that pins least (the shorter; of equal ranges the
 * read-only one), so until the other's unmap the bytes written through
 * the one left survive an eviction and a flush (in shared mode hmmd's
 * unmap once ended the newest engine map at the pointer, the longer
 * one, and those bytes were lost: found by fuzz_api's shared mode).
 * A host and a device map of one offset: the host unmap ends the host
 * map (device_and_host).
 */
#include <sys/mman.h>

#include "t.h"
#include "hmm_mode.h"

#include "hmm.h"

#define CHUNK	(64 << 10)
#define TBYTES	(1 << 20)

/* Evicted from the host, the write-backs done. */
static void evict(struct hmm *h, struct hmm_tensor *t)
{
	if (hmm_evict(t, 0, HMM_ALL, HMM_TIER_HOST) || hmm_wait(h, NULL))
		t_fail_all("evict: %s", hmm_last_error());
}

/*
 * Of two live maps, end first (a map of tf), then evict tl, or flush h
 * when flush is set, write v through the len bytes of last (a map of
 * tl) and end it: after an eviction tl reads v, so the first unmap
 * ended first's map and no other.  h: tl's context.
 */
static void end_in_turn(struct hmm *h, struct hmm_tensor *tf, void *first,
			struct hmm_tensor *tl, void *last, uint64_t len,
			int flush, uint8_t v, const char *what)
{
	t_eq(hmm_unmap(tf, first), 0, "%s: the first unmap", what);
	if (flush && hmm_flush(h))
		t_fail_all("flush: %s", hmm_last_error());
	if (!flush)
		evict(h, tl);
	memset(last, v, len);
	t_eq(hmm_unmap(tl, last), 0, "%s: the other, written after the %s",
	     what, flush ? "flush" : "eviction");
	evict(h, tl);
	t_ok(hmm_test_all(tl, len, v), "%s: the bytes written come back "
	     "after an eviction: the first unmap ended its own map", what);
}

/* See the top: two maps at one pointer, unmapped once. */
static void one_pointer(struct hmm *h, struct hmm_tensor *t)
{
	void *s, *l;

	if (hmm_map(t, 0, 4096, HMM_TIER_HOST, HMM_READ, &s) ||
	    hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_WRITE, &l) || s != l)
		t_fail_all("short and long map: %s", hmm_last_error());
	end_in_turn(h, t, s, t, l, TBYTES, 0, 0x5a, "a short map and a long "
		    "one at one pointer");

	if (hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &s) ||
	    hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_WRITE, &l) || s != l)
		t_fail_all("read and write map: %s", hmm_last_error());
	end_in_turn(h, t, s, t, l, TBYTES, 1, 0x6b, "a read map and a write "
		    "map of one range");
}

/*
 * A host map and a device map of one offset, the host one unmapped
 * first, then a flush, then writes at the device: they must survive the
 * device map's unmap and an eviction.  In shared mode the device map
 * stages through a host map in hmmd with the host map's pointer, and
 * the host unmap once ended that staging map (the shorter) instead:
 * the device's later writes came back to pages no write map pinned,
 * clean since the flush, and the eviction dropped them.
 */
static void device_and_host(struct hmm *h, struct hmm_tensor *t)
{
	void *hp, *dp;

	if (hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &hp) ||
	    hmm_map(t, 0, CHUNK, HMM_TIER_DEVICE, HMM_WRITE, &dp))
		t_fail_all("host and device map: %s", hmm_last_error());
	end_in_turn(h, t, hp, t, dp, CHUNK, 1, 0x3c, "a host map, then a "
		    "device map of offset 0");
}

/*
 * Shared mode: two clients' maps at one pointer in hmmd's engine.  The
 * saved "w" opened by a second context: this one maps its first 4 KiB,
 * the other all of it for writing; this one's unmap must end its own
 * map in hmmd, not the other's (hmmd's engine unmap took the newest at
 * the pointer), so the other's writes after an eviction come back.
 */
static void two_clients(struct hmm *h, const struct hmm_config *cfg)
{
	struct hmm_tensor *t, *t2;
	int64_t n = TBYTES;
	struct hmm *h2;
	void *s, *l;

	if (!hmm_test_shared()) {
		t_ok(1, "two clients' maps at one pointer # SKIP embedded "
		     "mode: one client");
		return;
	}
	if (hmm_tensor_new(h, "w", HMM_DTYPE_U8, 1, &n, &t) || hmm_flush(h) ||
	    hmm_open(cfg, &h2) || hmm_tensor_open(h2, "w", &t2))
		t_fail_all("w in two contexts: %s", hmm_last_error());
	if (hmm_map(t, 0, 4096, HMM_TIER_HOST, HMM_READ, &s) ||
	    hmm_map(t2, 0, HMM_ALL, HMM_TIER_HOST, HMM_WRITE, &l))
		t_fail_all("maps: %s", hmm_last_error());
	end_in_turn(h2, t, s, t2, l, TBYTES, 0, 0x7c, "two clients' maps at "
		    "one offset, the short one first");
	hmm_close(h2);
}

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
	cfg.device = "sim";
	cfg.device_budget = 1 << 20;
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
	one_pointer(h, u);
	device_and_host(h, u);
	two_clients(h, &cfg);

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
