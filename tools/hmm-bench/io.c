// SPDX-License-Identifier: MIT
/*
 * io.c — `hmm-bench io`: the store's I/O path against fio on the same
 * file, block size, queue depth and range, with the store's buffers on
 * 4 KiB pages and on huge pages.
 *
 * Ours: RAW requests (or, with --extent, extent requests with their
 * crc32c) from buffers in the store's pinned pool (registered with the
 * ring or not, as the store chose for that pool: stats say which),
 * queue_depth in flight, each completion's buffer resubmitted in the
 * next batch.  The store is opened anew for each measurement with its
 * pool on the page size under test (HMM_POOL_NOHUGE for 4 KiB pages).
 * Theirs: fio --ioengine=io_uring --direct=1 over the store's data area
 * (--offset = the data area's start), its own malloc'd buffers, JSON
 * output parsed for bw_bytes.  fio runs once a round for each page size
 * the kinds use, its buffers on that size (THP through glibc's malloc
 * tunable for huge: fio.c), and each kind is set against fio on its own
 * page size: on the build machine's virtio disk the page size alone
 * moved fio's 2 MiB I/O 2x (fio.c), so ours on huge pages against fio
 * on 4 KiB pages measured the pages, not the store.
 *
 * One untimed sequential write pass first makes every block real (a
 * fresh fallocate'd file reads as zeros without touching the disk).
 * Then --reps rounds, each measuring every cell in turn — for each
 * direction, ours on 4 KiB pages, ours on huge pages, fio — so that a
 * disk or a neighbour that slows down for a while slows all alike;
 * medians of the rounds are reported, and per cell the median of each
 * round's ours/fio (a paired ratio: a slow spell cancels out).
 *
 * DeepSpeed's aio (dsaio.c), where a venv with it is found (--ds-venv
 * DIR, else $HMM_TORCH_VENV, else build/peers beside this binary's
 * folder, as `hmm-bench train` finds its torch): each round, after the
 * cells, writes then reads the same size at the same bs and qd from a
 * plain (4 KiB-page, unpinned) torch tensor to a scratch file beside
 * F, O_DIRECT; read/write_ratio_ds_4k are the median of each round's
 * ours on 4 KiB pages over DeepSpeed.  A venv without python, or one
 * whose DeepSpeed cannot load or build its op, leaves those null with
 * a one-line note; the run goes on.
 *
 * The file: --file F is formatted as a store only when it is absent or
 * empty, or with --overwrite (its contents are lost); without --file a
 * scratch file in $TMPDIR (or /var/tmp) is made.  A file this run made
 * is removed on every exit: the end, an error, SIGINT/SIGTERM/SIGHUP/SIGPIPE;
 * an empty file it was given is left empty again.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "dsaio.h"
#include "err.h"
#include "pool.h"
#include "store.h"
#include "train_torch.h"

#define NDIRS	2	/* cells: up to two directions ... */
#define NKINDS	4	/* ... times up to four buffer kinds */

/* Buffer kinds: bit 0 huge pages, bit 1 an unregistered pool of ours */
static const char *const kind_name[NKINDS] = { "4k", "huge", "4k_unreg",
					       "huge_unreg" };

struct io_opts {
	const char *file;
	const char *ds_venv;		/* --ds-venv, or found; NULL: none */
	char ds_py[PATH_MAX + 16];	/* its bin/python; "" once it failed */
	const char *dirs[NDIRS];	/* "read", "write", "randread" */
	int ndirs;
	int kinds[NKINDS];		/* indices of kind_name */
	int nkinds;
	int64_t size, bs;
	int qd, reps, json, fio, sqpoll, extent, unreg, overwrite;
};

struct io_run {
	struct hmm_store *s;
	struct io_opts *o;
	struct hmm_pool *own;	/* --unregistered: buffers from here */
	uint64_t nops, next;
	uint64_t *order;	/* block index of each op */
	struct hmm_io *io;
	struct hmm_io **freeq;
	unsigned nfree;
	int err;
	struct hmm_store_stats st;	/* as opened */
};

/* The scratch file this run made without --file, or ""; it, a --file
 * it made and DeepSpeed's scratch file are removed at exit and on a
 * signal, and an empty --file is cut back to empty instead (scratch.c,
 * bench_user_file). */
static char made[4096];
static char ds_made[4096];	/* DeepSpeed's scratch file, or "" */

