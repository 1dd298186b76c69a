// SPDX-License-Identifier: MIT
/*
 * test_store_paths — where a store may and may not live: ENOENT, EISDIR,
 * EACCES (as user nobody), a character device, tmpfs (buffered, said in
 * stats), RLIMIT_MEMLOCK refusing the pool (unregistered, said in stats),
 * sizes too small (-ENOSPC, nothing lost), a full store and a full table
 * (-ENOSPC, what was there stays), and space freed since the last flush
 * coming back only after the next one (copy-on-write).
 */
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <linux/magic.h>

#include "store_t.h"

static int open_cfg(const char *path, uint64_t size, uint32_t flags,
		    struct hmm_store **s)
{
	struct hmm_store_config c = { .path = path, .size = size,
				      .flags = flags, .pool_bytes = 4 << 20,
				      .numa_node = -1 };

	*s = NULL;
	return hmm_store_open(&c, s);
}

static int exists(const char *p)
{
	struct stat st;

	return stat(p, &st) == 0;
}

/* Run fn as user nobody in a child; its exit status, or -1. */
static int as_nobody(int (*fn)(const char *), const char *path)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		struct rlimit rl = { 1 << 20, 1 << 20 };

		setrlimit(RLIMIT_MEMLOCK, &rl);
		if (setgid(65534) || setuid(65534))
			_exit(77);
		_exit(fn(path));
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* 0 when nobody can reach and open path read-write. */
static int nobody_reach(const char *path)
{
	return access(path, R_OK | W_OK) == 0 ? 0 : 1;
}

static int nobody_open(const char *path)
{
	struct hmm_store *s;
	int r = open_cfg(path, 0, 0, &s);

	hmm_store_close(s);
	return r == -EACCES ? 0 : 1;
}

/* Exit 0 when open works with an unregistered pool, the note says so,
 * and I/O still round-trips. */
static int nobody_memlock(const char *path)
{
	struct hmm_store *s;
	struct hmm_store_stats st;
	uint8_t *b, *c;

	if (open_cfg(path, 0, 0, &s))
		return 1;
	hmm_store_stats(s, &st);
	/* pool_locked is not checked: ASan's mlock() does nothing, says 0 */
	if (st.registered_buffers ||
	    !strstr(hmm_store_note(s), "not registered"))
		return 2;
	b = hmm_pool_alloc(hmm_store_pool(s), 8192);
	c = hmm_pool_alloc(hmm_store_pool(s), 8192);
	t_fill(b, 8192, 3);
	if (st_io(s, HMM_IO_WRITE, 9, 0, b, 8192) ||
	    st_io(s, HMM_IO_READ, 9, 0, c, 8192) || memcmp(b, c, 8192))
		return 3;
	hmm_store_close(s);
	return 0;
}

static void permissions(void)
{
	const char *dir = st_path("perm");
	char priv[4200], pub[4200];
	struct hmm_store *s;
	int r;

	mkdir(dir, 0755);
	chmod(t_tmpdir(), 0755);
	snprintf(priv, sizeof(priv), "%s/private.store", dir);
	snprintf(pub, sizeof(pub), "%s/public.store", dir);
	if (open_cfg(priv, 4 << 20, HMM_STORE_CREATE, &s))
		t_fail_all("create %s: %s", priv, hmm_last_error());
	hmm_store_close(s);
	if (open_cfg(pub, 4 << 20, HMM_STORE_CREATE, &s))
		t_fail_all("create %s: %s", pub, hmm_last_error());
	hmm_store_close(s);
	chmod(priv, 0600);
	chmod(pub, 0666);
	r = as_nobody(nobody_reach, pub);
	if (r == 77 || r == 1) {
		/* not root, or the build tree is under a private directory */
		t_ok(1, "# SKIP nobody cannot %s", r == 77 ? "be had" :
		     "reach the build tree");
		return;
	}
	r = as_nobody(nobody_open, priv);
	t_eq(r, 0, "mode 0600 file as nobody: -EACCES");
	t_eq(as_nobody(nobody_memlock, pub), 0,
	     "RLIMIT_MEMLOCK 1 MiB: pool not registered, said so, I/O works");
}

