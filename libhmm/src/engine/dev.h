/* SPDX-License-Identifier: MIT */
/*
 * dev.h — the device tier's backend: one small ops table.
 *
 * A backend gives each tensor a contiguous device address range
 * (reserve/release) whose chunks are backed by device memory only while
 * resident (populate/depopulate), and copies between a host address and
 * a device address asynchronously.  "sim" is host memory posing as a
 * device (dev_sim.c); "cuda" is the CUDA driver API loaded at run time
 * (dev_cuda.c); "uvm" the same driver with managed memory that hmm
 * moves with cuMemPrefetchAsync (dev_uvm.c).
 *
 * Threading: reserve/release/populate/depopulate are called with h->lock
 * held and must not block on a copy.  copy() queues and returns; done()
 * runs later on the backend's copy thread, without h->lock.  Copies of
 * one backend complete in the order they were queued.
 */
#ifndef HMM_DEV_H
#define HMM_DEV_H

#include <pthread.h>
#include <stdint.h>

#include "hmm.h"

#define HMM_H2D	0
#define HMM_D2H	1

struct hmm_dev_ops {
	const char *name;
	/* Returns 0, *priv, the device's capacity in bytes and its
	 * allocation unit (what a chunk's memory is rounded up to), or
	 * -errno with a detail. */
	int (*open)(const struct hmm_config *cfg, void **priv,
		    uint64_t *capacity, uint64_t *granularity);
	void (*close)(void *priv);	/* after every copy completed */
	int (*reserve)(void *priv, uint64_t bytes, uint64_t *addr);
	void (*release)(void *priv, uint64_t addr, uint64_t bytes);
	/* 0, or -errno with hmm_last_error() saying why */
	int (*populate)(void *priv, uint64_t addr, uint64_t bytes);
	void (*depopulate)(void *priv, uint64_t addr, uint64_t bytes);
	/* Optional (NULL: populate, depopulate): the same for a range
	 * whose contents do not matter, since a copy queued next overwrites
	 * all of it (populate_blank; nothing else may touch the range
	 * before that copy) or another tier holds them (discard; nothing
	 * touches the range after); a device that moves a range's contents
	 * when it (de)populates it ("uvm") can then skip the move. */
	int (*populate_blank)(void *priv, uint64_t addr, uint64_t bytes);
	void (*discard)(void *priv, uint64_t addr, uint64_t bytes);
	int (*copy)(void *priv, int dir, uint64_t dev, void *host,
		    uint64_t bytes, void (*done)(void *arg, int err),
		    void *arg);
};

/*
 * The copy queue both backends use (dev_common.c): copy() pushes, one
 * thread per backend pops in order and runs the backend's run().
 */

/* One queued copy: allocated by hmm_dev_queue_copy, freed by the queue's
 * thread after done() returns. */
struct hmm_dev_copy {
	struct hmm_dev_copy *next;
	int dir;			/* HMM_H2D or HMM_D2H */
	uint64_t dev;
	void *host;
	uint64_t bytes;
	void (*done)(void *arg, int err);
	void *arg;
};

/* Embedded in the backend's private struct; set up by _start, torn down
 * by _stop.  lock protects head, tail and stop. */
struct hmm_dev_queue {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct hmm_dev_copy *head, *tail;
	int stop;
	pthread_t thr;
	void *owner;
	/* On the queue's thread: enter() once before the first copy (may
	 * be NULL); run() per copy, returning 0 or -errno for done(). */
	void (*enter)(void *owner);
	int (*run)(void *owner, const struct hmm_dev_copy *c);
};

/* Starts the thread.  0, or -errno from pthread_create (nothing left to
 * undo).  Call from open. */
int hmm_dev_queue_start(struct hmm_dev_queue *q, void *owner,
			void (*enter)(void *owner),
			int (*run)(void *owner, const struct hmm_dev_copy *c));
/* Lets the thread finish every queued copy, joins it.  Call from close. */
void hmm_dev_queue_stop(struct hmm_dev_queue *q);
/* Both backends' copy op (struct hmm_dev_ops.copy) for a priv whose
 * first member is its struct hmm_dev_queue: queues one copy; done(arg,
 * err) runs later on the thread.  0 or -ENOMEM.  Any thread; does not
 * block on a copy. */
int hmm_dev_queue_copy(void *priv, int dir, uint64_t dev, void *host,
		       uint64_t bytes, void (*done)(void *arg, int err),
		       void *arg);

extern const struct hmm_dev_ops hmm_dev_sim;
extern const struct hmm_dev_ops hmm_dev_cuda;
extern const struct hmm_dev_ops hmm_dev_uvm;

#endif /* HMM_DEV_H */
