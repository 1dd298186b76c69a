// SPDX-License-Identifier: MIT
/*
 * test_store_stripe — a store striped over 2, 3 and 4 files ("a,b,c"):
 *  - round trip with crc, spread over every member, RAW I/O across a
 *    member boundary, stats summed; reopen after a clean close, exact;
 *  - a flush torn on member 1 (fault injection: its table write fails
 *    after member 0 committed), then writes that would reuse member
 *    0's old places if it had released them: reopen presents the
 *    previous generation on every member, bit-exact, and the member
 *    that got ahead says so; the next flush and reopen are consistent;
 *  - children flushing in a loop killed at random moments: the set
 *    always opens at the last reported flush or the next, exact;
 *  - a missing, added, reordered or foreign member, a plain store as a
 *    member, a member opened alone, empty and repeated names: refused
 *    with an error naming the path, the set still intact afterwards;
 *  - members two flushes apart (an old copy of one): -ESTALE naming it,
 *    nothing written (with its own file back the set opens exact);
 *  - member 1's format lost (a crash between the members' formats): the
 *    creating open makes the set again; once flushed, refused;
 *  - a damaged extent on member 1: -EIO naming member 1;
 *  - hmm_open with store_path "a,b": tensors larger than the host budget
 *    are evicted to both members and read back exact, after a reopen
 *    with HMM_CONFIG_STORE_KEEP too.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "store_t.h"
#include "hmm.h"
#include "hmm_mode.h"
#include "loopdev.h"

#define MAXB	(16 * 4096)

/* "dir/<tag>0.store,dir/<tag>1.store,..." for n members */
static const char *set_path(const char *tag, unsigned n)
{
	static char buf[4][8 * 4400];
	static int k;
	char *out = buf[k++ & 3];
	size_t len = 0;

	out[0] = 0;
	for (unsigned i = 0; i < n; i++) {
		char name[64];

		snprintf(name, sizeof(name), "%s%u.store", tag, i);
		len += snprintf(out + len, sizeof(buf[0]) - len, "%s%s",
				i ? "," : "", st_path(name));
	}
	return out;
}

static const char *member(const char *tag, unsigned i)
{
	char name[64];

	snprintf(name, sizeof(name), "%s%u.store", tag, i);
	return st_path(name);
}

static int try_open(const char *path, uint32_t flags, struct hmm_store **s)
{
	struct hmm_store_config c = { .path = path, .size = 8 << 20,
				      .flags = flags, .queue_depth = 8,
				      .pool_bytes = 4 << 20, .numa_node = -1 };

	*s = NULL;
	return hmm_store_open(&c, s);
}

static uint64_t key_of(int i)
{
	return (uint64_t)(i / 6) << 32 | (uint64_t)(i % 6);
}

static uint32_t len_of(uint64_t round, int k)
{
	return 4096u * (1 + (round + k) % 16);
}

static int count_key(void *arg, uint64_t key, uint32_t len)
{
	uint64_t *last = arg;

	if (last[1] && key <= last[0])
		last[2] = 1;	/* out of order */
	last[0] = key;
	last[1]++;
	return 0;
}

