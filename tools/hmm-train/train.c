// SPDX-License-Identifier: MIT
/*
 * train.c — the training loop (train.h): data, state, model, optional
 * resume, the steps with their records, checkpoint, summary and report.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "attn.h"
#include "ckpt.h"
#include "data.h"
#include "file.h"
#include "gpu.h"
#include "hk.h"
#include "run.h"
#include "scratch.h"
#include "train.h"

#define SYNTH_BYTES	(2u << 20)

/*
 * Can the report be written at path?  Checked before training.  An
 * existing file is replaced only when it is a report (report.c's title
 * in its first bytes): --report once replaced any file it was given,
 * where --ckpt refuses a file that is not a checkpoint.
 */
static int report_check_target(const char *path, char *err, size_t cap)
{
	static const char mark[] = "<title>hmm-train report</title>";
	const char *kind = "";
	char head[256], tmp[4300];
	ssize_t n;
	int fd, slot = -1;

	if (!access(path, F_OK)) {
		n = file_head(path, head, sizeof(head) - 1, &kind);
		if (n == -EINVAL) {
			snprintf(err, cap, "--report %s: not a regular file (%s); "
				 "refusing to replace it", path, kind);
			return -EINVAL;
		}
		head[n > 0 ? n : 0] = 0;
		if (n > 0 && !strstr(head, mark)) {
			snprintf(err, cap, "--report %s: the file exists and is "
				 "not an hmm-train report; refusing to replace "
				 "it", path);
			return -EEXIST;
		}
	}
	/* the page is written beside path and renamed over it: the folder
	 * must take a new file (path's own mode does not matter) */
	fd = file_tmp_beside(path, tmp, sizeof(tmp), &slot);
	if (fd < 0) {
		snprintf(err, cap, "--report %s: cannot write: %s", path,
			 strerror(-fd));
		return fd;
	}
	close(fd);
	scratch_remove(slot);
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t peak_rss(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) ? 0 : (uint64_t)ru.ru_maxrss * 1024;
}

/* Where the state's store is, and whether it is kept or reopened;
 * scratch: its slot while it is this run's with no checkpoint (or -1). */
struct store_plan {
	char path[4200];
	int persist, reopen;
	int scratch;
};

/*
 * A --ckpt run's store, made now when there is none: until a checkpoint
 * is complete in it, it holds nothing worth keeping (79 MB for --preset
 * small), so it is scratch, removed however the run ends.  An existing
 * store is never this run's to remove.  A failed create is left to the
 * store's own checks (state_store.c), which name the path and the cause.
 */
static void claim_store(struct store_plan *sp)
{
	int fd;

	if (!sp->persist)
		return;
	scratch_begin();
	fd = open(sp->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd >= 0) {
		sp->scratch = scratch_add(sp->path);
		close(fd);
	}
	scratch_end();
}

/* The state is open: run the kernels on the threads libhmm resolved
 * (config.kernel_threads), and note the knobs for the header line. */
static void apply_knobs(struct run *r, struct state *st)
{
	struct state_sample ss;

	r->state_bytes = state_bytes(st);
	state_sample(st, &ss);
	if (ss.kernel_threads)
		hk_set_threads((int)ss.kernel_threads);
	r->threads = hk_threads();
	r->pool_bytes = ss.pool_bytes;
	r->queue_depth = ss.queue_depth;
	r->io_depth = ss.io_depth;
}

static int open_state(const struct train_opts *o, struct run *r,
		      const struct store_plan *sp, struct state **st)
{
	int nb = r->cfg.layers + 1, err;
	size_t *sizes = calloc(nb, sizeof(*sizes));
	const char **names = calloc(nb, sizeof(*names));
	char (*buf)[16] = calloc(nb, sizeof(*buf));
	struct state_config sc = { .store_path = o->store, .daemon = o->daemon,
				   .nblocks = nb, .persist = sp->persist,
				   .reopen = sp->reopen, .format = o->format,
				   .pool_bytes = o->pool_bytes,
				   .io_depth = o->io_depth,
				   .queue_depth = o->queue_depth,
				   /* HK_THREADS, else the online CPUs */
				   .kernel_threads = o->threads ? o->threads :
						     (uint32_t)hk_threads() };

	if (!sizes || !names || !buf) {
		err = -ENOMEM;
		goto out;
	}
	gpt_block_floats(&r->cfg, sizes);
	for (int i = 0; i < nb; i++) {
		snprintf(buf[i], sizeof(buf[i]), i + 1 < nb ? "layer%d" : "embed",
			 i);
		names[i] = buf[i];
	}
	sc.floats = sizes;
	sc.names = names;
	sc.host_budget = o->host_budget < 0 ? 0 : (uint64_t)o->host_budget;
	sc.budget_div = o->budget_div;
	sc.shared_grad = 1;
	if (o->offload_acts) {
		sc.act_count = r->cfg.layers + 1;
		sc.act_floats = gpt_act_floats(&r->cfg);
	}
	if (sp->persist || sp->reopen)
		sc.store_path = sp->path;
	err = state_open(&sc, st);
	if (err && sp->reopen)
		fprintf(stderr, "hmm-train: --resume %s: %s\n", o->resume,
			state_error());
	else if (err)
		fprintf(stderr, "hmm-train: %s\n", state_error());
	else
		apply_knobs(r, *st);
out:
	free(sizes);
	free(names);
	free(buf);
	return err;
}

