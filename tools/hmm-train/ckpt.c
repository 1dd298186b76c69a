// SPDX-License-Identifier: MIT
/*
 * ckpt.c — the checkpoint file (ckpt.h).
 *
 * Layout (native endian, like the store it describes):
 *   struct ckpt_disk, then store_len bytes of store path, then a CRC-32
 *   (IEEE) of everything before it.  total = the whole file's bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "file.h"
#include "scratch.h"

#define MAGIC		"HMMTRN02"
#define MAGIC_ANY	"HMMTRN"	/* any version: ours, may be replaced */
#define VERSION		2

struct ckpt_disk {
	char magic[8];
	uint32_t version, total;
	char preset[32];
	int32_t cfg[6];
	double lr;
	int64_t step;
	uint64_t seed, data_len, data_hash;
	uint64_t tag[4];
	uint64_t state_bytes;
	uint32_t store_len, pad;
};

uint64_t ckpt_hash(const void *p, size_t n, uint64_t h)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static uint32_t crc32(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint32_t c = 0xffffffffu;

	for (size_t i = 0; i < n; i++) {
		c ^= b[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & -(c & 1));
	}
	return ~c;
}

/*
 * Can a checkpoint's worth of bytes be written and synced next to path?
 * A full file system fails here, not after training.  The probe has no
 * name (O_TMPFILE: nothing to remove, whatever ends the run); where the
 * file system has no O_TMPFILE, a name of its own made with O_EXCL, as
 * scratch.  Never a fixed name such as PATH.probe: that may be a file
 * of the user's, which the probe would truncate and remove.
 */
static int probe_folder(const char *path, char *err, size_t cap)
{
	char dir[4200], tmp[4300] = "";
	static const char zero[4096];
	int fd, e = 0, slot = -1;

	snprintf(dir, sizeof(dir), "%s", path);
	fd = open(dirname(dir), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR ||
		       errno == EINVAL))
		fd = file_tmp_beside(path, tmp, sizeof(tmp), &slot);
	else if (fd < 0)
		fd = -errno;
	if (fd < 0) {
		snprintf(err, cap, "--ckpt %s: cannot create a file in its "
			 "folder: %s", path, strerror(-fd));
		return fd;
	}
	if (write(fd, zero, sizeof(zero)) != (ssize_t)sizeof(zero))
		e = errno ? -errno : -ENOSPC;
	if (!e && fsync(fd))
		e = -errno;
	close(fd);
	scratch_remove(slot);
	if (e)
		snprintf(err, cap, "--ckpt %s: cannot write a checkpoint in "
			 "its folder (a 4 KiB probe%s%s): %s", path,
			 *tmp ? " " : "", tmp, strerror(-e));
	return e;
}

/*
 * Before step 1: path is no other file (a FIFO, a device, a directory,
 * foreign data), and its folder takes a checkpoint (probe_folder).
 */
int ckpt_check_target(const char *path, char *err, size_t cap)
{
	char head[8];
	const char *kind = "";
	struct stat st;
	ssize_t n;

	if (!stat(path, &st)) {
		n = file_head(path, head, sizeof(head), &kind);
		if (n == -EINVAL) {
			snprintf(err, cap, "--ckpt %s: not a regular file (%s); "
				 "refusing to replace it", path, kind);
			return -EINVAL;
		}
		if (n > 0 && (n < 6 || memcmp(head, MAGIC_ANY, 6))) {
			snprintf(err, cap, "--ckpt %s: the file exists and is "
				 "not an hmm-train checkpoint; refusing to "
				 "replace it", path);
			return -EEXIST;
		}
	}
	return probe_folder(path, err, cap);
}

int ckpt_stage(const char *path, const struct ckpt_info *in, char *err,
	       size_t cap)
{
	size_t slen = strnlen(in->store, sizeof(in->store) - 1);
	size_t total = sizeof(struct ckpt_disk) + slen + 4;
	struct ckpt_disk *d = calloc(1, total);
	char tmp[4200];
	uint32_t crc;
	int fd, e = 0;

	if (!d) {
		snprintf(err, cap, "--ckpt %s: out of memory", path);
		return -ENOMEM;
	}
	memcpy(d->magic, MAGIC, 8);
	d->version = VERSION;
	d->total = total;
	memcpy(d->preset, in->preset, sizeof(d->preset));
	memcpy(d->cfg, in->cfg, sizeof(d->cfg));
	d->lr = in->lr;
	d->step = in->step;
	d->seed = in->seed;
	d->data_len = in->data_len;
	d->data_hash = in->data_hash;
	memcpy(d->tag, in->tag, sizeof(d->tag));
	d->state_bytes = in->state_bytes;
	d->store_len = slen;
	memcpy(d + 1, in->store, slen);
	crc = crc32(d, total - 4);
	memcpy((char *)d + total - 4, &crc, 4);

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		e = -errno;
		snprintf(err, cap, "--ckpt %s: cannot create %s: %s", path, tmp,
			 strerror(errno));
		free(d);
		return e;
	}
	if (write(fd, d, total) != (ssize_t)total)
		e = errno ? -errno : -EIO;
	if (!e && fsync(fd))
		e = -errno;
	if (close(fd) && !e)
		e = -errno;
	if (e) {
		snprintf(err, cap, "--ckpt %s: write of %s failed: %s", path,
			 tmp, strerror(-e));
		unlink(tmp);
	}
	free(d);
	return e;
}

