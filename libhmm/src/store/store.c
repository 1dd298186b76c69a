// SPDX-License-Identifier: MIT
/*
 * store.c — the NVMe tier: open (format or load), close, flush, the
 * extent table and the stats.  The request engine is store_io.c; the
 * on-disk format is table.c.  See store.h for the contract.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "crc32c.h"
#include "err.h"
#include "fault_inject.h"
#include "pool.h"
#include "store_int.h"
#include "stripe.h"

#define DEF_DEPTH	32u
#define MAX_DEPTH	4096u
#define DEF_BLOCK	4096u
#define DEF_POOL	STORE_DEF_POOL
#define DEF_META	(1u << 20)
#define KNOWN_FLAGS	(HMM_STORE_CREATE | HMM_STORE_SQPOLL | \
			 HMM_STORE_BUFFERED | HMM_STORE_TRUNCATE)

static void note(struct hmm_store *s, const char *fmt, ...)
{
	size_t n = strlen(s->note);
	va_list ap;

	if (n && n + 2 < sizeof(s->note)) {
		strcpy(s->note + n, "; ");
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(s->note + n, sizeof(s->note) - n, fmt, ap);
	va_end(ap);
}

static const char *errstr(int err)
{
	const char *d = strerrordesc_np(err < 0 ? -err : err);

	return d ? d : "unknown error";
}

static void *aligned(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, len))
		return NULL;
	memset(p, 0, len);
	return p;
}

/* pread/pwrite all of len, through short transfers: 0 or -errno. */
static int sync_rw(int fd, int write, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = write ? pwrite(fd, (char *)buf + done, len - done,
					   off + done)
				  : pread(fd, (char *)buf + done, len - done,
					  off + done);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO;	/* end of file */
		done += r;
	}
	return 0;
}

/* Drop O_DIRECT on the open file: tmpfs, or a file system refusing it. */
static void go_buffered(struct hmm_store *s, const char *why)
{
	int fl = fcntl(s->fd, F_GETFL);

	if (fl >= 0)
		fcntl(s->fd, F_SETFL, fl & ~O_DIRECT);
	s->direct = 0;
	note(s, "O_DIRECT %s: running buffered", why);
}

/* The pid holding a flock on the file st names, from /proc/locks; 0 if
 * none is found (or /proc/locks shows 0: a holder that has exited, or
 * one outside this pid namespace). */
static pid_t lock_holder(const struct stat *st)
{
	FILE *f = fopen("/proc/locks", "re");
	char line[256], want[64];
	pid_t pid = 0;

	if (!f)
		return 0;
	snprintf(want, sizeof(want), " %02x:%02x:%llu ", major(st->st_dev),
		 minor(st->st_dev), (unsigned long long)st->st_ino);
	while (!pid && fgets(line, sizeof(line), f)) {
		char *w = strstr(line, want);
		int p;

		/* "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" */
		if (w && strstr(line, " FLOCK ") && w > line &&
		    sscanf(line, "%*d: FLOCK %*s %*s %d", &p) == 1 && p > 0)
			pid = p;
	}
	fclose(f);
	return pid;
}

/*
 * One context per store: an exclusive flock on the open file (per open
 * file description, so a second open in this process conflicts too; a
 * block device's node works the same).  Held until the fd is closed.
 */