static void io_done(struct hmm_io *io)
{
	struct io_run *r = io->priv;

	if (io->result && !r->err)
		r->err = io->result;
	r->freeq[r->nfree++] = io;
}

/* One pass over nops blocks; returns seconds, or < 0 on error. */
static double run_pass(struct io_run *r, int write)
{
	uint64_t done = 0;
	double t0 = bench_now();
	int op = r->o->extent ? (write ? HMM_IO_WRITE : HMM_IO_READ)
			      : (write ? HMM_IO_WRITE_RAW : HMM_IO_READ_RAW);

	r->next = 0;
	r->err = 0;
	r->nfree = r->o->qd;
	for (int i = 0; i < r->o->qd; i++)
		r->freeq[i] = &r->io[i];
	while (done < r->nops) {
		struct hmm_io *batch[1024];
		unsigned n = 0;
		int k;

		while (r->nfree && r->next < r->nops && n < 1024) {
			struct hmm_io *io = r->freeq[--r->nfree];
			uint64_t b = r->order[r->next++];

			io->op = op;
			io->key = b;
			io->off = b * r->o->bs;
			batch[n++] = io;
		}
		if (n && (k = hmm_store_submit(r->s, batch, n)) != (int)n) {
			fprintf(stderr, "hmm-bench io: submit: %s\n",
				hmm_last_error());
			return -1;
		}
		k = hmm_store_poll(r->s, 1, -1);
		if (k < 0 || r->err) {
			fprintf(stderr, "hmm-bench io: %s\n", hmm_last_error());
			return -1;
		}
		done += k;
	}
	return bench_now() - t0;
}

static double parse_bw(const char *js, const char *dir)
{
	char key[32];
	const char *p = strstr(js, "\"jobs\"");

	snprintf(key, sizeof(key), "\"%s\" : {", dir);	/* the section */
	if (p)
		p = strstr(p, key);
	if (p)
		p = strstr(p, "\"bw_bytes\"");
	if (!p || !(p = strchr(p, ':')))
		return -1;
	return strtod(p + 1, NULL);
}

/* Run fio once in direction rw (fio.c: a bench child), its buffers on
 * huge pages or not; MB/s or < 0. */
static double run_fio(struct io_opts *o, const char *rw, uint64_t offset,
		      int huge)
{
	char a[6][4200];
	char *argv[] = { "fio", "--name=hmmbench", a[0], "--ioengine=io_uring",
			 "--direct=1", a[1], a[2], a[3], a[4], a[5],
			 "--numjobs=1", "--randrepeat=0",
			 "--output-format=json", NULL, NULL };
	char *out;
	double bw;

	if (snprintf(a[0], sizeof(a[0]), "--filename=%s", o->file) >=
	    (int)sizeof(a[0]))
		return -1;
	snprintf(a[1], sizeof(a[1]), "--rw=%s", rw);
	snprintf(a[2], sizeof(a[2]), "--bs=%lld", (long long)o->bs);
	snprintf(a[3], sizeof(a[3]), "--iodepth=%d", o->qd);
	snprintf(a[4], sizeof(a[4]), "--size=%lld", (long long)o->size);
	snprintf(a[5], sizeof(a[5]), "--offset=%llu",
		 (unsigned long long)offset);
	if (o->sqpoll)
		argv[13] = "--sqthread_poll=1";
	out = bench_fio_run(argv, huge);
	if (!out)
		return -1;
	bw = parse_bw(out, strcmp(rw, "write") ? "read" : "write");
	free(out);
	if (bw <= 0)
		fprintf(stderr, "hmm-bench io: fio's report holds no %s "
			"bandwidth\n", rw);
	return bw <= 0 ? -1 : bw / 1e6;
}

static const char usage[] =
	"usage: hmm-bench io [--file F [--overwrite]] [--size BYTES] "
	"[--bs BYTES] [--qd N]\n"
	"                    [--rw read|write|randread|both] "
	"[--pages KIND,...] [--reps N]\n"
	"                    [--no-fio] [--sqpoll] [--extent] "
	"[--unregistered] [--ds-venv DIR] [--json]\n"
	"F (default: a scratch file in $HMM_TEST_DIR, build/tmp, $TMPDIR or "
	"/var/tmp,\nremoved at exit) is formatted as a store; an existing "
	"non-empty F only\nwith --overwrite.\nKIND: 4k, huge (the store's "
	"own pool on those pages), 4k_unreg, huge_unreg\n(a pool of ours, never registered); "
	"default 4k,huge.\n"
	"BYTES: --bs 4K..1G, a multiple of 4K (default 1M); --size at "
	"least --bs (default 1G);\nN: --qd 1..1024 (default 32), --reps "
	"1..1000 (default 5, at least 5 with fio).\n"
	"DIR: a venv with DeepSpeed (default $HMM_TORCH_VENV, else "
	"build/peers):\nits aio is timed too, where it loads.\n";

