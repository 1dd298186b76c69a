// SPDX-License-Identifier: MIT
/*
 * test_tensor_backpressure — when a tier is full of pinned chunks a map
 * waits (back-pressure) and proceeds as soon as a pin is dropped; if no
 * pin is dropped within wait_ms it fails with -ENOMEM and a detail, and
 * leaves nothing pinned; the same at the (sim) device tier.  A map
 * waits out other calls' copies that fill the budget (busy_room).
 * Never an abort.  t: tsan
 *
 * In shared mode (HMM_TEST_MODE=shared, tests/unit/hmm_mode.h) the same
 * checks hold through hmmd, whose budget and wait_ms are this config's:
 * the client's host quota is the whole budget, so b's map waits in hmmd
 * for this client's own unmap of a (quota back-pressure), on one
 * connection shared by both threads.  hmmd admits a map before it pins,
 * so b's waiting map pins nothing there yet.
 */
#include "t.h"

#include "hmm.h"
#include "hmm_mode.h"

static struct hmm *h;
static struct hmm_tensor *a, *b;
static int done_flag;	/* __atomic */

static void *mapper(void *arg)
{
	void *p;
	int r = hmm_map(b, 0, HMM_ALL, HMM_TIER_HOST, HMM_WRITE, &p);

	if (r == 0) {
		memset(p, 0x5a, hmm_tensor_bytes(b));
		hmm_unmap(b, p);
	}
	__atomic_store_n(&done_flag, r == 0 ? 1 : -1, __ATOMIC_RELEASE);
	return NULL;
}

/* A context of 64 KiB chunks, a host budget of `host` bytes and a sim
 * device of `dev` behind a link on which one chunk takes 62 ms, past
 * wait_ms (20); NULL with the detail. */
static struct hmm *slow_open(uint64_t host, uint64_t dev)
{
	static char path[4200];
	struct hmm_config cfg;
	struct hmm *h2;

	hmm_test_config(&cfg, path, sizeof(path), 16 << 20, host, 64 << 10);
	cfg.device = "sim";
	cfg.device_budget = dev;
	cfg.sim_bandwidth = 1 << 20;
	cfg.wait_ms = 20;
	cfg.flags |= HMM_CONFIG_STORE_FORMAT;	/* whatever the last one kept */
	return hmm_open(&cfg, &h2) ? NULL : h2;
}

/*
 * A device map staging its chunks through a host budget of two, over a
 * slow device link: the host is full of the map's own chunks in flight,
 * not of pinned ones, so the map waits for them and succeeds.  The
 * chunks that found no room counted as starved while the others were
 * copied, and the map failed with -ENOMEM after wait_ms (found while
 * writing tests/fuzz/fuzz_api).
 */
static void staged_slowly(void)
{
	struct hmm_tensor *t;
	int64_t n = 256 << 10;
	struct hmm *h2;
	uint8_t *p;
	void *v;
	int r;

	if (hmm_test_shared()) {
		hmm_test_skip("a device map staged through a small host budget",
			      "shared mode: staging is hmmd's");
		return;
	}
	if (!(h2 = slow_open(128 << 10, 1 << 20)) ||
	    hmm_tensor_new(h2, "staged", HMM_DTYPE_U8, 1, &n, &t))
		t_fail_all("staged: %s", hmm_last_error());
	for (int i = 0; i < 4; i++) {	/* each chunk written, to the store */
		if (hmm_map(t, i << 16, 64 << 10, HMM_TIER_HOST, HMM_DISCARD,
			    &v))
			t_fail_all("staged: %s", hmm_last_error());
		memset(v, i + 1, 64 << 10);
		hmm_unmap(t, v);
	}
	hmm_evict(t, 0, HMM_ALL, HMM_TIER_HOST);
	hmm_wait(h2, NULL);
	r = hmm_map(t, 0, HMM_ALL, HMM_TIER_DEVICE, HMM_READ, &v);
	t_eq(r, 0, "a device map of four chunks through a two-chunk host "
	     "budget over a slow link (%s)", r ? hmm_last_error() : "ok");
	if (!r) {
		p = v;
		t_ok(p[0] == 1 && p[(128 << 10) + 5] == 3 && p[n - 1] == 4,
		     "its bytes are the store's");
		hmm_unmap(t, v);
	}
	hmm_close(h2);
}

static double since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return t1.tv_sec - t0->tv_sec + (t1.tv_nsec - t0->tv_nsec) * 1e-9;
}