static int lock_file(struct hmm_store *s, const struct stat *st)
{
	struct timespec nap = { 0, 10000000 };
	pid_t pid;

	/* a holder that is gone (killed) keeps the lock until the kernel
	 * has torn its io_uring down: wait for that, up to 2 s, while the
	 * holder's pid is unknown or no longer exists */
	for (int i = 0;; i++) {
		if (flock(s->fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK)
			return hmm_err(-errno, "store %s: flock: %s", s->path,
				       errstr(errno));
		pid = lock_holder(st);
		if (i == 200 || (pid && (kill(pid, 0) == 0 || errno != ESRCH)))
			break;
		nanosleep(&nap, NULL);
	}
	if (!pid)
		return hmm_err(-EBUSY, "store %s: in use by another context "
			       "(holder's pid unknown)", s->path);
	return hmm_err(-EBUSY, "store %s: in use by another context (pid "
		       "%d%s)", s->path, (int)pid, pid == getpid() ?
		       ", this process" : "");
}

static int open_file(struct hmm_store *s, const struct hmm_store_config *cfg,
		     int *created, uint64_t *bytes)
{
	int fl = O_RDWR | O_CLOEXEC, existed, r;
	struct stat st;
	struct statfs fs;

	existed = stat(s->path, &st) == 0;
	if (cfg->flags & HMM_STORE_CREATE)
		fl |= O_CREAT;
	s->fd = -1;
	if (!(cfg->flags & HMM_STORE_BUFFERED)) {
		s->fd = open(s->path, fl | O_DIRECT, 0600);
		s->direct = s->fd >= 0;
		if (s->fd < 0 && errno == EINVAL)
			note(s, "O_DIRECT refused by open");
	}
	if (s->fd < 0 && (cfg->flags & HMM_STORE_BUFFERED || errno == EINVAL))
		s->fd = open(s->path, fl, 0600);
	if (s->fd < 0)
		return hmm_err(-errno, "store %s: open: %s", s->path,
			       errstr(errno));
	if (fstat(s->fd, &st))
		return hmm_err(-errno, "store %s: stat: %s", s->path,
			       errstr(errno));
	if (S_ISDIR(st.st_mode))
		return hmm_err(-EISDIR, "store %s: is a directory", s->path);
	r = lock_file(s, &st);
	if (r)
		return r;
	*created = !existed;	/* ours to remove on failure: locked */
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(s->fd, BLKGETSIZE64, bytes))
			return hmm_err(-errno, "store %s: BLKGETSIZE64: %s",
				       s->path, errstr(errno));
	} else if (S_ISREG(st.st_mode)) {
		*bytes = st.st_size;
	} else {
		return hmm_err(-EINVAL, "store %s: not a regular file or "
			       "block device", s->path);
	}
	if (S_ISREG(st.st_mode) && fstatfs(s->fd, &fs) == 0 &&
	    (fs.f_type == TMPFS_MAGIC ||
	     fs.f_type == RAMFS_MAGIC)) {
		s->tmpfs = 1;
		if (s->direct)
			go_buffered(s, "means nothing on tmpfs");
	}
	return 0;
}

/* Allocate the file's space for a store of size bytes. */
static int grow_file(struct hmm_store *s, uint64_t size, uint64_t have,
		     int blk)
{
	if (have >= size)
		return 0;
	if (blk)
		return hmm_err(-ENOSPC, "store %s: device has %llu bytes, "
			       "%llu wanted", s->path,
			       (unsigned long long)have,
			       (unsigned long long)size);
	if (fallocate(s->fd, 0, 0, size) == 0)
		return 0;
	if (errno == ENOSPC)
		return hmm_err(-ENOSPC, "store %s: no space for %llu bytes on "
			       "its file system", s->path,
			       (unsigned long long)size);
	if (errno != EOPNOTSUPP && errno != ENOSYS)
		return hmm_err(-errno, "store %s: fallocate %llu bytes: %s",
			       s->path, (unsigned long long)size,
			       errstr(errno));
	if (ftruncate(s->fd, size))
		return hmm_err(-errno, "store %s: ftruncate %llu bytes: %s",
			       s->path, (unsigned long long)size,
			       errstr(errno));
	return 0;
}

