// SPDX-License-Identifier: MIT
/*
 * file.c — opening hmm-train's own files (file.h): only regular ones.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"

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
