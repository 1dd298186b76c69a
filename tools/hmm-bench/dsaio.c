// SPDX-License-Identifier: MIT
/*
 * dsaio.c — DeepSpeed's aio on the bytes `hmm-bench io` moves
 * (dsaio.h).  The script loads the async_io op (AsyncIOBuilder().load(),
 * which JIT-builds it on first use: libaio-dev), makes
 * aio_handle(block_size, queue_depth, single_submit=False,
 * overlap_events=True, num_threads=1), fills a torch.empty uint8 tensor
 * of `size` bytes (pin_memory=False: ordinary 4 KiB pages), then times
 * sync_pwrite(t, file) and sync_pread(t, file) — DeepSpeed opens the
 * file O_DIRECT — and prints "ds WRITE_MBps READ_MBps".  The script is
 * passed with -c, so it holds no single quote.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	size_t len = sizeof(script) + 2 * 4096 + 256;
	char *cmd = malloc(len), line[512];
	FILE *f;
	int got = 0, rc;

	snprintf(why, cap, "%s: cannot run", python);
	if (!cmd)
		return -1;
	snprintf(cmd, len, "'%s' -c '%s' '%s' %lld %lld %d 2>&1", python,
		 script, file, (long long)size, (long long)bs, qd);
	f = popen(cmd, "r");
	free(cmd);
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
	rc = pclose(f);
	return rc == 0 && got && *write_mbps > 0 && *read_mbps > 0 ? 0 : -1;
}
