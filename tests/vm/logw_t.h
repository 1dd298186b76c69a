/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tests/vm/logw_t.h — reading the log that device-mapper's log-writes
 * target (drivers/md/dm-log-writes.c; Documentation/admin-guide/
 * device-mapper/log-writes.rst) leaves on its log device.
 *
 * Format, all little-endian, in units of the logged device's logical
 * sector size S (the super says which):
 *   sector 0: super { u64 magic 0x6a736677736872, u64 version 1,
 *                     u64 nr_entries, u32 sectorsize }
 *   then nr_entries entries, each one sector of header
 *     { u64 sector, u64 nr_sectors, u64 flags, u64 data_len }
 *   followed by nr_sectors sectors of the data written (none for a
 *   discard).  A mark's text is in its header sector, after the header
 *   (data_len bytes, nr_sectors 0).
 *
 * Ordering (the target's guarantee, which the replay relies on): a
 * plain write is logged only when a later FLUSH that covers it has
 * completed, just before that FLUSH; so the entries between two FLUSH
 * entries are the writes that completed before the second FLUSH was
 * issued, in completion order, and may reach the disk in any order and
 * any subset until that FLUSH.  A FUA write is logged when it completes.
 * A mark is logged when the message arrives: after every FLUSH that
 * completed before it.
 *
 * Ownership: logw_open maps the file read-only and allocates the entry
 * array; logw_close frees both.  Pure reads otherwise; any thread.
 */
#ifndef LOGW_T_H
#define LOGW_T_H

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define LOGW_MAGIC	0x6a736677736872ULL
#define LOGW_VERSION	1
#define LOGW_FLUSH	(1u << 0)
#define LOGW_FUA	(1u << 1)
#define LOGW_DISCARD	(1u << 2)
#define LOGW_MARK	(1u << 3)
#define LOGW_META	(1u << 4)

struct logw_entry {
	uint64_t off;		/* byte offset on the logged device */
	uint64_t len;		/* bytes written (0: flush or mark) */
	uint32_t flags;		/* LOGW_* */
	const uint8_t *data;	/* len bytes, in the mapped log */
	char mark[64];		/* a mark's text, NUL-terminated */
};

struct logw {
	uint8_t *map;
	size_t map_len;
	uint32_t sectorsize;
	size_t n;		/* entries */
	struct logw_entry *e;
};

static inline uint64_t logw_le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

static inline void logw_close(struct logw *l)
{
	if (l->map)
		munmap(l->map, l->map_len);
	free(l->e);
	memset(l, 0, sizeof(*l));
}

/* Read one entry at byte pos of the log into *e; the next entry's pos,
 * or 0 when the entry runs past the end. */
static inline size_t logw_entry_at(const struct logw *l, size_t pos,
				   struct logw_entry *e)
{
	const uint8_t *h = l->map + pos;
	uint64_t nsec, dlen, data;

	if (pos + l->sectorsize > l->map_len)
		return 0;
	memset(e, 0, sizeof(*e));
	nsec = logw_le64(h + 8);
	e->flags = (uint32_t)logw_le64(h + 16);
	dlen = logw_le64(h + 24);
	e->off = logw_le64(h) * l->sectorsize;
	if (e->flags & LOGW_MARK) {
		size_t max = l->sectorsize - 32;

		if (dlen > max)
			dlen = max;
		if (dlen >= sizeof(e->mark))
			dlen = sizeof(e->mark) - 1;
		memcpy(e->mark, h + 32, dlen);
		return pos + l->sectorsize;
	}
	data = pos + l->sectorsize;
	if (e->flags & LOGW_DISCARD) {
		e->len = nsec * l->sectorsize;	/* no data follows */
		return data;
	}
	e->len = nsec * l->sectorsize;
	if (nsec > (l->map_len - data) / l->sectorsize)
		return 0;
	e->data = l->map + data;
	return data + e->len;
}

/* Map the log at path and index its entries: 0, -EBADMSG (not a log,
 * or truncated), -errno. */
static inline int logw_open(const char *path, struct logw *l)
{
	struct stat st;
	uint64_t want;
	size_t pos;
	int fd, err = 0;

	memset(l, 0, sizeof(*l));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || st.st_size < 4096) {
		close(fd);
		return -EBADMSG;
	}
	l->map_len = st.st_size;
	l->map = mmap(NULL, l->map_len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (l->map == MAP_FAILED) {
		l->map = NULL;
		return -errno;
	}
	memcpy(&l->sectorsize, l->map + 24, 4);
	l->sectorsize = le32toh(l->sectorsize);
	want = logw_le64(l->map + 16);
	if (logw_le64(l->map) != LOGW_MAGIC ||
	    logw_le64(l->map + 8) != LOGW_VERSION ||
	    l->sectorsize < 512 || l->sectorsize > 4096 ||
	    (l->sectorsize & (l->sectorsize - 1)) ||
	    want > l->map_len / l->sectorsize) {
		err = -EBADMSG;
		goto out_close;
	}
	l->e = calloc(want ? want : 1, sizeof(*l->e));
	if (!l->e) {
		err = -ENOMEM;
		goto out_close;
	}
	for (pos = l->sectorsize; l->n < want; l->n++) {
		pos = logw_entry_at(l, pos, &l->e[l->n]);
		if (!pos) {
			err = -EBADMSG;
			goto out_close;
		}
	}
	return 0;

out_close:
	logw_close(l);
	return err;
}

#endif /* LOGW_T_H */
