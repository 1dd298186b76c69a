// SPDX-License-Identifier: MIT
/*
 * fio.c — the I/O floor: fio moving bytes the way a store does (bench.h).
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"

static double fio_qd_s(const char *file, int64_t bs, int64_t size,
		       int64_t io_bytes, int readpct, int qd)
{
	char cmd[8192], buf[4096];
	double ms = -1;
	FILE *f;

	if (snprintf(cmd, sizeof(cmd),
		     "fio --name=floor --filename='%s' --ioengine=io_uring "
		     "--direct=1 --rw=rw --rwmixread=%d --bs=%lld --iodepth=%d "
		     "--size=%lld --io_size=%lld --numjobs=1 "
		     "--output-format=json 2>/dev/null", file, readpct,
		     (long long)bs, qd, (long long)size,
		     (long long)io_bytes) >= (int)sizeof(cmd) ||
	    strchr(file, '\''))
		return -1;
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(buf, sizeof(buf), f)) {
		char *k = strstr(buf, "\"job_runtime\"");

		if (k && ms < 0 && sscanf(strchr(k, ':') + 1, "%lf", &ms) != 1)
			ms = -1;
	}
	if (pclose(f) != 0)
		return -1;
	return ms > 0 ? ms / 1e3 : -1;
}

double bench_fio_s(const char *file, int64_t bs, int64_t size,
		   int64_t io_bytes, int readpct)
{
	double a = fio_qd_s(file, bs, size, io_bytes, readpct, 16);
	double b = fio_qd_s(file, bs, size, io_bytes, readpct, 64);

	if (a < 0 || b < 0)
		return a < 0 ? b : a;
	return a < b ? a : b;
}
