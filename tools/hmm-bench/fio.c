// SPDX-License-Identifier: MIT
/*
 * fio.c — fio for hmm-bench (bench.h): the one way its subcommands run
 * it, as a bench child (scratch.c), so that a signal which ends
 * hmm-bench stops fio before the scratch file is removed and fio cannot
 * make that file again; and the I/O floor, fio moving bytes the way a
 * store does.
 *
 * fio --thread.  By default fio forks each job, and the job calls
 * setsid(): it leaves fio's process group, so the group's SIGKILL
 * (scratch.c) missed it, and a stopped hmm-bench left a job process,
 * reparented to init, asleep for ever on the file it had just removed.
 * With --thread the jobs are threads of the one fio process, which the
 * kill cannot miss; the I/O is the same (io_uring, O_DIRECT, a malloc'd
 * buffer of bs * iodepth per job), only the job's address space is
 * fio's.  Simpler than a subreaper hunting for orphans, and it holds
 * for whatever fio forks no more.
 *
 * Huge pages for fio's buffers.  hmm does its I/O from 2 MiB pages (a
 * tensor's chunks are MADV_HUGEPAGE, the store's pool MAP_HUGETLB or
 * THP), and fio by default from malloc'd 4 KiB pages.  On the build
 * machine's virtio disk that difference is the whole game: a 2 MiB
 * O_DIRECT I/O from 4 KiB pages is 512 segments (the disk takes 254 a
 * request), and the block trace (block_rq_issue to block_rq_complete,
 * 4 GiB randrw at --iodepth=64) showed about 1 such request at the disk
 * at a time, 0.9-1.3 GB/s, against 25-61 at a time and 1.7-2.5 GB/s
 * from huge pages (fio --iomem=mmaphuge, or malloc on THP), the same
 * file, interleaved, twice each.  A floor on 4 KiB pages was no floor:
 * hmm's step could beat it by using the disk better, not by wasting
 * less.  So a floor's fio gets THP the way a program asks for it
 * without privileges: glibc's glibc.malloc.hugetlb=1 tunable, which
 * madvises its mmap'd chunks MADV_HUGEPAGE (fio's buffers are one
 * malloc of bs * iodepth).  Where THP is "never" neither hmm nor fio
 * gets huge pages; the tunable then changes nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define TUNE	"glibc.malloc.hugetlb=1"

#define MAX_ARGS	32

/*
 * fio failed: say how (its exit status or the signal), on which file,
 * and its own last words: its errors ("ENOSPC on laying out file") are
 * lines of their own among the JSON's indented ones.
 */
#define SAID_LINES	4
static void fio_failed(char *const av[], int st, char *out)
{
	const char *file = "?", *line[SAID_LINES];
	char how[64], *p, *nl;
	int n = 0;

	for (int i = 0; av[i]; i++)
		if (!strncmp(av[i], "--filename=", 11))
			file = av[i] + 11;
	fprintf(stderr, "hmm-bench: fio on %s %s%s\n", file,
		bench_child_said(st, how, sizeof(how)),
		out && *out ? "; it said:" : "");
	for (p = out; p && *p; p = nl ? nl + 1 : NULL) {
		nl = strchr(p, '\n');
		if (nl)
			*nl = 0;
		if (*p && !strchr(" \t{}\"", *p)) {
			if (n == SAID_LINES)
				memmove(line, line + 1, sizeof(*line) * --n);
			line[n++] = p;
		}
		if (!nl)
			break;
	}
	for (int i = 0; i < n; i++)
		fprintf(stderr, "  %s\n", line[i]);
}

char *bench_fio_run(char *const argv[], int huge)
{
	char *out = NULL, *n, **env = NULL, *mine = NULL;
	char *av[MAX_ARGS + 2] = { argv[0], "--thread" };	/* why: above */
	size_t len = 0, cap = 0, k, i;
	FILE *f;
	pid_t pid;
	int st;

	for (i = 1; argv[i]; i++) {
		if (i == MAX_ARGS)
			return NULL;
		av[i + 1] = argv[i];
	}
	if (huge && !(env = bench_env_with("GLIBC_TUNABLES", TUNE, ":", &mine)))
		return NULL;
	f = bench_child_open(av, env, &pid);
	free(env);
	free(mine);
	if (!f) {
		fprintf(stderr, "hmm-bench: fio: cannot start: %s%s\n",
			strerror(errno), errno == ENOENT ?
			" (is fio installed?)" : "");
		return NULL;
	}
	for (;;) {
		if (len + 4096 + 1 > cap) {
			n = realloc(out, cap = cap * 2 + 8192);
			if (!n)
				break;
			out = n;
		}
		k = fread(out + len, 1, 4096, f);
		if (!k)
			break;
		len += k;
	}
	if (out)
		out[len] = 0;
	st = bench_child_close(f, pid);
	if (st != 0 || !out) {
		if (out)
			fio_failed(av, st, out);
		else
			fprintf(stderr, "hmm-bench: fio: %s\n",
				strerror(ENOMEM));
		free(out);
		return NULL;
	}
	return out;
}

double bench_fio_qd_s(const char *file, int64_t bs, int64_t off,
		      int64_t size, int64_t io_bytes, int readpct, int qd)
{
	char a[7][4200];
	char *argv[] = { "fio", "--name=floor", a[0], "--ioengine=io_uring",
			 "--direct=1", "--rw=rw", a[1], a[2], a[3], a[4], a[5],
			 a[6], "--numjobs=1", "--output-format=json", NULL };
	char *out, *k;
	double ms = -1;

	if (snprintf(a[0], sizeof(a[0]), "--filename=%s", file) >=
	    (int)sizeof(a[0]))
		return -1;
	snprintf(a[1], sizeof(a[1]), "--rwmixread=%d", readpct);
	snprintf(a[2], sizeof(a[2]), "--bs=%lld", (long long)bs);
	snprintf(a[3], sizeof(a[3]), "--iodepth=%d", qd);
	snprintf(a[4], sizeof(a[4]), "--size=%lld", (long long)size);
	snprintf(a[5], sizeof(a[5]), "--io_size=%lld", (long long)io_bytes);
	snprintf(a[6], sizeof(a[6]), "--offset=%lld", (long long)off);
	out = bench_fio_run(argv, 1);
	if (!out)
		return -1;
	k = strstr(out, "\"job_runtime\"");
	if (!k || sscanf(strchr(k, ':') + 1, "%lf", &ms) != 1)
		ms = -1;
	free(out);
	return ms >= 0 ? ms / 1e3 : -1;	/* 0: under a millisecond */
}

const int bench_fio_qd[2] = { 16, 64 };

double bench_fio_s(const char *file, int64_t bs, int64_t size,
		   int64_t io_bytes, int readpct)
{
	double a = bench_fio_qd_s(file, bs, 0, size, io_bytes, readpct,
				  bench_fio_qd[0]), b;

	if (a < 0)	/* said once: the second would fail the same way */
		return a;
	b = bench_fio_qd_s(file, bs, 0, size, io_bytes, readpct,
			   bench_fio_qd[1]);
	return b < 0 || a < b ? a : b;
}