/* --rw: one direction, or both = read then write. */
static int parse_rw(const char *s, struct io_opts *o)
{
	if (!strcmp(s, "both")) {
		o->dirs[0] = "read";
		o->dirs[1] = "write";
		o->ndirs = 2;
		return 0;
	}
	if (strcmp(s, "read") && strcmp(s, "write") && strcmp(s, "randread"))
		return -1;
	o->dirs[0] = s;
	o->ndirs = 1;
	return 0;
}

/* --pages: kinds joined by ',' ("both" = 4k,huge); each at most once. */
static int parse_pages(const char *s, struct io_opts *o)
{
	if (!strcmp(s, "both"))
		s = "4k,huge";
	o->nkinds = 0;
	while (*s) {
		size_t n = strcspn(s, ",");
		int k;

		for (k = 0; k < NKINDS; k++)
			if (strlen(kind_name[k]) == n &&
			    !strncmp(s, kind_name[k], n))
				break;
		for (int i = 0; k < NKINDS && i < o->nkinds; i++)
			if (o->kinds[i] == k)
				k = NKINDS;
		if (k == NKINDS)
			return -1;
		o->kinds[o->nkinds++] = k;
		s += n + !!s[n];
	}
	return o->nkinds ? 0 : -1;
}

static void parse(int argc, char **argv, struct io_opts *o)
{
	const char *rw = "both", *pages = "both";
	int vs_fio = 0, no_fio = 0, no_huge = 0;
	const struct bench_arg args[] = {
		{ "--file", BA_STR, &o->file },
		{ "--size", BA_SIZE, &o->size, 4096, 1ll << 42 },
		{ "--bs", BA_SIZE, &o->bs, 4096, 1 << 30, 4096 },
		{ "--qd", BA_INT, &o->qd, 1, 1024 },
		{ "--rw", BA_STR, &rw },
		{ "--pages", BA_STR, &pages },
		{ "--reps", BA_INT, &o->reps, 1, 1000 },
		{ "--json", BA_FLAG, &o->json },
		{ "--vs-fio", BA_FLAG, &vs_fio },	/* the default now */
		{ "--no-fio", BA_FLAG, &no_fio },
		{ "--sqpoll", BA_FLAG, &o->sqpoll },
		{ "--extent", BA_FLAG, &o->extent },
		{ "--no-huge", BA_FLAG, &no_huge },	/* = --pages 4k */
		{ "--unregistered", BA_FLAG, &o->unreg },
		{ "--overwrite", BA_FLAG, &o->overwrite },
		{ "--ds-venv", BA_STR, &o->ds_venv },
		{ NULL }
	};

	*o = (struct io_opts){ .size = 1ll << 30, .bs = 1 << 20, .qd = 32,
			       .reps = 5 };
	bench_args("io", usage, argc, argv, args);
	o->fio = !no_fio;
	if (o->overwrite && !o->file)
		bench_arg_bad("--overwrite", NULL, "only with --file");
	if (parse_rw(rw, o))
		bench_arg_bad("--rw", rw, "want read, write, randread or both");
	if (parse_pages(no_huge ? "4k" : pages, o))
		bench_arg_bad("--pages", pages, "want kinds from 4k, huge, "
			      "4k_unreg, huge_unreg, each once, joined by ','");
	if (o->size < o->bs)
		bench_arg_bad("--size", bench_arg_val("--size"),
			      "want at least --bs");
	for (int k = 0; o->unreg && k < o->nkinds; k++)
		o->kinds[k] |= 2;	/* --unregistered: our own pools */
	if (o->fio && o->reps < 5)
		o->reps = 5;	/* medians of at least five each */
	o->size = o->size / o->bs * o->bs;
}

