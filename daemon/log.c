// SPDX-License-Identifier: MIT
/*
 * log.c — hmmd_log (log.h): depends on nothing of the daemon, so every
 * daemon file may use it without reaching back into main.c.
 *
 * Rate-limited: at most LOG_BURST lines a second; the rest are counted
 * and the next line that may go says how many were dropped, so a client
 * (or a failing accept) that makes hmmd log in a loop cannot fill the
 * disk (issue 18: 54 MB in 8 s).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define LOG_BURST	50

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static time_t log_sec;
static unsigned log_lines;
static unsigned long log_dropped;

/* May a line go now?  *dropped: lines dropped before it (then 0). */
static int log_may(unsigned long *dropped)
{
	struct timespec ts;
	int ok;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	pthread_mutex_lock(&log_lock);
	if (ts.tv_sec != log_sec) {
		log_sec = ts.tv_sec;
		log_lines = 0;
	}
	ok = log_lines < LOG_BURST;
	if (ok) {
		log_lines++;
		*dropped = log_dropped;
		log_dropped = 0;
	} else {
		log_dropped++;
	}
	pthread_mutex_unlock(&log_lock);
	return ok;
}

void hmmd_log(const char *fmt, ...)
{
	unsigned long dropped;
	char line[1024];
	va_list ap;
	int n;

	if (!log_may(&dropped))
		return;
	if (dropped)
		n = snprintf(line, sizeof(line), "hmmd: (%lu lines dropped: "
			     "more than %d a second)\nhmmd: ", dropped,
			     LOG_BURST);
	else
		n = snprintf(line, sizeof(line), "hmmd: ");
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	n = strlen(line);
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0) {
		/* nowhere left to say it */
	}
}