static void record(struct run *r, struct gpt *g, struct state *st,
		   int64_t step, double loss, double t0, double step_s)
{
	struct step_rec *s = &r->rec[r->nrec++];
	struct state_sample ss;

	state_sample(st, &ss);
	s->step = step;
	s->loss = loss;
	s->t = now() - t0;
	s->step_s = step_s;
	s->tok_s = step_s > 0 ? r->cfg.batch * r->cfg.ctx / step_s : 0;
	s->host_resident = ss.host_resident;
	s->store_resident = ss.store_resident;
	s->store_read_bytes = ss.store_read_bytes;
	s->store_write_bytes = ss.store_write_bytes;
	s->fwd_s = g->t.fwd;
	s->bwd_s = g->t.bwd;
	s->opt_s = g->t.opt;
	s->stall_s = ss.stall_s > 0 ? ss.stall_s : ss.map_s;
}

/* Are a and b the same file?  0 when either is missing. */
static int same_file(const char *a, const char *b)
{
	struct stat x, y;

	return !stat(a, &x) && !stat(b, &y) && x.st_dev == y.st_dev &&
	       x.st_ino == y.st_ino;
}

/*
 * Before the state is opened: read --resume's file, check it fits this
 * run, and plan the store: the checkpoint's own (reopened), PATH.store
 * or --store for --ckpt (kept), or a temporary one.
 */
static int plan(const struct train_opts *o, struct run *r,
		const struct data *d, uint64_t dhash, struct ckpt_info *ci,
		struct store_plan *sp)
{
	int32_t cfg[6] = { r->cfg.vocab, r->cfg.ctx, r->cfg.d, r->cfg.heads,
			   r->cfg.layers, r->cfg.batch };
	char err[512];
	int e;

	memset(sp, 0, sizeof(*sp));
	sp->scratch = -1;
	if (!o->resume) {
		if (!o->ckpt)
			return 0;
		sp->persist = 1;
		if (o->store)
			snprintf(sp->path, sizeof(sp->path), "%s", o->store);
		else
			snprintf(sp->path, sizeof(sp->path), "%s.store",
				 o->ckpt);
		return 0;
	}
	e = ckpt_read(o->resume, ci, err, sizeof(err));
	if (e) {
		fprintf(stderr, "hmm-train: %s\n", err);
		return e;
	}
	if (memcmp(ci->cfg, cfg, sizeof(cfg))) {
		fprintf(stderr, "hmm-train: --resume %s: made with preset %s "
			"(another model shape: %d layers, d %d, batch %d); use "
			"--preset %s and its batch\n", o->resume, ci->preset,
			ci->cfg[4], ci->cfg[2], ci->cfg[5], ci->preset);
		return -EINVAL;
	}
	if (ci->data_len != d->len || ci->data_hash != dhash) {
		fprintf(stderr, "hmm-train: --resume %s: made on other data "
			"(%llu bytes) than this run's %s\n", o->resume,
			(unsigned long long)ci->data_len, d->source);
		return -EINVAL;
	}
	ckpt_store_path(o->resume, ci, sp->path, sizeof(sp->path));
	sp->reopen = 1;
	if (o->store && strcmp(o->store, sp->path) &&
	    !same_file(o->store, sp->path)) {
		fprintf(stderr, "hmm-train: --store %s: the state of --resume "
			"%s lives in %s; leave --store out\n", o->store,
			o->resume, sp->path);
		return -EINVAL;
	}
	/* a flush in the resumed store replaces the checkpoint it holds:
	 * only the file that describes that store may be rewritten */
	if (o->ckpt && strcmp(o->ckpt, o->resume) &&
	    !same_file(o->ckpt, o->resume)) {
		fprintf(stderr, "hmm-train: --ckpt %s: the resumed state lives "
			"in %s, whose checkpoint is %s; a new checkpoint there "
			"replaces it, so --ckpt must be %s (copy %s and %s "
			"first to keep the old one)\n", o->ckpt, sp->path,
			o->resume, o->resume, o->resume, sp->path);
		return -EINVAL;
	}
	if (o->lr <= 0)
		r->lr = ci->lr;
	return 0;
}

