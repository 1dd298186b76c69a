// SPDX-License-Identifier: MIT
/*
 * hmm-train — the main job: train a small GPT whose training state
 * lives in hmm tensors, by default with a host budget of a quarter of
 * that state so that the store is really used.  This file is the command
 * line; train.c runs it.  See man/hmm-train.1.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas.h"
#include "cuda.h"
#include "gpu.h"
#include "hmm.h"
#include "model.h"
#include "scratch.h"
#include "train.h"

static void usage(FILE *f)
{
	fprintf(f,
"usage: hmm-train [options]\n"
"  --preset NAME       model size (default: default); --preset list\n"
"  --steps N           steps to train to (default: the preset's)\n"
"  --host-budget SIZE  host memory for the training state, e.g. 64M, 2G,\n"
"                      or /N: the state over N (default: /4, a quarter\n"
"                      of the state; a budget larger\n"
"                      than the state keeps everything in memory)\n"
"  --store PATH        store file or block device (default: a temporary\n"
"                      file under build/tmp or $TMPDIR, unlinked once\n"
"                      open, so it goes however the run ends;\n"
"                      with --ckpt: PATH.store, kept once it holds\n"
"                      a checkpoint)\n"
"  --format            format the store whatever it holds (foreign data,\n"
"                      or an hmm store with named tensors: without it\n"
"                      they are refused and left untouched)\n"
"  --daemon unix:PATH  use hmmd at this socket (shared mode; the store\n"
"                      is hmmd's: not with --store, --format, --ckpt,\n"
"                      --resume)\n"
"  --data FILE         train on a text file, byte by byte (default: a\n"
"                      synthetic grammar corpus made from --seed)\n"
"  --seed N            seed for the corpus, the weights, the batches (1)\n"
"  --lr X              peak learning rate (default: the preset's)\n"
"  --batch N           sequences per step (default: the preset's)\n"
"  --ckpt PATH         checkpoint at the end: flush the store, write\n"
"                      the small file PATH (the state stays in the store)\n"
"  --resume PATH       continue from a checkpoint (in its own store; the\n"
"                      only --ckpt allowed then is PATH itself)\n"
"  --report PATH       write an HTML report (inline SVG) at the end\n"
"  --offload-activations  the checkpointed block inputs go to the store\n"
"                      after the forward and come back for the backward\n"
"                      (same losses; recomputes even when the state fits)\n"
"  --json              one JSON object per step, then a summary object\n"
"  --threads N         kernel threads, 1..64 (default: the online CPUs)\n"
"  --pool SIZE         the store's pinned I/O pool, 4K..1G (default 4M)\n"
"  --io-depth N        store I/Os in flight, 1..4096 (default 4)\n"
"  --queue-depth N     io_uring entries, 1..4096 (default max(64, io-depth))\n"
"  --device cpu|cuda   where the step runs (default cpu); cuda needs the\n"
"                      driver, a GPU and cuBLAS, found at run time; its\n"
"                      AdamW runs on the CPU over the state\n"
"  --device-budget SIZE  device memory for the parameters and gradients\n"
"                      (with --device cuda; default: all of them)\n"
"  -h, --help          this text\n");
}

/* A byte size (hmm_size_parse: "123", "4K", "2MiB", "1G"), or -1. */
static int64_t parse_size(const char *s)
{
	uint64_t v;

	return hmm_size_parse(s, &v) || v > INT64_MAX ? -1 : (int64_t)v;
}

static int parse_int(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (*end || v < 0 || errno == ERANGE)
		return -1;
	*out = v;
	return 0;
}

static int bad(const char *flag, const char *val, const char *why)
{
	fprintf(stderr, "hmm-train: %s%s%s: %s\n", flag, val && *val ? " " : "",
		val ? val : "", why);
	return 2;
}

static void list_presets(void)
{
	for (const struct preset *p = preset_list(); p->name; p++)
		printf("%-8s %2d layers, d %4d, ctx %3d, batch %d, %3d steps, "
		       "loss_max %.2f: %.1f M parameters%s%s\n", p->name,
		       p->cfg.layers, p->cfg.d, p->cfg.ctx, p->cfg.batch,
		       p->steps, p->loss_max, gpt_params(&p->cfg) / 1e6,
		       *p->about ? ", " : "", p->about);
}

