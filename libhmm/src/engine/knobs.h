/* SPDX-License-Identifier: MIT */
/*
 * knobs.h — the I/O and thread settings of struct hmm_config
 * (pool_bytes, io_depth, queue_depth, kernel_threads): their bounds,
 * their defaults, and the one check and resolution of both (knobs.c).
 * The embedded engine resolves them at hmm_open (ctx.c), the I/O thread
 * applies them (iothread.c), hmm_stats reports them (stats.c).
 */
#ifndef HMM_KNOBS_H
#define HMM_KNOBS_H

#include "hmm.h"

#define HMM_POOL_DEFAULT	(4u << 20)	/* the engine's I/O bypasses it */
#define HMM_IO_DEPTH_DEFAULT	4u		/* measured: iothread.c */
#define HMM_QUEUE_DEPTH_DEFAULT	64u
/* the bounds are hmm.h's HMM_CONFIG_*_MAX: one registered iovec, the
   store's ring bound (store.c MAX_DEPTH), hk's pool bound (par.c) */

/* 0, or -EINVAL naming the key and value that is out of its range. */
int hmm_knobs_check(const struct hmm_config *c);

/* Replace each 0 by its default (threads: online CPUs, at most 64). */
void hmm_knobs_resolve(struct hmm_config *c);

#endif /* HMM_KNOBS_H */