/*
 * The store holds the tag of a checkpoint whose file was staged but not
 * renamed (killed in between): take PATH.tmp when it is that one, and
 * finish its rename.  0 (ci replaced, or left when PATH.tmp is not the
 * store's), or -errno when the rename fails.
 */
static int take_pending(const struct train_opts *o, struct run *r,
			struct ckpt_info *ci, const uint64_t tag[4])
{
	struct ckpt_info pend;
	char err[512];
	int e;

	if (ckpt_read_pending(o->resume, ci, &pend) ||
	    memcmp(pend.tag, tag, sizeof(pend.tag)))
		return 0;
	fprintf(stderr, "hmm-train: --resume %s: its store holds the "
		"checkpoint at step %lld, whose file was staged in %s.tmp but "
		"not renamed (interrupted); resuming from it and completing "
		"the rename\n", o->resume, (long long)pend.step, o->resume);
	e = ckpt_commit(o->resume, err, sizeof(err));
	if (e) {
		fprintf(stderr, "hmm-train: %s\n", err);
		return e;
	}
	if (o->lr <= 0)
		r->lr = pend.lr;
	*ci = pend;
	return 0;
}

static int start(const struct train_opts *o, struct run *r, struct gpt *g,
		 struct state *st, struct ckpt_info *ci)
{
	uint64_t tag[4];
	int e;

	if (!o->resume) {
		e = gpt_init(g, r->seed);
		if (e)
			fprintf(stderr, "hmm-train: initialising: %s\n",
				state_error());
		return e;
	}
	e = state_tag(st, tag, 0);
	if (e) {
		fprintf(stderr, "hmm-train: --resume %s: %s\n", o->resume,
			state_error());
		return e;
	}
	if (memcmp(tag, ci->tag, sizeof(tag)) && take_pending(o, r, ci, tag))
		return -EIO;
	if (memcmp(tag, ci->tag, sizeof(tag))) {
		fprintf(stderr, "hmm-train: --resume %s: its store %s holds "
			"another checkpoint (flushed later, or by another run); "
			"refusing to mix them\n", o->resume,
			state_store_path(st));
		return -EINVAL;
	}
	/* a run of no steps would report losses it never had */
	if (ci->step >= r->steps) {
		fprintf(stderr, "hmm-train: --resume %s: the checkpoint is at "
			"step %lld and --steps is %lld: nothing to train (give "
			"--steps above %lld)\n", o->resume, (long long)ci->step,
			(long long)r->steps, (long long)ci->step);
		return -EINVAL;
	}
	r->first_step = ci->step + 1;
	r->seed = ci->seed;
	return 0;
}

/*
 * --daemon: did the step fail because hmmd is gone (stopped or killed)?
 * The connection says so (-ENOTCONN and the like); an -EIO may be that
 * too, underneath, so then hmmd's socket is asked: no one there (gone
 * with hmmd, or refusing: killed) is hmmd gone.  1 and why, or 0.
 */
static int hmmd_gone(const char *daemon, int err, char *why, size_t cap)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	const char *p;
	int fd, e = 0;

	if (err == -ENOTCONN || err == -ECONNRESET || err == -EPIPE ||
	    err == -ESHUTDOWN || err == -ECONNREFUSED) {
		snprintf(why, cap, "%s", strerror(-err));
		return 1;
	}
	if (strncmp(daemon, "unix:", 5))
		return 0;
	p = daemon + 5;
	if (strlen(p) >= sizeof(a.sun_path))
		return 0;
	memcpy(a.sun_path, p, strlen(p) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)))
		e = errno;
	close(fd);
	if (e != ENOENT && e != ECONNREFUSED)
		return 0;
	if (err == -EIO)	/* libhmm's word for it: no news */
		snprintf(why, cap, "its socket: %s", strerror(e));
	else
		snprintf(why, cap, "%s; its socket: %s", strerror(-err),
			 strerror(e));
	return 1;
}