/*
 * The host budget full of another call's copies: a's two chunks being
 * copied to the (sim) device by a prefetch, or in from it by an evict,
 * over a link slower than wait_ms.  Nothing is pinned: an unrelated map
 * of b waits for the copies to end and then for the room they free.  It
 * found no victim (every chunk busy) and failed with -ENOMEM after
 * wait_ms while the copies ran (found by fuzz_api).  A map that cannot
 * fit once they end (half the budget pinned) still fails with -ENOMEM,
 * a wait_ms after the copies, naming the tensor and the numbers.
 */
static struct hmm *busy_open(struct hmm_tensor **a, struct hmm_tensor **b,
			     struct hmm_tensor **c, int on_device)
{
	int64_t na = 128 << 10, nb = 64 << 10;
	struct hmm *h2;
	void *v;

	if (!(h2 = slow_open(128 << 10, 1 << 20)) ||
	    hmm_tensor_new(h2, "busy_a", HMM_DTYPE_U8, 1, &na, a) ||
	    hmm_tensor_new(h2, "busy_b", HMM_DTYPE_U8, 1, &nb, b) ||
	    hmm_tensor_new(h2, "busy_c", HMM_DTYPE_U8, 1, &na, c))
		t_fail_all("busy: %s", hmm_last_error());
	/* a written where its copies will start from */
	if (hmm_map(*a, 0, HMM_ALL, on_device ? HMM_TIER_DEVICE :
		    HMM_TIER_HOST, HMM_DISCARD, &v))
		t_fail_all("busy: map a: %s", hmm_last_error());
	if (!on_device)
		memset(v, 0x3c, na);
	hmm_unmap(*a, v);
	return h2;
}

/* b's host map (DISCARD) waits for the copies filling the budget and
 * succeeds; its result, checked. */
static int map_waits(struct hmm_tensor *b, void **v, const char *copies)
{
	struct timespec ts;
	double w;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	r = hmm_map(b, 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD, v);
	w = since(&ts);
	t_eq(r, 0, "a host map waits for %s a full host budget (%s, %.3f s)",
	     copies, r ? hmm_last_error() : "ok", w);
	return r;
}

static void busy_room(void)
{
	struct hmm_tensor *a, *b, *c;
	struct timespec ts;
	struct hmm_stats st;
	struct hmm *h2;
	double w;
	void *v, *vc;
	int r;

	if (hmm_test_shared()) {
		hmm_test_skip("a map waits for other calls' copies", "shared "
			      "mode: the device is this process's, the host "
			      "budget hmmd's");
		return;
	}
	/* a prefetch copies a's host chunks to the device */
	h2 = busy_open(&a, &b, &c, 0);
	hmm_prefetch(a, 0, HMM_ALL, HMM_TIER_DEVICE);
	r = map_waits(b, &v, "a prefetch's copies out of");
	if (!r) {
		memset(v, 0x11, 64 << 10);
		hmm_unmap(b, v);
	}
	hmm_wait(h2, NULL);
	hmm_stats(h2, &st);
	t_ok(st.tier[HMM_TIER_HOST].peak <= 128 << 10, "peak %llu within "
	     "budget", (unsigned long long)st.tier[HMM_TIER_HOST].peak);
	hmm_close(h2);

	/* an evict copies a's device chunks down into the host budget */
	h2 = busy_open(&a, &b, &c, 1);
	hmm_evict(a, 0, HMM_ALL, HMM_TIER_DEVICE);
	r = map_waits(b, &v, "an evict's copies into");
	if (!r)
		hmm_unmap(b, v);
	hmm_wait(h2, NULL);
	if (!hmm_map(a, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &v)) {
		t_ok(((uint8_t *)v)[0] == 0 && ((uint8_t *)v)[(128 << 10) - 1]
		     == 0, "a's bytes came down whole");
		hmm_unmap(a, v);
	} else {
		t_ok(0, "map a back: %s", hmm_last_error());
	}

	/* half the budget pinned, half another call's copies: a map of the
	   whole budget never fits, and fails once the copies have ended */
	if (hmm_map(b, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &v))
		t_fail_all("busy: map b: %s", hmm_last_error());
	if (hmm_map(a, 0, 64 << 10, HMM_TIER_DEVICE, HMM_WRITE, &vc))
		t_fail_all("busy: map a at the device: %s", hmm_last_error());
	hmm_unmap(a, vc);
	hmm_evict(a, 0, HMM_ALL, HMM_TIER_DEVICE);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	r = hmm_map(c, 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD, &vc);
	w = since(&ts);
	t_eq(r, -ENOMEM, "a map that cannot fit once the copies end fails "
	     "-ENOMEM (%.3f s)", w);
	t_ok(strstr(hmm_last_error(), "busy_c") &&
	     strstr(hmm_last_error(), "needs 131072 bytes") &&
	     strstr(hmm_last_error(), "budget 131072"), "its detail names "
	     "the tensor and the sizes: %s", hmm_last_error());
	t_ok(w >= 0.019 && w < 5, "after a bounded wait (%.3f s)", w);
	hmm_stats(h2, &st);
	t_eq(st.tier[HMM_TIER_HOST].pinned, 64 << 10, "only b stays pinned");
	hmm_unmap(b, v);
	hmm_close(h2);
}

