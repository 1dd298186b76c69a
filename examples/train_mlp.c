// SPDX-License-Identifier: MIT
/*
 * train_mlp — a trainer built outside hmm's tree, against an installed
 * libhmm and libhk (see Makefile here: pkg-config only).
 *
 * A toy MLP (IN -> HID tanh -> 1) learns a fixed random teacher.  Its
 * weights for compute live in this process's memory, as a GPU copy
 * would; the optimizer's state (the fp32 master p, the gradient g and
 * AdamW's m and v) lives in four hmm tensors whose bytes are four times
 * the host budget, so most of it sits in the store.  Each step:
 *
 *	forward + backward in memory  ->  g, written into its tensor
 *	hk_offload_adamw_step(): the fused AdamW on mapped pieces of p, g,
 *	m, v, streamed through the budget  ->  p read back into the weights
 *
 * Usage: train_mlp --store PATH [--steps N] [--daemon unix:SOCKET]
 * With --daemon the tensors live in that hmmd (shared mode), --store is
 * not used, and the host budget asked of hmmd is at least two pieces of
 * the four tensors in hmmd's chunks (2 MiB by default, more than BUDGET).
 * Prints the batch loss every 10 steps, then one line
 * "train_mlp: loss A -> B, store written W bytes, host peak P of BUDGET"
 * (A, B: a held-out batch's loss before and after training) and exits
 * 0 when B < A.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hk_adamw.h>
#include <hk_offload.h>
#include <hmm.h>

#define IN	64
#define HID	4096
#define BATCH	32
#define NPARAM	((size_t)IN * HID + HID + HID + 1)	/* W1 b1 W2 b2 */
#define CHUNK	(64u << 10)
#define BUDGET	((uint64_t)NPARAM * 4)	/* a quarter of p, g, m, v */

/* The teacher and the batches: a small xorshift, the same every run. */
static uint64_t seed = 0x9e3779b97f4a7c15ull;

static float frand(void)	/* in [-1, 1) */
{
	seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
	return (float)((seed >> 11) * 0x1p-53 * 2.0 - 1.0);
}

/*
 * One batch's loss (mean squared error) and, in g, its gradient with
 * respect to w (both laid out W1[IN][HID], b1[HID], W2[HID], b2).
 */
static double forward_backward(const float *w, float *g, const float *x,
			       const float *y, float *h)
{
	const float *w1 = w, *b1 = w + IN * HID, *w2 = b1 + HID, *b2 = w2 + HID;
	float *g1 = g, *gb1 = g + IN * HID, *g2 = gb1 + HID, *gb2 = g2 + HID;
	double loss = 0;

	memset(g, 0, NPARAM * sizeof(*g));
	for (int b = 0; b < BATCH; b++) {
		const float *xb = x + b * IN;
		float out = *b2, d;

		for (int j = 0; j < HID; j++) {
			float a = b1[j];

			for (int i = 0; i < IN; i++)
				a += xb[i] * w1[i * HID + j];
			h[j] = tanhf(a);
			out += h[j] * w2[j];
		}
		d = out - y[b];
		loss += (double)d * d / BATCH;
		d *= 2.0f / BATCH;
		*gb2 += d;
		for (int j = 0; j < HID; j++) {
			float dh = d * w2[j] * (1 - h[j] * h[j]);

			g2[j] += d * h[j];
			gb1[j] += dh;
			for (int i = 0; i < IN; i++)
				g1[i * HID + j] += dh * xb[i];
		}
	}
	return loss;
}

/* Copy n floats into (in = 1) or out of a tensor, a few chunks a time. */
static int copy_tensor(struct hmm *c, struct hmm_tensor *t, float *buf,
		       size_t n, int in)
{
	const uint64_t bytes = n * sizeof(float), piece = 4 * CHUNK;

	for (uint64_t o = 0; o < bytes; o += piece) {
		uint64_t len = bytes - o < piece ? bytes - o : piece;
		void *p;
		int r = hmm_map(t, o, len, HMM_TIER_HOST,
				in ? HMM_DISCARD : HMM_READ, &p);

		if (r)
			return r;
		if (in)
			memcpy(p, (char *)buf + o, len);
		else
			memcpy((char *)buf + o, p, len);
		hmm_unmap(t, p);
		hmm_evict(t, o, len, HMM_TIER_HOST);
	}
	return hmm_wait(c, t);
}

/* A batch of the teacher's examples: y = tanh(teacher . x / 4). */
static void batch(const float *teacher, float *x, float *y)
{
	for (int b = 0; b < BATCH; b++) {
		float dot = 0;

		for (int i = 0; i < IN; i++) {
			x[b * IN + i] = frand();
			dot += x[b * IN + i] * teacher[i];
		}
		y[b] = tanhf(0.25f * dot);
	}
}

/*
 * The chunk the context uses: ours, or in shared mode hmmd's, which may
 * be larger (hmm_stats_json's "chunk_bytes").  Maps pin whole chunks, so
 * the budget and the optimizer's pieces are sized by it.
 */
static uint32_t chunk_in_use(struct hmm *c)
{
	int n = hmm_stats_json(c, NULL, 0);
	char *buf = n > 0 ? malloc(n + 1) : NULL, *p;
	uint32_t chunk = CHUNK;

	if (buf && hmm_stats_json(c, buf, n + 1) == n &&
	    (p = strstr(buf, "\"chunk_bytes\":")))
		chunk = (uint32_t)strtoul(p + strlen("\"chunk_bytes\":"),
					  NULL, 10);
	free(buf);
	return chunk;
}

