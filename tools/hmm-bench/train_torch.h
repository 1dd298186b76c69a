/* SPDX-License-Identifier: MIT */
/*
 * train_torch.h — hmm-train's GPT in PyTorch (train_torch.c), timed by
 * one python process: `hmm-bench train --vs-torch` runs it between
 * hmm-train runs.
 */
#ifndef HMM_BENCH_TRAIN_TORCH_H
#define HMM_BENCH_TRAIN_TORCH_H

#include <stddef.h>

struct torch_gpt {
	int vocab, ctx, d, heads, layers, batch, threads;
};

struct torch_gpt_result {
	char version[32];	/* torch.__version__ */
	double tok_s;		/* median step, all activations kept */
	double tok_s_recompute;	/* every block recomputed, as hmm-train */
};

/*
 * Run a torch script, argv (argv[0] the python), in its own process
 * group, with OMP_WAIT_POLICY=passive when passive.  result(line, arg)
 * says whether a line of its output is the result it wants (and takes
 * it); what it prints before that goes to standard error (an
 * ImportError, ...).  0, or -1 when no result came or it failed.
 */
int torch_script_run(char *const argv[], int passive,
		     int (*result)(const char *line, void *arg), void *arg);

/*
 * Run the model for `steps` timed steps in `python` (a path to a python
 * with torch).  0, or -1 when it could not run (its output went to
 * standard error).
 */
int torch_gpt_run(const char *python, const struct torch_gpt *m, int steps,
		  struct torch_gpt_result *res);

/*
 * The python of the venv whose torch 2.x (or DeepSpeed) a bench compares
 * with: DIR/bin/python of given (a --torch-venv or --ds-venv DIR), else
 * of $HMM_TORCH_VENV, else of build/peers beside this binary's folder
 * (build/bin), which scripts/peers.sh makes, in py[cap].  Returns 2
 * (given or from the environment: it must run), 1 (build/peers, found
 * with a bin/python: left out if it cannot run), or 0 (none; py "").
 */
int torch_venv_python(const char *given, char *py, size_t cap);

#endif /* HMM_BENCH_TRAIN_TORCH_H */