/* 24 extents over n members: spread, exact, reopened exact. */
static void round_trip(unsigned n)
{
	const char tag[] = { 'r', (char)('0' + n), 0 };
	const char *path = set_path(tag, n);
	struct hmm_store *s = st_open(path, (uint64_t)(8 << 20) * n,
				      HMM_STORE_CREATE, 8);
	struct hmm_store_stats st;
	uint64_t each[3] = { 0, 0, 0 }, cap1;
	unsigned hits[4] = { 0 };
	void *b = hmm_pool_alloc(hmm_store_pool(s), MAXB);
	uint8_t *raw;
	int ok = 1;

	for (int i = 0; i < 24; i++)
		ok &= st_put(s, b, key_of(i), len_of(n, i), 100 * n + i) == 0;
	t_ok(ok, "%u members: 24 writes", n);
	for (int i = 0; i < 24; i++)
		for (unsigned m = 0; m < n; m++)
			hits[m] += !strcmp(hmm_store_extent_path(s, key_of(i)),
					   member(tag, m));
	ok = 1;
	for (unsigned m = 0; m < n; m++)
		ok &= hits[m] >= 24 / n - 1 && hits[m] <= 24 / n + 1;
	t_ok(ok, "%u members: extents spread evenly (%u %u %u %u)", n,
	     hits[0], hits[1], hits[2], hits[3]);
	ok = 1;
	for (int i = 0; i < 24; i++)
		ok &= st_same(s, b, key_of(i), len_of(n, i), 100 * n + i);
	t_ok(ok, "%u members: read back exact", n);
	hmm_store_stats(s, &st);
	t_eq(st.members, n, "stats: %u members", n);
	t_diag("ring flags %#x, direct %u, registered buffers %u, note: %s",
	       st.ring_flags, st.direct, st.registered_buffers,
	       hmm_store_note(s));
	t_eq(st.extents, 24, "stats: extents summed");
	t_eq(st.write_ops, 24, "stats: writes summed");
	hmm_store_extent_each(s, count_key, each);
	t_ok(each[1] == 24 && !each[2], "extent_each: 24 keys in order");

	/* RAW: the members' data areas one after the other */
	cap1 = st.capacity_bytes / n;	/* members are equal here */
	raw = hmm_pool_alloc(hmm_store_pool(s), 8192);
	t_fill(raw, 8192, 77);
	t_eq(st_io(s, HMM_IO_WRITE_RAW, 0, cap1 - 4096 - (cap1 % 4096), raw,
		   4096), 0, "raw write at member 0's end");
	t_eq(st_io(s, HMM_IO_WRITE_RAW, 0, st.capacity_bytes - 4096, raw + 4096,
		   4096), 0, "raw write at the last member's end");
	memset(raw, 0, 8192);
	t_eq(st_io(s, HMM_IO_READ_RAW, 0, st.capacity_bytes - 4096, raw, 4096),
	     0, "raw read back");
	t_fill(b, 8192, 77);
	t_ok(!memcmp(raw, (uint8_t *)b + 4096, 4096), "raw bytes exact");
	t_eq(st_io(s, HMM_IO_READ_RAW, 0, st.capacity_bytes, raw, 4096),
	     -EINVAL, "raw read past every member: -EINVAL (%s)",
	     hmm_last_error());
	t_ok(strstr(hmm_last_error(), "in all"), "the detail counts every "
	     "member's data area");
	hmm_pool_free(hmm_store_pool(s), raw);

	t_eq(hmm_store_meta_set(s, "striped", 8), 0, "meta blob");
	t_eq(hmm_store_flush(s), 0, "%u members: flush", n);
	hmm_store_close(s);

	s = st_open(path, 0, 0, 8);
	b = hmm_pool_alloc(hmm_store_pool(s), MAXB);
	hmm_store_stats(s, &st);
	t_eq(st.generation, 2, "reopen: generation 2");
	t_eq(st.extents, 24, "reopen: 24 extents");
	ok = 1;
	for (int i = 0; i < 24; i++)
		ok &= st_same(s, b, key_of(i), len_of(n, i), 100 * n + i);
	t_ok(ok, "%u members: reopened exact", n);
	{
		char m[16] = { 0 };

		t_eq(hmm_store_meta_get(s, m, sizeof(m)), 8, "meta back");
		t_ok(!strcmp(m, "striped"), "meta bytes");
	}
	hmm_store_close(s);
}

/* A flush torn on member 1 of path = m0,m1: reopen at the previous
 * generation. */