static int die(const char *what, int err)
{
	fprintf(stderr, "train_mlp: %s: %s (%s)\n", what, hmm_strerror(err),
		hmm_last_error());
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "steps", required_argument, NULL, 'n' },
		{ "daemon", required_argument, NULL, 'd' },
		{ 0 }
	};
	static const char *const names[4] = { "mlp.p", "mlp.g", "mlp.m",
					       "mlp.v" };
	struct hmm_tensor *t[4] = { 0 };
	struct hmm_config cfg;
	struct hmm_stats st;
	struct hk_offload_adamw o;
	int64_t shape = NPARAM;
	double first = 0, loss = 0;
	int steps = 60, r, opt;
	uint32_t chunk;
	float *w, *g, *x, *y, *hbuf, teacher[IN], xe[BATCH * IN], ye[BATCH];
	struct hmm *c;

	hmm_config_default(&cfg);
	cfg.host_budget = BUDGET;
	cfg.chunk_bytes = CHUNK;
	cfg.store_size = 8 * BUDGET;
	while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (opt == 's')
			cfg.store_path = optarg;
		else if (opt == 'n')
			steps = atoi(optarg);
		else if (opt == 'd')
			cfg.daemon = optarg;
		else
			return 2;
	}
	if ((!cfg.store_path && !cfg.daemon) || steps < 1) {
		fprintf(stderr, "usage: train_mlp --store PATH [--steps N] "
			"[--daemon unix:SOCKET]\n");
		return 2;
	}
	if (cfg.daemon)
		cfg.store_path = NULL;

	w = malloc(NPARAM * sizeof(*w));
	g = malloc(NPARAM * sizeof(*g));
	x = malloc(BATCH * IN * sizeof(*x));
	y = malloc(BATCH * sizeof(*y));
	hbuf = malloc(HID * sizeof(*hbuf));
	if (!w || !g || !x || !y || !hbuf)
		return die("memory", -ENOMEM);
	for (int i = 0; i < IN; i++)
		teacher[i] = frand();
	for (size_t i = 0; i < NPARAM; i++)
		w[i] = frand() * (i < (size_t)IN * HID ? 0.125f : 0.015625f);
	batch(teacher, xe, ye);		/* held out: the loss before and after */
	first = forward_backward(w, g, xe, ye, hbuf);

	r = hmm_open(&cfg, &c);
	if (r)
		return die("hmm_open", r);
	chunk = chunk_in_use(c);
	if (cfg.daemon && cfg.host_budget < 8 * (uint64_t)chunk) {
		/* hmmd's chunks: ask for two pieces of the four tensors */
		hmm_close(c);
		cfg.host_budget = 8 * (uint64_t)chunk;
		r = hmm_open(&cfg, &c);
		if (r)
			return die("hmm_open", r);
	}
	for (int k = 0; k < 4; k++) {
		r = hmm_tensor_new(c, names[k], HMM_DTYPE_F32, 1, &shape, &t[k]);
		if (r)
			return die(names[k], r);
	}
	/* the master from the weights, m and v from zeros (g is a buffer) */
	r = copy_tensor(c, t[0], w, NPARAM, 1);
	memset(g, 0, NPARAM * sizeof(*g));
	for (int k = 2; k < 4 && !r; k++)
		r = copy_tensor(c, t[k], g, NPARAM, 1);
	if (r)
		return die("initial state", r);

	memset(&o, 0, sizeof(o));
	o.param = t[0], o.grad = t[1], o.exp_avg = t[2], o.exp_avg_sq = t[3];
	o.hp.lr = 3e-3, o.hp.beta1 = 0.9, o.hp.beta2 = 0.999;
	o.hp.eps = 1e-8, o.hp.weight_decay = 0.01;
	o.chunk_bytes = chunk;
	for (int s = 1; s <= steps; s++) {
		batch(teacher, x, y);
		loss = forward_backward(w, g, x, y, hbuf);
		if (s % 10 == 0 || s == 1)
			printf("step %d loss %.6f\n", s, loss);
		r = copy_tensor(c, t[1], g, NPARAM, 1);
		if (r)
			return die("write grad", r);
		o.hp.step = s, o.start = 0;
		r = hk_offload_adamw_step(c, &o);
		if (r < 0) {
			fprintf(stderr, "train_mlp: step %d: %s\n", s,
				hk_offload_error());
			return 1;
		}
		r = copy_tensor(c, t[0], w, NPARAM, 0);
		if (r)
			return die("read master", r);
	}
	loss = forward_backward(w, g, xe, ye, hbuf);
	hmm_stats(c, &st);
	printf("train_mlp: loss %.6f -> %.6f, store written %llu bytes, "
	       "host peak %llu of %llu\n", first, loss,
	       (unsigned long long)st.tier[HMM_TIER_STORE].bytes_in,
	       (unsigned long long)st.tier[HMM_TIER_HOST].peak,
	       (unsigned long long)st.tier[HMM_TIER_HOST].capacity);
	for (int k = 0; k < 4; k++)
		hmm_tensor_free(t[k]);
	hmm_close(c);
	free(w), free(g), free(x), free(y), free(hbuf);
	return loss < first ? 0 : 1;
}
