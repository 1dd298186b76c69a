// SPDX-License-Identifier: MIT
/*
 * test_host_dir — config.host_dir: with HMM_CONFIG_HOST_SHARED each
 * tensor's host memory is an unnamed file in that tmpfs (not a memfd);
 * bad directories are refused with their path named; on a tmpfs mounted
 * with huge=within_size (we mount one when we may) a mapped chunk is
 * backed by 2 MiB pages, which is the point of the option.
 */
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "t.h"

#include "hmm.h"

#define CHUNK	(2u << 20)
#define TBYTES	(4ull * CHUNK)

/* kB of "FilePmdMapped:"/"ShmemPmdMapped:" in the smaps entry of addr. */
static long pmd_kb(const void *addr)
{
	unsigned long lo, hi, a = (unsigned long)addr;
	char line[256];
	long kb = -1, v;
	int in = 0;
	FILE *f = fopen("/proc/self/smaps", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			in = a >= lo && a < hi;
			continue;
		}
		if (in && (sscanf(line, "FilePmdMapped: %ld", &v) == 1 ||
			   sscanf(line, "ShmemPmdMapped: %ld", &v) == 1))
			kb = (kb < 0 ? 0 : kb) + v;
	}
	fclose(f);
	return kb;
}

static void config(struct hmm_config *cfg, char *store, size_t len)
{
	snprintf(store, len, "%s/store", t_tmpdir());
	hmm_config_default(cfg);
	cfg->store_path = store;
	cfg->store_size = 64 << 20;
	cfg->host_budget = 8 << 20;
	cfg->chunk_bytes = CHUNK;
	cfg->flags = HMM_CONFIG_HOST_SHARED;
}

/* A tensor in dir: its fd is a tmpfs file with no name; bytes kept. */
static void check_dir(const char *dir, int want_huge)
{
	char store[4200];
	struct hmm_config cfg;
	struct hmm_tensor *t;
	struct statfs sf;
	struct stat st;
	int64_t n = TBYTES;
	uint64_t off;
	uint8_t *p;
	struct hmm *h;
	long kb;
	int fd;

	config(&cfg, store, sizeof(store));
	cfg.host_dir = dir;
	if (hmm_open(&cfg, &h) || hmm_tensor_new(h, "w", HMM_DTYPE_U8, 1, &n,
						 &t))
		t_fail_all("open with host_dir %s: %s", dir,
			   hmm_last_error());
	t_eq(hmm_tensor_host_fd(t, &fd, &off), 0, "%s: host fd", dir);
	t_ok(!fstatfs(fd, &sf) && sf.f_type == TMPFS_MAGIC &&
	     !fstat(fd, &st) && st.st_nlink == 0,
	     "%s: the fd is an unlinked tmpfs file", dir);
	t_ok(hmm_map(t, 0, CHUNK, HMM_TIER_HOST, HMM_WRITE | HMM_DISCARD,
		     (void **)&p) == 0, "%s: map a chunk for write", dir);
	memset(p, 0x5a, CHUNK);
	kb = pmd_kb(p);
	if (want_huge)
		t_ok(kb >= 2048, "%s: the chunk is on 2 MiB pages (%ld kB "
		     "PMD-mapped)", dir, kb);
	t_eq(hmm_unmap(t, p), 0, "%s: unmap", dir);
	/* push it out to the store and back: the bytes survive */
	t_eq(hmm_evict(t, 0, CHUNK, HMM_TIER_HOST), 0, "%s: evict", dir);
	t_eq(hmm_wait(h, t), 0, "%s: wait", dir);
	t_ok(hmm_map(t, 0, CHUNK, HMM_TIER_HOST, HMM_READ, (void **)&p) == 0 &&
	     p[0] == 0x5a && p[CHUNK - 1] == 0x5a, "%s: read back", dir);
	hmm_unmap(t, p);
	hmm_tensor_free(t);
	hmm_close(h);
}

int main(void)
{
	char store[4200], huge[4200], plain[4200];
	struct hmm_config cfg;
	struct hmm *h;
	int mounted;

	config(&cfg, store, sizeof(store));
	cfg.flags = 0;
	cfg.host_dir = "/dev/shm";
	t_eq(hmm_open(&cfg, &h), -EINVAL, "host_dir without HOST_SHARED: "
	     "-EINVAL (%s)", hmm_last_error());
	t_ok(strstr(hmm_last_error(), "/dev/shm") != NULL, "names the dir");

	config(&cfg, store, sizeof(store));
	snprintf(plain, sizeof(plain), "%s/no-such-dir", t_tmpdir());
	cfg.host_dir = plain;
	t_eq(hmm_open(&cfg, &h), -ENOENT, "missing dir: -ENOENT (%s)",
	     hmm_last_error());
	t_ok(strstr(hmm_last_error(), plain) != NULL, "names the path");
	cfg.host_dir = t_tmpdir();	/* a real file system, not tmpfs */
	t_eq(hmm_open(&cfg, &h), -EINVAL, "a disk directory: -EINVAL (%s)",
	     hmm_last_error());
	t_ok(strstr(hmm_last_error(), "not a tmpfs") != NULL,
	     "says why");

	check_dir("/dev/shm", 0);

	snprintf(huge, sizeof(huge), "%s/huge-tmpfs", t_tmpdir());
	mkdir(huge, 0700);
	mounted = !mount("hmm-test", huge, "tmpfs", 0,
			 "huge=within_size,size=64M");
	if (mounted) {
		check_dir(huge, 1);
		umount2(huge, MNT_DETACH);
	} else {
		t_ok(1, "huge tmpfs # SKIP mount: %s (needs CAP_SYS_ADMIN)",
		     strerror(errno));
	}
	rmdir(huge);
	return t_done();
}