static void bad_paths(void)
{
	struct hmm_store *s;
	const char *missing = st_path("missing.store");
	char deep[4200];

	t_eq(open_cfg(missing, 0, 0, &s), -ENOENT, "missing file: -ENOENT");
	t_ok(strstr(hmm_last_error(), missing) != NULL, "detail: %s",
	     hmm_last_error());
	snprintf(deep, sizeof(deep), "%s/no/such/dir.store", t_tmpdir());
	t_eq(open_cfg(deep, 1 << 20, HMM_STORE_CREATE, &s), -ENOENT,
	     "missing directory: -ENOENT");
	t_eq(open_cfg(t_tmpdir(), 1 << 20, HMM_STORE_CREATE, &s), -EISDIR,
	     "a directory: -EISDIR");
	t_eq(open_cfg("/dev/null", 0, 0, &s), -EINVAL,
	     "a character device: -EINVAL");
	t_eq(open_cfg(missing, 0, HMM_STORE_CREATE, &s), -EINVAL,
	     "creating without a size: -EINVAL");
	t_ok(!exists(missing), "and no file is left behind");
}

static void on_tmpfs(void)
{
	struct statfs fs;
	struct hmm_store *s;
	struct hmm_store_stats st;
	char path[64];
	uint8_t *b, *c;

	if (statfs("/dev/shm", &fs) || fs.f_type != TMPFS_MAGIC) {
		t_ok(1, "# SKIP /dev/shm is not tmpfs");
		return;
	}
	snprintf(path, sizeof(path), "/dev/shm/hmm-test-%d.store", getpid());
	t_eq(open_cfg(path, 4 << 20, HMM_STORE_CREATE, &s), 0, "store on tmpfs");
	hmm_store_stats(s, &st);
	t_eq(st.direct, 0, "tmpfs: buffered");
	t_eq(st.tmpfs, 1, "tmpfs: flagged");
	t_ok(strstr(hmm_store_note(s), "O_DIRECT") != NULL, "note: %s",
	     hmm_store_note(s));
	b = hmm_pool_alloc(hmm_store_pool(s), 8192);
	c = hmm_pool_alloc(hmm_store_pool(s), 8192);
	t_fill(b, 8192, 1);
	t_ok(st_io(s, HMM_IO_WRITE, 1, 0, b, 8192) == 0 &&
	     st_io(s, HMM_IO_READ, 1, 0, c, 8192) == 0 && !memcmp(b, c, 8192),
	     "tmpfs: round trip");
	t_eq(hmm_store_flush(s), 0, "tmpfs: flush");
	hmm_store_close(s);
	t_eq(open_cfg(path, 0, HMM_STORE_BUFFERED, &s), 0,
	     "reopen with HMM_STORE_BUFFERED");
	t_eq(hmm_store_extent_len(s, 1), 8192, "tmpfs: extent kept");
	hmm_store_close(s);
	unlink(path);
}

static void too_small(void)
{
	const char *fresh = st_path("small.store"), *old = st_path("old.bin");
	struct hmm_store *s;
	char text[8192], back[8192];
	int fd;

	t_eq(open_cfg(fresh, 16384, HMM_STORE_CREATE, &s), -ENOSPC,
	     "16 KiB cannot hold a store: -ENOSPC");
	t_ok(strstr(hmm_last_error(), "needs at least"), "detail: %s",
	     hmm_last_error());
	t_ok(!exists(fresh), "nothing left behind");
	/* the size it names holds one, and 4 KiB less does not (a size's
	   own need fell short: a larger store has larger tables) */
	{
		const char *p = strstr(hmm_last_error(), "needs at least ");
		unsigned long long need = p ? strtoull(p + 15, NULL, 10) : 0;

		t_eq(open_cfg(fresh, need - 4096, HMM_STORE_CREATE, &s),
		     -ENOSPC, "%llu bytes, 4 KiB short of the need named: "
		     "-ENOSPC", need - 4096);
		t_eq(open_cfg(fresh, need, HMM_STORE_CREATE, &s), 0,
		     "%llu bytes, the need named: a store (%s)", need,
		     hmm_last_error());
		if (s)
			hmm_store_close(s);
		unlink(fresh);
	}

	memset(text, 'y', sizeof(text));
	fd = open(old, O_CREAT | O_RDWR | O_TRUNC, 0600);
	if (fd < 0 || write(fd, text, sizeof(text)) != sizeof(text))
		t_fail_all("write %s", old);
	close(fd);
	t_eq(open_cfg(old, 16384, HMM_STORE_CREATE | HMM_STORE_TRUNCATE, &s),
	     -ENOSPC, "too small to format an existing file: -ENOSPC");
	fd = open(old, O_RDONLY);
	t_ok(fd >= 0 && read(fd, back, sizeof(back)) == sizeof(back) &&
	     !memcmp(back, text, sizeof(text)), "the file keeps what it had");
	close(fd);
}

