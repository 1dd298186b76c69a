// SPDX-License-Identifier: MIT
/*
 * args.c — a subcommand's options, read by one table (bench.h).
 *
 * Every subcommand reads its flags here, so they all behave alike:
 * "--name value" or "--name=value", the last of a flag given twice
 * wins, --help and -h print the usage on stdout and exit 0, and a bad
 * flag exits 2 with one line that names it and says what was wanted,
 * then the usage:
 *	hmm-bench offload: --n 0: want a size from 1K to 16G (K, M, G,
 *	T: powers of 1024)
 * Integers are whole decimal numbers; sizes take K, M, G, T suffixes
 * (powers of 1024; hmm_size_parse: "8MiB" too, "8MB" refused); nothing
 * trailing is ignored.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "hmm.h"

static const char *cur_cmd, *cur_usage;
static int cur_argc;
static char **cur_argv;

const char *bench_arg_val(const char *name)
{
	const char *val = NULL;
	size_t len = strlen(name);

	for (int i = 1; i < cur_argc; i++) {
		const char *s = cur_argv[i];

		if (!strncmp(s, name, len) && s[len] == '=')
			val = s + len + 1;
		else if (!strcmp(s, name) && i + 1 < cur_argc)
			val = cur_argv[++i];
	}
	return val;
}

void bench_arg_bad(const char *flag, const char *val, const char *why)
{
	if (val)	/* an empty one shown as "" */
		fprintf(stderr, "hmm-bench %s: %s %s: %s\n", cur_cmd, flag,
			*val ? val : "\"\"", why);
	else
		fprintf(stderr, "hmm-bench %s: %s: %s\n", cur_cmd, flag, why);
	fputs(cur_usage, stderr);
	exit(2);
}

/* A bound as a user writes it: 4K, 2M, 1G, 1T where exact. */
static void fmt_size(char *b, size_t n, double v)
{
	static const char suf[] = "TGMK";
	int64_t x = (int64_t)v;

	for (int i = 0; i < 4 && x; i++) {
		int64_t unit = 1ll << (10 * (4 - i));

		if (x % unit == 0) {
			snprintf(b, n, "%lld%c", (long long)(x / unit), suf[i]);
			return;
		}
	}
	snprintf(b, n, "%lld", (long long)x);
}

static void range_bad(const struct bench_arg *a, const char *val)
{
	char why[192];

	if (a->kind == BA_SIZE) {
		char lo[24], hi[24], m[24];

		fmt_size(lo, sizeof(lo), a->lo);
		fmt_size(hi, sizeof(hi), a->hi);
		fmt_size(m, sizeof(m), (double)a->mult);
		snprintf(why, sizeof(why), "want a size from %s to %s%s%s "
			 "(K, M, G, T: powers of 1024)", lo, hi,
			 a->mult ? ", a multiple of " : "", a->mult ? m : "");
	} else if (a->kind == BA_INT) {
		snprintf(why, sizeof(why), "want an integer from %.0f to %.0f",
			 a->lo, a->hi);
	} else {
		snprintf(why, sizeof(why), "want a number from %g to %g",
			 a->lo, a->hi);
	}
	bench_arg_bad(a->name, val, why);
}

static void take(const struct bench_arg *a, const char *val)
{
	char *end;
	double d;

	switch (a->kind) {
	case BA_FLAG:
		*(int *)a->dst = 1;
		return;
	case BA_STR:
		if (!*val)
			bench_arg_bad(a->name, val, "want a value, not empty");
		*(const char **)a->dst = val;
		return;
	case BA_INT: {
		long long v;

		errno = 0;
		v = strtoll(val, &end, 10);
		if (!*val || *end || errno || v < a->lo || v > a->hi)
			range_bad(a, val);
		*(int *)a->dst = (int)v;
		return;
	}
	case BA_SIZE: {
		int64_t v = bench_parse_size(val);

		if (v < 0 || v < a->lo || v > a->hi || (a->mult && v % a->mult))
			range_bad(a, val);
		*(int64_t *)a->dst = v;
		return;
	}
	case BA_NUM:
		errno = 0;
		d = strtod(val, &end);
		if (!*val || *end || errno || !isfinite(d) || d < a->lo ||
		    d > a->hi)
			range_bad(a, val);
		*(double *)a->dst = d;
		return;
	}
}

void bench_args(const char *cmd, const char *usage, int argc, char **argv,
		const struct bench_arg *args)
{
	cur_cmd = cmd;
	cur_usage = usage;
	cur_argc = argc;
	cur_argv = argv;
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i], *eq = strchr(s, '=');
		size_t len = eq ? (size_t)(eq - s) : strlen(s);
		const struct bench_arg *a;

		if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
			fputs(usage, stdout);
			exit(0);
		}
		for (a = args; a->name; a++)
			if (strlen(a->name) == len && !strncmp(s, a->name, len))
				break;
		if (!a->name)
			bench_arg_bad(s, NULL, s[0] == '-' ? "unknown option" :
				      "unexpected argument");
		if (a->kind == BA_FLAG) {
			if (eq)
				bench_arg_bad(s, NULL, "takes no value");
			take(a, NULL);
		} else if (eq) {
			take(a, eq + 1);
		} else if (i + 1 < argc) {
			take(a, argv[++i]);
		} else {
			bench_arg_bad(a->name, NULL, "needs a value");
		}
	}
}
