/* SPDX-License-Identifier: MIT */
/*
 * fz_must.h — a fuzz target's findings (header-only; fuzz_api,
 * fuzz_store, fuzz_proto).  must(cond, fmt, ...) prints the file, the
 * line, the condition, the message and libhmm's last error on stderr,
 * runs the target's fz_finding() (its scratch files, its logs) and
 * aborts, so that libFuzzer keeps the input as a crash.
 *
 * The Makefile's fuzz rule lets UBSan recover (print and go on); a
 * finding of UBSan must stop the run as an ASan one does, so that it
 * fails check: __ubsan_default_options says so.
 */
#ifndef HMM_FZ_MUST_H
#define HMM_FZ_MUST_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "hmm.h"

const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void)
{
	return "halt_on_error=1:print_stacktrace=1";
}

/* The target's own, run before the abort. */
static void fz_finding(void);

static void fz_die(const char *file, int line, const char *cond,
		   const char *fmt, ...)
	__attribute__((format(printf, 4, 5), noreturn));
static void fz_die(const char *file, int line, const char *cond,
		   const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s:%d: check failed: %s: ", file, line, cond);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (last error: \"%s\")\n", hmm_last_error());
	fz_finding();
	abort();
}

#define must(cond, ...)							\
	do {								\
		if (!(cond))						\
			fz_die(__FILE__, __LINE__, #cond, __VA_ARGS__);	\
	} while (0)

#endif /* HMM_FZ_MUST_H */
