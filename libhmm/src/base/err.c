// SPDX-License-Identifier: MIT
/* err.c — the per-thread error detail (see err.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "err.h"

static _Thread_local char hmm_detail[512];

int hmm_err(int err, const char *fmt, ...)
{
	char buf[sizeof(hmm_detail)];
	va_list ap;

	/* formatted aside first: an argument may be hmm_last_error() */
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	memcpy(hmm_detail, buf, sizeof(buf));
	return err;
}

const char *hmm_last_error(void)
{
	return hmm_detail;
}
