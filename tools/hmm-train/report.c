// SPDX-License-Identifier: MIT
/*
 * report.c — the run as one self-contained HTML page (run.h): a table
 * of settings and results, then four inline SVG charts — the loss curve,
 * bytes per tier over time, store bandwidth over time, and where the
 * step time went (compute, optimizer, waiting for the store).  No script,
 * no external file, no network: it opens anywhere, offline.
 *
 * Element ids (tests/integration/test_train_report.sh looks for them):
 * table#summary, svg#loss, svg#tiers, svg#bandwidth, svg#stalls, each
 * chart's data as <polyline class="series"> or <rect class="bar">.
 */
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"
#include "run.h"
#include "scratch.h"

#define W	720
#define H	260
#define ML	70	/* margins: left, right, top, bottom */
#define MR	20
#define MT	30
#define MB	40

struct series {
	const char *name, *color;
	const double *y;
};

static void esc(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default: fputc(*s, f);
		}
	}
}

/* A "nice" tick step near range / 5. */
static double nice_step(double range)
{
	double raw = range / 5, mag, n;

	if (raw <= 0)
		return 1;
	mag = pow(10, floor(log10(raw)));
	n = raw / mag;
	return (n < 1.5 ? 1 : n < 3 ? 2 : n < 7 ? 5 : 10) * mag;
}

static void axes(FILE *f, double x0, double x1, double y0, double y1,
		 const char *xl, const char *yl)
{
	double sx = nice_step(x1 - x0), sy = nice_step(y1 - y0);

	fprintf(f, "<rect x='%d' y='%d' width='%d' height='%d' fill='#fff' "
		"stroke='#999'/>\n", ML, MT, W - ML - MR, H - MT - MB);
	for (double v = ceil(y0 / sy) * sy; v <= y1 + 1e-9; v += sy) {
		double py = MT + (H - MT - MB) * (1 - (v - y0) / (y1 - y0));

		fprintf(f, "<line x1='%d' x2='%d' y1='%.1f' y2='%.1f' "
			"stroke='#eee'/><text x='%d' y='%.1f' "
			"text-anchor='end' font-size='11'>%g</text>\n", ML,
			W - MR, py, py, ML - 4, py + 4, v);
	}
	for (double v = ceil(x0 / sx) * sx; v <= x1 + 1e-9; v += sx) {
		double px = ML + (W - ML - MR) * (v - x0) / (x1 - x0);

		fprintf(f, "<text x='%.1f' y='%d' text-anchor='middle' "
			"font-size='11'>%g</text>\n", px, H - MB + 15, v);
	}
	fprintf(f, "<text x='%d' y='%d' text-anchor='middle' font-size='12'>"
		"%s</text>\n", (W + ML) / 2, H - 6, xl);
	fprintf(f, "<text x='14' y='%d' font-size='12' transform='rotate(-90 "
		"14 %d)' text-anchor='middle'>%s</text>\n", (H + MT) / 2,
		(H + MT) / 2, yl);
}

static void chart(FILE *f, const char *id, const char *title,
		  const char *xl, const char *yl, const double *x, int n,
		  const struct series *s, int ns)
{
	double x0 = n ? x[0] : 0, x1 = n ? x[n - 1] : 1, y0 = 0, y1 = 0;

	for (int k = 0; k < ns; k++)
		for (int i = 0; i < n; i++)
			y1 = s[k].y[i] > y1 ? s[k].y[i] : y1;
	if (x1 <= x0)
		x1 = x0 + 1;
	if (y1 <= y0)
		y1 = 1;
	y1 *= 1.05;
	fprintf(f, "<h2>%s</h2>\n<svg id='%s' width='%d' height='%d' "
		"viewBox='0 0 %d %d' role='img'>\n", title, id, W, H, W, H);
	axes(f, x0, x1, y0, y1, xl, yl);
	for (int k = 0; k < ns; k++) {
		fprintf(f, "<polyline class='series' data-name='%s' fill='none' "
			"stroke='%s' stroke-width='2' points='", s[k].name,
			s[k].color);
		for (int i = 0; i < n; i++)
			fprintf(f, "%.1f,%.1f ",
				ML + (W - ML - MR) * (x[i] - x0) / (x1 - x0),
				MT + (H - MT - MB) * (1 - (s[k].y[i] - y0) /
						      (y1 - y0)));
		fprintf(f, "'/>\n<rect x='%d' y='%d' width='12' height='4' "
			"fill='%s'/><text x='%d' y='%d' font-size='12'>%s"
			"</text>\n", ML + 10 + 150 * k, 12, s[k].color,
			ML + 26 + 150 * k, 17, s[k].name);
	}
	fputs("</svg>\n", f);
}

