/* SPDX-License-Identifier: MIT */
/*
 * data.h — the bytes hmm-train learns from, and its batches.
 *
 * data_synth(): a deterministic corpus generated from a seed by a small
 * stochastic grammar (English-like sentences over a fixed lexicon, with
 * skewed word choices and agreement), so that next-byte prediction has
 * a lot of structure and the loss falls far below uniform (ln 256).
 * data_load(): any text file, byte level; refuses a missing, empty,
 * binary or too-short file with a message naming the file and why.
 *
 * data_batch(): the batch of step `step` — batch sequences of ctx tokens
 * at offsets drawn from (seed, step) alone, so a resumed run sees the
 * same batches as an uninterrupted one.  tok[i] = text[o + t],
 * tgt[i] = text[o + t + 1].
 *
 * Ownership: the loaders allocate d->text; data_free frees it.
 * Errors: 0 or -errno with a message in err (cap bytes).
 */
#ifndef HMM_TRAIN_DATA_H
#define HMM_TRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

struct data {
	unsigned char *text;
	size_t len;
	char source[256];	/* "synthetic grammar, seed 1" or the path */
};

int data_synth(struct data *d, uint64_t seed, size_t bytes);
int data_load(struct data *d, const char *path, int ctx, char *err,
	      size_t cap);
void data_free(struct data *d);
void data_batch(const struct data *d, uint64_t seed, int64_t step, int batch,
		int ctx, int *tok, int *tgt);

#endif /* HMM_TRAIN_DATA_H */
