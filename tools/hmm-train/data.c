// SPDX-License-Identifier: MIT
/*
 * data.c — the synthetic grammar corpus, text files, and batches
 * (data.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data.h"
#include "file.h"

static uint64_t mix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Pick index i of n with weight 1/(i+1) (Zipf-like). */
static int zipf(uint64_t *s, int n)
{
	double tot = 0, r;

	for (int i = 0; i < n; i++)
		tot += 1.0 / (i + 1);
	r = (mix(s) >> 11) * 0x1.0p-53 * tot;
	for (int i = 0; i < n; i++) {
		r -= 1.0 / (i + 1);
		if (r < 0)
			return i;
	}
	return n - 1;
}

#define N_(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const char *const det[] = { "the", "a", "every", "some", "this",
				   "my", "no" };
static const char *const adj[] = { "small", "old", "red", "quiet", "happy",
				   "green", "bright", "lazy", "tall",
				   "strange" };
static const char *const noun[] = { "cat", "dog", "bird", "child",
				    "teacher", "river", "farmer", "robot",
				    "garden", "window", "king", "horse" };
static const char *const verb_s[] = { "sees", "likes", "follows", "finds",
				      "helps", "watches", "carries",
				      "remembers" };
static const char *const verb_p[] = { "see", "like", "follow", "find",
				      "help", "watch", "carry",
				      "remember" };
static const char *const adv[] = { "slowly", "today", "again", "quietly",
				   "at night", "every day" };
static const char *const prep[] = { "near", "under", "behind", "with" };

struct out {
	unsigned char *p;
	size_t n, cap;
};

static void put(struct out *o, const char *w)
{
	while (*w && o->n < o->cap)
		o->p[o->n++] = (unsigned char)*w++;
}

/* NP; returns 1 when plural. */
static int np(struct out *o, uint64_t *s)
{
	int plural = mix(s) % 4 == 0;

	put(o, plural ? (mix(s) & 1 ? "the" : "some") : det[zipf(s, N_(det))]);
	put(o, " ");
	if (mix(s) % 3 == 0) {
		put(o, adj[zipf(s, N_(adj))]);
		put(o, " ");
	}
	put(o, noun[zipf(s, N_(noun))]);
	if (plural)
		put(o, "s");
	return plural;
}

static void sentence(struct out *o, uint64_t *s)
{
	int plural = np(o, s), v = zipf(s, N_(verb_s));

	put(o, " ");
	put(o, plural ? verb_p[v] : verb_s[v]);
	put(o, " ");
	np(o, s);
	if (mix(s) % 3 == 0) {
		put(o, " ");
		put(o, prep[zipf(s, N_(prep))]);
		put(o, " ");
		np(o, s);
	}
	if (mix(s) % 4 == 0) {
		put(o, " ");
		put(o, adv[zipf(s, N_(adv))]);
	}
	put(o, mix(s) % 8 ? ". " : ".\n");
}

int data_synth(struct data *d, uint64_t seed, size_t bytes)
{
	struct out o = { .cap = bytes };
	uint64_t s = seed ^ 0x5eed5eed5eedull;

	memset(d, 0, sizeof(*d));
	o.p = malloc(bytes);
	if (!o.p)
		return -ENOMEM;
	while (o.n < o.cap)
		sentence(&o, &s);
	d->text = o.p;
	d->len = o.n;
	snprintf(d->source, sizeof(d->source), "synthetic grammar, seed %llu",
		 (unsigned long long)seed);
	return 0;
}

static int err(char *buf, size_t cap, int e, const char *fmt, const char *p,
	       const char *why)
{
	snprintf(buf, cap, fmt, p, why);
	return e;
}

/* 1 if the first bytes look like a binary file; *at = offending offset. */
static int looks_binary(const unsigned char *p, size_t n, size_t *at)
{
	size_t ctl = 0, look = n < 65536 ? n : 65536;

	for (size_t i = 0; i < look; i++) {
		if (p[i] == 0) {
			*at = i;
			return 1;
		}
		if (p[i] < 0x20 && p[i] != '\n' && p[i] != '\r' &&
		    p[i] != '\t' && p[i] != '\f')
			ctl++;
	}
	*at = look;
	return ctl * 20 > look;	/* over 5% control bytes */
}

int data_load(struct data *d, const char *path, int ctx, char *ebuf,
	      size_t cap)
{
	const char *kind = "";
	struct stat st;
	size_t got = 0, at;
	int fd;

	memset(d, 0, sizeof(*d));
	fd = file_open_regular(path, O_RDONLY, &kind);
	if (fd == -EINVAL)
		return err(ebuf, cap, -EINVAL, "--data %s: not a regular file "
			   "(%s)", path, kind);
	if (fd < 0)
		return err(ebuf, cap, fd, "--data %s: cannot open: %s",
			   path, strerror(-fd));
	if (fstat(fd, &st)) {
		close(fd);
		return err(ebuf, cap, -EIO, "--data %s: %s", path,
			   "cannot stat");
	}
	if (st.st_size == 0) {
		close(fd);
		return err(ebuf, cap, -EINVAL, "--data %s: %s", path,
			   "the file is empty; give a text file to train on");
	}
	d->text = malloc(st.st_size);
	if (!d->text) {
		close(fd);
		return err(ebuf, cap, -ENOMEM, "--data %s: %s", path,
			   "out of memory");
	}
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, d->text + got, st.st_size - got);

		if (r <= 0) {
			int e = r < 0 ? -errno : -EIO;

			close(fd);
			data_free(d);
			return err(ebuf, cap, e, "--data %s: read failed: %s",
				   path, strerror(-e));
		}
		got += r;
	}
	close(fd);
	d->len = got;
	if (looks_binary(d->text, d->len, &at)) {
		char why[160];

		snprintf(why, sizeof(why), "looks like a binary file (%s near "
			 "byte %zu); hmm-train reads text, byte by byte",
			 at < d->len && !d->text[at] ? "a NUL byte" :
			 "many control bytes", at);
		data_free(d);
		return err(ebuf, cap, -EINVAL, "--data %s: %s", path, why);
	}
	if (d->len < (size_t)ctx + 2) {
		char why[128];

		snprintf(why, sizeof(why), "%zu bytes is shorter than one "
			 "sequence (%d bytes for this preset)", d->len, ctx + 1);
		data_free(d);
		return err(ebuf, cap, -EINVAL, "--data %s: %s", path, why);
	}
	snprintf(d->source, sizeof(d->source), "%s", path);
	return 0;
}

void data_free(struct data *d)
{
	free(d->text);
	d->text = NULL;
	d->len = 0;
}

void data_batch(const struct data *d, uint64_t seed, int64_t step, int batch,
		int ctx, int *tok, int *tgt)
{
	uint64_t s = seed * 0x2545f4914f6cdd1dull + (uint64_t)step;
	size_t span = d->len - ctx - 1;

	for (int b = 0; b < batch; b++) {
		size_t o = span ? mix(&s) % (span + 1) : 0;

		for (int t = 0; t < ctx; t++) {
			tok[b * ctx + t] = d->text[o + t];
			tgt[b * ctx + t] = d->text[o + t + 1];
		}
	}
}