static int format(struct hmm_store *s, const struct hmm_store_config *cfg,
		  uint64_t have, int blk)
{
	uint64_t size = cfg->size ? cfg->size : have, need;
	uint8_t *buf;
	int err;
	uint32_t block = cfg->block_size ? cfg->block_size : DEF_BLOCK;
	uint32_t meta = cfg->meta_bytes ? cfg->meta_bytes : DEF_META;
	uint32_t max_ext = cfg->max_extents;

	if (!size)
		return hmm_err(-EINVAL, "store %s: a new store needs a size",
			       s->path);
	/* per-block tables while they can name every block (up to 1 << 22
	 * entries, 16 GiB of 4 KiB blocks): any extent size fits them, as
	 * regions' small blocks need; past that, tables sized by extents */
	if (!max_ext && cfg->extent_bytes &&
	    (size - 2 * HMM_SB_BYTES) / block > (1u << 22)) {
		if (cfg->extent_bytes % block)
			return hmm_err(-EINVAL, "store %s: extent size %u is "
				       "not a multiple of the block size %u",
				       s->path, cfg->extent_bytes, block);
		/* 0: too small for one extent and the slack; then one
		 * entry per block, as without extent_bytes */
		max_ext = hmm_sb_extents_fit(size, block, cfg->extent_bytes,
					     meta);
	}
	err = hmm_sb_layout(size, block, max_ext, meta, &s->sb, &need);
	if (err == -ENOSPC)
		return hmm_err(err, "store %s: %llu bytes cannot hold a store "
			       "(needs at least %llu)", s->path,
			       (unsigned long long)size,
			       (unsigned long long)need);
	if (err)
		return hmm_err(err, "store %s: bad block size %u", s->path,
			       cfg->block_size);
	err = grow_file(s, size, have, blk);
	if (err)
		return err;
	s->sb.generation = 1;
	s->sb.slot = 0;
	if (getrandom(&s->sb.uuid, sizeof(s->sb.uuid), 0) < 0)
		s->sb.uuid = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL);
	if (s->role.member) {
		s->sb.set_uuid = s->role.set_uuid;
		s->sb.set_index = s->role.index;
		s->sb.set_count = s->role.count;
	}
	s->formatted = 1;
	buf = aligned(2 * HMM_SB_BYTES);
	if (!buf)
		return hmm_err(-ENOMEM, "store %s: out of memory", s->path);
	hmm_sb_encode(&s->sb, buf);	/* slot 1 stays zero: invalid */
	err = sync_rw(s->fd, 1, buf, 2 * HMM_SB_BYTES, 0);
	if (err == -EINVAL && s->direct) {
		go_buffered(s, "refused by the file system");
		err = sync_rw(s->fd, 1, buf, 2 * HMM_SB_BYTES, 0);
	}
	free(buf);
	if (!err && fdatasync(s->fd))
		err = -errno;
	if (err)
		return hmm_err(err, "store %s: writing the superblocks at "
			       "offset 0: %s", s->path, errstr(err));
	return 0;
}

/* Fill map, ext and meta from a table image; -EUCLEAN when inconsistent,
 * naming the entry, its offset in the file and the field. */
static int load_table(struct hmm_store *s, const uint8_t *t)
{
	const struct hmm_sb *sb = &s->sb;
	struct hmm_xent e, old;
	const char *bad;
	int err;

	if (hmm_xmap_reserve(&s->map, sb->nextents))
		return -ENOMEM;
	for (uint64_t i = 0; i < sb->nextents; i++) {
		uint64_t nblk;

		hmm_table_entry(t, i, &e);
		nblk = (e.len + (uint64_t)sb->block_size - 1) / sb->block_size;
		bad = !e.len || e.len % 4096 ? "len" :
		      e.blk >= s->blocks || nblk > s->blocks - e.blk ?
		      "blk (past the data area)" : NULL;
		if (!bad) {
			err = hmm_ext_reserve(&s->ext, e.blk, nblk);
			if (err == -ENOMEM)
				return err;
			e.on_disk = 1;
			bad = err ? "blk (overlaps another extent)" :
			      hmm_xmap_put(&s->map, &e, &old) ? "key" :
			      old.used ? "key (a second entry)" : NULL;
		}
		if (bad)
			return hmm_err(-EUCLEAN, "store %s: table %u entry "
				       "%llu at offset %llu (extent %#llx, blk "
				       "%llu, len %u): bad %s", s->path,
				       sb->slot,
				       (unsigned long long)i,
				       (unsigned long long)(sb->table_off[sb->slot] +
							    i * HMM_TENT_BYTES),
				       (unsigned long long)e.key,
				       (unsigned long long)e.blk, e.len, bad);
	}
	if (sb->meta_len) {
		s->meta = malloc(sb->meta_len);
		if (!s->meta)
			return -ENOMEM;
		memcpy(s->meta, t + sb->nextents * HMM_TENT_BYTES, sb->meta_len);
		s->meta_len = sb->meta_len;
	}
	return 0;
}

/* Read and check the table sb names; 0, -EBADMSG (crc) or -errno. */
static int read_table(struct hmm_store *s, const struct hmm_sb *sb,
		      uint8_t **out)
{
	uint64_t n = hmm_table_bytes(sb->nextents, sb->meta_len);
	uint64_t len = (n + 4095) / 4096 * 4096;
	uint8_t *t = aligned(len ? len : 4096);
	int err;

	if (!t)
		return -ENOMEM;
	err = len ? sync_rw(s->fd, 0, t, len, sb->table_off[sb->slot]) : 0;
	if (!err && hmm_crc32c(0, t, n) != sb->table_crc)
		err = -EBADMSG;
	if (err) {
		free(t);
		return err;
	}
	*out = t;
	return 0;
}

static int setup_tables(struct hmm_store *s)
{
	s->blocks = s->sb.data_bytes / s->sb.block_size;
	if (hmm_ext_init(&s->ext, s->blocks) ||
	    hmm_xmap_init(&s->map, 64))
		return hmm_err(-ENOMEM, "store %s: out of memory", s->path);
	return 0;
}