/* --device cuda: 0, or 1 saying what is missing (before any state). */
static int train_cuda_probe(void)
{
	char why[512], found[128];

	if (cuda_probe(why, sizeof(why), found, sizeof(found))) {
		fprintf(stderr, "hmm-train: --device cuda: %s\n", why);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "preset", 1, 0, 'p' }, { "steps", 1, 0, 'n' },
		{ "host-budget", 1, 0, 'b' }, { "store", 1, 0, 's' },
		{ "daemon", 1, 0, 'D' }, { "data", 1, 0, 'd' },
		{ "seed", 1, 0, 'S' }, { "ckpt", 1, 0, 'c' },
		{ "resume", 1, 0, 'r' }, { "report", 1, 0, 'R' },
		{ "lr", 1, 0, 'l' }, { "batch", 1, 0, 'B' },
		{ "json", 0, 0, 'j' }, { "format", 0, 0, 'F' },
		{ "threads", 1, 0, 'T' }, { "pool", 1, 0, 'P' },
		{ "io-depth", 1, 0, 'I' }, { "queue-depth", 1, 0, 'Q' },
		{ "device", 1, 0, 'G' }, { "device-budget", 1, 0, 'g' },
		{ "offload-activations", 0, 0, 'A' },
		{ "help", 0, 0, 'h' }, { 0 }
	};
	struct train_opts o = { .host_budget = -1, .seed = 1 };
	const char *preset = "default", *device = "cpu";
	int64_t v, dev_budget = 0;
	const char *dev_budget_arg = NULL;
	char *end;
	int c, li = 0;

	scratch_arm();	/* before any file of the run's is made */
	while ((c = getopt_long(argc, argv, "h", opts, &li)) != -1) {
		/* an empty path or word: "" would be read as the cwd */
		if (optarg && !*optarg) {
			char flag[32];

			snprintf(flag, sizeof(flag), "--%s", opts[li].name);
			return bad(flag, "\"\"", "want a value, not empty");
		}
		switch (c) {
		case 'p': preset = optarg; break;
		case 'n':
			if (parse_int(optarg, &o.steps) || !o.steps)
				return bad("--steps", optarg, "want a positive integer");
			if (o.steps > INT32_MAX)
				return bad("--steps", optarg, "at most 2147483647 "
					   "(a record is kept per step)");
			break;
		case 'b':
			if (optarg[0] == '/') {	/* a fraction of the state */
				char *e;
				long d = strtol(optarg + 1, &e, 10);

				if (*e || d < 1 || d > 1 << 20)
					return bad("--host-budget", optarg,
						   "want /N, N from 1 to "
						   "1048576");
				o.budget_div = (int)d;
				o.host_budget = -1;
				break;
			}
			o.host_budget = parse_size(optarg);
			o.budget_div = 0;
			if (o.host_budget <= 0)
				return bad("--host-budget", optarg,
					   "want a size like 512M or 4G");
			break;
		case 's': o.store = optarg; break;
		case 'D': o.daemon = optarg; break;
		case 'd': o.data = optarg; break;
		case 'S':
			if (parse_int(optarg, &v))
				return bad("--seed", optarg,
					   "want an integer, 0 or more");
			o.seed = v;
			break;
		case 'l':
			o.lr = strtod(optarg, &end);
			if (*end || !(o.lr > 0 && o.lr < 1))
				return bad("--lr", optarg, "want a number in (0, 1)");
			break;
		case 'B':
			if (parse_int(optarg, &v) || v < 1 || v > 4096)
				return bad("--batch", optarg, "want 1 to 4096");
			o.batch = v;
			break;
		case 'c': o.ckpt = optarg; break;
		case 'r': o.resume = optarg; break;
		case 'R': o.report = optarg; break;
		case 'j': o.json = 1; break;
		case 'F': o.format = 1; break;
		case 'T':
		case 'I':
		case 'Q':
			/* ranges: hmm_open's (config.kernel_threads, ...) */
			if (parse_int(optarg, &v) || v < 1 || v > UINT32_MAX)
				return bad(c == 'T' ? "--threads" : c == 'I' ?
					   "--io-depth" : "--queue-depth",
					   optarg, "want a positive integer");
			*(c == 'T' ? &o.threads : c == 'I' ? &o.io_depth :
			  &o.queue_depth) = (uint32_t)v;
			break;
		case 'P':
			v = parse_size(optarg);
			if (v <= 0 || v > UINT32_MAX)
				return bad("--pool", optarg, "want a size like "
					   "4M, at most 1G");
			o.pool_bytes = (uint32_t)v;
			break;
		case 'G': device = optarg; break;
		case 'g':
			dev_budget = parse_size(optarg);
			dev_budget_arg = optarg;
			if (dev_budget <= 0)
				return bad("--device-budget", optarg,
					   "want a size like 512M or 4G");
			break;
		case 'A': o.offload_acts = 1; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc)
		return bad("argument", argv[optind], "unexpected (see --help)");
	if (o.format && o.resume)
		return bad("--format", "", "formats the store --resume needs");
	/* with --daemon the state lives in hmmd's store: a --store of ours
	   was made, reserved and left unused, and a checkpoint flushed
	   hmmd's store but named that empty file, so it never resumed */
	if (o.daemon && (o.store || o.format))
		return bad(o.store ? "--store" : "--format", o.store,
			   "not with --daemon (the store is hmmd's: its "
			   "--store, --format)");
	if (o.daemon && (o.ckpt || o.resume))
		return bad(o.ckpt ? "--ckpt" : "--resume",
			   o.ckpt ? o.ckpt : o.resume, "not with --daemon (a "
			   "checkpoint is a flush of hmm-train's own store; "
			   "with --daemon the state is in hmmd's)");
	if (!strcmp(preset, "list")) {
		list_presets();
		return 0;
	}
	o.preset = preset_find(preset);
	if (!o.preset)
		return bad("--preset", preset, "unknown (see --preset list)");
	if (strcmp(device, "cpu") && strcmp(device, "cuda"))
		return bad("--device", device, "want cpu or cuda");
	if (dev_budget && strcmp(device, "cuda"))
		return bad("--device-budget", dev_budget_arg,
			   "only with --device cuda");
	if (!strcmp(device, "cuda")) {
		if (o.offload_acts)
			return bad("--offload-activations", "", "not with "
				   "--device cuda (its activations stay on "
				   "the GPU)");
		struct gpu_plan plan;
		char why[512];

		/* a budget too small is bad input, GPU or not */
		if (gpu_plan_make(&o.preset->cfg, GPU_CHUNK, dev_budget, &plan,
				  why, sizeof(why)))
			return bad("--device-budget", "", why);
		if (train_cuda_probe())
			return 1;
		o.cuda = 1;
		o.device_budget = (uint64_t)dev_budget;
	}
	blas_setup(argv, stderr);
	o.blas_core = blas_core();
	return train_main(&o);
}
