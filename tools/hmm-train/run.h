/* SPDX-License-Identifier: MIT */
/*
 * run.h — what one hmm-train run did: its settings and one record per
 * step, shared by the training loop (train.c, which fills it), the
 * progress output (progress.c) and the HTML report (report.c).
 *
 * Ownership: train_run() allocates rec (steps entries) and frees it with
 * run_free(); the strings point into argv or static storage.
 * Threading: one thread.
 */
#ifndef HMM_TRAIN_RUN_H
#define HMM_TRAIN_RUN_H

#include <stdint.h>
#include <stdio.h>

#include "model.h"

/* One step.  Bytes are now; *_bytes counters and seconds cumulative. */
struct step_rec {
	int64_t step;			/* 1-based, global (resume continues) */
	double loss;
	double t;			/* seconds since the run started */
	double step_s, tok_s;
	uint64_t host_resident, store_resident;
	uint64_t store_read_bytes, store_write_bytes;
	double fwd_s, bwd_s, opt_s, stall_s;
};

struct run {
	/* settings */
	const char *preset;
	struct gpt_config cfg;
	int64_t steps;			/* last step to run (global) */
	int64_t first_step;		/* 1, or the checkpoint's + 1 */
	uint64_t seed;
	double lr;
	uint64_t host_budget, state_bytes, params;
	int offloaded, json, tty;
	int kept_acts;			/* activations kept: no recompute */
	uint64_t activation_bytes;	/* to the store per step, or 0 */
	int has_store;			/* a store, maybe only for --ckpt */
	const char *store_path, *data_source, *blas_core, *attn, *optim;
	const char *ckpt, *resume, *report;
	const char *daemon;		/* --daemon unix:PATH, or NULL */
	double step_flops;
	/* the knobs in force: kernel threads; the store's pool, ring and
	   I/O depth (0 without a store) */
	int threads;
	uint32_t queue_depth, io_depth;
	uint64_t pool_bytes;
	/* results */
	struct step_rec *rec;
	int nrec;
	double wall_s;
	uint64_t peak_rss_bytes;
	int64_t ckpt_step;		/* 0, or the step --ckpt saved */
	uint64_t ckpt_flush_bytes;	/* store bytes its flush wrote */
	uint64_t ckpt_file_bytes;	/* the checkpoint file's size */
	FILE *out;			/* progress goes here (stdout) */
};

double run_step_s_median(const struct run *r);
double run_tok_s(const struct run *r);	/* over all steps */

void progress_begin(struct run *r);
void progress_step(struct run *r, const struct step_rec *s);
void progress_end(struct run *r);

int report_write(const struct run *r, const char *path, char *err,
		 size_t cap);

#endif /* HMM_TRAIN_RUN_H */