/*
 * A striped store opens this member at an older generation than its
 * newest (a flush that did not reach every member): zero the newer
 * superblock durably, so that it can never be mistaken for a later
 * flush of the same generation.
 */
static int drop_slot(struct hmm_store *s, int slot, uint64_t gen)
{
	uint8_t *z = aligned(HMM_SB_BYTES);
	int err;

	if (!z)
		return -ENOMEM;
	err = sync_rw(s->fd, 1, z, HMM_SB_BYTES, (uint64_t)slot * HMM_SB_BYTES);
	free(z);
	if (!err && fdatasync(s->fd))
		err = -errno;
	if (err)
		return hmm_err(err, "store %s: dropping superblock %d "
			       "(generation %llu) at offset %llu: %s", s->path,
			       slot, (unsigned long long)gen,
			       (unsigned long long)slot * HMM_SB_BYTES,
			       errstr(err));
	note(s, "generation %llu dropped: not every member of the striped "
	     "store reached it", (unsigned long long)gen);
	return 0;
}

/* Pick the newest superblock whose table checks out (or the one of
 * role.at_gen), and load it. */
static int load(struct hmm_store *s, struct hmm_sb sb[2], int ok[2])
{
	int order[2] = { 0, 1 }, err = -EIO;

	if (ok[0] && ok[1] && sb[1].generation > sb[0].generation) {
		order[0] = 1;
		order[1] = 0;
	}
	for (int k = 0; k < 2; k++) {
		int i = order[k];
		uint8_t *t;

		if (!ok[i] || (s->role.at_gen &&
			       sb[i].generation != s->role.at_gen))
			continue;
		s->sb = sb[i];
		err = read_table(s, &sb[i], &t);
		if (err == -EBADMSG) {
			note(s, "superblock %d (generation %llu) names a damaged "
			     "table: using the other", i,
			     (unsigned long long)sb[i].generation);
			continue;
		}
		if (err)
			return hmm_err(err, "store %s: reading the table at "
				       "offset %llu: %s", s->path,
				       (unsigned long long)sb[i].table_off[i],
				       errstr(err));
		err = setup_tables(s);
		if (!err)
			err = load_table(s, t);
		free(t);
		if (!err && s->role.at_gen && ok[1 - i] &&
		    sb[1 - i].generation > s->role.at_gen)
			err = drop_slot(s, 1 - i, sb[1 - i].generation);
		return err == -ENOMEM ? hmm_err(err, "store %s: out of memory",
						s->path) : err;
	}
	if (s->role.at_gen)
		return hmm_err(-ESTALE, "store %s: no intact table of generation "
			       "%llu, which the other members of its striped "
			       "store hold", s->path,
			       (unsigned long long)s->role.at_gen);
	return hmm_err(-EUCLEAN, "store %s: no superblock names an intact "
		       "table", s->path);
}

static int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* A loaded store is what the opener takes it for: plain, or the member
 * of the striped store it names in its place. */
static int check_role(struct hmm_store *s)
{
	const struct hmm_sb *sb = &s->sb;
	const struct store_role *r = &s->role;

	if (!r->member && sb->set_count)
		return hmm_err(-EINVAL, "store %s: member %u of a striped store "
			       "of %u: open it with every member's path, in "
			       "order", s->path, sb->set_index, sb->set_count);
	if (!r->member)
		return 0;
	if (!sb->set_count)
		return hmm_err(-EINVAL, "store %s: a plain store, not a member "
			       "of a striped store", s->path);
	if (!r->any_uuid && sb->set_uuid != r->set_uuid)
		return hmm_err(-EXDEV, "store %s: a member of another striped "
			       "store (set %016llx, not %016llx)", s->path,
			       (unsigned long long)sb->set_uuid,
			       (unsigned long long)r->set_uuid);
	if (sb->set_index != r->index || sb->set_count != r->count)
		return hmm_err(-EINVAL, "store %s: member %u of a striped store "
			       "of %u, named as member %u of %u (a member "
			       "missing, added or out of order?)", s->path,
			       sb->set_index, sb->set_count, r->index, r->count);
	return 0;
}