/* A step failed: say why, naming hmmd when it is hmmd that went. */
static void step_failed(const struct run *r, int64_t s, int err, int gpu)
{
	char why[256];
	/* a state map's failure is -EIO here, its errno in the state's:
	   a connection reset by hmmd's death said only "step N: map ..."
	   when hmmd's socket still took connections at that moment */
	int cause = err == -EIO && state_errno() ? state_errno() : err;

	if (r->daemon && hmmd_gone(r->daemon, cause, why, sizeof(why)))
		fprintf(stderr, "hmm-train: step %lld: hmmd at %s is gone (%s):"
			" stopped or killed, it held this run's state; the run "
			"stops\n", (long long)s, r->daemon, why);
	else
		fprintf(stderr, "hmm-train: step %lld: %s\n", (long long)s,
			gpu ? gpu_error() : err == -EIO ? state_error() :
			strerror(-err));
}

static int loop(struct run *r, struct gpt *g, struct gpu *gpu,
		struct state *st, const struct data *d, const struct preset *p)
{
	int n = r->cfg.batch * r->cfg.ctx;
	int *tok = malloc(2 * n * sizeof(int)), *tgt = tok + n;
	double t0 = now();

	if (!tok)
		return -ENOMEM;
	progress_begin(r);
	for (int64_t s = r->first_step; s <= r->steps; s++) {
		struct optim_hp hp = { .beta1 = 0.9, .beta2 = 0.95,
				       .eps = 1e-8, .step = s };
		double loss, ts = now();
		int err;

		hp.lr = r->lr * (s < p->warmup ? (double)s / p->warmup : 1);
		data_batch(d, r->seed, s, r->cfg.batch, r->cfg.ctx, tok, tgt);
		err = gpu ? gpu_step(gpu, tok, tgt, &hp, &loss) :
			    gpt_step(g, tok, tgt, &hp, &loss);
		if (err) {
			if (r->tty && !r->json)
				fputc('\n', r->out);
			step_failed(r, s, err, gpu != NULL);
			free(tok);
			return err;
		}
		record(r, g, st, s, loss, t0, now() - ts);
		progress_step(r, &r->rec[r->nrec - 1]);
	}
	r->wall_s = now() - t0;
	free(tok);
	return 0;
}

/* --device cuda: the GPU step, its plan said on stderr.  0 or -errno. */
static int gpu_start(const struct train_opts *o, struct gpt *g,
		     struct gpu **gpu)
{
	const struct gpu_plan *P;
	int e = gpu_open(g, o->device_budget, gpu);

	if (e) {
		fprintf(stderr, "hmm-train: --device cuda: %s\n", gpu_error());
		return e;
	}
	P = gpu_plan(*gpu);
	fprintf(stderr, "hmm-train: --device cuda: device budget %llu of "
		"%llu bytes (parameters and gradients, %llu-byte chunks): %d "
		"of %d layers' parameters resident; activations %llu bytes "
		"beside it; AdamW on the CPU\n",
		(unsigned long long)P->budget, (unsigned long long)P->all_bytes,
		(unsigned long long)P->chunk, P->resident_layers, P->layers,
		(unsigned long long)P->act_bytes);
	return 0;
}

/* A fresh tag: ties the checkpoint file to the store's flush. */
static void new_tag(uint64_t tag[4], int64_t step)
{
	struct timespec ts;

	if (getrandom(tag, 4 * sizeof(*tag), 0) != 4 * sizeof(*tag)) {
		clock_gettime(CLOCK_REALTIME, &ts);
		tag[0] = ts.tv_sec, tag[1] = ts.tv_nsec, tag[2] = getpid();
	}
	tag[3] = step;
}

/*
 * The checkpoint: stage the small file that describes it (PATH.tmp),
 * tag the store and flush it (libhmm writes the dirty chunks and its
 * table of tensors: a flush of the extent table, not a copy), then
 * rename the file into place.  A crash before the flush leaves the old
 * pair; one after it leaves the old file and the staged one, which
 * --resume takes (ckpt.h).
 */
