// SPDX-License-Identifier: MIT
/*
 * scratch.c — files a benchmark made and must remove on every exit:
 * normal return, exit() from a failure, SIGINT, SIGTERM or SIGHUP.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define MAX_SCRATCH	16

static char *scratch[MAX_SCRATCH];
static volatile sig_atomic_t nscratch;

static void remove_all(void)
{
	for (int i = 0; i < nscratch; i++)
		if (scratch[i])
			unlink(scratch[i]);
}

static void on_signal(int sig)
{
	remove_all();		/* unlink is async-signal-safe */
	signal(sig, SIG_DFL);
	raise(sig);
}

int bench_scratch_add(const char *path)
{
	static int armed;
	char *p;

	if (nscratch == MAX_SCRATCH || !(p = strdup(path)))
		return -1;
	if (!armed) {
		armed = 1;
		atexit(remove_all);
		signal(SIGINT, on_signal);
		signal(SIGTERM, on_signal);
		signal(SIGHUP, on_signal);
	}
	scratch[nscratch] = p;
	nscratch = nscratch + 1;
	return 0;
}

void bench_scratch_remove(const char *path)
{
	for (int i = 0; i < nscratch; i++)
		if (scratch[i] && !strcmp(scratch[i], path)) {
			char *p = scratch[i];

			scratch[i] = NULL;	/* before a signal could see it */
			unlink(p);
			free(p);
		}
}