/*
 * The file to format: F when absent or empty (then made by us), or with
 * --overwrite; else a scratch file of ours.  0, or 2 (refused: a usage
 * error) / 1 (cannot make one).
 */
static int pick_file(struct io_opts *o, char *buf, size_t len)
{
	int fd;

	if (o->file)
		return bench_user_file("io", "--file", o->file, o->overwrite);
	snprintf(buf, len, "%s/hmm-bench-io.XXXXXX",
		 bench_scratch_dir(NULL, NULL));
	fd = mkstemp(buf);
	if (fd < 0) {
		fprintf(stderr, "hmm-bench io: scratch file %s: %s\n", buf,
			strerror(errno));
		return 1;
	}
	close(fd);
	snprintf(made, sizeof(made), "%s", buf);
	bench_scratch_add(made);
	o->file = made;
	return 0;
}

static void run_close(struct io_run *r)
{
	hmm_store_close(r->s);
	hmm_pool_delete(r->own);
	free(r->order);
	free(r->io);
	free(r->freeq);
	memset(r, 0, sizeof(*r));
}

/* Open the store with its pool on 4 KiB pages or huge ones (kind & 1),
 * the buffers in it or (kind & 2) in an unregistered pool of ours;
 * format it when format.  0 or -errno (said on stderr). */
static int run_open(struct io_run *r, struct io_opts *o, int kind,
		    int format)
{
	int huge = kind & 1;
	struct hmm_store_config c = { 0 };
	uint64_t bsz = 4096, seed = 42;
	int err;

	memset(r, 0, sizeof(*r));
	while (bsz * 2 <= (uint64_t)o->bs && o->bs % (bsz * 2) == 0 &&
	       bsz < (1 << 20))
		bsz *= 2;
	c.path = o->file;
	c.block_size = (uint32_t)bsz;
	c.max_extents = (uint32_t)(o->size / o->bs) * 2 + 64;
	c.meta_bytes = 4096;
	c.size = o->size + (uint64_t)o->qd * o->bs + (64 << 20);
	c.queue_depth = o->qd;
	c.pool_bytes = (size_t)o->qd * o->bs;
	c.numa_node = -1;
	c.pool_flags = huge ? 0 : HMM_POOL_NOHUGE;
	c.flags = HMM_STORE_CREATE | (format ? HMM_STORE_TRUNCATE : 0) |
		  (o->sqpoll ? HMM_STORE_SQPOLL : 0);
	err = hmm_store_open(&c, &r->s);
	if (err) {
		fprintf(stderr, "hmm-bench io: %s\n", hmm_last_error());
		return err;
	}
	hmm_store_stats(r->s, &r->st);
	r->o = o;
	r->nops = o->size / o->bs;
	r->order = calloc(r->nops, sizeof(*r->order));
	r->io = calloc(o->qd, sizeof(*r->io));
	r->freeq = calloc(o->qd, sizeof(*r->freeq));
	if (!r->order || !r->io || !r->freeq)
		return -ENOMEM;
	/* an unregistered kind: a pool of our own, like the store's but
	 * not registered with its ring */
	if ((kind & 2) && hmm_pool_new((size_t)o->qd * o->bs, -1,
				     c.pool_flags, &r->own))
		return -ENOMEM;
	for (int i = 0; i < o->qd; i++) {
		uint64_t *b = hmm_pool_alloc(r->own ? r->own :
					     hmm_store_pool(r->s), o->bs);

		if (!b)
			return -ENOMEM;
		for (int64_t k = 0; k < o->bs / 8; k++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			b[k] = seed;
		}
		r->io[i] = (struct hmm_io){ .len = (uint32_t)o->bs, .buf = b,
					    .done = io_done, .priv = r };
	}
	return 0;
}

static void set_order(struct io_run *r, int random)
{
	uint64_t seed = 7;

	for (uint64_t i = 0; i < r->nops; i++)
		r->order[i] = i;
	for (uint64_t i = r->nops - 1; random && i > 0; i--) {
		uint64_t j, t;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		j = (seed >> 11) % (i + 1);
		t = r->order[i];
		r->order[i] = r->order[j];
		r->order[j] = t;
	}
}

/* What one cell's store was: for the report. */
struct cell_info {
	int registered, pool_huge, direct;
	unsigned ring_flags;
};

/*
 * Open with pages huge, run one pass in direction rw (the first pass
 * ever: format and write every block), close (extents flushed so that
 * the next open finds them).  MB/s, or < 0.
 */
