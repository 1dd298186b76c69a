// SPDX-License-Identifier: MIT
/*
 * par.c — hk_parallel(): a fixed pool of worker threads, started on first
 * use, that run parts of one job at a time (see hk.h).  The caller runs
 * part 0 itself; workers take parts 1..n-1.  One job at a time: run_lock
 * serialises callers.  lock/cv protect job, gen, pending.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "hk.h"

#define HK_MAX_THREADS 64

static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv_job = PTHREAD_COND_INITIALIZER;
static pthread_cond_t cv_done = PTHREAD_COND_INITIALIZER;
static int nthreads, started;
static unsigned long gen;
static int pending, job_n, next_part;
static void (*job_fn)(void *, int, int);
static void *job_arg;

/*
 * HK_THREADS, else the online CPUs.  A value that is not a count from 1
 * to HK_MAX_THREADS is said once on stderr and the default used: a
 * library must not exit, and "abc" silently running one thread (atoi)
 * hid the typo behind a slow run.
 */
int hk_threads(void)
{
	if (!nthreads) {
		const char *e = getenv("HK_THREADS");
		long cpus = sysconf(_SC_NPROCESSORS_ONLN), n = cpus;
		char *end;

		if (e) {
			errno = 0;
			n = strtol(e, &end, 10);
			if (errno || end == e || *end || n < 1 ||
			    n > HK_MAX_THREADS) {
				n = cpus;
				fprintf(stderr, "hk: HK_THREADS=\"%s\": not a "
					"count from 1 to %d; using %ld (the "
					"online CPUs)\n", e, HK_MAX_THREADS,
					n < 1 ? 1 : n > HK_MAX_THREADS ?
					HK_MAX_THREADS : n);
			}
		}
		nthreads = n < 1 ? 1 : n > HK_MAX_THREADS ? HK_MAX_THREADS : n;
	}
	return nthreads;
}

void hk_set_threads(int n)
{
	pthread_mutex_lock(&run_lock);
	nthreads = n < 1 ? 1 : n > HK_MAX_THREADS ? HK_MAX_THREADS : n;
	pthread_mutex_unlock(&run_lock);
}

/* Take parts until none are left; returns how many this thread ran. */
static void run_parts(void)
{
	for (;;) {
		int i;

		pthread_mutex_lock(&lock);
		i = next_part < job_n ? next_part++ : -1;
		pthread_mutex_unlock(&lock);
		if (i < 0)
			return;
		job_fn(job_arg, i, job_n);
		pthread_mutex_lock(&lock);
		if (--pending == 0)
			pthread_cond_broadcast(&cv_done);
		pthread_mutex_unlock(&lock);
	}
}

static void *worker(void *unused)
{
	unsigned long seen = 0;

	for (;;) {
		pthread_mutex_lock(&lock);
		while (gen == seen)
			pthread_cond_wait(&cv_job, &lock);
		seen = gen;
		pthread_mutex_unlock(&lock);
		run_parts();
	}
	return NULL;
}

static void start_workers(int want)
{
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	while (started < want - 1) {
		pthread_t t;

		if (pthread_create(&t, &attr, worker, NULL))
			break;	/* fewer workers: the caller runs the rest */
		started++;
	}
	pthread_attr_destroy(&attr);
}

void hk_parallel(int n, void (*fn)(void *arg, int i, int n), void *arg)
{
	if (n <= 0)
		return;
	pthread_mutex_lock(&run_lock);
	if (n == 1 || hk_threads() == 1) {
		for (int i = 0; i < n; i++)
			fn(arg, i, n);
		pthread_mutex_unlock(&run_lock);
		return;
	}
	start_workers(hk_threads());
	pthread_mutex_lock(&lock);
	job_fn = fn;
	job_arg = arg;
	job_n = n;
	next_part = 0;
	pending = n;
	gen++;
	pthread_cond_broadcast(&cv_job);
	pthread_mutex_unlock(&lock);
	run_parts();
	pthread_mutex_lock(&lock);
	while (pending)
		pthread_cond_wait(&cv_done, &lock);
	pthread_mutex_unlock(&lock);
	pthread_mutex_unlock(&run_lock);
}
