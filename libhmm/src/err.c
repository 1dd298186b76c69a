// SPDX-License-Identifier: MIT
/* err.c — the per-thread error detail (see err.h). */
#include <stdarg.h>
#include <stdio.h>

#include "err.h"

static _Thread_local char hmm_detail[512];

int hmm_err(int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(hmm_detail, sizeof(hmm_detail), fmt, ap);
	va_end(ap);
	return err;
}

const char *hmm_last_error(void)
{
	return hmm_detail;
}
