/* SPDX-License-Identifier: MIT */
/*
 * train.h — one training run from parsed options (main.c parses).
 * train_main() prints progress on stdout, problems on stderr, and returns
 * the process exit status: 0, 1 (training failed) or 2 (bad input: the
 * message says which flag and why).
 */
#ifndef HMM_TRAIN_TRAIN_H
#define HMM_TRAIN_TRAIN_H

#include <stdint.h>

#include "preset.h"

struct train_opts {
	const struct preset *preset;
	int64_t steps;			/* 0 = preset's */
	int64_t host_budget;		/* -1 = a quarter of the state */
	int budget_div;			/* > 0: host_budget is the state / it */
	const char *store, *daemon, *data, *ckpt, *resume, *report;
	uint64_t seed;
	double lr;			/* 0 = preset's */
	int batch;			/* 0 = preset's */
	int json;
	int offload_acts;		/* --offload-activations */
	int format;			/* --format: format --store whatever
					   it holds */
	const char *blas_core;
	int cuda;			/* --device cuda (probed by main.c) */
	uint64_t device_budget;		/* --device-budget; 0 = everything */
	/* --threads, --pool, --io-depth, --queue-depth (struct hmm_config's
	   knobs, checked by hmm_open); 0 = libhmm's default */
	uint32_t threads, pool_bytes, io_depth, queue_depth;
};

int train_main(const struct train_opts *o);

#endif /* HMM_TRAIN_TRAIN_H */
