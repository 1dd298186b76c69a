// SPDX-License-Identifier: MIT
/*
 * io.c — `hmm-bench io`: the store's I/O path against fio on the same
 * file, block size, queue depth and range.
 *
 * Ours: RAW requests (or, with --extent, extent requests with their
 * crc32c) from buffers in the store's registered pool, queue_depth in
 * flight, each completion's buffer resubmitted in the next batch.
 * Theirs: fio --ioengine=io_uring --direct=1 over the store's data area
 * (--offset = the data area's start), JSON output parsed for bw_bytes.
 * One untimed sequential write pass first makes every block real (a
 * fresh fallocate'd file reads as zeros without touching the disk);
 * then ours and fio alternate --reps times each; medians are reported.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "err.h"
#include "pool.h"
#include "store.h"

struct io_opts {
	const char *file, *rw;
	int64_t size, bs;
	int qd, reps, json, vs_fio, sqpoll, extent, nohuge, unreg;
};

struct io_run {
	struct hmm_store *s;
	struct io_opts *o;
	struct hmm_pool *own;	/* --unregistered: buffers from here */
	uint64_t nops, next;
	uint64_t *order;	/* block index of each op */
	int write, op;
	struct hmm_io *io;
	struct hmm_io **freeq;
	unsigned nfree;
	int err;
};

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

/* Run fio once; MB/s or < 0. */
static double run_fio(struct io_opts *o, uint64_t offset)
{
	char cmd[2048], *out = NULL;
	size_t len = 0, cap = 0;
	FILE *f;
	double bw;

	snprintf(cmd, sizeof(cmd),
		 "fio --name=hmmbench --filename='%s' --ioengine=io_uring "
		 "--direct=1 --rw=%s --bs=%lld --iodepth=%d --size=%lld "
		 "--offset=%llu --numjobs=1 --randrepeat=0 %s "
		 "--output-format=json 2>/dev/null", o->file, o->rw,
		 (long long)o->bs, o->qd, (long long)o->size,
		 (unsigned long long)offset,
		 o->sqpoll ? "--sqthread_poll=1" : "");
	f = popen(cmd, "r");
	if (!f)
		return -1;
	for (;;) {
		if (len + 4096 + 1 > cap) {
			char *n = realloc(out, cap = cap * 2 + 8192);

			if (!n)
				break;
			out = n;
		}
		size_t k = fread(out + len, 1, 4096, f);

		if (!k)
			break;
		len += k;
	}
	if (pclose(f) != 0 || !out) {
		free(out);
		return -1;
	}
	out[len] = 0;
	bw = parse_bw(out, strcmp(o->rw, "write") ? "read" : "write");
	free(out);
	return bw <= 0 ? -1 : bw / 1e6;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: hmm-bench io --file F --size BYTES --bs BYTES "
		"--qd N --rw read|write|randread\n"
		"                    [--reps N] [--vs-fio] [--sqpoll] "
		"[--extent] [--no-huge] [--unregistered] [--json]\n"
		"F is overwritten: it is formatted as a store.\n");
}

static int parse(int argc, char **argv, struct io_opts *o)
{
	static const struct option lo[] = {
		{ "file", 1, 0, 'f' }, { "size", 1, 0, 's' },
		{ "bs", 1, 0, 'b' }, { "qd", 1, 0, 'q' },
		{ "rw", 1, 0, 'r' }, { "reps", 1, 0, 'n' },
		{ "json", 0, 0, 'j' }, { "vs-fio", 0, 0, 'v' },
		{ "sqpoll", 0, 0, 'p' }, { "extent", 0, 0, 'e' },
		{ "no-huge", 0, 0, 'g' }, { "unregistered", 0, 0, 'u' },
		{ "help", 0, 0, 'h' }, { 0, 0, 0, 0 } };
	int c;

	*o = (struct io_opts){ .rw = "read", .size = 1ll << 30, .bs = 1 << 20,
			       .qd = 32, .reps = 5 };
	optind = 1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'f': o->file = optarg; break;
		case 's': o->size = bench_parse_size(optarg); break;
		case 'b': o->bs = bench_parse_size(optarg); break;
		case 'q': o->qd = atoi(optarg); break;
		case 'r': o->rw = optarg; break;
		case 'n': o->reps = atoi(optarg); break;
		case 'j': o->json = 1; break;
		case 'v': o->vs_fio = 1; break;
		case 'p': o->sqpoll = 1; break;
		case 'e': o->extent = 1; break;
		case 'g': o->nohuge = 1; break;
		case 'u': o->unreg = 1; break;
		case 'h': usage(stdout); exit(0);
		default: return -1;
		}
	}
	if (!o->file || o->bs < 4096 || o->bs % 4096 || o->bs > (1 << 30) ||
	    o->size < o->bs || o->qd < 1 || o->qd > 1024 || o->reps < 1 ||
	    (strcmp(o->rw, "read") && strcmp(o->rw, "write") &&
	     strcmp(o->rw, "randread")))
		return -1;
	if (o->vs_fio && o->reps < 5)
		o->reps = 5;	/* medians of at least five each */
	o->size = o->size / o->bs * o->bs;
	return 0;
}