static double measure(struct io_opts *o, const char *rw, int kind,
		      int first, struct cell_info *ci, uint64_t *data_off)
{
	struct io_run r;
	int write = first || !strcmp(rw, "write");
	double t = -1;

	if (run_open(&r, o, kind, first))
		goto out;
	if (*hmm_store_note(r.s) && first)
		fprintf(stderr, "hmm-bench io: note: %s\n", hmm_store_note(r.s));
	*data_off = r.st.data_offset;
	*ci = (struct cell_info){ r.st.registered_buffers && !(kind & 2),
				  (int)r.st.pool_huge, (int)r.st.direct,
				  r.st.ring_flags };
	set_order(&r, !first && !strcmp(rw, "randread"));
	t = run_pass(&r, write);
	if (t >= 0 && o->extent && write && hmm_store_flush(r.s)) {
		fprintf(stderr, "hmm-bench io: flush: %s\n", hmm_last_error());
		t = -1;
	}
out:
	run_close(&r);
	return t < 0 ? -1 : o->size / t / 1e6;
}

struct results {
	double *ours[NDIRS][NKINDS], *fio[NDIRS][2];	/* [rep]; [pg] */
	double *ds[NDIRS];	/* [rep]: DeepSpeed's aio, NAN: none */
	double dm[NDIRS];	/* its median, NAN: none */
	double dratio[NDIRS];	/* median of each round's ours 4k / ds */
	double om[NDIRS][NKINDS], fm[NDIRS][2];		/* medians */
	int pg[2];	/* fio runs on 4 KiB pages, on huge pages */
	double ratio[NDIRS][NKINDS];	/* median of each round's ours/fio */
	struct cell_info ci[NKINDS];
};

static void report(struct io_opts *o, struct results *R)
{
	for (int d = 0; d < o->ndirs; d++)
		for (int k = 0; k < o->nkinds; k++) {
			int kind = o->kinds[k];

			printf("io: %-8s bs %lld qd %d size %lld, %s "
			       "(pool %s, buffers %sregistered)%s: ours %.0f "
			       "MB/s", o->dirs[d], (long long)o->bs, o->qd,
			       (long long)o->size, kind_name[kind],
			       R->ci[k].pool_huge == HMM_POOL_PAGES_HUGETLB ?
			       "hugetlb" : R->ci[k].pool_huge ? "THP" : "4 KiB",
			       R->ci[k].registered ? "" : "not ",
			       o->extent ? " (extents+crc32c)" : "",
			       R->om[d][k]);
			if (o->fio)
				printf(", fio (%s pages) %.0f MB/s, ratio "
				       "%.3f", kind & 1 ? "huge" : "4 KiB",
				       R->fm[d][kind & 1], R->ratio[d][k]);
			if (kind == 0 && !isnan(R->dm[d]))
				printf(", DeepSpeed aio %.0f MB/s, ratio %.3f",
				       R->dm[d], R->dratio[d]);
			printf(" (medians of %d)\n", o->reps);
		}
	if (!o->json)
		return;
	bench_json_begin(stdout, "io");
	bench_json_str(stdout, "rw", o->ndirs == 2 ? "both" : o->dirs[0]);
	bench_json_int(stdout, "bs", o->bs);
	bench_json_int(stdout, "qd", o->qd);
	bench_json_int(stdout, "size", o->size);
	bench_json_int(stdout, "reps", o->reps);
	bench_json_str(stdout, "path", o->extent ? "extent" : "raw");
	bench_json_int(stdout, "direct", R->ci[0].direct);
	bench_json_int(stdout, "ring_flags", R->ci[0].ring_flags);
	for (int k = 0; k < o->nkinds; k++) {
		char key[64];

		snprintf(key, sizeof(key), "registered_%s",
			 kind_name[o->kinds[k]]);
		bench_json_int(stdout, key, R->ci[k].registered);
		snprintf(key, sizeof(key), "pool_huge_%s",
			 kind_name[o->kinds[k]]);
		bench_json_int(stdout, key, R->ci[k].pool_huge);
	}
	for (int d = 0; d < o->ndirs; d++) {
		char key[64];

		for (int k = 0; k < o->nkinds; k++) {
			snprintf(key, sizeof(key), "%s_%s_MBps", o->dirs[d],
				 kind_name[o->kinds[k]]);
			bench_json_num(stdout, key, R->om[d][k]);
			if (!o->fio)
				continue;
			snprintf(key, sizeof(key), "%s_ratio_%s", o->dirs[d],
				 kind_name[o->kinds[k]]);
			bench_json_num(stdout, key, R->ratio[d][k]);
		}
		if (o->fio && R->pg[0]) {
			snprintf(key, sizeof(key), "%s_fio_MBps", o->dirs[d]);
			bench_json_num(stdout, key, R->fm[d][0]);
		}
		if (o->fio && R->pg[1]) {
			snprintf(key, sizeof(key), "%s_fio_huge_MBps",
				 o->dirs[d]);
			bench_json_num(stdout, key, R->fm[d][1]);
		}
		snprintf(key, sizeof(key), "%s_ds_MBps", o->dirs[d]);
		bench_json_num(stdout, key, R->dm[d]);	/* null: none */
		snprintf(key, sizeof(key), "%s_ratio_ds_4k", o->dirs[d]);
		bench_json_num(stdout, key, R->dratio[d]);
	}
	if (o->ndirs == 1 && o->nkinds == 1) {	/* one cell: plain names */
		bench_json_num(stdout, "ours_MBps", R->om[0][0]);
		if (o->fio) {
			bench_json_num(stdout, "fio_MBps",
				       R->fm[0][o->kinds[0] & 1]);
			bench_json_num(stdout, "ratio", R->ratio[0][0]);
		}
	}
	bench_json_end(stdout);
}