/*
 * A flush whose dirty chunk is only at the device must stage it through
 * the host; with the host budget pinned full by a live map it can never,
 * and hmm_flush waited for ever (found by fuzz_api).  Now it fails
 * -ENOMEM after wait_ms, naming the chunk, loses nothing, and the next
 * flush, once the map is gone, saves it.
 */
static void flush_starved(void)
{
	struct hmm_tensor *d, *p;
	int64_t nd = 64 << 10, np = 128 << 10;
	struct timespec ts;
	struct hmm *h2;
	void *vd, *vp;
	double w;
	int r;

	if (hmm_test_shared()) {
		hmm_test_skip("a flush starved of host room", "shared mode: "
			      "the device is this process's, staged through "
			      "hmmd");
		return;
	}
	if (!(h2 = slow_open(128 << 10, 1 << 20)) ||
	    hmm_tensor_new(h2, "on_dev", HMM_DTYPE_U8, 1, &nd, &d) ||
	    hmm_tensor_new(h2, "pins", HMM_DTYPE_U8, 1, &np, &p))
		t_fail_all("flush_starved: %s", hmm_last_error());
	if (hmm_map(d, 0, HMM_ALL, HMM_TIER_DEVICE, HMM_WRITE, &vd))
		t_fail_all("map on_dev at the device: %s", hmm_last_error());
	hmm_unmap(d, vd);		/* dirty at the device only */
	if (hmm_map(p, 0, HMM_ALL, HMM_TIER_HOST, HMM_WRITE, &vp))
		t_fail_all("map pins: %s", hmm_last_error());
	memset(vp, 0x77, np);
	t_watchdog(30, "hmm_flush with the host pinned full");
	clock_gettime(CLOCK_MONOTONIC, &ts);
	r = hmm_flush(h2);
	w = since(&ts);
	alarm(0);
	t_eq(r, -ENOMEM, "a flush that cannot stage a device chunk through "
	     "a host pinned full fails -ENOMEM (%.3f s)", w);
	t_ok(strstr(hmm_last_error(), "on_dev") &&
	     strstr(hmm_last_error(), "pinned"), "its detail names the "
	     "tensor and the pins: %s", hmm_last_error());
	t_ok(w >= 0.019 && w < 5, "after a bounded wait (%.3f s)", w);
	hmm_unmap(p, vp);
	t_eq(hmm_flush(h2), 0, "once the map is gone the flush saves all "
	     "(%s)", hmm_last_error());
	hmm_close(h2);
}

/* A one-chunk tensor `name` in h2, written with `byte` at `tier`. */
static struct hmm_tensor *one_chunk(struct hmm *h2, const char *name,
				    int tier, int byte)
{
	int64_t n = 64 << 10;
	struct hmm_tensor *t;
	void *v;

	if (hmm_tensor_new(h2, name, HMM_DTYPE_U8, 1, &n, &t) ||
	    hmm_map(t, 0, HMM_ALL, tier, HMM_DISCARD, &v))
		t_fail_all("%s: %s", name, hmm_last_error());
	if (tier == HMM_TIER_HOST)
		memset(v, byte, n);
	hmm_unmap(t, v);
	return t;
}

/*
 * Prefetches get room in the order they were asked.  A device of two
 * chunks: d's dirty chunk on its way down (62 ms), k's clean one
 * pinned; x's prefetch finds no room and waits for d's.  Then k is
 * dropped at once, and y's prefetch is asked: the room goes to x, asked
 * first.  y took it, jumping the queue, and x waited for d's copy: in
 * hk_offload's pipeline that left pieces half read, the rest of their
 * chunks a whole I/O round behind pieces needed later.
 */
