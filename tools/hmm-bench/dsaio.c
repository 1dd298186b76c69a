// SPDX-License-Identifier: MIT
/*
 * dsaio.c — DeepSpeed's aio on the bytes `hmm-bench io` moves
 * (dsaio.h).  The script loads the async_io op (AsyncIOBuilder().load(),
 * which JIT-builds it on first use: libaio-dev), makes
 * aio_handle(block_size, queue_depth, single_submit=False,
 * overlap_events=True, num_threads=1), fills a torch.empty uint8 tensor
 * of `size` bytes (pin_memory=False: ordinary 4 KiB pages), then times
 * sync_pwrite(t, file) and sync_pread(t, file) — DeepSpeed opens the
 * file O_DIRECT — and prints "ds WRITE_MBps READ_MBps".  The python runs
 * as a bench child (scratch.c): a signal that ends hmm-bench stops it
 * before the file is removed, so it cannot make the file again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "dsaio.h"

static const char script[] =
"import sys, time, torch\n"
"from deepspeed.ops.op_builder import AsyncIOBuilder\n"
"path, size, bs, qd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])\n"
"aio = AsyncIOBuilder().load(verbose=False)\n"
"h = aio.aio_handle(bs, qd, False, True, 1)\n"
"t = torch.empty(size, dtype=torch.uint8, pin_memory=False)\n"
"t.random_(0, 256)\n"
"def timed(f):\n"
"    t0 = time.perf_counter()\n"
"    r = f(t, path)\n"
"    if r is not None and r < 0:\n"
"        raise SystemExit(\"aio returned %d\" % r)\n"
"    return size / (time.perf_counter() - t0) / 1e6\n"
"w = timed(h.sync_pwrite)\n"
"r = timed(h.sync_pread)\n"
"print(\"ds\", w, r)\n";

int ds_aio_run(const char *python, const char *file, int64_t size,
	       int64_t bs, int qd, double *write_mbps, double *read_mbps,
	       char *why, size_t cap)
{
	char s_size[32], s_bs[32], s_qd[16], line[512];
	char *argv[] = { (char *)python, "-c", (char *)script, (char *)file,
			 s_size, s_bs, s_qd, NULL };
	FILE *f;
	pid_t pid;
	int got = 0, rc;

	snprintf(why, cap, "%s: cannot run", python);
	snprintf(s_size, sizeof(s_size), "%lld", (long long)size);
	snprintf(s_bs, sizeof(s_bs), "%lld", (long long)bs);
	snprintf(s_qd, sizeof(s_qd), "%d", qd);
	f = bench_child_open(argv, NULL, &pid);
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "ds %lf %lf", write_mbps, read_mbps) == 2) {
			got = 1;
			continue;
		}
		line[strcspn(line, "\n")] = 0;
		if (*line)	/* the last word said: an ImportError, ... */
			snprintf(why, cap, "%s: %s", python, line);
	}
	rc = bench_child_close(f, pid);
	return rc == 0 && got && *write_mbps > 0 && *read_mbps > 0 ? 0 : -1;
}
