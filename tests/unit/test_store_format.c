// SPDX-License-Identifier: MIT
/*
 * test_store_format — hmm_open formats only what holds nothing: a new or
 * empty file, or an hmm store without named tensors.  Foreign data (an
 * 8 MiB file of other bytes, also as a loop block device) and an hmm
 * store with named tensors are refused, naming the path and what was
 * found, and left byte-identical, unless HMM_CONFIG_STORE_FORMAT is set;
 * KEEP with FORMAT is -EINVAL.  The loop device (root only) also holds
 * the one-context lock.  Scratch files and the loop device go at exit.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t.h"
#include "loopdev.h"

#include "hmm.h"

#define FOREIGN	(8u << 20)

static struct hmm_config cfg;

static uint8_t *slurp(const char *path, size_t n)
{
	uint8_t *b = malloc(n);
	int fd = open(path, O_RDONLY);

	if (!b || fd < 0 || pread(fd, b, n, 0) != (ssize_t)n)
		t_fail_all("read %s", path);
	close(fd);
	return b;
}

static void put(const char *path, const void *b, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0 || (n && write(fd, b, n) != (ssize_t)n))
		t_fail_all("write %s", path);
	close(fd);
}

/* hmm_open(path, flags): 0 (closed again) or the error. */
static int try_open(const char *path, uint32_t flags)
{
	struct hmm *h;
	int r;

	cfg.store_path = path;
	cfg.flags = flags;
	r = hmm_open(&cfg, &h);
	if (!r)
		hmm_close(h);
	else
		t_diag("%s: %d %s", path, r, hmm_last_error());
	return r;
}

static int says(const char *a, const char *b)
{
	return strstr(hmm_last_error(), a) && strstr(hmm_last_error(), b);
}

/* Foreign bytes at path (size n): refused, named, untouched; FORMAT
 * formats them. */
static void foreign(const char *path, const char *what, const uint8_t *was)
{
	uint8_t *now;

	t_eq(try_open(path, 0), -EEXIST, "%s of foreign bytes: -EEXIST", what);
	t_ok(says(path, "foreign data"), "the detail names %s and says "
	     "foreign data", path);
	t_eq(try_open(path, HMM_CONFIG_STORE_KEEP), -EEXIST, "with KEEP "
	     "too");
	now = slurp(path, FOREIGN);
	t_ok(!memcmp(now, was, FOREIGN), "%s: all %u bytes untouched", what,
	     FOREIGN);
	free(now);
	t_eq(try_open(path, HMM_CONFIG_STORE_FORMAT), 0, "FORMAT formats "
	     "it");
	now = slurp(path, 8);
	t_ok(!memcmp(now, "HMMSTORE", 8), "and it now starts with an hmm "
	     "superblock");
	free(now);
}

static void blkdev(const char *img, const uint8_t *was)
{
	struct hmm *h, *h2;
	const char *dev;

	put(img, was, FOREIGN);
	dev = t_loop_attach(img, "");
	if (!dev) {
		t_ok(1, "block device # SKIP needs root, losetup and a loop "
		     "device");
		return;
	}
	cfg.store_size = 0;	/* the device's size */
	foreign(dev, "a loop device", was);
	cfg.store_path = dev;
	cfg.flags = HMM_CONFIG_STORE_KEEP;
	if (hmm_open(&cfg, &h))
		t_fail_all("open %s: %s", dev, hmm_last_error());
	t_eq(hmm_open(&cfg, &h2), -EBUSY, "a second context on the device: "
	     "-EBUSY");
	t_ok(says(dev, "pid"), "naming the device and the holder's pid");
	hmm_close(h);
	cfg.store_size = 16 << 20;
}

int main(void)
{
	char path[4200], img[4200];
	struct hmm_tensor *t;
	uint8_t *junk;
	int64_t n = 4096;
	struct hmm *h;
	int i;

	hmm_config_default(&cfg);
	cfg.store_size = 16 << 20;
	cfg.host_budget = 1 << 20;
	cfg.chunk_bytes = 64 << 10;

	/* someone else's 8 MiB file */
	snprintf(path, sizeof(path), "%s/foreign", t_tmpdir());
	junk = malloc(FOREIGN);
	t_fill(junk, FOREIGN, 7);
	put(path, junk, FOREIGN);
	foreign(path, "a file", junk);

	/* a file shorter than a superblock is foreign too */
	put(path, "not a store", 11);
	t_eq(try_open(path, 0), -EEXIST, "an 11-byte file: -EEXIST");
	t_ok(says(path, "foreign data"), "named, foreign data");

	/* new and empty files format without the flag */
	snprintf(path, sizeof(path), "%s/new", t_tmpdir());
	t_eq(try_open(path, 0), 0, "a new file formats");
	snprintf(path, sizeof(path), "%s/empty", t_tmpdir());
	put(path, "", 0);
	t_eq(try_open(path, 0), 0, "an empty file formats");

	/* an hmm store with named tensors */
	cfg.store_path = path;
	cfg.flags = 0;
	if (hmm_open(&cfg, &h))
		t_fail_all("open: %s", hmm_last_error());
	for (i = 0; i < 3; i++) {
		char name[16];

		snprintf(name, sizeof(name), "named%d", i);
		if (hmm_tensor_new(h, name, HMM_DTYPE_U8, 1, &n, &t))
			t_fail_all("tensor: %s", hmm_last_error());
	}
	t_eq(hmm_flush(h), 0, "flushed 3 named tensors");
	hmm_close(h);
	free(junk);
	junk = slurp(path, 16 << 20);
	t_eq(try_open(path, 0), -EEXIST, "without KEEP or FORMAT: -EEXIST");
	t_ok(says(path, "hmm store with 3 named tensors"), "named, with what "
	     "was found");
	{
		uint8_t *now = slurp(path, 16 << 20);

		t_ok(!memcmp(now, junk, 16 << 20), "the store is untouched");
		free(now);
	}
	cfg.flags = HMM_CONFIG_STORE_KEEP;
	if (hmm_open(&cfg, &h))
		t_fail_all("open KEEP: %s", hmm_last_error());
	t_eq(hmm_tensor_open(h, "named2", &t), 0, "KEEP still finds them");
	hmm_close(h);
	t_eq(try_open(path, HMM_CONFIG_STORE_KEEP | HMM_CONFIG_STORE_FORMAT),
	     -EINVAL, "KEEP with FORMAT: -EINVAL");
	t_eq(try_open(path, HMM_CONFIG_STORE_FORMAT), 0, "FORMAT formats it");
	cfg.flags = HMM_CONFIG_STORE_KEEP;
	if (hmm_open(&cfg, &h))
		t_fail_all("open KEEP: %s", hmm_last_error());
	t_eq(hmm_tensor_open(h, "named2", &t), -ENOENT, "after FORMAT the "
	     "named tensors are gone");
	t_eq(hmm_flush(h), 0, "flush with no tensors");
	hmm_close(h);
	t_eq(try_open(path, 0), 0, "an hmm store with no named tensors "
	     "opens without the flag");

	snprintf(img, sizeof(img), "%s/blk.img", t_tmpdir());
	t_fill(junk, FOREIGN, 9);
	blkdev(img, junk);
	free(junk);
	return t_done();
}
