// SPDX-License-Identifier: MIT
/*
 * test_store_corrupt — damage on disk is found, never returned as data:
 * a flipped byte in an extent fails its read with -EIO (crc32c); a
 * damaged newest superblock or table falls back to the previous flush;
 * both superblocks damaged fails the open (-EUCLEAN); a file not a store is
 * refused unless the caller asks to overwrite it; a caller that takes
 * the crc32c itself (HMM_IOF_CRC_LATER, HMM_IOF_CRC_GIVEN) finds the
 * same damage, and a crc it gives is the one stored.
 */
#include <fcntl.h>

#include "crc32c.h"
#include "store_t.h"

static void flip(const char *path, uint64_t off)
{
	int fd = open(path, O_RDWR);
	uint8_t c;

	if (fd < 0 || pread(fd, &c, 1, off) != 1)
		t_fail_all("open %s", path);
	c ^= 0x40;
	if (pwrite(fd, &c, 1, off) != 1 || fsync(fd))
		t_fail_all("pwrite %s", path);
	close(fd);
}

/* One request with flags, waited for; its result (or the submit's). */
static int io_flags(struct hmm_store *s, struct hmm_io *io, uint32_t op,
		    uint64_t key, void *buf, uint32_t flags, uint32_t crc)
{
	struct hmm_io *p = io;
	int r;

	*io = (struct hmm_io){ .op = op, .key = key, .buf = buf,
			       .len = 16384, .flags = flags, .crc = crc };
	r = hmm_store_submit(s, &p, 1);
	return r < 0 ? r : hmm_store_wait(s, io);
}

/*
 * The caller's crc32c (the engine's checksum thread): a read with
 * HMM_IOF_CRC_LATER completes without a check and hmm_store_check
 * finds the damage (extent 2 is damaged); a write with HMM_IOF_CRC_GIVEN
 * stores the crc it is given, not one of its own.
 */
static void crc_by_caller(struct hmm_store *s, const char *path, uint8_t *b)
{
	struct hmm_store_stats st;
	struct hmm_io io;
	uint32_t crc;

	hmm_store_stats(s, &st);
	t_eq(io_flags(s, &io, HMM_IO_READ, 2, b, HMM_IOF_CRC_LATER, 0), 0,
	     "damaged extent, CRC_LATER: the read itself succeeds");
	t_eq(hmm_store_check(&io), -EIO, "and hmm_store_check finds it");
	t_ok(strstr(hmm_last_error(), "crc32c") &&
	     strstr(hmm_last_error(), path) && strstr(hmm_last_error(),
						      "offset"),
	     "detail: %s", hmm_last_error());
	crc = st.crc_errors;
	hmm_store_stats(s, &st);
	t_eq(st.crc_errors, crc + 1, "counted in stats.crc_errors");
	t_eq(io_flags(s, &io, HMM_IO_READ, 3, b, HMM_IOF_CRC_LATER, 0), 0,
	     "an intact extent, CRC_LATER");
	t_eq(hmm_store_check(&io), 0, "checks out");
	t_eq(io_flags(s, &io, HMM_IO_READ, 3, b, 0, 0), 0, "a plain read");
	t_eq(hmm_store_check(&io), -EINVAL,
	     "hmm_store_check of a read without CRC_LATER: -EINVAL");

	t_fill(b, 16384, 66);
	crc = hmm_crc32c(0, b, 16384);
	t_eq(io_flags(s, &io, HMM_IO_WRITE, 6, b, HMM_IOF_CRC_GIVEN, crc), 0,
	     "a write with its crc given");
	t_ok(st_same(s, b, 6, 16384, 66), "reads back and checks out");
	t_fill(b, 16384, 67);
	t_eq(io_flags(s, &io, HMM_IO_WRITE, 7, b, HMM_IOF_CRC_GIVEN, crc), 0,
	     "a write given a wrong crc");
	t_eq(st_io(s, HMM_IO_READ, 7, 0, b, 16384), -EIO,
	     "its read fails: the store kept the crc it was given");
}

static int try_open(const char *path, uint32_t flags, struct hmm_store **s)
{
	struct hmm_store_config c = { .path = path, .size = 8 << 20,
				      .flags = flags, .pool_bytes = 1 << 20,
				      .numa_node = -1 };

	*s = NULL;
	return hmm_store_open(&c, s);
}

