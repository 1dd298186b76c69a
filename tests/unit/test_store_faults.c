// SPDX-License-Identifier: MIT
/* test_store_faults — every fault-injection path: eio, enospc and short
 * on reads, writes, RAW ops and flush's table and superblock writes; the
 * HMM_FAULT environment variable; malformed specs.  Errors come back as
 * -errno with the path and offset in hmm_last_error(), nothing aborts,
 * and what was there before stays readable. */
#include <sys/wait.h>

#include "store_t.h"

static char *path;


static int has(const char *what)
{
	return strstr(hmm_last_error(), what) != NULL;
}

/*
 * A child process that has not opened a store yet, so HMM_FAULT is read
 * at its first open: op 1 writes extent 1, ops 2 and 3 read it.  Exit
 * status: 10 when open fails with -EINVAL, else a bit per failed op.
 */
static int env_child(const char *spec, int n)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		char name[32];
		struct hmm_store *s;
		void *b;
		int r, bits = 0;

		snprintf(name, sizeof(name), "env%d.store", n);
		setenv("HMM_FAULT", spec, 1);
		struct hmm_store_config c = { .path = st_path(name),
					      .size = 4 << 20,
					      .flags = HMM_STORE_CREATE,
					      .pool_bytes = 1 << 20,
					      .numa_node = -1 };
		r = hmm_store_open(&c, &s);
		if (r)
			_exit(r == -EINVAL ? 10 : 11);
		b = hmm_pool_alloc(hmm_store_pool(s), 8192);
		bits |= st_io(s, HMM_IO_WRITE, 1, 0, b, 8192) == -EIO;
		bits |= (st_io(s, HMM_IO_READ, 1, 0, b, 8192) == -EIO) << 1;
		bits |= (st_io(s, HMM_IO_READ, 1, 0, b, 8192) == -EIO) << 2;
		hmm_store_close(s);
		_exit(bits);
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int main(void)
{
	struct hmm_store *s;
	struct hmm_store_stats st;
	uint8_t *w, *r;
	uint64_t used;

	/* environment, in children, before this process opens a store;
	 * the folder is made here first, so that this process removes it */
	t_tmpdir();
	t_eq(env_child("eio@2", 1), 2, "HMM_FAULT=eio@2: only the 2nd op fails");
	t_eq(env_child("eio@3,short@1", 2), 4, "HMM_FAULT=eio@3,short@1");
	t_eq(env_child("bogus@1", 3), 10, "HMM_FAULT malformed: open says -EINVAL");
	t_eq(env_child("", 4), 0, "HMM_FAULT empty: nothing fails");

	path = st_path("faults.store");
	s = st_open(path, 32 << 20, HMM_STORE_CREATE, 8);
	w = hmm_pool_alloc(hmm_store_pool(s), 64 << 10);
	r = hmm_pool_alloc(hmm_store_pool(s), 64 << 10);
	t_fill(w, 64 << 10, 1);
	t_eq(st_io(s, HMM_IO_WRITE, 1, 0, w, 8192), 0, "write extent 1");
	t_eq(hmm_store_flush(s), 0, "flush it");
	hmm_store_close(s);

	t_eq(hmm_fault_set("eio@1,short@x"), -EINVAL, "bad count");
	t_eq(hmm_fault_set("eio@0"), -EINVAL, "count 0");
	t_eq(hmm_fault_set("boom@1"), -EINVAL, "unknown kind");
	t_eq(hmm_fault_set("eio"), -EINVAL, "no count");
	t_eq(hmm_fault_set("eio@1,enospc@2,short@3"), 0, "a list parses");
	t_eq(hmm_fault_set(NULL), 0, "clear");

	s = st_open(path, 0, 0, 8);
	w = hmm_pool_alloc(hmm_store_pool(s), 64 << 10);
	r = hmm_pool_alloc(hmm_store_pool(s), 64 << 10);
	t_fill(w, 64 << 10, 2);
	hmm_store_stats(s, &st);
	used = st.used_bytes;

	/* eio on an extent write: error, old version kept, space returned */
	hmm_fault_set("eio@1");
	t_eq(st_io(s, HMM_IO_WRITE, 1, 0, w, 16384), -EIO, "eio on a write");
	t_ok(has(path) && has("offset"), "detail names path and offset: %s",
	     hmm_last_error());
	t_eq(hmm_fault_fired(), 1, "the fault fired once");
	t_eq(hmm_store_extent_len(s, 1), 8192, "the old extent stays");
	hmm_store_stats(s, &st);
	t_eq(st.used_bytes, used, "the failed write's space is back");
	t_eq(st.errors, 1, "stats: one error");

	/* eio on a read */
	hmm_fault_set("eio@1");
	t_eq(st_io(s, HMM_IO_READ, 1, 0, r, 8192), -EIO, "eio on a read");
	t_ok(has("read of 8192 bytes at offset"), "detail: %s", hmm_last_error());
	t_eq(st_io(s, HMM_IO_READ, 1, 0, r, 8192), 0, "the next read works");

	/* enospc on an extent write and a raw write */
	hmm_fault_set("enospc@1,enospc@2");
	t_eq(st_io(s, HMM_IO_WRITE, 2, 0, w, 4096), -ENOSPC, "enospc on a write");
	t_ok(has("No space"), "detail: %s", hmm_last_error());
	t_eq(hmm_store_extent_len(s, 2), -ENOENT, "no extent 2");
	t_eq(st_io(s, HMM_IO_WRITE_RAW, 0, 1 << 20, w, 4096), -ENOSPC,
	     "enospc on a raw write");

	/* short transfers are completed by resubmission */
	hmm_fault_set("short@1,short@2,short@3");
	hmm_store_stats(s, &st);
	used = st.short_resubmits;
	t_eq(st_io(s, HMM_IO_WRITE, 3, 0, w, 64 << 10), 0, "short write completes");
	memset(r, 0, 64 << 10);
	t_eq(st_io(s, HMM_IO_READ, 3, 0, r, 64 << 10), 0, "short read completes");
	t_ok(!memcmp(r, w, 64 << 10), "bytes exact after short transfers");
	t_eq(st_io(s, HMM_IO_WRITE, 4, 0, w, 4096), 0,
	     "a 4096-byte op reported as 0 bytes is retried");
	hmm_store_stats(s, &st);
	t_eq(st.short_resubmits - used, 2, "stats: two short resubmits");
	t_eq(st_io(s, HMM_IO_READ, 4, 0, r, 4096), 0, "and reads back");
	t_ok(!memcmp(r, w, 4096), "exactly");

	/* a batch where the 2nd of 3 fails: the others succeed */
	{
		struct hmm_io io[3], *p[3];

		hmm_fault_set("eio@2");
		for (int i = 0; i < 3; i++) {
			io[i] = (struct hmm_io){ .op = HMM_IO_WRITE, .key = 10 + i,
						 .len = 4096, .buf = w + 4096 * i };
			p[i] = &io[i];
		}
		t_eq(hmm_store_submit(s, p, 3), 3, "batch of 3");
		t_ok(hmm_store_wait(s, &io[0]) == 0 && hmm_store_wait(s, &io[1]) == -EIO &&
		     hmm_store_wait(s, &io[2]) == 0, "only the 2nd fails");
		t_ok(hmm_store_extent_len(s, 11) == -ENOENT &&
		     hmm_store_extent_len(s, 12) == 4096, "and only it is missing");
	}

	/* every kind on every request type */
	{
		static const struct { const char *spec; int want; } k[] = {
			{ "eio@1", -EIO }, { "enospc@1", -ENOSPC },
			{ "short@1", 0 } };
		static const uint32_t ops[] = { HMM_IO_WRITE, HMM_IO_READ,
						HMM_IO_WRITE_RAW, HMM_IO_READ_RAW };
		int bad = 0;

		for (int i = 0; i < 3; i++)
			for (int j = 0; j < 4; j++) {
				int got;

				hmm_fault_set(k[i].spec);
				got = st_io(s, ops[j], 20, 2 << 20, w, 16384);
				if (got != k[i].want || hmm_fault_fired() != 1) {
					t_diag("%s on op %u: %d", k[i].spec, ops[j], got);
					bad++;
				}
				if (ops[j] == HMM_IO_WRITE && k[i].want)
					st_io(s, ops[j], 20, 0, w, 16384);	/* for the read */
			}
		t_eq(bad, 0, "eio, enospc and short on write, read, raw write, raw read");
		hmm_fault_set("enospc@1");
		t_eq(hmm_store_flush(s), -ENOSPC, "enospc on the table write");
	}

	/* flush: op 1 is the table write, op 2 the superblock write */
	hmm_fault_set("eio@1");
	t_eq(hmm_store_flush(s), -EIO, "eio on the table write fails the flush");
	t_ok(has("table write"), "detail: %s", hmm_last_error());
	hmm_store_stats(s, &st);
	t_eq(st.generation, 2, "generation unchanged");
	hmm_fault_set("eio@2");
	t_eq(hmm_store_flush(s), -EIO, "eio on the superblock write fails it");
	hmm_fault_set("short@1,short@2");
	t_eq(hmm_store_flush(s), 0, "short table/superblock writes complete");
	hmm_store_stats(s, &st);
	t_eq(st.generation, 3, "generation 3");
	t_eq(hmm_store_extent_len(s, 20), 16384, "extent 20 flushed");
	hmm_fault_set(NULL);
	hmm_store_close(s);

	s = st_open(path, 0, 0, 8);
	r = hmm_pool_alloc(hmm_store_pool(s), 64 << 10);
	t_eq(st_io(s, HMM_IO_READ, 3, 0, r, 64 << 10), 0, "reopen: extent 3");
	t_fill(w, 64 << 10, 2);
	t_ok(!memcmp(r, w, 64 << 10), "byte-exact");
	t_eq(st_io(s, HMM_IO_READ, 1, 0, r, 8192), 0, "reopen: extent 1");
	t_fill(w, 64 << 10, 1);
	t_ok(!memcmp(r, w, 8192), "still the first version");
	t_eq(hmm_store_extent_len(s, 11), -ENOENT, "failed write never appears");
	t_eq(hmm_store_extent_len(s, 2), -ENOENT, "nor the enospc one");
	hmm_store_close(s);
	return t_done();
}