static void torn_flush(const char *path, const char *m0, const char *m1,
		       uint64_t size)
{
	struct hmm_store *s = st_open(path, size, HMM_STORE_CREATE, 8);
	struct hmm_store_stats st;
	void *b = hmm_pool_alloc(hmm_store_pool(s), MAXB);
	int ok = 1, err;

	for (int i = 0; i < 12; i++)
		ok &= st_put(s, b, key_of(i), 8 * 4096, 500 + i) == 0;
	ok &= hmm_store_meta_set(s, "G2", 3) == 0;
	ok &= hmm_store_flush(s) == 0;		/* generation 2 */
	/* replace and free: member 0's old places are quarantined */
	for (int i = 0; i < 12; i++)
		ok &= st_put(s, b, key_of(i), 8 * 4096, 600 + i) == 0;
	ok &= hmm_store_extent_free(s, key_of(11)) == 0;
	ok &= hmm_store_meta_set(s, "G3", 3) == 0;
	t_ok(ok, "generation 2 flushed, then every extent rewritten");
	/* ops: member 0's table (1), superblock (2), member 1's table (3) */
	hmm_fault_set("eio@3");
	err = hmm_store_flush(s);
	hmm_fault_set(NULL);
	t_eq(err, -EIO, "flush fails at member 1's table write: %s",
	     hmm_last_error());
	t_ok(strstr(hmm_last_error(), m1) != NULL,
	     "the error names member 1");
	/* reuse whatever member 0 freed: it must not have freed G2's */
	for (int i = 100; i < 400; i++)
		st_put(s, b, key_of(i), 4096, 9000 + i); /* room or not */
	hmm_store_close(s);			/* no flush: crash-like */

	s = st_open(path, 0, 0, 8);
	b = hmm_pool_alloc(hmm_store_pool(s), MAXB);
	hmm_store_stats(s, &st);
	t_eq(st.generation, 2, "reopen: generation 2 on every member");
	t_eq(st.extents, 12, "reopen: generation 2's 12 extents");
	ok = 1;
	for (int i = 0; i < 12; i++)
		ok &= st_same(s, b, key_of(i), 8 * 4096, 500 + i);
	t_ok(ok, "generation 2 bit-exact on both members");
	t_ok(hmm_store_extent_len(s, key_of(100)) == -ENOENT,
	     "later writes absent");
	{
		char m[4] = { 0 };

		hmm_store_meta_get(s, m, sizeof(m));
		t_ok(!strcmp(m, "G2"), "meta of generation 2");
	}
	t_ok(strstr(hmm_store_note(s), "generation 3 dropped") &&
	     strstr(hmm_store_note(s), m0),
	     "note: member 0 dropped generation 3: %s", hmm_store_note(s));
	{
		uint8_t slot[4096], zero[4096] = { 0 };
		int fd = open(m0, O_RDONLY);

		/* generation 3 went to slot 0 (1 and 3 even: 0, 2: 1) */
		t_ok(fd >= 0 && pread(fd, slot, 4096, 0) == 4096 &&
		     !memcmp(slot, zero, 4096),
		     "member 0's generation 3 superblock zeroed on disk");
		if (fd >= 0)
			close(fd);
	}
	/* the set goes on: flush 3 for real, reopen consistent */
	ok = 1;
	for (int i = 0; i < 6; i++)
		ok &= st_put(s, b, key_of(i), 4 * 4096, 700 + i) == 0;
	ok &= hmm_store_flush(s) == 0;
	hmm_store_close(s);
	s = st_open(path, 0, 0, 8);
	b = hmm_pool_alloc(hmm_store_pool(s), MAXB);
	hmm_store_stats(s, &st);
	t_eq(st.generation, 3, "next flush: generation 3");
	for (int i = 0; i < 12; i++)
		ok &= i < 6 ? st_same(s, b, key_of(i), 4 * 4096, 700 + i)
			    : st_same(s, b, key_of(i), 8 * 4096, 500 + i);
	t_ok(ok && !strstr(hmm_store_note(s), "dropped"),
	     "generation 3 exact, nothing dropped");
	hmm_store_close(s);
}

/* Children flush in a loop and are killed at random. */
static void child_loop(const char *path, int fd)
{
	struct hmm_store *s = st_open(path, 0, 0, 8);
	void *b = hmm_pool_alloc(hmm_store_pool(s), MAXB);

	for (uint64_t r = 1;; r++) {
		for (int k = 0; k < 9; k++)
			if (st_put(s, b, key_of(k), len_of(r, k), r * 100 + k))
				_exit(1);
		if (hmm_store_meta_set(s, &r, sizeof(r)) || hmm_store_flush(s))
			_exit(1);
		if (write(fd, &r, sizeof(r)) != sizeof(r))
			_exit(1);
	}
}

static int kill_once(const char *path, uint64_t seed, int iter, int *rolled)
{
	uint64_t last, m = 0;
	struct hmm_store *s;
	int ok = 1;
	void *b;

	if (!st_kill_child(child_loop, path, &seed, iter, &last))
		return 0;
	s = st_open(path, 0, 0, 8);
	b = hmm_pool_alloc(hmm_store_pool(s), MAXB);
	*rolled += strstr(hmm_store_note(s), "dropped") != NULL;
	if (hmm_store_meta_get(s, &m, sizeof(m)) != sizeof(m) ||
	    (m != last && m != last + 1)) {
		t_diag("reopen at round %llu, last reported %llu",
		       (unsigned long long)m, (unsigned long long)last);
		ok = 0;
	}
	for (int k = 0; k < 9 && ok; k++)
		if (!st_same(s, b, key_of(k), len_of(m, k), m * 100 + k)) {
			t_diag("round %llu key %d differs: %s",
			       (unsigned long long)m, k, hmm_last_error());
			ok = 0;
		}
	hmm_store_close(s);
	return ok;
}

