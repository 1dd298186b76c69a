// SPDX-License-Identifier: MIT
/*
 * test_tensor_persist — named tensors outlive the context: hmm_flush is
 * a checkpoint, and a context reopened with HMM_CONFIG_STORE_KEEP gets
 * them back by name, exact, read on demand; unflushed writes are not
 * there; unopened tensors survive the next flush; new tensors do not
 * collide with saved ones; tensors sharing a name are all saved and
 * opened in turn, in the order they were made.
 */
#include "t.h"
#include "hmm_mode.h"

#include "hmm.h"

#define TB	(700 << 10)	/* not a chunk multiple */

static struct hmm_config cfg;
static char path[4200];

static void fill(struct hmm_tensor *t, uint64_t seed)
{
	void *p;

	if (hmm_map(t, 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD, &p))
		t_fail_all("map: %s", hmm_last_error());
	t_fill(p, TB, seed);
	hmm_unmap(t, p);
}

static struct hmm *reopen(void)
{
	struct hmm *h;

	cfg.flags = HMM_CONFIG_STORE_KEEP;
	if (hmm_open(&cfg, &h))
		t_fail_all("reopen: %s", hmm_last_error());
	return h;
}

/*
 * A tensor mapped for writing across two flushes, at tier: each flush
 * saves its bytes as they are then.  The first flush's write-back left
 * the chunks marked valid in the store, so the second skipped them and
 * saved the first one's bytes (found by tests/fuzz/fuzz_api).
 */
static void flush_while_mapped(int tier, const char *tn)
{
	struct hmm_tensor *t;
	int64_t n = TB;
	struct hmm *h;
	void *p;

	cfg.flags = HMM_CONFIG_STORE_FORMAT;
	cfg.device = tier == HMM_TIER_DEVICE ? "sim" : "none";
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	if (hmm_tensor_new(h, "held", HMM_DTYPE_U8, 1, &n, &t) ||
	    hmm_map(t, 0, HMM_ALL, tier, HMM_WRITE, &p))
		t_fail_all("held: %s", hmm_last_error());
	t_fill(p, TB, 5);
	t_eq(hmm_flush(h), 0, "%s: flush with a write map held", tn);
	t_fill(p, TB, 6);
	t_eq(hmm_flush(h), 0, "%s: flush again, the map still held", tn);
	t_fill(p, TB, 7);	/* after the last flush: not saved */
	t_eq(hmm_unmap(t, p), 0, "%s: unmap", tn);
	hmm_close(h);

	h = reopen();
	t_eq(hmm_tensor_open(h, "held", &t), 0, "%s: open held", tn);
	t_ok(hmm_test_same(t, TB, 6), "%s: the second flush saved what was "
	     "written through the map after the first", tn);
	hmm_close(h);
	cfg.device = "none";
}

/*
 * Three tensors named "dup": a flush saves all three, and
 * hmm_tensor_open("dup") gives them in the order they were made, then
 * -ENOENT; after a flush with only the first opened, the same again.
 */
