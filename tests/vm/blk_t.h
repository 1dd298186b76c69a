/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tests/vm/blk_t.h — loop devices and device-mapper from C, for the VM
 * tests (busybox has neither losetup's LOOP_CONFIGURE nor dmsetup).
 *
 * Loop: t_loop_attach binds a file to a free /dev/loopN (LOOP_CONFIGURE,
 * autoclear: the kernel detaches it when its last opener closes it).
 * Device-mapper: one linear table of one target on a named device,
 * through the ioctls of <linux/dm-ioctl.h> on /dev/mapper/control:
 * create, load, resume, message, status, remove.  The ioctl version sent
 * is 4.0.0, which any 4.x kernel accepts (the headers' minor may be newer
 * than the VM kernel's).
 *
 * Each helper returns 0 / -errno (or a value); none prints or exits.
 * Not thread-safe; the tests are single-threaded.
 */
#ifndef BLK_T_H
#define BLK_T_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/dm-ioctl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define T_DM_CONTROL	"/dev/mapper/control"
#define T_LOOP_CONTROL	"/dev/loop-control"
#define T_DM_BUF	16384	/* ioctl buffer: header, spec, params */

/*
 * Bind path to a free loop device: 0, its node in dev (>= 32 bytes) and
 * an open O_RDWR fd in *fd (the device stays bound while it is open);
 * -errno otherwise.
 */
static inline int t_loop_attach(const char *path, char *dev, int *fd)
{
	struct loop_config lc;
	int ctl, n, ffd, lfd, err = 0;

	ctl = open(T_LOOP_CONTROL, O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return -errno;
	n = ioctl(ctl, LOOP_CTL_GET_FREE);
	err = n < 0 ? -errno : 0;
	close(ctl);
	if (err)
		return err;
	snprintf(dev, 32, "/dev/loop%d", n);
	ffd = open(path, O_RDWR | O_CLOEXEC);
	if (ffd < 0)
		return -errno;
	lfd = open(dev, O_RDWR | O_CLOEXEC);
	if (lfd < 0) {
		err = -errno;
		goto out_close_file;
	}
	memset(&lc, 0, sizeof(lc));
	lc.fd = ffd;
	lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;
	if (ioctl(lfd, LOOP_CONFIGURE, &lc)) {
		err = -errno;
		close(lfd);
		goto out_close_file;
	}
	*fd = lfd;
out_close_file:
	close(ffd);		/* the loop device holds its own reference */
	return err;
}

/* Unbind now (the device may still be open elsewhere: then autoclear
 * unbinds it at its last close) and close fd. */
static inline void t_loop_detach(int fd)
{
	if (fd >= 0) {
		ioctl(fd, LOOP_CLR_FD, 0);
		close(fd);
	}
}

/* "major:minor" of the block device at path, for a table line. */
static inline int t_devno(const char *path, char *out, size_t len)
{
	struct stat st;

	if (stat(path, &st))
		return -errno;
	if (!S_ISBLK(st.st_mode))
		return -ENOTBLK;
	snprintf(out, len, "%u:%u", major(st.st_rdev), minor(st.st_rdev));
	return 0;
}

/* A dm_ioctl header for device name in buf (T_DM_BUF bytes), data
 * starting right after it. */
static inline struct dm_ioctl *t_dm_init(void *buf, const char *name)
{
	struct dm_ioctl *io = buf;

	memset(buf, 0, T_DM_BUF);
	io->version[0] = DM_VERSION_MAJOR;
	io->data_size = T_DM_BUF;
	io->data_start = sizeof(*io);
	if (name)
		snprintf(io->name, sizeof(io->name), "%s", name);
	return io;
}

static inline int t_dm_ioctl(unsigned long cmd, struct dm_ioctl *io)
{
	int fd = open(T_DM_CONTROL, O_RDWR | O_CLOEXEC), err = 0;

	if (fd < 0)
		return -errno;
	if (ioctl(fd, cmd, io))
		err = -errno;
	close(fd);
	return err;
}

/* 0 when the kernel has the target type (e.g. "log-writes"), -ENOENT
 * when not, -errno when device-mapper does not answer. */
static inline int t_dm_has_target(const char *type)
{
	uint64_t buf[T_DM_BUF / 8];
	struct dm_ioctl *io = t_dm_init(buf, NULL);
	struct dm_target_versions *v;
	char *p, *end = (char *)buf + T_DM_BUF;
	int err = t_dm_ioctl(DM_LIST_VERSIONS, io);

	if (err)
		return err;
	if (io->flags & DM_BUFFER_FULL_FLAG)
		return -ENOSPC;
	for (p = (char *)buf + io->data_start;
	     p + sizeof(*v) < end; p += v->next) {
		v = (struct dm_target_versions *)p;
		if (!strncmp(v->name, type, end - v->name))
			return 0;
		if (!v->next)
			break;
	}
	return -ENOENT;
}

/*
 * Create device name with the one target "0 sectors type params" and
 * resume it: 0 and its device number in *devno, or -errno (nothing
 * left behind).
 */
static inline int t_dm_create(const char *name, uint64_t sectors,
			      const char *type, const char *params,
			      dev_t *devno)
{
	uint64_t buf[T_DM_BUF / 8];
	struct dm_ioctl *io = t_dm_init(buf, name);
	struct dm_target_spec *sp;
	size_t plen = strlen(params) + 1;
	int err;

	if (sizeof(*io) + sizeof(*sp) + plen > T_DM_BUF)
		return -E2BIG;
	err = t_dm_ioctl(DM_DEV_CREATE, io);
	if (err)
		return err;
	*devno = (dev_t)io->dev;
	io = t_dm_init(buf, name);
	io->target_count = 1;
	sp = (struct dm_target_spec *)((char *)buf + io->data_start);
	sp->sector_start = 0;
	sp->length = sectors;
	snprintf(sp->target_type, sizeof(sp->target_type), "%s", type);
	memcpy(sp + 1, params, plen);
	io->data_size = io->data_start + sizeof(*sp) + plen;
	err = t_dm_ioctl(DM_TABLE_LOAD, io);
	if (!err) {
		io = t_dm_init(buf, name);	/* no SUSPEND flag: resume */
		err = t_dm_ioctl(DM_DEV_SUSPEND, io);
	}
	if (err) {
		io = t_dm_init(buf, name);
		t_dm_ioctl(DM_DEV_REMOVE, io);
	}
	return err;
}

/* Send the target of device name a message, e.g. "mark gen5". */
static inline int t_dm_message(const char *name, const char *msg)
{
	uint64_t buf[T_DM_BUF / 8];
	struct dm_ioctl *io = t_dm_init(buf, name);
	struct dm_target_msg *m;
	size_t len = strlen(msg) + 1;

	m = (struct dm_target_msg *)((char *)buf + io->data_start);
	if (io->data_start + sizeof(*m) + len > T_DM_BUF)
		return -E2BIG;
	m->sector = 0;
	memcpy(m->message, msg, len);
	return t_dm_ioctl(DM_TARGET_MSG, io);
}

/* The target's status line (its INFO status) in out. */
static inline int t_dm_status(const char *name, char *out, size_t len)
{
	uint64_t buf[T_DM_BUF / 8];
	struct dm_ioctl *io = t_dm_init(buf, name);
	struct dm_target_spec *sp;
	int err = t_dm_ioctl(DM_TABLE_STATUS, io);

	if (err)
		return err;
	if (io->target_count != 1 || io->flags & DM_BUFFER_FULL_FLAG)
		return -EPROTO;
	sp = (struct dm_target_spec *)((char *)buf + io->data_start);
	snprintf(out, len, "%.*s", (int)(T_DM_BUF - io->data_start -
					  sizeof(*sp)), (char *)(sp + 1));
	return 0;
}

/* Remove device name (its target's destructor has run on return);
 * retries a while when it is still busy. */
static inline int t_dm_remove(const char *name)
{
	uint64_t buf[T_DM_BUF / 8];
	int err = -EBUSY;

	for (int i = 0; i < 100 && err == -EBUSY; i++) {
		if (i)
			usleep(20000);
		err = t_dm_ioctl(DM_DEV_REMOVE, t_dm_init(buf, name));
	}
	return err;
}

#endif /* BLK_T_H */