/* DeepSpeed's aio for round i, where its venv runs: ds[d][i] for a
 * read or a write direction (randread: none); when it fails, a note
 * and no more tries. */
static void run_ds(struct io_opts *o, struct results *R, int i)
{
	double w, rd;
	char why[600];

	if (!o->ds_py[0])
		return;
	if (ds_aio_run(o->ds_py, ds_made, o->size, o->bs, o->qd, &w, &rd,
		       why, sizeof(why))) {
		fprintf(stderr, "hmm-bench io: note: no DeepSpeed aio "
			"ceiling (%s)\n", why);
		o->ds_py[0] = 0;
		for (int d = 0; d < o->ndirs; d++)
			R->ds[d][0] = NAN;	/* none at all */
		return;
	}
	for (int d = 0; d < o->ndirs; d++)
		R->ds[d][i] = !strcmp(o->dirs[d], "read") ? rd :
			      !strcmp(o->dirs[d], "write") ? w : NAN;
	if (!o->json)
		printf("rep %d DeepSpeed aio: write %.0f read %.0f MB/s\n",
		       i + 1, w, rd);
}

/* dm[d] and dratio[d] (ours on 4 KiB pages over DeepSpeed, the median
 * of each round's), or NAN where it did not run every round. */
static void ds_medians(struct io_opts *o, struct results *R, int d)
{
	int k4 = -1;
	double q[o->reps];

	R->dm[d] = R->dratio[d] = NAN;
	if (!o->ds_py[0] || isnan(R->ds[d][0]))
		return;
	for (int k = 0; k < o->nkinds; k++)
		if (o->kinds[k] == 0)
			k4 = k;
	for (int i = 0; k4 >= 0 && i < o->reps; i++)
		q[i] = R->ours[d][k4][i] / R->ds[d][i];
	if (k4 >= 0)
		R->dratio[d] = bench_median(q, o->reps);
	R->dm[d] = bench_median(R->ds[d], o->reps);
}

/* The venv (--ds-venv, $HMM_TORCH_VENV, else build/peers beside this
 * binary) and DeepSpeed's scratch file beside the store's file. */
static void ds_setup(struct io_opts *o)
{
	int fd;

	if (!torch_venv_python(o->ds_venv, o->ds_py, sizeof(o->ds_py)))
		return;	/* none: said in the report as null */
	if (access(o->ds_py, X_OK)) {
		fprintf(stderr, "hmm-bench io: note: no DeepSpeed aio ceiling "
			"(%s: %s)\n", o->ds_py, strerror(errno));
		o->ds_py[0] = 0;
		return;
	}
	if (snprintf(ds_made, sizeof(ds_made), "%s.ds.XXXXXX", o->file) >=
	    (int)sizeof(ds_made))
		fd = -1, errno = ENAMETOOLONG;
	else
		fd = mkstemp(ds_made);
	if (fd >= 0)
		bench_scratch_add(ds_made);
	if (fd < 0) {
		fprintf(stderr, "hmm-bench io: note: no DeepSpeed aio ceiling "
			"(%s: %s)\n", ds_made, strerror(errno));
		ds_made[0] = o->ds_py[0] = 0;
		return;
	}
	close(fd);
}