static void same_name(void)
{
	char p2[4300];
	struct hmm_config c2 = cfg;
	struct hmm_tensor *t[3], *x;
	int64_t n = TB;
	struct hmm *h;
	int i, round;

	snprintf(p2, sizeof(p2), "%s.dup", path);
	c2.store_path = p2;
	c2.flags = 0;
	if (hmm_open(&c2, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	for (i = 0; i < 3; i++) {
		if (hmm_tensor_new(h, "dup", HMM_DTYPE_U8, 1, &n, &t[i]))
			t_fail_all("dup: %s", hmm_last_error());
		fill(t[i], 11 + i);
	}
	t_eq(hmm_flush(h), 0, "flush of three tensors named dup");
	hmm_close(h);
	c2.flags = HMM_CONFIG_STORE_KEEP;
	for (round = 0; round < 2; round++) {
		if (hmm_open(&c2, &h))
			t_fail_all("reopen: %s", hmm_last_error());
		for (i = 0; i < 3; i++) {
			int r = hmm_tensor_open(h, "dup", &t[i]);

			t_eq(r, 0, "open dup #%d (%s)", i,
			     r ? hmm_last_error() : "");
			t_ok(hmm_test_same(t[i], TB, 11 + i), "dup #%d is the "
			     "%s made", i, i ? i == 1 ? "second" : "third" :
			     "first");
		}
		t_eq(hmm_tensor_open(h, "dup", &x), -ENOENT, "then no more");
		if (!round) {	/* only the first open, the rest saved */
			hmm_close(h);
			if (hmm_open(&c2, &h) ||
			    hmm_tensor_open(h, "dup", &x) || hmm_flush(h))
				t_fail_all("dup: %s", hmm_last_error());
		}
		hmm_close(h);
	}
}

int main(void)
{
	struct hmm_tensor *w, *b, *z, *x;
	struct hmm_stats st;
	int64_t n = TB, zs[2] = { 3, 1000 };
	struct hmm *h;
	void *p;

	if (hmm_test_shared())
		t_skip_all("shared mode: a tensor hmm_flush saved stays live "
			   "in hmmd, so a write after the flush is not lost "
			   "at close as this test expects (flush and reopen "
			   "in shared mode: test_hmmd_save)");
	hmm_test_config(&cfg, path, sizeof(path), 32 << 20, 4 << 20, 256 << 10);
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open: %s", hmm_last_error());
	if (hmm_tensor_new(h, "w", HMM_DTYPE_U8, 1, &n, &w) ||
	    hmm_tensor_new(h, "b", HMM_DTYPE_U8, 1, &n, &b) ||
	    hmm_tensor_new(h, "zeros", HMM_DTYPE_F32, 2, zs, &z))
		t_fail_all("tensor: %s", hmm_last_error());
	fill(w, 1);
	fill(b, 2);
	t_eq(hmm_flush(h), 0, "flush = checkpoint");
	fill(w, 3);	/* after the checkpoint: lost at close */
	hmm_close(h);

	h = reopen();
	t_eq(hmm_tensor_open(h, "nope", &x), -ENOENT, "unknown name: %s",
	     hmm_last_error());
	t_eq(hmm_tensor_open(h, "w", &w), 0, "open w (%s)", hmm_last_error());
	t_eq(hmm_tensor_bytes(w), TB, "w's size");
	hmm_stats(h, &st);
	t_eq(st.tier[HMM_TIER_HOST].resident, 0, "nothing read yet");
	t_ok(hmm_test_same(w, TB, 1), "w is the checkpoint's contents, not "
	     "the later write");
	t_eq(hmm_tensor_open(h, "w", &x), -ENOENT, "w cannot be opened twice");
	t_eq(hmm_tensor_open(h, "zeros", &z), 0, "open zeros");
	t_ok(hmm_tensor_dtype(z) == HMM_DTYPE_F32 && hmm_tensor_ndim(z) == 2 &&
	     hmm_tensor_shape(z)[1] == 1000, "dtype and shape kept");
	if (hmm_map(z, 0, HMM_ALL, HMM_TIER_HOST, HMM_READ, &p) == 0) {
		int ok = 1;

		for (int i = 0; i < 3000; i++)
			ok &= ((float *)p)[i] == 0;
		t_ok(ok, "a never-written tensor is zeros");
		hmm_unmap(z, p);
	}
	/* a new tensor must not reuse b's id (b is saved, not opened) */
	if (hmm_tensor_new(h, "new", HMM_DTYPE_U8, 1, &n, &x))
		t_fail_all("new: %s", hmm_last_error());
	fill(x, 9);
	fill(w, 4);
	t_eq(hmm_flush(h), 0, "second flush");
	hmm_close(h);

	h = reopen();
	t_eq(hmm_tensor_open(h, "b", &b), 0, "b survived a flush while "
	     "unopened");
	t_ok(hmm_test_same(b, TB, 2), "b exact");
	t_eq(hmm_tensor_open(h, "w", &w), 0, "w again");
	t_ok(hmm_test_same(w, TB, 4), "w has the second checkpoint");
	t_eq(hmm_tensor_open(h, "new", &x), 0, "new");
	t_ok(hmm_test_same(x, TB, 9), "new exact (no key collision with b)");
	t_eq(hmm_tensor_free(x), 0, "free new");
	t_eq(hmm_flush(h), 0, "flush without it");
	hmm_close(h);

	h = reopen();
	t_eq(hmm_tensor_open(h, "new", &x), -ENOENT, "a freed tensor is gone "
	     "after the next flush");
	t_eq(hmm_tensor_open(h, "b", &b), 0, "b still there");
	t_ok(hmm_test_same(b, TB, 2), "b exact");
	hmm_close(h);

	cfg.chunk_bytes = 128 << 10;
	h = reopen();
	t_eq(hmm_tensor_open(h, "b", &b), -EINVAL, "other chunk size refused: "
	     "%s", hmm_last_error());
	hmm_close(h);

	same_name();
	flush_while_mapped(HMM_TIER_HOST, "host");
	flush_while_mapped(HMM_TIER_DEVICE, "device");
	return t_done();
}
