/* SPDX-License-Identifier: MIT */
/*
 * ckpt.h — the checkpoint file: what the store does not hold.
 *
 * A checkpoint is a flush of the store (state_flush: libhmm writes the
 * dirty chunks and its table of named tensors, parameters and AdamW
 * moments among them), plus this small file, which says how to continue:
 * format magic and version, the preset and its shape, the learning rate,
 * the step reached, the seed (batches are a function of seed and step),
 * the data's length and FNV-1a hash, the store's path and a tag that the
 * store's "train.ckpt" tensor holds too (so a file and a store that do
 * not belong together are refused), then a CRC-32 of all that.
 *
 * One checkpoint is three steps, so that kill -9 at any point leaves
 * one that resumes: (1) ckpt_stage writes the new file whole to
 * PATH.tmp and fsyncs it; (2) the caller writes the new tag into the
 * store and flushes it (atomic in libhmm: the old flush or the new one);
 * (3) ckpt_commit renames PATH.tmp over PATH and fsyncs the folder.
 * Killed before (2) completes, PATH and the store still agree (the old
 * checkpoint); killed between (2) and (3), PATH lags the store by one
 * checkpoint and PATH.tmp holds the store's: --resume takes PATH.tmp
 * when its tag is the store's (ckpt_read_pending) and completes the
 * rename.  Read back only when magic, version, size and CRC match.
 * HMM_TRAIN_CRASH_AT=staged|flushed|renamed kills the process (SIGKILL)
 * at that point, for tests.
 *
 * The store: "" in the file means PATH.store next to the file (the pair
 * may be moved or copied together); otherwise an absolute path (--store).
 * Threading: one thread.  Returns 0 or -errno with a message in err that
 * names the path.
 */
#ifndef HMM_TRAIN_CKPT_H
#define HMM_TRAIN_CKPT_H

#include <stddef.h>
#include <stdint.h>

struct ckpt_info {
	char preset[32];
	int32_t cfg[6];		/* vocab ctx d heads layers batch */
	double lr;
	int64_t step;		/* steps done */
	uint64_t seed;
	uint64_t data_len, data_hash;
	uint64_t tag[4];	/* also in the store's "train.ckpt" */
	uint64_t state_bytes;	/* for the log: the state the store holds */
	char store[4096];	/* "": PATH.store */
};

uint64_t ckpt_hash(const void *p, size_t n, uint64_t h);	/* FNV-1a */
#define CKPT_HASH0 0xcbf29ce484222325ull

/*
 * Before training: may a checkpoint be written at path?  -EEXIST when a
 * file is there that is not a checkpoint (it would be replaced), -errno
 * when the folder cannot take a file; 0 otherwise.
 */
int ckpt_check_target(const char *path, char *err, size_t cap);

/* Step (1): write in whole to PATH.tmp, synced (see above). */
int ckpt_stage(const char *path, const struct ckpt_info *in, char *err,
	       size_t cap);

/* Step (3): rename PATH.tmp over PATH, sync the folder. */
int ckpt_commit(const char *path, char *err, size_t cap);

/* Drop a staged PATH.tmp (its store flush failed). */
void ckpt_unstage(const char *path);

/* Kill the process with SIGKILL when $HMM_TRAIN_CRASH_AT is point. */
void ckpt_crash_point(const char *point);

/*
 * The staged checkpoint PATH.tmp of path, when it is whole and of the
 * same run as cur (PATH's own, read with ckpt_read): preset, shape,
 * seed, data and store equal, step not older.  0 and *out; -ENOENT
 * when there is none, -EINVAL when it is damaged or another run's.
 */
int ckpt_read_pending(const char *path, const struct ckpt_info *cur,
		      struct ckpt_info *out);

/* Read and check path's file into *out (-EINVAL: not ours, damaged). */
int ckpt_read(const char *path, struct ckpt_info *out, char *err,
	      size_t cap);

/* The store of the checkpoint at path: in->store or PATH.store. */
void ckpt_store_path(const char *path, const struct ckpt_info *in,
		     char *buf, size_t cap);

#endif /* HMM_TRAIN_CKPT_H */
