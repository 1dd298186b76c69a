// SPDX-License-Identifier: MIT
/*
 * state_store.c — the store file, checked by hand before libhmm opens it:
 * created (or an earlier store reused), its space reserved with
 * posix_fallocate, so that a read-only or full file system is reported,
 * with the path and the sizes, before any training starts rather than at
 * the first eviction.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "state_priv.h"

void st_default_store(char *buf, size_t cap)
{
	struct stat st;
	const char *dir = "build/tmp";

	if (stat("build", &st) || !S_ISDIR(st.st_mode))
		dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/var/tmp";
	else
		mkdir(dir, 0755);
	snprintf(buf, cap, "%s/hmm-train.%d.store", dir, (int)getpid());
}

/*
 * An existing file may be reused as the store only when it is empty,
 * starts with libhmm's superblock magic, or starts with zeros (reserved
 * by an earlier run that stopped before formatting it).
 */
static int looks_like_store(int fd, off_t size)
{
	char head[8];

	if (size == 0)
		return 1;
	if (pread(fd, head, sizeof(head), 0) != sizeof(head))
		return 0;
	return !memcmp(head, "HMMSTORE", 8) ||
	       !memcmp(head, "\0\0\0\0\0\0\0\0", 8);
}

/*
 * A store to reopen (--resume) must still hold a superblock: libhmm
 * formats a file whose superblocks are zeros or cut off, which would
 * lose the checkpoint's state for good.  Either slot's magic will do
 * (libhmm then checks the rest, and refuses damage).
 */
#define SB_BYTES	4096	/* libhmm's superblock slot (table.h) */
static int reopen_check(int fd, const char *p)
{
	char head[2][8];
	struct stat st;

	if (fstat(fd, &st))
		return st_fail(-errno, "store %s: %s", p, strerror(errno));
	if (pread(fd, head[0], 8, 0) == 8 && pread(fd, head[1], 8, SB_BYTES)
	    == 8 && (!memcmp(head[0], "HMMSTORE", 8) ||
		     !memcmp(head[1], "HMMSTORE", 8)))
		return 0;
	/* -EINVAL: a bad checkpoint is bad input (exit 2), not an I/O error */
	return st_fail(-EINVAL, "store %s: no hmm superblock at offset 0 or %d "
		    "(%lld bytes: %s); the checkpoint's state is not there "
		    "and the store is left as it is, not reformatted", p,
		    SB_BYTES, (long long)st.st_size,
		    S_ISREG(st.st_mode) && st.st_size < 2 * SB_BYTES ?
		    "truncated" : "both superblocks damaged or zeroed");
}

/*
 * Create the store file (or open the device) and reserve its size, so a
 * full or read-only file system fails here, named, before training.  A
 * store to reopen is only checked (reopen_check), never changed.
 */
int st_store_preflight(struct state *s)
{
	const char *p = s->store_path;
	struct statvfs vfs;
	struct stat st;
	char need[32], have[32];
	int fd, r, created = 1;

	if (s->reopen) {
		fd = open(p, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return st_fail(-errno, "store %s: cannot open: %s", p,
				    strerror(errno));
		r = reopen_check(fd, p);
		close(fd);
		return r;
	}
	fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST) {
		created = 0;
		fd = open(p, O_RDWR | O_CLOEXEC);
	}
	if (fd < 0)
		return st_fail(-errno, "store %s: cannot open for writing: %s%s",
			    p, strerror(errno), errno == EROFS ?
			    " (pick a writable place with --store)" : "");
	if (fstat(fd, &st) == 0 && S_ISBLK(st.st_mode)) {
		close(fd);
		return 0;
	}
	if (!created && !s->format && !looks_like_store(fd, st.st_size)) {
		close(fd);
		return st_fail(-EEXIST, "store %s: the file exists (%lld bytes) and "
			    "is not an hmm store; refusing to overwrite it "
			    "(remove it, pick another --store, or --format)", p,
			    (long long)st.st_size);
	}
	r = posix_fallocate(fd, 0, s->store_size);
	st_human(need, sizeof(need), s->store_size);
	if (r == ENOSPC || r == EDQUOT) {
		uint64_t avail = fstatvfs(fd, &vfs) ? 0 :
				 (uint64_t)vfs.f_bavail * vfs.f_frsize;

		st_human(have, sizeof(have), avail);
		close(fd);
		if (created)
			unlink(p);
		return st_fail(-ENOSPC, "store %s: the store needs %s but its "
			    "file system has %s free (pick another place with "
			    "--store, or a larger --host-budget)", p, need,
			    have);
	}
	close(fd);
	if (r && r != EOPNOTSUPP && r != EINVAL && created)
		unlink(p);
	if (r && r != EOPNOTSUPP && r != EINVAL)
		return st_fail(-r, "store %s: cannot reserve %s: %s", p, need,
			    strerror(r));
	return 0;
}