/* Every round measures every cell in turn; then the medians. */
static int run_all(struct io_opts *o, struct results *R)
{
	struct cell_info ci;
	uint64_t off = 0;

	if (measure(o, "write", o->kinds[0], 1, &ci, &off) < 0)
		return -1;	/* format, make every block real */
	for (int i = 0; i < o->reps; i++) {
		for (int d = 0; d < o->ndirs; d++) {
			for (int k = 0; k < o->nkinds; k++) {
				double v = measure(o, o->dirs[d], o->kinds[k],
						   0, &R->ci[k], &off);

				if (v < 0)
					return -1;
				R->ours[d][k][i] = v;
			}
			for (int g = 0; o->fio && g < 2; g++) {
				if (!R->pg[g])
					continue;
				R->fio[d][g][i] = run_fio(o, o->dirs[d], off, g);
				if (R->fio[d][g][i] < 0) {
					fprintf(stderr, "hmm-bench io: fio "
						"failed (said above)\n");
					return -1;
				}
			}
			if (o->json)
				continue;
			printf("rep %d %s:", i + 1, o->dirs[d]);
			for (int k = 0; k < o->nkinds; k++)
				printf(" %s %.0f", kind_name[o->kinds[k]],
				       R->ours[d][k][i]);
			for (int g = 0; o->fio && g < 2; g++)
				if (R->pg[g])
					printf(" fio%s %.0f", g ? "_huge" : "",
					       R->fio[d][g][i]);
			printf(" MB/s\n");
			fflush(stdout);
		}
		run_ds(o, R, i);
	}
	for (int d = 0; d < o->ndirs; d++) {
		for (int k = 0; k < o->nkinds; k++) {
			double q[o->reps];

			for (int i = 0; o->fio && i < o->reps; i++)
				q[i] = R->ours[d][k][i] /
				       R->fio[d][o->kinds[k] & 1][i];
			if (o->fio)
				R->ratio[d][k] = bench_median(q, o->reps);
			R->om[d][k] = bench_median(R->ours[d][k], o->reps);
		}
		for (int g = 0; o->fio && g < 2; g++)
			if (R->pg[g])
				R->fm[d][g] = bench_median(R->fio[d][g],
							   o->reps);
		ds_medians(o, R, d);
	}
	return 0;
}

static int bench_io(int argc, char **argv)
{
	struct io_opts o;
	struct results R = { 0 };
	char scratch[4096];
	int rc = 1;

	parse(argc, argv, &o);
	if (o.fio && system("command -v fio >/dev/null 2>&1") != 0) {
		fprintf(stderr, "hmm-bench io: fio not found (make deps, or "
			"apt-get install fio; --no-fio runs without it)\n");
		return 1;
	}
	rc = pick_file(&o, scratch, sizeof(scratch));
	if (rc)
		goto out;
	rc = 1;
	for (int d = 0; d < o.ndirs; d++) {
		for (int k = 0; k < o.nkinds; k++)
			if (!(R.ours[d][k] = calloc(o.reps, sizeof(double))))
				goto out;
		if (!(R.fio[d][0] = calloc(o.reps, sizeof(double))) ||
		    !(R.fio[d][1] = calloc(o.reps, sizeof(double))) ||
		    !(R.ds[d] = calloc(o.reps, sizeof(double))))
			goto out;
	}
	for (int k = 0; k < o.nkinds; k++)
		R.pg[o.kinds[k] & 1] = 1;
	ds_setup(&o);
	if (run_all(&o, &R))
		goto out;
	report(&o, &R);
	rc = 0;
out:	/* made and ds_made are removed at the exit (scratch.c) */
	for (int d = 0; d < NDIRS; d++) {
		for (int k = 0; k < NKINDS; k++)
			free(R.ours[d][k]);
		free(R.fio[d][0]);
		free(R.fio[d][1]);
		free(R.ds[d]);
	}
	return rc;
}

HMM_BENCH(io, "store I/O against fio, 4 KiB and huge pages", bench_io);