static void prefetch_order(void)
{
	struct hmm_tensor *d, *k, *x, *y;
	uint64_t rx[HMM_TIERS], ry[HMM_TIERS];
	struct hmm *h2;
	void *v;

	if (hmm_test_shared()) {
		hmm_test_skip("prefetch order", "shared mode: the device is "
			      "this process's, its staging hmmd's");
		return;
	}
	if (!(h2 = slow_open(1 << 20, 128 << 10)))
		t_fail_all("prefetch order: %s", hmm_last_error());
	d = one_chunk(h2, "ord_d", HMM_TIER_DEVICE, 0);
	k = one_chunk(h2, "ord_k", HMM_TIER_HOST, 0x4b);
	x = one_chunk(h2, "ord_x", HMM_TIER_HOST, 0x58);
	y = one_chunk(h2, "ord_y", HMM_TIER_HOST, 0x59);
	if (hmm_map(k, 0, HMM_ALL, HMM_TIER_DEVICE, HMM_READ, &v))
		t_fail_all("prefetch order: map k: %s", hmm_last_error());
	hmm_evict(d, 0, HMM_ALL, HMM_TIER_DEVICE);
	hmm_prefetch(x, 0, HMM_ALL, HMM_TIER_DEVICE);
	hmm_unmap(k, v);
	hmm_evict(k, 0, HMM_ALL, HMM_TIER_DEVICE);
	hmm_prefetch(y, 0, HMM_ALL, HMM_TIER_DEVICE);
	hmm_tensor_residency(x, rx);
	hmm_tensor_residency(y, ry);
	t_ok(rx[HMM_TIER_DEVICE] == 64 << 10 && ry[HMM_TIER_DEVICE] == 0,
	     "the room a drop frees goes to the prefetch asked first (device "
	     "bytes: x %llu, y %llu)",
	     (unsigned long long)rx[HMM_TIER_DEVICE],
	     (unsigned long long)ry[HMM_TIER_DEVICE]);
	t_eq(hmm_wait(h2, NULL), 0, "prefetch order: all copies end");
	hmm_tensor_residency(y, ry);
	t_eq(ry[HMM_TIER_DEVICE], 64 << 10, "y's prefetch is served after "
	     "d's copy frees its room");
	hmm_close(h2);
}

/*
 * A map that waited wait_ms and failed stalled as long: stall_s ("time
 * maps waited for this tier") counts it, as it does a wait that ended
 * in a map (before, only those).  Shared mode: the host's are hmmd's,
 * the device's this process's (dev_stage.c counted only maps that
 * succeeded, too).
 */
static void stall_counted(const struct hmm_stats *st0,
			  const struct hmm_stats *st, int tier)
{
	double d = st->tier[tier].stall_s - st0->tier[tier].stall_s;

	t_ok(d >= 0.25, "the failed map's wait is counted as %s stall "
	     "(+%.3f s)", tier == HMM_TIER_HOST ? "host" : "device", d);
}

