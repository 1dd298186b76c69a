/* SPDX-License-Identifier: MIT */
/*
 * dsaio.h — DeepSpeed's aio (its async_io op, aio_handle) moving the
 * same bytes as `hmm-bench io` does, timed by one python process
 * (dsaio.c): the ceiling hmm's store on 4 KiB pages is held to.
 */
#ifndef HMM_BENCH_DSAIO_H
#define HMM_BENCH_DSAIO_H

#include <stddef.h>
#include <stdint.h>

/*
 * In `python` (a venv's, with torch and deepspeed), write then read
 * back `size` bytes of `file` (made by it; the caller removes it) from
 * one plain torch.empty CPU tensor (not pinned: 4 KiB pages) with
 * aio_handle(bs, qd), O_DIRECT; MB/s of each in *write_mbps and
 * *read_mbps.  0, or -1 when it could not run: why (the last line the
 * python said, or what failed) in why[cap].
 */
int ds_aio_run(const char *python, const char *file, int64_t size,
	       int64_t bs, int qd, double *write_mbps, double *read_mbps,
	       char *why, size_t cap);

#endif /* HMM_BENCH_DSAIO_H */