struct seg {
	const char *name, *color;
	double v;
};

/* One horizontal stacked bar of segs, at row `row`, scaled to total. */
static void bar(FILE *f, int row, const char *label, const struct seg *s,
		int n, double total)
{
	double x = 160, w = W - 160 - MR;
	int y = 30 + row * 60;

	fprintf(f, "<text x='4' y='%d' font-size='12'>%s</text>\n", y + 16,
		label);
	for (int i = 0; i < n; i++) {
		double bw = total > 0 ? w * s[i].v / total : 0;

		fprintf(f, "<rect class='bar' data-name='%s' x='%.1f' y='%d' "
			"width='%.1f' height='24' fill='%s'><title>%s: %.2f s"
			"</title></rect>\n", s[i].name, x, y, bw, s[i].color,
			s[i].name, s[i].v);
		if (bw > 60)
			fprintf(f, "<text x='%.1f' y='%d' font-size='11' "
				"fill='#fff'>%s %.1f s</text>\n", x + 4, y + 16,
				s[i].name, s[i].v);
		x += bw;
	}
}

static void stalls(FILE *f, const struct run *r)
{
	const struct step_rec *z = &r->rec[r->nrec - 1];
	double busy = z->fwd_s + z->bwd_s + z->opt_s;
	double wait = z->stall_s < busy ? z->stall_s : busy;
	struct seg a[] = {
		{ "compute", "#3b7dd8", busy - wait },
		{ "waiting for the store", "#d8553b", wait },
	};
	struct seg b[] = {
		{ "forward", "#5a9", z->fwd_s },
		{ "backward + recompute", "#497", z->bwd_s },
		{ "optimizer", "#a85", z->opt_s },
	};

	fprintf(f, "<h2>Where the time went</h2>\n<svg id='stalls' width='%d' "
		"height='150' viewBox='0 0 %d 150' role='img'>\n", W, W);
	bar(f, 0, "step time", a, 2, busy);
	bar(f, 1, "by phase", b, 3, busy);
	fputs("</svg>\n", f);
}