static int setup(struct io_run *r, struct io_opts *o)
{
	struct hmm_store_config c = { 0 };
	uint64_t bsz = 4096, seed = 42;
	int err;

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
	c.pool_flags = o->nohuge ? HMM_POOL_NOHUGE : 0;
	c.flags = HMM_STORE_CREATE | HMM_STORE_TRUNCATE |
		  (o->sqpoll ? HMM_STORE_SQPOLL : 0);
	err = hmm_store_open(&c, &r->s);
	if (err) {
		fprintf(stderr, "hmm-bench io: %s\n", hmm_last_error());
		return err;
	}
	r->o = o;
	r->nops = o->size / o->bs;
	r->order = calloc(r->nops, sizeof(*r->order));
	r->io = calloc(o->qd, sizeof(*r->io));
	r->freeq = calloc(o->qd, sizeof(*r->freeq));
	if (!r->order || !r->io || !r->freeq)
		return -ENOMEM;
	/* --unregistered: a pool of our own, like the store's but not
	 * registered with its ring */
	if (o->unreg && hmm_pool_new((size_t)o->qd * o->bs, -1,
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

static int bench_io(int argc, char **argv)
{
	struct io_opts o;
	struct io_run r = { 0 };
	struct hmm_store_stats st;
	double *ours, *fio, om, fm = 0;
	int write, rc = 1;

	if (parse(argc, argv, &o)) {
		usage(stderr);
		return 2;
	}
	if (o.vs_fio && system("command -v fio >/dev/null 2>&1") != 0) {
		fprintf(stderr, "hmm-bench io: fio not found (make deps, or "
			"apt-get install fio)\n");
		return 1;
	}
	ours = calloc(o.reps, sizeof(double));
	fio = calloc(o.reps, sizeof(double));
	if (!ours || !fio || setup(&r, &o))
		goto out;
	hmm_store_stats(r.s, &st);
	if (*hmm_store_note(r.s))
		fprintf(stderr, "hmm-bench io: note: %s\n", hmm_store_note(r.s));
	write = !strcmp(o.rw, "write");
	set_order(&r, 0);
	if (run_pass(&r, 1) < 0)	/* make every block real */
		goto out;
	set_order(&r, !strcmp(o.rw, "randread"));
	for (int i = 0; i < o.reps; i++) {
		double t = run_pass(&r, write);

		if (t < 0)
			goto out;
		ours[i] = o.size / t / 1e6;
		if (o.vs_fio) {
			fio[i] = run_fio(&o, st.data_offset);
			if (fio[i] < 0) {
				fprintf(stderr, "hmm-bench io: fio failed\n");
				goto out;
			}
		}
		if (!o.json)
			printf("rep %d: ours %.0f MB/s%s%.0f%s\n", i + 1, ours[i],
			       o.vs_fio ? ", fio " : "", o.vs_fio ? fio[i] : 0,
			       o.vs_fio ? " MB/s" : "");
	}
	om = bench_median(ours, o.reps);
	if (o.vs_fio)
		fm = bench_median(fio, o.reps);
	printf("io: %s bs %lld qd %d size %lld%s: ours %.0f MB/s", o.rw,
	       (long long)o.bs, o.qd, (long long)o.size,
	       o.extent ? " (extents+crc32c)" : "", om);
	if (o.vs_fio)
		printf(", fio %.0f MB/s, ratio %.3f", fm, om / fm);
	printf(" (medians of %d)\n", o.reps);
	if (o.json) {
		bench_json_begin(stdout, "io");
		bench_json_str(stdout, "rw", o.rw);
		bench_json_int(stdout, "bs", o.bs);
		bench_json_int(stdout, "qd", o.qd);
		bench_json_int(stdout, "size", o.size);
		bench_json_int(stdout, "reps", o.reps);
		bench_json_str(stdout, "path", o.extent ? "extent" : "raw");
		bench_json_int(stdout, "buffers_registered", !o.unreg &&
			       st.registered_buffers);
		bench_json_num(stdout, "ours_MBps", om);
		if (o.vs_fio) {
			bench_json_num(stdout, "fio_MBps", fm);
			bench_json_num(stdout, "ratio", om / fm);
		}
		bench_json_int(stdout, "direct", st.direct);
		bench_json_int(stdout, "registered_buffers",
			       st.registered_buffers);
		bench_json_int(stdout, "ring_flags", st.ring_flags);
		bench_json_int(stdout, "pool_huge", st.pool_huge);
		bench_json_end(stdout);
	}
	rc = 0;
out:
	hmm_store_close(r.s);
	hmm_pool_delete(r.own);
	free(r.order);
	free(r.io);
	free(r.freeq);
	free(ours);
	free(fio);
	return rc;
}

HMM_BENCH(io, "store I/O against fio (--vs-fio)", bench_io);