static void kills(const char *path, uint64_t size, int times)
{
	uint64_t seed = (uint64_t)time(NULL), zero = 0;
	struct hmm_store *s = st_open(path, size, HMM_STORE_CREATE, 8);
	void *b = hmm_pool_alloc(hmm_store_pool(s), MAXB);
	int good = 0, rolled = 0;

	hmm_store_meta_set(s, &zero, sizeof(zero));
	for (int k = 0; k < 9; k++)
		st_put(s, b, key_of(k), len_of(0, k), k);
	hmm_store_flush(s);
	hmm_store_close(s);
	for (int i = 0; i < times; i++)
		good += kill_once(path, seed + i, i, &rolled);
	t_eq(good, times, "%d random kills of %s: always the last flush or "
	     "the next, exact (%d rolled a member back)", times, path, rolled);
}

static int refused(const char *path, uint32_t flags, int want,
		   const char *named, const char *what)
{
	struct hmm_store *s;
	int r = try_open(path, flags, &s);

	if (!r)
		hmm_store_close(s);
	t_eq(r, want, "%s: %s", what, r ? hmm_last_error() : "opened");
	return t_ok(r && strstr(hmm_last_error(), named), "%s: names %s",
		    what, named);
}

static void refusals(void)
{
	const char *ab = set_path("m", 2), *cd = set_path("f", 2);
	const char *a = member("m", 0), *b = member("m", 1);
	const char *d = member("f", 1), *plain = st_path("plain.store");
	char list[3 * 4400];
	struct hmm_store *s;
	void *buf;
	int ok;

	s = st_open(ab, 8 << 20, HMM_STORE_CREATE, 8);
	buf = hmm_pool_alloc(hmm_store_pool(s), MAXB);
	ok = 1;
	for (int i = 0; i < 6; i++)
		ok &= st_put(s, buf, key_of(i), 4096, 40 + i) == 0;
	ok &= hmm_store_flush(s) == 0;
	hmm_store_close(s);
	s = st_open(cd, 8 << 20, HMM_STORE_CREATE, 8);
	hmm_store_close(s);
	s = st_open(plain, 4 << 20, HMM_STORE_CREATE, 8);
	hmm_store_close(s);
	t_ok(ok, "a set, a foreign set and a plain store");

	refused(a, 0, -EINVAL, a, "member 0 alone");
	snprintf(list, sizeof(list), "%s,%s", b, a);
	refused(list, 0, -EINVAL, b, "reordered");
	snprintf(list, sizeof(list), "%s,%s,%s", a, b, plain);
	refused(list, HMM_STORE_CREATE, -EINVAL, a, "a member added");
	snprintf(list, sizeof(list), "%s,%s", a, d);
	refused(list, 0, -EXDEV, d, "a foreign member");
	snprintf(list, sizeof(list), "%s,%s", a, plain);
	refused(list, 0, -EINVAL, plain, "a plain store as a member");
	snprintf(list, sizeof(list), "%s,,%s", a, b);
	refused(list, 0, -EINVAL, list, "an empty member name");
	snprintf(list, sizeof(list), "%s,%s", a, a);
	refused(list, 0, -EINVAL, a, "a member named twice");
	t_ok(rename(b, st_path("m1.away")) == 0, "member 1 moved away");
	refused(ab, HMM_STORE_CREATE, -ENOENT, b, "a missing member");
	t_ok(access(b, F_OK) != 0, "the missing member was not created");
	t_ok(rename(st_path("m1.away"), b) == 0, "member 1 back");

	s = st_open(ab, 0, 0, 8);
	buf = hmm_pool_alloc(hmm_store_pool(s), MAXB);
	ok = 1;
	for (int i = 0; i < 6; i++)
		ok &= st_same(s, buf, key_of(i), 4096, 40 + i);
	t_ok(ok, "after every refusal the set opens intact");

	/* a damaged extent on member 1 */
	{
		uint64_t key = key_of(1), off;
		const char *where = hmm_store_extent_path(s, key);
		int fd = where ? open(where, O_WRONLY) : -1;

		t_ok(where && !strcmp(where, b), "key %#llx is on member 1",
		     (unsigned long long)key);
		t_eq(hmm_store_extent_where(s, key, &off), 0, "its offset");
		t_ok(fd >= 0 && pwrite(fd, "x", 1, (off_t)off + 7) == 1,
		     "damage a byte");
		if (fd >= 0)
			close(fd);
		hmm_store_close(s);
		s = st_open(ab, 0, HMM_STORE_BUFFERED, 8);
		buf = hmm_pool_alloc(hmm_store_pool(s), MAXB);
		t_eq(st_io(s, HMM_IO_READ, key, 0, buf, 4096), -EIO,
		     "damaged extent: -EIO");
		t_ok(strstr(hmm_last_error(), b) &&
		     strstr(hmm_last_error(), "checksum"),
		     "names member 1: %s", hmm_last_error());
		hmm_store_close(s);
	}
}

