// SPDX-License-Identifier: MIT
/*
 * train_torch.c — the same GPT as hmm-train's, in PyTorch, for
 * `hmm-bench train --vs-torch` (train_torch.h).
 *
 * The model is written out to match tools/hmm-train/model.h: byte
 * tokens, learned positions, pre-LayerNorm blocks (fused qkv Linear with
 * bias, causal attention, output Linear; Linear d -> 4d, GELU tanh form,
 * Linear 4d -> d), a final LayerNorm, the head tied to the token
 * embedding, cross-entropy, AdamW (weight decay 0.1) and gradient
 * clipping to norm 1.  Attention is scaled_dot_product_attention where
 * the torch has it (2.x), else the plain masked softmax (1.13).  Each
 * run times `steps` steps after two warm-up steps, once as is and once
 * with every block recomputed in the backward (torch.utils.checkpoint),
 * as hmm-train does; it prints "torch VERSION THREADS TOK_S TOK_S_RECOMP"
 * with tok/s from the median step.  The script is passed with -c, so it
 * holds no single quote.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <limits.h>

#include "bench.h"
#include "train_torch.h"

static const char script[] =
"import math, sys, time, torch\n"
"import torch.nn.functional as F\n"
"from torch.utils.checkpoint import checkpoint\n"
"V, T, D, H, L, B, steps, threads = map(int, sys.argv[1:9])\n"
"torch.set_num_threads(threads)\n"
"torch.manual_seed(1)\n"
"sdpa = getattr(F, \"scaled_dot_product_attention\", None)\n"
"mask = torch.ones(T, T, dtype=torch.bool).triu(1)\n"
"class Block(torch.nn.Module):\n"
"    def __init__(s):\n"
"        super().__init__()\n"
"        s.ln1, s.ln2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)\n"
"        s.qkv, s.proj = torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D)\n"
"        s.fc1 = torch.nn.Linear(D, 4 * D)\n"
"        s.fc2 = torch.nn.Linear(4 * D, D)\n"
"    def attn(s, x):\n"
"        q, k, v = s.qkv(x).view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)\n"
"        if sdpa:\n"
"            a = sdpa(q, k, v, is_causal=True)\n"
"        else:\n"
"            w = (q @ k.transpose(-1, -2)) / math.sqrt(D // H)\n"
"            a = w.masked_fill(mask, float(\"-inf\")).softmax(-1) @ v\n"
"        return s.proj(a.transpose(1, 2).reshape(B, T, D))\n"
"    def forward(s, x):\n"
"        x = x + s.attn(s.ln1(x))\n"
"        h = F.gelu(s.fc1(s.ln2(x)), approximate=\"tanh\")\n"
"        return x + s.fc2(h)\n"
"class GPT(torch.nn.Module):\n"
"    def __init__(s):\n"
"        super().__init__()\n"
"        s.wte, s.wpe = torch.nn.Embedding(V, D), torch.nn.Embedding(T, D)\n"
"        s.blocks = torch.nn.ModuleList(Block() for _ in range(L))\n"
"        s.lnf = torch.nn.LayerNorm(D)\n"
"    def forward(s, idx, tgt, recompute):\n"
"        x = s.wte(idx) + s.wpe(torch.arange(T))\n"
"        for b in s.blocks:\n"
"            x = checkpoint(b, x, use_reentrant=False) if recompute else b(x)\n"
"        y = s.lnf(x) @ s.wte.weight.t()\n"
"        return F.cross_entropy(y.view(-1, V), tgt.view(-1))\n"
"def run(recompute):\n"
"    m = GPT()\n"
"    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.1)\n"
"    g = torch.Generator().manual_seed(1)\n"
"    ts = []\n"
"    for i in range(steps + 2):\n"
"        idx = torch.randint(0, V, (B, T), generator=g)\n"
"        t0 = time.perf_counter()\n"
"        loss = m(idx, torch.roll(idx, -1, 1), recompute)\n"
"        opt.zero_grad(set_to_none=True)\n"
"        loss.backward()\n"
"        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)\n"
"        opt.step()\n"
"        if i >= 2:\n"
"            ts.append(time.perf_counter() - t0)\n"
"    ts.sort()\n"
"    return B * T / ts[len(ts) // 2]\n"
"print(\"torch\", torch.__version__, torch.get_num_threads(), run(0), run(1))\n";

int torch_script_run(char *const argv[], int passive,
		     int (*result)(const char *line, void *arg), void *arg)
{
	char **env = NULL, *mine = NULL, line[512];
	FILE *f;
	pid_t pid;
	int got = 0;

	/* torch's OpenMP threads sleep, not spin, between its ops (unless
	 * the caller says otherwise); in its environment, not hmm-bench's */
	if (passive &&
	    !(env = bench_env_with("OMP_WAIT_POLICY", "passive", NULL, &mine)))
		return -1;
	/* its own process group, killed and reaped if hmm-bench is stopped */
	f = bench_child_open(argv, env, &pid);
	free(env);
	free(mine);
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!got && !(got = result(line, arg)))
			/* say why (an ImportError, ...) */
			fprintf(stderr, "%s: %s", argv[0], line);
	return bench_child_close(f, pid) != 0 || !got ? -1 : 0;
}

struct gpt_line {
	const struct torch_gpt *m;
	struct torch_gpt_result *res;
};

/* "torch VERSION THREADS TOK_S TOK_S_RECOMPUTE" at the model's threads */
static int gpt_result(const char *line, void *arg)
{
	struct gpt_line *g = arg;
	int threads;

	return sscanf(line, "torch %31s %d %lf %lf", g->res->version,
		      &threads, &g->res->tok_s,
		      &g->res->tok_s_recompute) == 4 &&
	       threads == g->m->threads;
}

int torch_gpt_run(const char *python, const struct torch_gpt *m, int steps,
		  struct torch_gpt_result *res)
{
	char a[8][16];
	char *argv[] = { (char *)python, "-c", (char *)script, a[0], a[1],
			 a[2], a[3], a[4], a[5], a[6], a[7], NULL };
	const int v[8] = { m->vocab, m->ctx, m->d, m->heads, m->layers,
			   m->batch, steps, m->threads };
	struct gpt_line g = { m, res };

	memset(res, 0, sizeof(*res));
	for (int i = 0; i < 8; i++)
		snprintf(a[i], sizeof(a[i]), "%d", v[i]);
	return torch_script_run(argv, 1, gpt_result, &g);
}

int torch_venv_python(const char *given, char *py, size_t cap)
{
	const char *v = given && *given ? given : getenv("HMM_TORCH_VENV");
	char exe[PATH_MAX], *slash;
	ssize_t n;

	if (v && *v) {
		snprintf(py, cap, "%s/bin/python", v);
		return 2;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	exe[n > 0 ? n : 0] = 0;
	slash = strrchr(exe, '/');
	if (slash && snprintf(py, cap, "%.*s/../peers/bin/python",
			      (int)(slash - exe), exe) < (int)cap &&
	    !access(py, X_OK))
		return 1;
	py[0] = 0;
	return 0;
}
