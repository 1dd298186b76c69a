/* SPDX-License-Identifier: MIT */
/*
 * train_run.h — hmm-bench's runs of hmm-train (train_run.c): the binary
 * next to hmm-bench, its --json summary parsed.
 */
#ifndef HMM_BENCH_TRAIN_RUN_H
#define HMM_BENCH_TRAIN_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "train_torch.h"

struct summary {
	double step_s, tok_s, flops, stall_s;
	int64_t rss, budget, state, rd, wr, params;
	double step_rd, step_wr;	/* store bytes of the last step */
	struct torch_gpt shape;
};

/* Run hmm-train --json with args (a NULL-terminated list of at most
 * RUN_ARGS, passed as they are: no shell) as a bench child (bench.h),
 * its stderr lines copied to stderr; fill s from its summary.  0; 2 when
 * hmm-train refused its arguments (exit 2: a bad --preset, --store...;
 * hmm-bench then exits 2 too); -1 on any other failure (said on
 * stderr).  store (NULL: none): a path of the run's scratch folder,
 * passed as --store: claimed first (a file there is refused, exit 1),
 * removed after the run and on every exit (hmm-train keeps a store it
 * is given). */
#define RUN_ARGS	16
int run_train(const char *bin, const char *const args[], const char *store,
	      struct summary *s);

/* The path of the hmm-train next to this binary, into buf. */
void sibling(char *buf, size_t cap);

#endif /* HMM_BENCH_TRAIN_RUN_H */