int ckpt_commit(const char *path, char *err, size_t cap)
{
	char tmp[4200];
	int e = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	ckpt_crash_point("flushed");
	if (rename(tmp, path))
		e = -errno;
	ckpt_crash_point("renamed");
	if (!e)
		e = file_sync_dir(path);
	if (e)
		snprintf(err, cap, "--ckpt %s: rename of %s failed: %s", path,
			 tmp, strerror(-e));
	return e;
}

void ckpt_unstage(const char *path)
{
	char tmp[4200];

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	unlink(tmp);
}

void ckpt_crash_point(const char *point)
{
	const char *at = getenv("HMM_TRAIN_CRASH_AT");

	if (at && !strcmp(at, point))
		kill(getpid(), SIGKILL);
}

static int bad(char *err, size_t cap, const char *path, const char *why)
{
	snprintf(err, cap, "--resume %s: %s", path, why);
	return -EINVAL;
}

int ckpt_read(const char *path, struct ckpt_info *out, char *err,
	      size_t cap)
{
	const char *kind = "";
	struct ckpt_disk d;
	char *buf = NULL;
	uint32_t crc;
	ssize_t n;
	int fd, e;

	memset(out, 0, sizeof(*out));
	fd = file_open_regular(path, O_RDONLY, &kind);
	if (fd == -EINVAL) {
		snprintf(err, cap, "--resume %s: not a regular file (%s)", path,
			 kind);
		return fd;
	}
	if (fd < 0) {
		snprintf(err, cap, "--resume %s: cannot open: %s", path,
			 strerror(-fd));
		return fd;
	}
	n = pread(fd, &d, sizeof(d), 0);
	if (n < 8 || memcmp(d.magic, MAGIC_ANY, 6)) {
		e = bad(err, cap, path, "not an hmm-train checkpoint");
		goto out;
	}
	if (memcmp(d.magic, MAGIC, 8)) {
		e = bad(err, cap, path, "a checkpoint of another hmm-train "
			"version (not a store flush); train again");
		goto out;
	}
	if (n < (ssize_t)sizeof(d) || d.total < sizeof(d) + 4 ||
	    d.store_len >= sizeof(out->store) ||
	    d.total != sizeof(d) + d.store_len + 4) {
		e = bad(err, cap, path, n < (ssize_t)sizeof(d) ? "truncated" :
			"checksum mismatch: the file is damaged (bad sizes)");
		goto out;
	}
	buf = malloc(d.total);
	if (!buf) {
		e = -ENOMEM;
		snprintf(err, cap, "--resume %s: out of memory", path);
		goto out;
	}
	n = pread(fd, buf, d.total, 0);
	if (n != (ssize_t)d.total) {
		e = bad(err, cap, path, "truncated");
		goto out;
	}
	memcpy(&crc, buf + d.total - 4, 4);
	if (crc != crc32(buf, d.total - 4)) {
		e = bad(err, cap, path, "checksum mismatch: the file is "
			"damaged");
		goto out;
	}
	memcpy(out->preset, d.preset, sizeof(out->preset));
	out->preset[sizeof(out->preset) - 1] = 0;
	memcpy(out->cfg, d.cfg, sizeof(out->cfg));
	out->lr = d.lr;
	out->step = d.step;
	out->seed = d.seed;
	out->data_len = d.data_len;
	out->data_hash = d.data_hash;
	memcpy(out->tag, d.tag, sizeof(out->tag));
	out->state_bytes = d.state_bytes;
	memcpy(out->store, buf + sizeof(d), d.store_len);
	e = 0;
out:
	free(buf);
	close(fd);
	return e;
}

int ckpt_read_pending(const char *path, const struct ckpt_info *cur,
		      struct ckpt_info *out)
{
	char tmp[4200], err[512];
	struct stat st;
	int e;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (lstat(tmp, &st))
		return -ENOENT;
	e = ckpt_read(tmp, out, err, sizeof(err));
	if (e)
		return e;
	/* the same run's next checkpoint: only the step (and lr) move */
	if (strcmp(out->preset, cur->preset) ||
	    memcmp(out->cfg, cur->cfg, sizeof(out->cfg)) ||
	    out->seed != cur->seed || out->data_len != cur->data_len ||
	    out->data_hash != cur->data_hash ||
	    strcmp(out->store, cur->store) || out->step < cur->step)
		return -EINVAL;
	return 0;
}

void ckpt_store_path(const char *path, const struct ckpt_info *in,
		     char *buf, size_t cap)
{
	if (in->store[0])
		snprintf(buf, cap, "%s", in->store);
	else
		snprintf(buf, cap, "%s.store", path);
}
