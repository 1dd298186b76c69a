// SPDX-License-Identifier: MIT
/*
 * train_run.c — run the hmm-train next to hmm-bench and read its --json
 * summary (train_run.h); hmm-bench train and scale use it.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "train_run.h"

static double num(const char *line, const char *key)
{
	char k[64];
	const char *p;

	snprintf(k, sizeof(k), "\"%s\":", key);
	p = strstr(line, k);
	return p ? strtod(p + strlen(k), NULL) : -1;
}

int run_train(const char *bin, const char *const args[], const char *store,
	      struct summary *s)
{
	char *argv[RUN_ARGS + 5], line[4096], last[4096] = "", how[64];
	double rd0 = 0, wr0 = 0;
	FILE *p;
	pid_t pid;
	int n = 0, st;

	argv[n++] = (char *)bin;
	argv[n++] = "--json";
	while (*args && n < RUN_ARGS + 2)
		argv[n++] = (char *)*args++;
	if (store) {
		if (bench_scratch_claim("train", store))
			return -1;
		argv[n++] = "--store";
		argv[n++] = (char *)store;
	}
	argv[n] = NULL;
	/* its own process group, killed and reaped before hmm-bench's
	 * scratch files go (scratch.c); stderr with stdout, as 2>&1 did */
	p = bench_child_open(argv, NULL, &pid);
	if (!p) {
		fprintf(stderr, "hmm-bench: %s could not start: %s\n", bin,
			strerror(errno));
		if (store)
			bench_scratch_remove(store);
		return -1;
	}
	s->step_rd = s->step_wr = 0;
	while (fgets(line, sizeof(line), p))
		if (strstr(line, "\"summary\":true")) {
			snprintf(last, sizeof(last), "%s", line);
		} else if (!strncmp(line, "{\"step\":", 8)) {
			double r = num(line, "store_read_bytes");
			double w = num(line, "store_write_bytes");

			s->step_rd = r - rd0;	/* the last step's */
			s->step_wr = w - wr0;
			rd0 = r, wr0 = w;
		} else if (line[0] != '{') {	/* named once, not twice */
			fprintf(stderr, "%s%s", strncmp(line, "hmm-train:", 10) ?
				"hmm-train: " : "", line);
		}
	st = bench_child_close(p, pid);
	if (store)
		bench_scratch_remove(store);
	if (st != 0 || !last[0]) {
		fprintf(stderr, "hmm-bench: %s", bin);
		for (int i = 1; argv[i]; i++)
			fprintf(stderr, " %s", argv[i]);
		fprintf(stderr, ": %s\n", st == 2 ? "refused its arguments" :
			st == 0 ? "exited 0 without its summary" :
			bench_child_said(st, how, sizeof(how)));
		return st == 2 ? 2 : -1;
	}
	s->step_s = num(last, "step_s_median");
	s->tok_s = num(last, "tok_s");
	s->flops = num(last, "step_flops");
	s->rss = num(last, "peak_rss_bytes");
	s->budget = num(last, "host_budget");
	s->state = num(last, "state_bytes");
	s->params = num(last, "params");
	s->rd = num(last, "store_read_bytes");
	s->wr = num(last, "store_write_bytes");
	s->stall_s = num(last, "stall_s");
	s->shape = (struct torch_gpt){ num(last, "vocab"), num(last, "ctx"),
				       num(last, "d"), num(last, "heads"),
				       num(last, "layers"), num(last, "batch"),
				       num(last, "threads") };
	return 0;
}

void sibling(char *buf, size_t cap)
{
	ssize_t n = readlink("/proc/self/exe", buf, cap - 16);
	char *slash;

	buf[n > 0 ? n : 0] = 0;
	slash = strrchr(buf, '/');
	snprintf(slash ? slash + 1 : buf, cap - (slash ? slash + 1 - buf : 0),
		 "hmm-train");
}