/* Load the store in the file, or format one; see hmm_store_config. */
static int format_or_load(struct hmm_store *s,
			  const struct hmm_store_config *cfg, uint64_t have,
			  int blk)
{
	struct hmm_sb sb[2];
	int ok[2] = { 0, 0 }, r[2] = { -ENODATA, -ENODATA }, err = 0;
	const char *why[2] = { "magic", "magic" };
	uint8_t *slots = aligned(2 * HMM_SB_BYTES);
	int empty = 1;

	if (!slots)
		return hmm_err(-ENOMEM, "store %s: out of memory", s->path);
	if (have >= 2 * HMM_SB_BYTES) {
		err = sync_rw(s->fd, 0, slots, 2 * HMM_SB_BYTES, 0);
		if (err == -EINVAL && s->direct) {
			go_buffered(s, "refused by the file system");
			err = sync_rw(s->fd, 0, slots, 2 * HMM_SB_BYTES, 0);
		}
		if (err) {
			free(slots);
			return hmm_err(err, "store %s: reading the superblocks "
				       "at offset 0: %s", s->path, errstr(err));
		}
		for (int i = 0; i < 2; i++) {
			r[i] = hmm_sb_decode(slots + i * HMM_SB_BYTES, have,
					     &sb[i], &why[i]);
			if (!r[i] && sb[i].slot != (uint32_t)i) {
				r[i] = -EBADMSG;	/* another slot's */
				why[i] = "slot";
			}
			ok[i] = r[i] == 0;
		}
		empty = all_zero(slots, 2 * HMM_SB_BYTES);
	} else if (have) {
		empty = 0;
	}
	free(slots);
	if (cfg->flags & HMM_STORE_TRUNCATE)
		goto fmt;
	if (ok[0] || ok[1]) {
		for (int i = 0; i < 2; i++)
			if (r[i] == -EBADMSG)
				note(s, "superblock %d at offset %d refused "
				     "(%s): using the other", i,
				     i * HMM_SB_BYTES, why[i]);
		err = load(s, sb, ok);
		if (!err)
			err = check_role(s);
		if (!err && cfg->size && cfg->size != s->sb.store_bytes)
			note(s, "size %llu ignored: the store keeps its %llu bytes",
			     (unsigned long long)cfg->size,
			     (unsigned long long)s->sb.store_bytes);
		return err;
	}
	if (r[0] == -EPROTONOSUPPORT || r[1] == -EPROTONOSUPPORT)
		return hmm_err(-EPROTONOSUPPORT, "store %s: written by another "
			       "version of the format", s->path);
	if (r[0] == -EBADMSG || r[1] == -EBADMSG)
		return hmm_err(-EUCLEAN, "store %s: both superblocks are "
			       "damaged (superblock 0 at offset 0: %s; "
			       "superblock 1 at offset %d: %s)", s->path,
			       why[0], HMM_SB_BYTES, why[1]);
	if (!(cfg->flags & HMM_STORE_CREATE))
		return hmm_err(-ENODATA, "store %s: no store here (open with "
			       "HMM_STORE_CREATE to make one)", s->path);
	if (!empty)
		return hmm_err(-EEXIST, "store %s: foreign data: first bytes "
			       "are not an hmm superblock (%llu bytes; only an "
			       "explicit format overwrites them: "
			       "HMM_CONFIG_STORE_FORMAT, --format)", s->path,
			       (unsigned long long)have);
fmt:
	err = format(s, cfg, have, blk);
	if (err)
		return err;
	return setup_tables(s);
}

static int setup_io(struct hmm_store *s, const struct hmm_store_config *cfg)
{
	unsigned depth = cfg->queue_depth ? cfg->queue_depth : DEF_DEPTH;
	int err;

	if (s->role.pool) {
		s->pool = s->role.pool;	/* the set's: stripe.c notes it */
	} else {
		err = hmm_pool_new(cfg->pool_bytes ? cfg->pool_bytes : DEF_POOL,
				   cfg->numa_node, cfg->pool_flags, &s->pool);
		if (err)
			return err;
		if (!hmm_pool_locked(s->pool))
			note(s, "pool not mlock'd (RLIMIT_MEMLOCK)");
	}
	err = hmm_uring_init(&s->u, depth, s->fd,
			     !!(cfg->flags & HMM_STORE_SQPOLL));
	if (err == -EPERM || err == -ENOSYS || err == -EACCES) {
		/* io_uring disabled (seccomp, sysctl) or absent */
		s->u.depth = depth;
		s->sync_io = 1;
		note(s, "io_uring refused (%s): synchronous pread/pwrite",
		     errstr(err));
		return 0;
	}
	if (err)
		return hmm_err(err, "store %s: io_uring_setup with %u entries: "
			       "%s", s->path, depth, errstr(err));
	s->ring_up = 1;
	if ((cfg->flags & HMM_STORE_SQPOLL) &&
	    !(s->u.flags & IORING_SETUP_SQPOLL))
		note(s, "SQPOLL refused");
	if (!(s->u.flags & IORING_SETUP_SINGLE_ISSUER))
		note(s, "no SINGLE_ISSUER ring");
	if (!s->u.fixed_file)
		note(s, "file not registered with io_uring");
	err = hmm_uring_register_buffers(&s->u, hmm_pool_base(s->pool),
					 hmm_pool_size(s->pool));
	s->bufs_registered = !err;
	if (err)
		note(s, "pool buffers not registered (%s): plain reads and "
		     "writes", errstr(err));
	return 0;
}

