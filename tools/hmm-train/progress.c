// SPDX-License-Identifier: MIT
/*
 * progress.c — what hmm-train prints while it runs (run.h): on a
 * terminal one live line redrawn each step; otherwise a plain line every
 * few steps; with --json one object per step and a summary object last.
 */
#include <stdlib.h>
#include <string.h>

#include "hk.h"
#include "run.h"

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double run_step_s_median(const struct run *r)
{
	double *v, m;

	if (r->nrec == 0)
		return 0;
	v = malloc(r->nrec * sizeof(*v));
	if (!v)
		return 0;
	for (int i = 0; i < r->nrec; i++)
		v[i] = r->rec[i].step_s;
	qsort(v, r->nrec, sizeof(*v), cmp_d);
	m = r->nrec % 2 ? v[r->nrec / 2] :
	    (v[r->nrec / 2 - 1] + v[r->nrec / 2]) / 2;
	free(v);
	return m;
}

double run_tok_s(const struct run *r)
{
	double s = 0;

	for (int i = 0; i < r->nrec; i++)
		s += r->rec[i].step_s;
	return s > 0 ? (double)r->nrec * r->cfg.batch * r->cfg.ctx / s : 0;
}

static double mib(uint64_t b)
{
	return b / 1048576.0;
}

void progress_begin(struct run *r)
{
	FILE *f = r->out;

	if (r->json)
		return;
	fprintf(f, "hmm-train: preset %s: %llu parameters (%d layers, d %d, "
		"%d heads, ctx %d, batch %d), data: %s\n", r->preset,
		(unsigned long long)r->params, r->cfg.layers, r->cfg.d,
		r->cfg.heads, r->cfg.ctx, r->cfg.batch, r->data_source);
	fprintf(f, "hmm-train: training state %.1f MiB, host budget %.1f MiB"
		"%s%s%s; activations %s; attention %s, adamw %s, blas %s\n",
		mib(r->state_bytes), mib(r->host_budget),
		r->offloaded ? ", store " : r->has_store ?
		" (all in memory; checkpoint store " : " (all in memory)",
		r->has_store ? r->store_path : "",
		!r->offloaded && r->has_store ? ")" : "",
		r->kept_acts ? "kept" : "recomputed per block", r->attn,
		r->optim, r->blas_core);
	fprintf(f, "hmm-train: %d kernel threads", r->threads);
	if (r->pool_bytes >= 1 << 20)
		fprintf(f, "; store pool %.1f MiB", mib(r->pool_bytes));
	else if (r->pool_bytes)	/* --pool 4K is not "0.0 MiB" */
		fprintf(f, "; store pool %llu KiB",
			(unsigned long long)r->pool_bytes >> 10);
	if (r->pool_bytes)
		fprintf(f, ", %u I/Os in flight, queue depth %u", r->io_depth,
			r->queue_depth);
	fprintf(f, "\n");
	fflush(f);
}

static void json_step(FILE *f, const struct step_rec *s)
{
	fprintf(f, "{\"step\":%lld,\"loss\":%.6f,\"loss_hex\":\"%a\","
		"\"step_s\":%.4f,"
		"\"tok_s\":%.1f,\"host_bytes\":%llu,\"store_bytes\":%llu,"
		"\"store_read_bytes\":%llu,\"store_write_bytes\":%llu,"
		"\"stall_s\":%.4f}\n", (long long)s->step, s->loss, s->loss,
		s->step_s,
		s->tok_s, (unsigned long long)s->host_resident,
		(unsigned long long)s->store_resident,
		(unsigned long long)s->store_read_bytes,
		(unsigned long long)s->store_write_bytes, s->stall_s);
}

