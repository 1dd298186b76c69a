// SPDX-License-Identifier: MIT
/*
 * log.c — hmmd_log (log.h): depends on nothing of the daemon, so every
 * daemon file may use it without reaching back into main.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

void hmmd_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

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