/* Members two flushes apart (one restored from an old copy): refused,
 * naming both, and nothing written: with the right copy back it opens. */
static void generation_gap(void)
{
	const char *gs = set_path("g", 2), *g1 = member("g", 1);
	struct hmm_store_stats st;
	struct hmm_store *s = st_open(gs, 8 << 20, HMM_STORE_CREATE, 8);
	char cmd[3 * 4400];
	void *b = hmm_pool_alloc(hmm_store_pool(s), MAXB);
	int ok = st_put(s, b, key_of(1), 4096, 31) == 0 &&
		 hmm_store_flush(s) == 0;

	hmm_store_close(s);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s.old'", g1, g1);
	ok &= system(cmd) == 0;
	s = st_open(gs, 0, 0, 8);
	b = hmm_pool_alloc(hmm_store_pool(s), MAXB);
	ok &= st_put(s, b, key_of(1), 4096, 32) == 0 &&
	      hmm_store_flush(s) == 0 && hmm_store_flush(s) == 0;
	hmm_store_close(s);
	snprintf(cmd, sizeof(cmd), "mv '%s' '%s.new' && cp '%s.old' '%s'", g1,
		 g1, g1, g1);
	ok &= system(cmd) == 0;
	t_ok(ok, "a set at generation 4 with member 1 from generation 2");
	refused(gs, 0, -ESTALE, g1, "members two flushes apart");
	snprintf(cmd, sizeof(cmd), "mv '%s.new' '%s'", g1, g1);
	ok = system(cmd) == 0;
	s = st_open(gs, 0, 0, 8);
	b = hmm_pool_alloc(hmm_store_pool(s), MAXB);
	hmm_store_stats(s, &st);
	t_ok(ok && st.generation == 4 && st_same(s, b, key_of(1), 4096, 32),
	     "with member 1's own file back: generation 4, exact");
	hmm_store_close(s);
}

/* A crash between the members' formats (member 1's superblocks lost):
 * nothing was flushed, so the creating open makes the set again (a
 * plain store's lost format is made again too); after a flush a blank
 * member stays refused ("a missing member" above). */
static int blank_superblocks(const char *path)
{
	static const char zero[2 * 4096];
	int fd = open(path, O_WRONLY), ok;

	ok = fd >= 0 && pwrite(fd, zero, sizeof(zero), 0) == sizeof(zero);
	if (fd >= 0)
		close(fd);
	return ok;
}

static void format_lost(void)
{
	const char *cs = set_path("c", 2), *c1 = member("c", 1);
	struct hmm_store_stats st;
	struct hmm_store *s = st_open(cs, 8 << 20, HMM_STORE_CREATE, 8);
	int ok;

	hmm_store_close(s);
	ok = blank_superblocks(c1);
	t_ok(ok, "a new set, member 1's superblocks blank");
	refused(cs, 0, -ENODATA, c1, "member 1 blank, no CREATE");
	s = st_open(cs, 8 << 20, HMM_STORE_CREATE, 8);
	hmm_store_stats(s, &st);
	hmm_store_close(s);
	t_ok(st.generation == 1 && st.members == 2 && !st.extents,
	     "with CREATE: the set made again, generation %llu",
	     (unsigned long long)st.generation);
	s = st_open(cs, 0, 0, 8);
	hmm_store_stats(s, &st);
	ok = hmm_store_flush(s) == 0;
	hmm_store_close(s);
	t_ok(ok && st.generation == 1, "and it opens without CREATE");
	ok = blank_superblocks(c1);
	t_ok(ok, "flushed once, then member 1 blanked");
	refused(cs, HMM_STORE_CREATE, -ENODATA, c1,
		"member 1 blank after a flush, CREATE");
	t_ok(strstr(hmm_last_error(), "is lost, and is not made anew") != NULL,
	     "saying why CREATE does not make it");
}

/* The public API: tensors evicted to a 2-member store and read back
 * (hmm_mode.h's hmm_test_same). */
