/* SPDX-License-Identifier: MIT */
/* file.h — the files hmm-train is given (--data, --resume, --ckpt) must
 * be regular files: a FIFO would block it, a device node be replaced;
 * and the files it writes beside them (a report's temporary, the
 * --ckpt probe) get names no user file can have. */
#ifndef HMM_TRAIN_FILE_H
#define HMM_TRAIN_FILE_H

#include <sys/types.h>

/* What kind of file mode is, for a message: "a FIFO", "a directory"... */
const char *file_kind(mode_t mode);

/*
 * open(path, flags) without blocking on a FIFO (O_NONBLOCK, cleared
 * again), close-on-exec.  Returns the fd, -errno, or -EINVAL when path
 * is not a regular file (then *kind says what it is).
 */
int file_open_regular(const char *path, int flags, const char **kind);

/*
 * The first n bytes of path, read with file_open_regular: how many
 * (0 for an empty or unreadable file), -EINVAL when path is not a
 * regular file (*kind says what it is), or the open's -errno.  For
 * checking that an existing file is ours before replacing it.
 */
ssize_t file_head(const char *path, void *buf, size_t n, const char **kind);

/*
 * Make a new file beside path (in its folder) under a name of its own,
 * "FOLDER/.NAME.XXXXXX", with O_EXCL, mode 0600, as scratch (scratch.h:
 * removed however the run ends).  Returns the fd, its name in tmp and
 * its scratch slot in *slot (scratch_keep() it once it is renamed), or
 * -errno.
 */
int file_tmp_beside(const char *path, char *tmp, size_t cap, int *slot);

/* fsync the folder holding path, so a rename into it is durable. */
int file_sync_dir(const char *path);

#endif