static void refresh(struct hmm_store *s)
{
	pthread_mutex_lock(&s->stat_lock);
	s->st.used_bytes = hmm_ext_used(&s->ext) * s->sb.block_size;
	s->st.quarantined_bytes = s->ext.quar_units * s->sb.block_size;
	s->st.extents = s->map.n;
	s->st.generation = s->sb.generation;
	s->st.capacity_bytes = s->sb.data_bytes;
	s->st.data_offset = s->sb.data_off;
	s->st.block_size = s->sb.block_size;
	pthread_mutex_unlock(&s->stat_lock);
}

int hmm_store_open(const struct hmm_store_config *cfg, struct hmm_store **out)
{
	if (cfg && cfg->path && strchr(cfg->path, ','))
		return stripe_open(cfg, out);
	return store_open(cfg, NULL, out);
}

int store_open(const struct hmm_store_config *cfg,
	       const struct store_role *role, struct hmm_store **out)
{
	struct hmm_store *s;
	uint64_t have = 0;
	int created = 0, err;
	struct stat st;

	if (!cfg || !out || !cfg->path || !*cfg->path)
		return hmm_err(-EINVAL, "store: no configuration or path");
	if (cfg->flags & ~KNOWN_FLAGS || cfg->queue_depth > MAX_DEPTH ||
	    (cfg->block_size && (cfg->block_size < 4096 ||
				 (cfg->block_size & (cfg->block_size - 1)))))
		return hmm_err(-EINVAL, "store %s: bad flags %#x, queue depth "
			       "%u or block size %u", cfg->path, cfg->flags,
			       cfg->queue_depth, cfg->block_size);
	err = hmm_fault_init_env();
	if (err)
		return hmm_err(err, "store %s: HMM_FAULT is malformed",
			       cfg->path);
	s = calloc(1, sizeof(*s));
	if (!s || !(s->path = strdup(cfg->path))) {
		free(s);
		return hmm_err(-ENOMEM, "store %s: out of memory", cfg->path);
	}
	pthread_mutex_init(&s->stat_lock, NULL);
	s->flags = cfg->flags;
	if (role)
		s->role = *role;
	err = open_file(s, cfg, &created, &have);
	if (err)
		goto out_close;
	fstat(s->fd, &st);
	err = format_or_load(s, cfg, have, S_ISBLK(st.st_mode));
	if (err)
		goto out_close;
	err = setup_io(s, cfg);
	if (err)
		goto out_close;
	refresh(s);
	s->created = created;
	*out = s;
	return 0;

out_close:
	if (created && s->fd >= 0)
		unlink(s->path);	/* leave nothing we made */
	hmm_store_close(s);
	return err;
}

void hmm_store_close(struct hmm_store *s)
{
	if (!s)
		return;
	if (s->stripe) {
		stripe_close(s);
		return;
	}
	if (s->inflight && (s->sync_io ||
			    (s->ring_up && hmm_uring_claim(&s->u) == 0)))
		store_drain(s);
	if (s->ring_up)
		hmm_uring_fini(&s->u);
	if (!s->role.pool)
		hmm_pool_delete(s->pool);
	if (s->fd >= 0) {
		/* now: the ring may hold the file a while after its fini */
		flock(s->fd, LOCK_UN);
		close(s->fd);
	}
	hmm_ext_fini(&s->ext);
	hmm_xmap_fini(&s->map);
	pthread_mutex_destroy(&s->stat_lock);
	free(s->meta);
	free(s->path);
	free(s);
}