static void row(FILE *f, const char *k, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void row(FILE *f, const char *k, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(f, "<tr><th>%s</th><td>", k);
	esc(f, buf);
	fputs("</td></tr>\n", f);
}

static void summary(FILE *f, const struct run *r)
{
	const struct step_rec *a = &r->rec[0], *z = &r->rec[r->nrec - 1];
	const char *trace = getenv("HMM_TRACE");

	fputs("<table id='summary'>\n", f);
	row(f, "model", "preset %s: %llu parameters, %d layers, d %d, %d heads, "
	    "context %d, batch %d", r->preset, (unsigned long long)r->params,
	    r->cfg.layers, r->cfg.d, r->cfg.heads, r->cfg.ctx, r->cfg.batch);
	row(f, "data", "%s", r->data_source);
	row(f, "steps", "%lld to %lld", (long long)a->step, (long long)z->step);
	row(f, "loss", "%.4f to %.4f (uniform: %.4f)", a->loss, z->loss,
	    log(r->cfg.vocab));
	row(f, "training state", "%.1f MiB", r->state_bytes / 1048576.0);
	row(f, "host budget", "%.1f MiB%s", r->host_budget / 1048576.0,
	    r->offloaded ? "" : " (everything in memory)");
	if (r->offloaded)
		row(f, "store", "%s", r->store_path);
	row(f, "store traffic", "read %.1f MiB, written %.1f MiB",
	    z->store_read_bytes / 1048576.0, z->store_write_bytes / 1048576.0);
	row(f, "median step", "%.3f s, %.0f tokens/s, %.2f GFLOP/s",
	    run_step_s_median(r), run_tok_s(r),
	    r->step_flops / run_step_s_median(r) / 1e9);
	row(f, "peak RSS", "%.1f MiB", r->peak_rss_bytes / 1048576.0);
	row(f, "kernels", "attention %s, AdamW %s, OpenBLAS core %s", r->attn,
	    r->optim, r->blas_core);
	if (trace)
		row(f, "trace", "%s (open in ui.perfetto.dev)", trace);
	fputs("</table>\n", f);
}

static void charts(FILE *f, const struct run *r)
{
	int n = r->nrec;
	double *v = calloc((size_t)n * 6, sizeof(double));
	double *x = v, *t = v + n, *y0 = v + 2 * n, *y1 = v + 3 * n;
	double *y2 = v + 4 * n, *y3 = v + 5 * n;

	if (!v)
		return;
	for (int i = 0; i < n; i++) {
		const struct step_rec *s = &r->rec[i], *p = i ? s - 1 : NULL;
		double dt = p ? s->t - p->t : s->t;

		x[i] = s->step;
		t[i] = s->t;
		y0[i] = s->loss;
		y1[i] = s->host_resident / 1048576.0;
		y2[i] = s->store_resident / 1048576.0;
		y3[i] = dt > 0 ? (s->store_read_bytes -
				  (p ? p->store_read_bytes : 0)) / 1048576.0 / dt : 0;
	}
	chart(f, "loss", "Loss", "step", "cross-entropy (nats)", x, n,
	      (struct series[]){ { "training loss", "#3b7dd8", y0 } }, 1);
	chart(f, "tiers", "Bytes per tier", "seconds", "MiB", t, n,
	      (struct series[]){ { "host DRAM", "#3b7dd8", y1 },
				 { "store", "#d8553b", y2 } }, 2);
	for (int i = 0; i < n; i++) {
		const struct step_rec *s = &r->rec[i], *p = i ? s - 1 : NULL;
		double dt = p ? s->t - p->t : s->t;

		y0[i] = dt > 0 ? (s->store_write_bytes -
				  (p ? p->store_write_bytes : 0)) / 1048576.0 / dt : 0;
	}
	chart(f, "bandwidth", "Store bandwidth", "seconds", "MiB/s", t, n,
	      (struct series[]){ { "read", "#3b7dd8", y3 },
				 { "write", "#d8553b", y0 } }, 2);
	free(v);
}

/* The page, whole, to f: 0, or -errno of the first failed write. */
static int page(FILE *f, const struct run *r)
{
	fputs("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>\n"
	      "<title>hmm-train report</title>\n<style>\n"
	      "body{font-family:sans-serif;margin:24px;color:#222}\n"
	      "table{border-collapse:collapse}th{text-align:left;padding:2px "
	      "12px 2px 0;color:#555}td{padding:2px 0}\n"
	      "h2{font-size:16px;margin:24px 0 4px}\n</style></head><body>\n"
	      "<h1>hmm-train</h1>\n", f);
	summary(f, r);
	charts(f, r);
	stalls(f, r);
	fputs("</body></html>\n", f);
	if (fflush(f) || ferror(f))
		return errno ? -errno : -EIO;
	if (fsync(fileno(f)))
		return -errno;
	return 0;
}

/*
 * The page goes to a file of its own beside path, which is renamed over
 * path only once whole and synced: a full disk or a signal mid-write
 * leaves path as it was (an earlier report, or nothing), and no partial
 * page under any name.  A symlink at path is followed (the page replaces
 * its target, as writing through it did); a page replacing a report
 * keeps its mode.
 */
int report_write(const struct run *r, const char *path, char *err,
		 size_t cap)
{
	char tmp[4300], *real = realpath(path, NULL);
	const char *to = real ? real : path;
	struct stat st;
	mode_t mode;
	FILE *f;
	int fd, e, slot = -1;

	if (r->nrec == 0) {
		snprintf(err, cap, "--report %s: no step ran", path);
		free(real);
		return -EINVAL;
	}
	if (!stat(to, &st)) {
		mode = st.st_mode & 07777;
	} else {
		mode = umask(0);
		umask(mode);
		mode = 0666 & ~mode;
	}
	fd = file_tmp_beside(to, tmp, sizeof(tmp), &slot);
	if (fd < 0) {
		snprintf(err, cap, "--report %s: cannot create a file in its "
			 "folder: %s", path, strerror(-fd));
		free(real);
		return fd;
	}
	f = fdopen(fd, "w");
	if (!f) {
		e = -errno;
		close(fd);
	} else {
		e = page(f, r);
		if (!e && fchmod(fd, mode))
			e = -errno;
		if (fclose(f) && !e)
			e = errno ? -errno : -EIO;
	}
	if (!e) {
		scratch_begin();	/* a signal waits for the rename */
		if (rename(tmp, to))
			e = -errno;
		else
			scratch_keep(slot);
		scratch_end();
	}
	scratch_remove(slot);	/* the temporary, when not renamed */
	if (e) {
		snprintf(err, cap, "--report %s: write failed: %s (%s left as "
			 "it was)", path, strerror(-e), path);
	} else {
		e = file_sync_dir(to);
		if (e)
			snprintf(err, cap, "--report %s: written, but the sync "
				 "of its folder failed: %s", path,
				 strerror(-e));
	}
	free(real);
	return e;
}