void progress_step(struct run *r, const struct step_rec *s)
{
	FILE *f = r->out;
	int64_t left = r->steps - s->step;
	double dt = r->nrec > 1 ? s->t - r->rec[r->nrec - 2].t : s->step_s;
	double rd = 0, wr = 0;

	if (r->json) {
		json_step(f, s);
		fflush(f);
		return;
	}
	if (r->nrec > 1 && dt > 0) {
		rd = mib(s->store_read_bytes - r->rec[r->nrec - 2].store_read_bytes) / dt;
		wr = mib(s->store_write_bytes - r->rec[r->nrec - 2].store_write_bytes) / dt;
	}
	if (r->tty) {
		fprintf(f, "\r\033[Kstep %lld/%lld  loss %.4f  %.0f tok/s  "
			"host %.1f MiB  store %.1f MiB  r %.0f w %.0f MiB/s  "
			"eta %.0fs", (long long)s->step, (long long)r->steps,
			s->loss, s->tok_s, mib(s->host_resident),
			mib(s->store_resident), rd, wr,
			left * run_step_s_median(r));
		if (!left)
			fputc('\n', f);
	} else if (s->step == r->first_step || !left || s->step % 10 == 0) {
		fprintf(f, "step %lld/%lld loss %.4f step_s %.3f tok_s %.0f "
			"host_mib %.1f store_mib %.1f read_mib_s %.1f "
			"write_mib_s %.1f\n", (long long)s->step,
			(long long)r->steps, s->loss, s->step_s, s->tok_s,
			mib(s->host_resident), mib(s->store_resident), rd, wr);
	}
	fflush(f);
}

void progress_end(struct run *r)
{
	FILE *f = r->out;
	const struct step_rec *a = r->nrec ? &r->rec[0] : NULL;
	const struct step_rec *z = r->nrec ? &r->rec[r->nrec - 1] : NULL;

	if (!r->json) {
		fprintf(f, "hmm-train: %d steps in %.1f s, loss %.4f -> %.4f, "
			"median step %.3f s, %.0f tok/s, store read %.1f MiB "
			"written %.1f MiB, peak RSS %.1f MiB\n", r->nrec,
			r->wall_s, a ? a->loss : 0, z ? z->loss : 0,
			run_step_s_median(r), run_tok_s(r),
			z ? mib(z->store_read_bytes) : 0,
			z ? mib(z->store_write_bytes) : 0,
			mib(r->peak_rss_bytes));
		fflush(f);
		return;
	}
	fprintf(f, "{\"summary\":true,\"preset\":\"%s\",\"params\":%llu,"
		"\"vocab\":%d,\"ctx\":%d,\"d\":%d,\"heads\":%d,"
		"\"layers\":%d,\"batch\":%d,\"threads\":%d,"
		"\"pool_bytes\":%llu,\"io_depth\":%u,\"queue_depth\":%u,"
		"\"steps\":%d,\"loss_first\":%.6f,\"loss_last\":%.6f,"
		"\"step_s_median\":%.4f,\"tok_s\":%.1f,\"host_budget\":%llu,"
		"\"state_bytes\":%llu,\"offloaded\":%s,\"kept_activations\":%s,"
		"\"activation_bytes\":%llu,"
		"\"store_read_bytes\":%llu,\"store_write_bytes\":%llu,"
		"\"peak_rss_bytes\":%llu,\"stall_s\":%.4f,\"step_flops\":%.6g,"
		"\"ckpt_step\":%lld,\"ckpt_flush_bytes\":%llu,"
		"\"ckpt_file_bytes\":%llu,\"wall_s\":%.3f}\n", r->preset,
		(unsigned long long)r->params, r->cfg.vocab, r->cfg.ctx,
		r->cfg.d, r->cfg.heads, r->cfg.layers, r->cfg.batch,
		hk_threads(), (unsigned long long)r->pool_bytes, r->io_depth,
		r->queue_depth, r->nrec, a ? a->loss : 0,
		z ? z->loss : 0, run_step_s_median(r), run_tok_s(r),
		(unsigned long long)r->host_budget,
		(unsigned long long)r->state_bytes,
		r->offloaded ? "true" : "false",
		r->kept_acts ? "true" : "false",
		(unsigned long long)r->activation_bytes,
		(unsigned long long)(z ? z->store_read_bytes : 0),
		(unsigned long long)(z ? z->store_write_bytes : 0),
		(unsigned long long)r->peak_rss_bytes, z ? z->stall_s : 0,
		r->step_flops, (long long)r->ckpt_step,
		(unsigned long long)r->ckpt_flush_bytes,
		(unsigned long long)r->ckpt_file_bytes, r->wall_s);
	fflush(f);
}
