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
 * Written to PATH.tmp, fsync'ed, renamed over PATH and the folder
 * fsync'ed, so a crash leaves the old file or the new one.  Read back
 * only when magic, version, size and CRC match.
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

/* Write in atomically at path (see above). */
int ckpt_write(const char *path, const struct ckpt_info *in, char *err,
	       size_t cap);

/* Read and check path's file into *out (-EINVAL: not ours, damaged). */
int ckpt_read(const char *path, struct ckpt_info *out, char *err,
	      size_t cap);

/* The store of the checkpoint at path: in->store or PATH.store. */
void ckpt_store_path(const char *path, const struct ckpt_info *in,
		     char *buf, size_t cap);

#endif /* HMM_TRAIN_CKPT_H */
