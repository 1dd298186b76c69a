// SPDX-License-Identifier: MIT
/*
 * scratch.c — this run's files, removed on every exit (scratch.h).
 *
 * The section: the main thread sets busy, then reads dying; the handler
 * sets dying, then reads busy (both sequentially consistent).  So either
 * the handler sees busy and leaves the work to scratch_end(), which then
 * sees dying, or the main thread sees dying at scratch_begin() and makes
 * nothing: a file is never made after the handler has removed the files,
 * and a signal is never lost.  hmm-bench's scratch.c does the same for
 * the benchmarks with one thread; hmm-train's signals may land on
 * OpenBLAS's or libhmm's threads, hence the section.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "scratch.h"

static char path[SCRATCH_MAX][4200];
static atomic_int live[SCRATCH_MAX];	/* 1: path[i] is to remove */
static atomic_int busy;			/* main is inside a section */
static atomic_int dying;		/* the signal to die of, or 0 */

/* Remove the live files: at exit, and from the handler (unlink and the
 * atomics are async-signal-safe). */
static void remove_live(void)
{
	for (int i = 0; i < SCRATCH_MAX; i++)
		if (atomic_exchange(&live[i], 0))
			unlink(path[i]);
}

static void die(int sig)
{
	struct sigaction sa = { .sa_handler = SIG_DFL };
	sigset_t set;

	remove_live();
	sigaction(sig, &sa, NULL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	raise(sig);
	_exit(128 + sig);	/* not reached: the default action kills */
}

static void on_signal(int sig)
{
	int none = 0;

	atomic_compare_exchange_strong(&dying, &none, sig);
	if (atomic_load(&busy))
		return;		/* scratch_end() dies of it */
	die(sig);
}

void scratch_arm(void)
{
	static const int always[] = { SIGINT, SIGTERM };
	static const int unless_ignored[] = { SIGHUP, SIGPIPE };
	struct sigaction sa = { .sa_handler = on_signal,
				.sa_flags = SA_RESTART }, old;

	atexit(remove_live);
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(always) / sizeof(*always); i++)
		sigaction(always[i], &sa, NULL);
	/* nohup's SIGHUP, a caller's SIGPIPE: theirs to ignore */
	for (size_t i = 0; i < sizeof(unless_ignored) / sizeof(*unless_ignored);
	     i++)
		if (sigaction(unless_ignored[i], NULL, &old) ||
		    old.sa_handler != SIG_IGN)
			sigaction(unless_ignored[i], &sa, NULL);
}

void scratch_begin(void)
{
	int sig;

	atomic_store(&busy, 1);
	sig = atomic_load(&dying);
	if (sig) {
		atomic_store(&busy, 0);
		die(sig);
	}
}

void scratch_end(void)
{
	int sig;

	atomic_store(&busy, 0);
	sig = atomic_load(&dying);
	if (sig)
		die(sig);
}

int scratch_add(const char *p)
{
	for (int i = 0; i < SCRATCH_MAX; i++)
		if (!atomic_load(&live[i])) {
			snprintf(path[i], sizeof(path[i]), "%s", p);
			atomic_store(&live[i], 1);
			return i;
		}
	return -1;
}

void scratch_remove(int slot)
{
	if (slot >= 0 && atomic_exchange(&live[slot], 0))
		unlink(path[slot]);
}

void scratch_keep(int slot)
{
	if (slot >= 0)
		atomic_store(&live[slot], 0);
}