static int checkpoint(const struct train_opts *o, struct run *r,
		      struct state *st, const struct data *d, uint64_t dhash,
		      const struct ckpt_info *from, struct store_plan *sp)
{
	struct ckpt_info ci;
	char err[512], tmp[4200], *abs;
	struct stat sb;
	uint64_t fb = 0;
	int e, tslot = -1;

	memset(&ci, 0, sizeof(ci));
	snprintf(ci.preset, sizeof(ci.preset), "%s", r->preset);
	ci.cfg[0] = r->cfg.vocab, ci.cfg[1] = r->cfg.ctx, ci.cfg[2] = r->cfg.d;
	ci.cfg[3] = r->cfg.heads, ci.cfg[4] = r->cfg.layers;
	ci.cfg[5] = r->cfg.batch;
	ci.lr = r->lr;
	ci.step = r->first_step + r->nrec - 1;
	ci.seed = r->seed;
	ci.data_len = d->len;
	ci.data_hash = dhash;
	ci.state_bytes = r->state_bytes;
	if (o->resume) {
		memcpy(ci.store, from->store, sizeof(ci.store));
	} else if (o->store) {	/* absolute: the file may be read elsewhere */
		abs = realpath(o->store, NULL);
		snprintf(ci.store, sizeof(ci.store), "%s", abs ? abs : o->store);
		free(abs);
	}
	new_tag(ci.tag, ci.step);
	/* with a store that is still scratch, PATH.tmp is too: without the
	 * store it describes nothing.  With a kept store it is left to a
	 * signal, as to kill -9: after the flush --resume needs it */
	scratch_begin();
	e = ckpt_stage(o->ckpt, &ci, err, sizeof(err));
	if (!e && sp->scratch >= 0) {
		snprintf(tmp, sizeof(tmp), "%s.tmp", o->ckpt);
		tslot = scratch_add(tmp);
	}
	scratch_end();
	if (e) {
		fprintf(stderr, "hmm-train: %s\n", err);
		return e;
	}
	ckpt_crash_point("staged");
	e = state_tag(st, ci.tag, 1);
	if (!e)
		e = state_flush(st, &fb);
	if (e) {
		fprintf(stderr, "hmm-train: --ckpt %s: %s\n", o->ckpt,
			state_error());
		scratch_keep(tslot);
		ckpt_unstage(o->ckpt);
		return e;
	}
	/* the store holds the checkpoint: it and PATH.tmp are kept from
	 * here, and a signal waits for the rename that completes the pair */
	scratch_begin();
	scratch_keep(sp->scratch);
	sp->scratch = -1;
	scratch_keep(tslot);
	e = ckpt_commit(o->ckpt, err, sizeof(err));
	scratch_end();
	if (e) {
		fprintf(stderr, "hmm-train: %s\n", err);
		return e;
	}
	r->ckpt_step = ci.step;
	r->ckpt_flush_bytes = fb;
	r->ckpt_file_bytes = stat(o->ckpt, &sb) ? 0 : sb.st_size;
	fprintf(r->json ? stderr : r->out, "hmm-train: checkpoint at step %lld:"
		" flushed the store %s (%.1f MiB written by the flush, state "
		"%.1f MiB), %s %llu bytes\n", (long long)ci.step,
		state_store_path(st), fb / 1048576.0,
		r->state_bytes / 1048576.0, o->ckpt,
		(unsigned long long)r->ckpt_file_bytes);
	return 0;
}

static int finish(const struct train_opts *o, struct run *r,
		  struct state *st, const struct data *d, uint64_t dhash,
		  const struct ckpt_info *from, struct store_plan *sp)
{
	char err[512];
	int e;

	if (o->ckpt && checkpoint(o, r, st, d, dhash, from, sp))
		return 1;
	r->peak_rss_bytes = peak_rss();
	progress_end(r);
	if (o->report) {
		e = report_write(r, o->report, err, sizeof(err));
		if (e) {
			fprintf(stderr, "hmm-train: %s\n", err);
			return 1;
		}
		if (!r->json)
			fprintf(r->out, "hmm-train: report written to %s\n",
				o->report);
	}
	return 0;
}

