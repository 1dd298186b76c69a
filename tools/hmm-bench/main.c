// SPDX-License-Identifier: MIT
/*
 * hmm-bench — benchmarks as tools: each subcommand measures hmm against a
 * ceiling measured in the same run and prints the ratio (bench.h).
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "hmm.h"

extern const struct bench_cmd __start_hmm_bench[] __attribute__((weak));
extern const struct bench_cmd __stop_hmm_bench[] __attribute__((weak));

double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
	if (n <= 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int64_t bench_parse_size(const char *s)
{
	uint64_t v;

	return hmm_size_parse(s, &v) || v > INT64_MAX ? -1 : (int64_t)v;
}

static int json_first;

void bench_json_begin(FILE *f, const char *bench)
{
	fputc('{', f);
	json_first = 1;
	bench_json_str(f, "bench", bench);
}

static void json_key(FILE *f, const char *key)
{
	fprintf(f, "%s\"%s\":", json_first ? "" : ",", key);
	json_first = 0;
}

void bench_json_str(FILE *f, const char *key, const char *val)
{
	json_key(f, key);
	fputc('"', f);
	for (; *val; val++) {
		if (*val == '"' || *val == '\\')
			fputc('\\', f);
		if ((unsigned char)*val < 0x20)
			fprintf(f, "\\u%04x", *val);
		else
			fputc(*val, f);
	}
	fputc('"', f);
}

void bench_json_num(FILE *f, const char *key, double val)
{
	json_key(f, key);
	if (!isfinite(val))
		fputs("null", f);	/* not measured, or over nothing */
	else
		fprintf(f, "%.6g", val);
}

void bench_json_int(FILE *f, const char *key, int64_t val)
{
	json_key(f, key);
	fprintf(f, "%lld", (long long)val);
}

void bench_json_end(FILE *f)
{
	fputs("}\n", f);
	fflush(f);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: hmm-bench SUBCOMMAND [options] [--json]\n\n");
	for (const struct bench_cmd *c = __start_hmm_bench; c < __stop_hmm_bench; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->help);
	fprintf(f, "\nhmm-bench SUBCOMMAND --help for its options.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (const struct bench_cmd *c = __start_hmm_bench; c < __stop_hmm_bench; c++)
		if (!strcmp(c->name, argv[1])) {
			int rc = c->run(argc - 1, argv + 1);

			/* a file left on a shared disk fails the run (said) */
			return bench_scratch_finish() && !rc ? 1 : rc;
		}
	fprintf(stderr, "hmm-bench: unknown subcommand '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