int main(void)
{
	const char *path = st_path("corrupt.store");
	struct hmm_store *s;
	struct hmm_store_stats st;
	uint64_t where;
	uint8_t *b;
	int ok = 1;

	/* gen 2: keys 1..4; gen 3: key 5 too */
	s = st_open(path, 8 << 20, HMM_STORE_CREATE, 8);
	b = hmm_pool_alloc(hmm_store_pool(s), 16384);
	for (int k = 1; k <= 4; k++) {
		t_fill(b, 16384, k);
		st_io(s, HMM_IO_WRITE, k, 0, b, 16384);
	}
	hmm_store_flush(s);
	t_fill(b, 16384, 5);
	st_io(s, HMM_IO_WRITE, 5, 0, b, 16384);
	hmm_store_flush(s);
	t_eq(hmm_store_extent_where(s, 2, &where), 0, "where is extent 2");
	hmm_store_close(s);

	flip(path, where + 12345);
	s = st_open(path, 0, 0, 8);
	b = hmm_pool_alloc(hmm_store_pool(s), 16384);
	t_eq(st_io(s, HMM_IO_READ, 2, 0, b, 16384), -EIO,
	     "a flipped byte: the read fails with -EIO");
	t_ok(strstr(hmm_last_error(), "crc32c") && strstr(hmm_last_error(), path),
	     "detail: %s", hmm_last_error());
	hmm_store_stats(s, &st);
	t_eq(st.crc_errors, 1, "stats: one crc error");
	t_eq(st.errors, 0, "stats: not an I/O error");
	for (int k = 1; k <= 5; k++) {
		uint8_t want[16384];

		if (k == 2)
			continue;
		t_fill(want, 16384, k);
		ok &= st_io(s, HMM_IO_READ, k, 0, b, 16384) == 0 &&
		      !memcmp(b, want, 16384);
	}
	t_ok(ok, "the other extents read fine");
	crc_by_caller(s, path, b);
	hmm_store_close(s);

	/* newest is gen 3 in slot 0 (format: 1 in slot 0, then 2, 3) */
	flip(path, 8192 + 10);	/* its table */
	s = st_open(path, 0, 0, 8);
	hmm_store_stats(s, &st);
	t_eq(st.generation, 2, "damaged newest table: the previous flush");
	t_eq(st.extents, 4, "with its 4 extents");
	t_ok(strstr(hmm_store_note(s), "damaged table") != NULL, "note: %s",
	     hmm_store_note(s));
	hmm_store_close(s);
	flip(path, 8192 + 10);	/* mend it */

	flip(path, 20);		/* newest superblock */
	s = st_open(path, 0, 0, 8);
	hmm_store_stats(s, &st);
	t_eq(st.generation, 2, "damaged newest superblock: the previous flush");
	t_eq(hmm_store_extent_len(s, 5), -ENOENT, "without the newer extent");
	t_eq(hmm_store_extent_len(s, 4), 16384, "with the older ones");
	hmm_store_close(s);

	flip(path, 4096 + 20);	/* and the other */
	t_eq(try_open(path, 0, &s), -EUCLEAN,
	     "both superblocks damaged: -EUCLEAN (not an I/O error)");
	t_ok(strstr(hmm_last_error(), "damaged") != NULL, "detail: %s",
	     hmm_last_error());
	t_eq(try_open(path, HMM_STORE_CREATE, &s), -EUCLEAN,
	     "CREATE does not format over a damaged store");

	/* not a store */
	{
		const char *junk = st_path("junk.store");
		int fd = open(junk, O_CREAT | O_RDWR, 0600);
		char text[8192];
		char back[8192];

		memset(text, 'x', sizeof(text));
		if (fd < 0 || write(fd, text, sizeof(text)) != sizeof(text))
			t_fail_all("write %s", junk);
		close(fd);
		t_eq(try_open(junk, 0, &s), -ENODATA, "no store: -ENODATA");
		t_eq(try_open(junk, HMM_STORE_CREATE, &s), -EEXIST,
		     "other data: CREATE refuses with -EEXIST");
		fd = open(junk, O_RDONLY);
		t_ok(fd >= 0 && read(fd, back, sizeof(back)) == sizeof(back) &&
		     !memcmp(back, text, sizeof(text)), "and leaves it alone");
		close(fd);
		t_eq(try_open(junk, HMM_STORE_CREATE | HMM_STORE_TRUNCATE, &s), 0,
		     "TRUNCATE formats it");
		hmm_store_close(s);
		t_eq(try_open(path, HMM_STORE_TRUNCATE, &s), 0,
		     "TRUNCATE formats over a damaged store");
		hmm_store_stats(s, &st);
		t_eq(st.extents + st.generation, 1, "empty, generation 1");
		hmm_store_close(s);
	}
	return t_done();
}