static void full(void)
{
	const char *path = st_path("full.store");
	struct hmm_store *s;
	struct hmm_store_stats st;
	uint8_t *b, *c;
	int n = 0, ok = 1;
	struct hmm_store_config cfg = { .path = path, .size = 2 << 20,
					.flags = HMM_STORE_CREATE,
					.max_extents = 64, .meta_bytes = 4096,
					.pool_bytes = 1 << 20, .numa_node = -1 };

	if (hmm_store_open(&cfg, &s))
		t_fail_all("open %s: %s", path, hmm_last_error());
	b = hmm_pool_alloc(hmm_store_pool(s), 65536);
	c = hmm_pool_alloc(hmm_store_pool(s), 65536);
	hmm_store_stats(s, &st);
	for (;;) {
		int r;

		t_fill(b, 65536, n);
		r = st_io(s, HMM_IO_WRITE, n, 0, b, 65536);
		if (r) {
			t_eq(r, -ENOSPC, "a full store: -ENOSPC after %d extents", n);
			break;
		}
		n++;
	}
	t_eq(n, st.capacity_bytes / 65536, "exactly capacity / 64 KiB fit");
	t_ok(strstr(hmm_last_error(), "no room"), "detail: %s", hmm_last_error());
	for (int k = 0; k < n; k++) {
		t_fill(b, 65536, k);
		ok &= st_io(s, HMM_IO_READ, k, 0, c, 65536) == 0 &&
		      !memcmp(b, c, 65536);
	}
	t_ok(ok, "everything written before stays byte-exact");
	t_eq(hmm_store_flush(s), 0, "flush a full store");

	/* copy-on-write: a flushed extent's space is reused after a flush */
	t_eq(hmm_store_extent_free(s, 0), 0, "free a flushed extent");
	t_eq(st_io(s, HMM_IO_WRITE, 1000, 0, b, 65536), -ENOSPC,
	     "its space is quarantined until the next flush");
	hmm_store_stats(s, &st);
	t_eq(st.quarantined_bytes, 65536, "stats: 64 KiB quarantined");
	t_eq(st_io(s, HMM_IO_WRITE, 1, 0, b, 65536), -ENOSPC,
	     "rewriting a flushed extent needs fresh space too");
	t_eq(hmm_store_flush(s), 0, "flush");
	t_eq(st_io(s, HMM_IO_WRITE, 1000, 0, b, 65536), 0, "now it fits");
	hmm_store_close(s);

	/* a full table */
	cfg.size = 4 << 20;
	cfg.max_extents = 4;
	cfg.flags = HMM_STORE_CREATE | HMM_STORE_TRUNCATE;
	if (hmm_store_open(&cfg, &s))
		t_fail_all("open %s: %s", path, hmm_last_error());
	b = hmm_pool_alloc(hmm_store_pool(s), 4096);
	for (int k = 0; k < 4; k++)
		st_io(s, HMM_IO_WRITE, k, 0, b, 4096);
	t_eq(st_io(s, HMM_IO_WRITE, 4, 0, b, 4096), -ENOSPC,
	     "a 5th key with max_extents 4: -ENOSPC");
	t_ok(strstr(hmm_last_error(), "table full"), "detail: %s",
	     hmm_last_error());
	t_eq(st_io(s, HMM_IO_WRITE, 3, 0, b, 4096), 0,
	     "rewriting a 4th still works");
	hmm_store_close(s);
}

int main(void)
{
	bad_paths();
	permissions();
	on_tmpfs();
	too_small();
	full();
	return t_done();
}
