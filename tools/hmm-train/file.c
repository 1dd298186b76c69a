// SPDX-License-Identifier: MIT
/*
 * file.c — opening hmm-train's own files (file.h): only regular ones.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "scratch.h"

const char *file_kind(mode_t mode)
{
	return S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO" :
	       S_ISCHR(mode) ? "a character device" :
	       S_ISBLK(mode) ? "a block device" :
	       S_ISSOCK(mode) ? "a socket" : "not a plain file";
}

int file_open_regular(const char *path, int flags, const char **kind)
{
	struct stat st;
	int fd = open(path, flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		*kind = file_kind(st.st_mode);
		close(fd);
		return -EINVAL;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

ssize_t file_head(const char *path, void *buf, size_t n, const char **kind)
{
	int fd = file_open_regular(path, O_RDONLY, kind);
	ssize_t got;

	if (fd < 0)
		return fd;
	got = pread(fd, buf, n, 0);
	close(fd);
	return got < 0 ? 0 : got;
}

int file_tmp_beside(const char *path, char *tmp, size_t cap, int *slot)
{
	char d[4200], b[4200];
	int fd, e = 0;

	snprintf(d, sizeof(d), "%s", path);
	snprintf(b, sizeof(b), "%s", path);
	if ((size_t)snprintf(tmp, cap, "%s/.%s.XXXXXX", dirname(d),
			     basename(b)) >= cap)
		return -ENAMETOOLONG;
	scratch_begin();	/* a signal waits until the name is noted */
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		e = -errno;
	} else {
		*slot = scratch_add(tmp);
		if (*slot < 0) {
			close(fd);
			unlink(tmp);
			e = -ENOMEM;
		}
	}
	scratch_end();
	return e ? e : fd;
}

int file_sync_dir(const char *path)
{
	char buf[4200];
	int fd, e = 0;

	snprintf(buf, sizeof(buf), "%s", path);
	fd = open(dirname(buf), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd))
		e = -errno;
	close(fd);
	return e;
}