int main(void)
{
	struct hmm_config cfg;
	struct hmm_stats st;
	int64_t n = 1 << 20;
	pthread_t thr;
	void *pa;
	int r;

	char path[4200];

	hmm_test_config(&cfg, path, sizeof(path), 16 << 20, 1536 << 10, 256 << 10);
	cfg.wait_ms = 300;
	cfg.device = "sim";
	cfg.device_budget = 512 << 10;
	hmm_test_mode(&cfg);
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	if (hmm_tensor_new(h, "a", HMM_DTYPE_U8, 1, &n, &a) ||
	    hmm_tensor_new(h, "b", HMM_DTYPE_U8, 1, &n, &b))
		t_fail_all("tensor: %s", hmm_last_error());

	/* a pins 1 MiB of the 1.5 MiB budget; b needs 1 MiB: it must wait */
	if (hmm_map(a, 0, HMM_ALL, HMM_TIER_HOST, HMM_WRITE, &pa))
		t_fail_all("map a: %s", hmm_last_error());
	memset(pa, 0xa5, n);
	pthread_create(&thr, NULL, mapper, NULL);
	/* b's map pins its chunks before it waits: see them pinned (hmmd
	   admits before it pins: there, give the map time to arrive) */
	if (hmm_test_shared())
		usleep(100 * 1000);
	for (int i = 0; i < 10000 && !hmm_test_shared(); i++) {
		hmm_stats(h, &st);
		if (st.tier[HMM_TIER_HOST].pinned == 2u << 20)
			break;
		usleep(1000);
	}
	usleep(100 * 1000);
	t_eq(__atomic_load_n(&done_flag, __ATOMIC_ACQUIRE), 0,
	     "b's map waits while a is pinned");
	hmm_unmap(a, pa);
	pthread_join(thr, NULL);
	t_eq(done_flag, 1, "b's map proceeds once a is unpinned (a evicted to the store)");
	hmm_stats(h, &st);
	t_ok(st.tier[HMM_TIER_HOST].stall_s > 0.05, "the wait is counted as "
	     "stall (%.3f s)", st.tier[HMM_TIER_HOST].stall_s);
	t_ok(st.tier[HMM_TIER_HOST].peak <= cfg.host_budget, "peak %llu "
	     "within budget", (unsigned long long)st.tier[HMM_TIER_HOST].peak);

	/* with nothing ever unpinned: -ENOMEM after wait_ms, nothing held */
	struct hmm_tensor *c;
	void *pb, *pc;
	if (hmm_tensor_new(h, "c", HMM_DTYPE_U8, 1, &n, &c))
		t_fail_all("tensor c: %s", hmm_last_error());
	if (hmm_map(b, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &pb))
		t_fail_all("map b: %s", hmm_last_error());
	double t0 = (double)clock() / CLOCKS_PER_SEC;
	struct timespec ts0, ts1;
	struct hmm_stats st0;
	hmm_stats(h, &st0);
	clock_gettime(CLOCK_MONOTONIC, &ts0);
	r = hmm_map(c, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &pc);
	clock_gettime(CLOCK_MONOTONIC, &ts1);
	(void)t0;
	double waited = ts1.tv_sec - ts0.tv_sec + (ts1.tv_nsec - ts0.tv_nsec) *
			1e-9;
	t_eq(r, -ENOMEM, "map with the tier pinned full fails -ENOMEM");
	t_ok(strstr(hmm_last_error(), "pinned") != NULL, "detail: %s",
	     hmm_last_error());
	t_ok(waited >= 0.29, "after the bounded wait (%.3f s)", waited);
	hmm_stats(h, &st);
	t_eq(st.tier[HMM_TIER_HOST].pinned, 1 << 20, "only b stays pinned");
	stall_counted(&st0, &st, HMM_TIER_HOST);
	t_ok(((uint8_t *)pb)[12345] == 0x5a, "b's contents intact");
	hmm_unmap(b, pb);
	t_eq(hmm_map(c, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &pc), 0,
	     "and the same map works once b is unpinned");
	hmm_unmap(c, pc);

	/* the device tier too: half of a pinned there fills it, so half of
	   c waits and fails -ENOMEM after wait_ms (shared mode: the device
	   is this process's, staged through hmmd) */
	if (hmm_map(a, 0, 512 << 10, HMM_TIER_DEVICE, HMM_READ, &pa))
		t_fail_all("map a at the device: %s", hmm_last_error());
	hmm_stats(h, &st0);
	clock_gettime(CLOCK_MONOTONIC, &ts0);
	r = hmm_map(c, 0, 512 << 10, HMM_TIER_DEVICE, HMM_READ, &pc);
	clock_gettime(CLOCK_MONOTONIC, &ts1);
	waited = ts1.tv_sec - ts0.tv_sec + (ts1.tv_nsec - ts0.tv_nsec) * 1e-9;
	t_eq(r, -ENOMEM, "device map with the device pinned full fails -ENOMEM");
	t_ok(strstr(hmm_last_error(), "device tier full") != NULL,
	     "detail: %s", hmm_last_error());
	t_ok(waited >= 0.29 && waited < 5, "after the bounded wait (%.3f s)",
	     waited);
	hmm_stats(h, &st);
	stall_counted(&st0, &st, HMM_TIER_DEVICE);
	hmm_unmap(a, pa);
	t_eq(hmm_map(c, 0, 512 << 10, HMM_TIER_DEVICE, HMM_READ, &pc), 0,
	     "and the same map works once a is unmapped");
	hmm_unmap(c, pc);
	hmm_close(h);
	staged_slowly();
	busy_room();
	flush_starved();
	prefetch_order();
	return t_done();
}