static void public_api(void)
{
	const char *path = set_path("api", 2);
	struct hmm_tensor *t[8];
	struct hmm_config cfg;
	struct hmm_stats hs;
	int64_t n = 1 << 20;
	struct hmm *h;
	int ok = 1;

	hmm_config_default(&cfg);
	cfg.store_path = path;
	cfg.chunk_bytes = 256 << 10;
	cfg.store_size = hmm_store_required(8ull << 20, cfg.chunk_bytes);
	cfg.host_budget = 2 << 20;	/* 2 of the 8 tensors' MiB */
	if (hmm_open(&cfg, &h))
		t_fail_all("hmm_open %s: %s", path, hmm_last_error());
	for (int i = 0; i < 8; i++) {
		char name[8];
		void *p;

		snprintf(name, sizeof(name), "t%d", i);
		if (hmm_tensor_new(h, name, HMM_DTYPE_U8, 1, &n, &t[i]) ||
		    hmm_map(t[i], 0, HMM_ALL, HMM_TIER_HOST, HMM_DISCARD, &p))
			t_fail_all("tensor %s: %s", name, hmm_last_error());
		t_fill(p, n, 70 + i);
		hmm_unmap(t[i], p);
	}
	for (int i = 0; i < 8; i++)
		ok &= hmm_test_same(t[i], n, 70 + i);
	t_ok(ok, "8 MiB of tensors through a 2 MiB budget: exact");
	hmm_stats(h, &hs);
	t_ok(hs.tier[HMM_TIER_STORE].resident > 0, "evicted to the store");
	t_eq(hmm_flush(h), 0, "flush: %s", hmm_last_error());
	hmm_close(h);
	{
		uint64_t sz[2];

		for (int i = 0; i < 2; i++) {
			struct stat sb;

			sz[i] = stat(member("api", i), &sb) ? 0 : sb.st_size;
		}
		t_ok(sz[0] && sz[1], "both members exist (%llu, %llu bytes)",
		     (unsigned long long)sz[0], (unsigned long long)sz[1]);
	}
	cfg.flags = HMM_CONFIG_STORE_KEEP;
	if (hmm_open(&cfg, &h))
		t_fail_all("reopen %s: %s", path, hmm_last_error());
	ok = 1;
	for (int i = 0; i < 8; i++) {
		char name[8];

		snprintf(name, sizeof(name), "t%d", i);
		ok &= hmm_tensor_open(h, name, &t[i]) == 0 &&
		      hmm_test_same(t[i], n, 70 + i);
	}
	t_ok(ok, "reopened with STORE_KEEP: every tensor exact");
	hmm_close(h);
}

/* Two loop devices over two image files: O_DIRECT on real block
 * devices, sized by the devices, torn flush and kills as on files. */
static void loop_devices(void)
{
	const char *dev[2];
	char list[160], cmd[4400];
	struct hmm_store *s;
	struct hmm_store_stats st;

	for (int i = 0; i < 2; i++) {
		char name[32];

		snprintf(name, sizeof(name), "loop%d.img", i);
		snprintf(cmd, sizeof(cmd), "truncate -s 24M '%s'", st_path(name));
		if (system(cmd) != 0)
			t_fail_all("truncate %s", st_path(name));
		dev[i] = t_loop_attach(st_path(name), "--direct-io=on");
		if (!dev[i]) {
			t_ok(1, "loop devices # SKIP needs root, losetup and "
			     "two loop devices");
			return;
		}
	}
	snprintf(list, sizeof(list), "%s,%s", dev[0], dev[1]);
	s = st_open(list, 0, HMM_STORE_CREATE, 8);
	hmm_store_stats(s, &st);
	t_ok(st.members == 2 && st.direct, "%s: 2 members, O_DIRECT", list);
	t_ok(st.capacity_bytes > 2 * (20 << 20) &&
	     st.capacity_bytes < 2 * (24 << 20), "sized by the devices: %llu",
	     (unsigned long long)st.capacity_bytes);
	hmm_store_close(s);
	torn_flush(list, dev[0], dev[1], 0);
	kills(list, 0, 4);
	snprintf(list, sizeof(list), "%s,%s", dev[1], dev[0]);
	refused(list, 0, -EINVAL, dev[1], "devices reordered");
}

int main(void)
{
	for (unsigned n = 2; n <= 4; n++)
		round_trip(n);
	torn_flush(set_path("t", 2), member("t", 0), member("t", 1), 8 << 20);
	kills(set_path("k", 3), 12 << 20, 12);
	refusals();
	generation_gap();
	format_lost();
	public_api();
	loop_devices();
	return t_done();
}
