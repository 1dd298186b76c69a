// SPDX-License-Identifier: MIT
/*
 * hmm-bench scale — how hmm-train's cost grows with the model: the
 * default preset at a quarter of its state as host budget, large at an
 * eighth, 350m at a sixteenth, each run --reps times (interleaved),
 * against two floors:
 *	step_s:        median over the reps of hmm-train's median step;
 *	compute_floor_s: the same preset with everything in memory (a host
 *	               budget above its state: no store, no recompute);
 *	store bytes:   read + written by the last step (the first one also
 *	               writes the initial state out);
 *	io_floor_s:    fio moving those bytes, in the step's read/write mix,
 *	               2 MiB blocks, over a 1 GiB file beside the stores (at
 *	               most 2 GiB of it timed, scaled to the bytes);
 *	ratio:         step_s / max(io_floor_s, compute_floor_s).
 * Last line (--json): {"bench":"scale","steps","reps", and per preset
 * P: "P_params","P_state_bytes","P_host_budget","P_step_s",
 * "P_store_bytes","P_io_floor_s","P_compute_floor_s","P_ratio","P_tok_s"}.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "train_run.h"

#define NPRESET	3
#define REPS_MAX 16
#define FIO_FILE (1ll << 30)
#define FIO_MAX	(2ll << 30)

static const struct {
	const char *name;
	int div;		/* host budget: the state / div */
} presets[NPRESET] = { { "default", 4 }, { "large", 8 }, { "350m", 16 } };

struct row {
	double step[REPS_MAX], bytes[REPS_MAX], floor[REPS_MAX];
	double tok[REPS_MAX], mem[REPS_MAX];
	struct summary s;
};

static const char usage[] =
	"usage: hmm-bench scale [--steps N] [--reps N] [--dir DIR] [--json]\n"
	"  default at 1/4 of its state as host budget, large at 1/8, "
	"350m at 1/16;\n"
	"  step time, store bytes per step and their fio floor "
	"(default: 3 steps, 2..100000; 3 reps, 1..16)\n";

/* fio's time for bytes in the mix read:written, scaled from FIO_MAX. */
static double floor_s(const char *file, double rd, double wr)
{
	double bytes = rd + wr, io = bytes < FIO_MAX ? bytes : FIO_MAX, t;
	int pct = bytes > 0 ? (int)(100 * rd / bytes + 0.5) : 50;

	io = (double)((int64_t)io / (2 << 20) * (2 << 20));
	if (io < (2 << 20))
		return 0;
	t = bench_fio_s(file, 2 << 20, FIO_FILE, (int64_t)io, pct);
	return t < 0 ? -1 : t * bytes / io;
}

static int bench_scale(int argc, char **argv)
{
	const char *dir = NULL;
	int steps = 3, reps = 3, json = 0;
	char bin[PATH_MAX], fio[PATH_MAX + 64], nsteps[16], budget[16];
	char store[PATH_MAX + 64];
	struct row row[NPRESET];
	const struct bench_arg args[] = {
		{ "--steps", BA_INT, &steps, 2, 100000 },
		{ "--reps", BA_INT, &reps, 1, REPS_MAX },
		{ "--dir", BA_STR, &dir },
		{ "--json", BA_FLAG, &json },
		{ NULL }
	};

	bench_args("scale", usage, argc, argv, args);
	dir = bench_scratch_dir("--dir", dir);
	snprintf(store, sizeof(store), "%s/hmm-bench-scale.store", dir);
	if (snprintf(fio, sizeof(fio), "%s/hmm-bench-scale.fio", dir) >=
	    (int)sizeof(fio) || bench_scratch_add(fio)) {
		fprintf(stderr, "hmm-bench scale: --dir %s: too long\n", dir);
		return 1;
	}
	sibling(bin, sizeof(bin));
	snprintf(nsteps, sizeof(nsteps), "%d", steps);
	memset(row, 0, sizeof(row));
	for (int r = 0; r < reps; r++) {
		for (int k = 0; k < NPRESET; k++) {
			struct row *w = &row[k];
			const char *args[] = { "--preset", presets[k].name,
					       "--steps", nsteps,
					       "--host-budget", "1T", NULL };

			if (run_train(bin, args, NULL, &w->s))
				return 1;
			w->mem[r] = w->s.step_s;
			/* the store in DIR, as the man page says scratch
			 * goes, not in hmm-train's default place (build/tmp
			 * by the working folder, else $TMPDIR or /var/tmp) */
			snprintf(budget, sizeof(budget), "/%d", presets[k].div);
			args[5] = budget;
			if (run_train(bin, args, store, &w->s))
				return 1;
			w->step[r] = w->s.step_s;
			w->bytes[r] = w->s.step_rd + w->s.step_wr;
			w->tok[r] = w->s.tok_s;
			w->floor[r] = floor_s(fio, w->s.step_rd, w->s.step_wr);
			if (w->floor[r] < 0) {
				fprintf(stderr, "hmm-bench scale: fio failed "
					"(said above)\n");
				return 1;
			}
			fprintf(json ? stderr : stdout, "rep %d %-8s %.3f "
				"s/step, %.1f MiB of store I/O, io floor %.3f "
				"s, in memory %.3f s\n", r + 1,
				presets[k].name, w->step[r],
				w->bytes[r] / 1048576.0, w->floor[r],
				w->mem[r]);
		}
	}
	bench_scratch_remove(fio);
	if (!json)
		printf("%-8s %9s %10s %10s %9s %12s %10s %10s %6s %7s\n",
		       "preset", "params", "state MiB", "budget MiB", "step s",
		       "store MiB/st", "io floor s", "in mem s", "ratio",
		       "tok/s");
	else {
		bench_json_begin(stdout, "scale");
		bench_json_int(stdout, "steps", steps);
		bench_json_int(stdout, "reps", reps);
	}
	for (int k = 0; k < NPRESET; k++) {
		struct row *w = &row[k];
		double st = bench_median(w->step, reps);
		double by = bench_median(w->bytes, reps);
		double fl = bench_median(w->floor, reps);
		double tk = bench_median(w->tok, reps);
		double cf = bench_median(w->mem, reps);
		double fm = fl > cf ? fl : cf;
		char key[64];

		if (!json) {
			printf("%-8s %8.1fM %10.1f %10.1f %9.3f %12.1f %10.3f "
			       "%10.3f %6.2f %7.1f\n", presets[k].name,
			       w->s.params / 1e6, w->s.state / 1048576.0,
			       w->s.budget / 1048576.0, st, by / 1048576.0,
			       fl, cf, fm > 0 ? st / fm : 0, tk);
			continue;
		}
#define J(kind, field, v) do { snprintf(key, sizeof(key), "%s_%s", \
			presets[k].name, field); bench_json_##kind(stdout, key, v); \
		} while (0)
		J(int, "params", w->s.params);
		J(int, "state_bytes", w->s.state);
		J(int, "host_budget", w->s.budget);
		J(num, "step_s", st);
		J(num, "store_bytes", by);
		J(num, "io_floor_s", fl);
		J(num, "compute_floor_s", cf);
		J(num, "ratio", fm > 0 ? st / fm : 0);
		J(num, "tok_s", tk);
#undef J
	}
	if (json)
		bench_json_end(stdout);
	return 0;
}

HMM_BENCH(scale, "hmm-train's cost as the model grows (default, large, "
	  "350m)", bench_scale);