int train_main(const struct train_opts *o)
{
	const struct preset *p = o->preset;
	struct run r = { .preset = p->name, .cfg = p->cfg, .seed = o->seed,
			 .first_step = 1, .json = o->json, .out = stdout,
			 .blas_core = o->blas_core, .attn = attn_impl(),
			 .optim = optim_impl(), .lr = o->lr > 0 ? o->lr : p->lr };
	struct state *st = NULL;
	struct store_plan *sp = NULL;
	struct ckpt_info *ci = NULL;
	struct gpt *g = NULL;
	struct gpu *gpu = NULL;
	struct data d;
	char err[512], hmmd_store[256];
	uint64_t dhash;
	int e, rc = 1;

	if (o->batch > 0)
		r.cfg.batch = o->batch;
	r.steps = o->steps > 0 ? o->steps : p->steps;
	r.tty = isatty(STDOUT_FILENO);
	r.params = gpt_params(&r.cfg);
	if (o->data)
		e = data_load(&d, o->data, r.cfg.ctx, err, sizeof(err));
	else
		e = data_synth(&d, o->seed, SYNTH_BYTES);
	if (e) {
		fprintf(stderr, "hmm-train: %s\n", o->data ? err :
			"out of memory for the corpus");
		return 2;
	}
	if (o->ckpt && o->store && (!strcmp(o->ckpt, o->store) ||
				    same_file(o->ckpt, o->store))) {
		fprintf(stderr, "hmm-train: --ckpt %s: the same file as --store "
			"%s; the checkpoint would replace the store (give "
			"--ckpt another path)\n", o->ckpt, o->store);
		rc = 2;
		goto out_data;
	}
	if (o->ckpt && ckpt_check_target(o->ckpt, err, sizeof(err))) {
		fprintf(stderr, "hmm-train: %s\n", err);
		rc = 2;
		goto out_data;
	}
	if (o->report && report_check_target(o->report, err, sizeof(err))) {
		fprintf(stderr, "hmm-train: %s\n", err);
		rc = 2;
		goto out_data;
	}
	r.data_source = d.source;
	dhash = ckpt_hash(d.text, d.len, CKPT_HASH0);
	sp = calloc(1, sizeof(*sp));
	ci = calloc(1, sizeof(*ci));
	if (sp)
		sp->scratch = -1;
	if (!sp || !ci)
		goto out_data;
	e = plan(o, &r, &d, dhash, ci, sp);
	if (e) {
		rc = e == -ENOMEM || e == -EIO ? 1 : 2;
		goto out_data;
	}
	claim_store(sp);
	e = open_state(o, &r, sp, &st);
	if (e) {
		rc = e == -ENOMEM || e == -EIO ? 1 : 2;	/* else: bad input */
		goto out_data;
	}
	r.host_budget = state_budget(st);
	r.offloaded = state_offloaded(st);
	r.has_store = state_has_store(st);
	r.store_path = state_store_path(st);
	r.daemon = o->daemon;
	if (o->daemon) {	/* the tiers are hmmd's: no file of ours */
		snprintf(hmmd_store, sizeof(hmmd_store), "hmmd's (--daemon %s)",
			 o->daemon);
		r.store_path = hmmd_store;
	}
	e = gpt_new(&r.cfg, st, &g);
	if (e) {
		fprintf(stderr, "hmm-train: model: %s\n", strerror(-e));
		goto out_state;
	}
	/* in memory: keep the blocks' activations, skip the recompute
	 * (same losses); without the memory for them, recompute; the
	 * block inputs to the store: recompute */
	if (o->offload_acts) {
		e = gpt_offload_activations(g);
		if (e) {
			fprintf(stderr, "hmm-train: --offload-activations: %s\n",
				strerror(-e));
			goto out_model;
		}
		r.activation_bytes = gpt_act_offloaded_bytes(&r.cfg);
	} else if (o->cuda) {
		e = gpu_start(o, g, &gpu);
		if (e)
			goto out_model;
		r.kept_acts = 1;	/* on the device */
	} else if (!r.offloaded) {
		r.kept_acts = !gpt_keep_activations(g);
	}
	r.step_flops = gpt_step_flops(&r.cfg, !r.kept_acts);
	e = start(o, &r, g, st, ci);
	if (e) {
		rc = e == -EIO ? 1 : 2;
		goto out_model;
	}
	r.rec = calloc(r.steps > r.first_step ? r.steps - r.first_step + 1 : 1,
		       sizeof(*r.rec));
	if (!r.rec) {
		fprintf(stderr, "hmm-train: --steps %lld: no memory for a "
			"record of each step\n", (long long)r.steps);
		goto out_model;
	}
	if (!loop(&r, g, gpu, st, &d, p))
		rc = finish(o, &r, st, &d, dhash, ci, sp);
	free(r.rec);
out_model:
	gpu_close(gpu);
	gpt_free(g);
out_state:
	state_close(st);
out_data:
	if (sp)		/* a store with no checkpoint completed in it */
		scratch_remove(sp->scratch);
	free(sp);
	free(ci);
	data_free(&d);
	return rc;
}
