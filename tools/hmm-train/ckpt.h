/* SPDX-License-Identifier: MIT */
/*
 * ckpt.h — checkpoints: the whole training state (every block's
 * parameters and AdamW moments; gradients are rebuilt each step), the
 * step reached, the seed and the data's identity, in one file.
 *
 * Format (little-endian): a header (magic "HMMTRN01", config, step,
 * seed, data length and FNV-1a hash, block count and sizes), then for
 * each block P, M, V as raw fp32, then the FNV-1a hash of all that.
 * Written to PATH.tmp, fsync'ed and renamed, so a crash leaves the old
 * checkpoint or the new one, never half of one.  Read back only when
 * magic, config, data identity and the trailing hash all match.
 *
 * The blocks are read and written through state_map, so states that
 * live in the store stream through the host budget.
 * Threading: one thread.  Returns 0 or -errno with a message in err.
 */
#ifndef HMM_TRAIN_CKPT_H
#define HMM_TRAIN_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

struct ckpt_info {
	int64_t step;		/* steps done */
	uint64_t seed;
	uint64_t data_len, data_hash;
};

uint64_t ckpt_hash(const void *p, size_t n, uint64_t h);	/* FNV-1a */
#define CKPT_HASH0 0xcbf29ce484222325ull

int ckpt_save(struct gpt *g, const char *path, const struct ckpt_info *in,
	      char *err, size_t cap);
/*
 * Before training: may a checkpoint be written at path?  -EEXIST when a
 * file is there that is not a checkpoint (it would be replaced), -errno
 * when the folder cannot take a file; 0 otherwise.
 */
int ckpt_check_target(const char *path, char *err, size_t cap);

/* Loads P, M, V into g's state; *out gets the header's info. */
int ckpt_load(struct gpt *g, const char *path, struct ckpt_info *out,
	      char *err, size_t cap);

#endif /* HMM_TRAIN_CKPT_H */