uint64_t hmm_store_size_for(uint64_t extents, uint32_t extent_bytes)
{
	uint64_t s = hmm_sb_size_for(extents, DEF_BLOCK, extent_bytes, DEF_META);
	uint64_t want = (extents + HMM_SB_SLACK(extents)) * extent_bytes, need;
	struct hmm_sb sb;

	/* a store of up to 1 << 22 blocks gets per-block tables (format):
	 * grow s until their data area holds as much as the formula's */
	while (s && (s - 2 * HMM_SB_BYTES) / DEF_BLOCK <= (1u << 22) &&
	       !hmm_sb_layout(s, DEF_BLOCK, 0, DEF_META, &sb, &need) &&
	       sb.data_bytes < want)
		s += (want - sb.data_bytes + DEF_BLOCK - 1) / DEF_BLOCK *
		     DEF_BLOCK;
	return s;
}

struct hmm_pool *hmm_store_pool(struct hmm_store *s)
{
	return s->stripe ? stripe_pool(s) : s->pool;
}

const char *hmm_store_note(struct hmm_store *s)
{
	return s->stripe ? stripe_note(s) : s->note;
}

void hmm_store_stats(struct hmm_store *s, struct hmm_store_stats *st)
{
	if (s->stripe) {
		stripe_stats(s, st);
		return;
	}
	pthread_mutex_lock(&s->stat_lock);
	*st = s->st;
	pthread_mutex_unlock(&s->stat_lock);
	st->direct = s->direct;
	st->tmpfs = s->tmpfs;
	st->registered_files = s->u.fixed_file;
	st->registered_buffers = s->bufs_registered;
	st->sqpoll = !!(s->u.flags & IORING_SETUP_SQPOLL);
	st->ring_flags = s->u.flags & ~IORING_SETUP_R_DISABLED;
	st->queue_depth = s->u.depth;
	st->pool_bytes = hmm_pool_size(s->pool);
	st->pool_used_bytes = hmm_pool_used(s->pool);
	st->pool_huge = hmm_pool_huge(s->pool);
	st->pool_locked = hmm_pool_locked(s->pool);
	st->inflight = __atomic_load_n(&s->inflight, __ATOMIC_RELAXED);
	st->members = 1;
}

/* ---- extents and the table ------------------------------------------ */

int64_t hmm_store_extent_len(struct hmm_store *s, uint64_t key)
{
	struct hmm_xent *e;

	if (s->stripe)
		s = stripe_member_of(s, key);
	e = hmm_xmap_get(&s->map, key);

	return e ? (int64_t)e->len : -ENOENT;
}

int hmm_store_extent_where(struct hmm_store *s, uint64_t key,
			   uint64_t *file_off)
{
	struct hmm_xent *e;

	if (s->stripe)
		s = stripe_member_of(s, key);
	e = hmm_xmap_get(&s->map, key);

	if (!e)
		return hmm_err(-ENOENT, "store %s: no extent %#llx", s->path,
			       (unsigned long long)key);
	*file_off = s->sb.data_off + e->blk * s->sb.block_size;
	return 0;
}

const char *hmm_store_extent_path(struct hmm_store *s, uint64_t key)
{
	if (s->stripe)
		s = stripe_member_of(s, key);
	return hmm_xmap_get(&s->map, key) ? s->path : NULL;
}

int hmm_store_extent_free(struct hmm_store *s, uint64_t key)
{
	struct hmm_xent old;

	if (s->stripe)
		s = stripe_member_of(s, key);
	if (hmm_xmap_del(&s->map, key, &old))
		return hmm_err(-ENOENT, "store %s: no extent %#llx", s->path,
			       (unsigned long long)key);
	store_release_place(s, &old);
	refresh(s);
	return 0;
}

int hmm_store_extent_each(struct hmm_store *s,
			  int (*fn)(void *arg, uint64_t key, uint32_t len),
			  void *arg)
{
	size_t n;
	struct hmm_xent *v;
	int r = 0;

	if (s->stripe)
		return stripe_each(s, fn, arg);
	v = hmm_xmap_sorted(&s->map, &n);
	if (!v && n)
		return hmm_err(-ENOMEM, "store %s: out of memory", s->path);
	for (size_t i = 0; i < n && !r; i++)
		r = fn(arg, v[i].key, v[i].len);
	free(v);
	return r;
}

