// SPDX-License-Identifier: MIT
/*
 * ckpt.c — save and load the training state (ckpt.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt.h"

#define MAGIC "HMMTRN01"

struct ckpt_head {
	char magic[8];
	int32_t cfg[6];		/* vocab ctx d heads layers batch */
	int32_t nblocks, pad;
	int64_t step;
	uint64_t seed, data_len, data_hash;
};

uint64_t ckpt_hash(const void *p, size_t n, uint64_t h)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static void head_fill(struct ckpt_head *h, const struct gpt *g,
		      const struct ckpt_info *in)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, MAGIC, 8);
	h->cfg[0] = g->c.vocab, h->cfg[1] = g->c.ctx, h->cfg[2] = g->c.d;
	h->cfg[3] = g->c.heads, h->cfg[4] = g->c.layers, h->cfg[5] = g->c.batch;
	h->nblocks = g->c.layers + 1;
	if (in) {
		h->step = in->step;
		h->seed = in->seed;
		h->data_len = in->data_len;
		h->data_hash = in->data_hash;
	}
}

static size_t block_floats(const struct gpt *g, int blk)
{
	return blk == g->c.layers ? g->E.total : g->L.total;
}

static const int kinds[] = { ST_P, ST_M, ST_V };

int ckpt_check_target(const char *path, char *err, size_t cap)
{
	char head[8], tmp[4200];
	FILE *f = fopen(path, "rb");
	int e;

	if (f) {
		size_t n = fread(head, 1, sizeof(head), f);

		fclose(f);
		if (n && (n < 8 || memcmp(head, MAGIC, 8))) {
			snprintf(err, cap, "--ckpt %s: the file exists and is "
				 "not an hmm-train checkpoint; refusing to "
				 "replace it", path);
			return -EEXIST;
		}
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "wb");
	if (!f) {
		e = -errno;
		snprintf(err, cap, "--ckpt %s: cannot create %s: %s", path, tmp,
			 strerror(errno));
		return e;
	}
	fclose(f);
	unlink(tmp);
	return 0;
}

int ckpt_save(struct gpt *g, const char *path, const struct ckpt_info *in,
	      char *err, size_t cap)
{
	struct ckpt_head h;
	char tmp[4200];
	uint64_t hash;
	FILE *f;
	int e = 0;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "wb");
	if (!f) {
		e = -errno;
		snprintf(err, cap, "--ckpt %s: cannot create %s: %s", path, tmp,
			 strerror(errno));
		return e;
	}
	head_fill(&h, g, in);
	hash = ckpt_hash(&h, sizeof(h), CKPT_HASH0);
	if (fwrite(&h, sizeof(h), 1, f) != 1)
		e = -EIO;
	for (int b = 0; b <= g->c.layers && !e; b++)
		for (int k = 0; k < 3 && !e; k++) {
			size_t n = block_floats(g, b);
			float *p = state_map(g->st, b, kinds[k], SM_READ);

			if (!p) {
				snprintf(err, cap, "--ckpt %s: %s", path,
					 state_error());
				fclose(f);
				unlink(tmp);
				return -EIO;
			}
			hash = ckpt_hash(p, n * 4, hash);
			if (fwrite(p, 4, n, f) != n)
				e = -EIO;
			state_unmap(g->st, b, kinds[k], p);
		}
	if (!e && fwrite(&hash, sizeof(hash), 1, f) != 1)
		e = -EIO;
	if (!e && (fflush(f) || fsync(fileno(f))))
		e = -errno;
	if (fclose(f) && !e)
		e = -errno;
	if (!e && rename(tmp, path))
		e = -errno;
	if (e) {
		snprintf(err, cap, "--ckpt %s: write failed: %s", path,
			 strerror(-e));
		unlink(tmp);
	}
	return e;
}

static int load_fail(FILE *f, char *err, size_t cap, const char *path,
		     const char *why)
{
	snprintf(err, cap, "--resume %s: %s", path, why);
	if (f)
		fclose(f);
	return -EINVAL;
}

int ckpt_load(struct gpt *g, const char *path, struct ckpt_info *out,
	      char *err, size_t cap)
{
	struct ckpt_head h, want;
	uint64_t hash, stored;
	FILE *f = fopen(path, "rb");

	if (!f) {
		int e = -errno;

		snprintf(err, cap, "--resume %s: cannot open: %s", path,
			 strerror(errno));
		return e;
	}
	if (fread(&h, sizeof(h), 1, f) != 1 || memcmp(h.magic, MAGIC, 8))
		return load_fail(f, err, cap, path, "not an hmm-train checkpoint");
	head_fill(&want, g, NULL);
	if (memcmp(h.cfg, want.cfg, sizeof(h.cfg)) || h.nblocks != want.nblocks)
		return load_fail(f, err, cap, path, "made with another model "
				 "shape (use the same --preset)");
	hash = ckpt_hash(&h, sizeof(h), CKPT_HASH0);
	for (int b = 0; b <= g->c.layers; b++)
		for (int k = 0; k < 3; k++) {
			size_t n = block_floats(g, b);
			float *p = state_map(g->st, b, kinds[k], SM_DISCARD);
			size_t got;

			if (!p) {
				snprintf(err, cap, "--resume %s: %s", path,
					 state_error());
				fclose(f);
				return -EIO;
			}
			got = fread(p, 4, n, f);
			hash = ckpt_hash(p, n * 4, hash);
			state_unmap(g->st, b, kinds[k], p);
			if (got != n)
				return load_fail(f, err, cap, path,
						 "truncated");
		}
	if (fread(&stored, sizeof(stored), 1, f) != 1 || stored != hash)
		return load_fail(f, err, cap, path, "checksum mismatch: the "
				 "file is damaged");
	fclose(f);
	out->step = h.step;
	out->seed = h.seed;
	out->data_len = h.data_len;
	out->data_hash = h.data_hash;
	return 0;
}