int hmm_store_meta_set(struct hmm_store *s, const void *blob, size_t len)
{
	void *m = NULL;

	if (s->stripe)
		s = stripe_member(s, 0);	/* the set's blob is member 0's */
	if (len > s->sb.meta_cap)
		return hmm_err(-ENOSPC, "store %s: meta blob of %zu bytes, room "
			       "for %u", s->path, len, s->sb.meta_cap);
	if (len && !blob)
		return hmm_err(-EINVAL, "store %s: meta blob is NULL", s->path);
	if (len && !(m = malloc(len)))
		return hmm_err(-ENOMEM, "store %s: out of memory", s->path);
	if (len)
		memcpy(m, blob, len);
	free(s->meta);
	s->meta = m;
	s->meta_len = (uint32_t)len;
	return 0;
}

int hmm_store_meta_get(struct hmm_store *s, void *blob, size_t cap)
{
	if (s->stripe)
		s = stripe_member(s, 0);
	if (cap && !blob)
		return hmm_err(-EINVAL, "store %s: meta buffer is NULL", s->path);
	if (cap && s->meta_len)
		memcpy(blob, s->meta, cap < s->meta_len ? cap : s->meta_len);
	return (int)s->meta_len;
}

/* Write len bytes of buf at file offset off through the ring; wait. */
static int ring_write(struct hmm_store *s, void *buf, uint32_t len,
		      uint64_t off)
{
	struct hmm_io io = { .buf = buf, .len = len, .s_off = off };
	int err = store_queue_abs_write(s, &io);

	if (err && io.s_state != ST_QUEUED && io.s_state != ST_RING)
		return err;
	return hmm_store_wait(s, &io);
}

static int sync_file(struct hmm_store *s, const char *what)
{
	if (fdatasync(s->fd) == 0)
		return 0;
	return hmm_err(-errno, "store %s: fdatasync after %s: %s", s->path,
		       what, errstr(errno));
}

int hmm_store_flush(struct hmm_store *s)
{
	struct hmm_sb nsb;
	int err;

	if (s->stripe)
		return stripe_flush(s);
	err = store_flush_commit(s, &nsb);
	if (!err)
		store_flush_settle(s, &nsb);
	return err;
}

int store_flush_commit(struct hmm_store *s, struct hmm_sb *out)
{
	struct hmm_sb nsb = s->sb;
	struct hmm_xent *v;
	uint64_t tbytes, len;
	uint8_t *buf = NULL;
	size_t n;
	int err;

	err = store_drain(s);
	if (err)
		return err;
	v = hmm_xmap_sorted(&s->map, &n);
	tbytes = hmm_table_bytes(n, s->meta_len);
	len = (tbytes + 4095) / 4096 * 4096;
	if (len < HMM_SB_BYTES)
		len = HMM_SB_BYTES;
	/* never past the area: the next one holds the live table */
	if (len > s->sb.table_cap) {
		err = hmm_err(-ENOSPC, "store %s: a table of %llu bytes, its "
			      "area at offset %llu holds %llu", s->path,
			      (unsigned long long)len,
			      (unsigned long long)s->sb.table_off[1 - s->sb.slot],
			      (unsigned long long)s->sb.table_cap);
		goto out;
	}
	if ((!v && n) || !(buf = aligned(len))) {
		err = hmm_err(-ENOMEM, "store %s: out of memory", s->path);
		goto out;
	}
	nsb.slot = 1 - s->sb.slot;
	nsb.generation = s->sb.generation + 1;
	nsb.nextents = n;
	nsb.meta_len = s->meta_len;
	nsb.table_crc = hmm_table_encode(buf, v, n, s->meta, s->meta_len);
	err = ring_write(s, buf, (uint32_t)len, nsb.table_off[nsb.slot]);
	if (!err)
		err = sync_file(s, "the data and table");
	if (err)
		goto out;
	hmm_sb_encode(&nsb, buf);
	err = ring_write(s, buf, HMM_SB_BYTES, nsb.slot * HMM_SB_BYTES);
	if (!err)
		err = sync_file(s, "the superblock");
	/*
	 * A failed superblock write may still have reached the disk: from
	 * now on treat every placement as flushed (replacing one
	 * quarantines it), and keep the quarantine until a flush succeeds.
	 */
	for (size_t i = 0; i < s->map.cap; i++)
		s->map.v[i].on_disk = s->map.v[i].used;
	*out = nsb;
out:
	free(buf);
	free(v);
	return err;
}

void store_flush_settle(struct hmm_store *s, const struct hmm_sb *nsb)
{
	s->sb = *nsb;
	hmm_ext_release(&s->ext);
	pthread_mutex_lock(&s->stat_lock);
	s->st.flushes++;
	pthread_mutex_unlock(&s->stat_lock);
	refresh(s);
}
