// SPDX-License-Identifier: MIT
/*
 * test_kern_emu — the CUDA kernels that have never run on a GPU, run on
 * the CPU under cuda_emu.h (fibers for threads, real barriers and warp
 * exchanges, NaN-poisoned shared memory, the PTX mma layout), against
 * the CPU references, with the launch shapes their callers use:
 *  - hmm-train's gpu_kern.cu (gpu_step.c's shapes: 256 threads an
 *    elementwise block, 8 rows (warps) a row block) against layers.c
 *    and model.c's loops: LayerNorm forward and backward, bias and
 *    residual, GELU, softmax cross-entropy, embedding forward and
 *    backward, the qkv/heads packing; sizes with tails (rows not a
 *    multiple of 8, widths not of 32);
 *  - kernels/core/cuda's SIMT attention (attn_simt.cuh: fwd_simt,
 *    d_rows, bwd_dq, bwd_dkdv) against hk_attn_fwd/bwd: causal with
 *    Nq != Nk, GQA, paged K/V, d not a multiple of 32, d 256, bf16;
 *  - the tensor-core kernels (attn_mma.cu: fwd_mma, dq_mma, dkdv_mma at
 *    d 32, 64, 80, 96, 128) against the CPU's bf16 attention, with
 *    test_attn_gpu's tolerance;
 *  - the AdamW step (adamw.cu: adamw_kernel, check_kernel), launched by
 *    hk_adamw_step_cuda itself (only its launch() is the test's), against
 *    the CPU's scalar path bit for bit, as test_adamw_gpu wants (the same
 *    fp32 operations, each rounded once): all 16 storage variants, tails
 *    of every kind, steps 1, 2 and 1000, the vector and the element
 *    paths, tables of more than 24 tensors, and the found-inf contract;
 *    nothing may be written past an array's end.
 * Every array a kernel touches ends 0..15 bytes before a PROT_NONE page
 * (gmalloc), so a read or write past its end faults as it may on a GPU.
 * Every launch runs under each of cuda_emu.h's schedules (launch_all)
 * and must leave the same bits: races no barrier orders; small racy
 * kernels (races()) show that such a race is flagged.
 * Tolerances: max |emu - cpu| <= tol * max |cpu| (+1e-6): 2e-5 fp32
 * (other summation orders), 2e-2 bf16 (P and dS rounded to bf16 before
 * their products, as on the GPU); none for AdamW (the same bits, a NaN
 * matching any NaN where a NaN grad is stepped).  Built and run by
 * tests/integration/test_gpu_emu.sh (g++; no GPU, no CUDA toolkit).
 */
#include "cuda_emu.h"

#include "../../../tools/hmm-train/gpu_kern.cu"
#include "../../../kernels/core/cuda/attn_mma.cu"
#include "../../../kernels/core/cuda/adamw.cu"

extern "C" {
#include "hk.h"
#include "layers.h"
#include "t.h"
}
#include "hk_attn.h"
#include "unit/adamw_ref.h"

#include <sys/mman.h>

#include <map>
#include <vector>

extern "C" int hk_attn_resolve(const struct hk_attn *a, struct hk_attn *out);

#define TPB	256	/* gpu_step.c's elementwise block */
#define WPB	8	/* gpu_step.c's rows (warps) per row block */

static uint64_t seed = 12345;

/* bytes ending at most 15 bytes before an inaccessible page, 16-byte
 * aligned as a device allocation; gfree() unmaps */
struct gmap {
	void *m;
	size_t len, bytes;
};
static std::map<void *, gmap> gmaps;

static void *gmalloc(size_t bytes)
{
	size_t need = (bytes + 15) / 16 * 16, len = (need + 4095) / 4096 * 4096;
	char *m = (char *)mmap(NULL, len + 4096, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *p;

	if (m == MAP_FAILED || mprotect(m + len, 4096, PROT_NONE))
		t_fail_all("mmap %zu bytes", bytes);
	p = m + len - need;
	gmaps[p] = gmap{ m, len + 4096, bytes };
	return p;
}

static void gfree(void *p)
{
	auto it = gmaps.find(p);

	if (it == gmaps.end())
		return;
	munmap(it->second.m, it->second.len);
	gmaps.erase(it);
}
#define malloc(n)	gmalloc(n)
#define calloc(n, s)	gmalloc((size_t)(n) * (s))	/* mmap: zeros */
#define free(p)		gfree((void *)(p))

/* after the macros: attn_page's pool is gmalloc'ed too */
#include "../attn_check.h"

/* ---- schedules ---------------------------------------------------------- */

/*
 * Every launch runs under each of these orders of cuda_emu.h (forward,
 * its default, first), from the same device memory (every gmalloc'ed
 * array put back), and must leave the same bits in all of it: a kernel
 * here gives one result under any one order, so a difference is a race
 * between threads that no barrier orders (a missing __syncthreads or
 * __syncwarp), as compute-sanitizer's racecheck would report it.
 */
static const struct {
	int sched;
	uint64_t seed;
	const char *name;
} scheds[] = {
	{ hk_emu::SCHED_FWD, 0, "forward" },
	{ hk_emu::SCHED_REV, 0, "reverse" },
	{ hk_emu::SCHED_WFWD, 0, "warps forward" },
	{ hk_emu::SCHED_WREV, 0, "warps reverse" },
	{ hk_emu::SCHED_RAND, 1, "random 1" },
	{ hk_emu::SCHED_RAND, 2, "random 2" },
};

/* An array a kernel writes, named for the message when it differs. */
struct written {
	const char *name;
	const void *p;
	int dtype;		/* HK_F32 (or int32) or HK_BF16 */
};

static char case_name[160];	/* what the launches belong to */
static int sched_launches, sched_bad;

typedef std::vector<std::vector<char>> mem_t;

static void mem_save(mem_t &s)
{
	s.clear();
	for (auto &m : gmaps)
		s.emplace_back((char *)m.first,
			       (char *)m.first + m.second.bytes);
}

static void mem_load(const mem_t &s)
{
	size_t i = 0;

	for (auto &m : gmaps)
		memcpy(m.first, s[i++].data(), m.second.bytes);
}

static int mem_same(const mem_t &s)
{
	size_t i = 0;

	for (auto &m : gmaps)
		if (memcmp(m.first, s[i++].data(), m.second.bytes))
			return 0;
	return 1;
}

/* The first difference of now (schedule s) from was (forward's), named
 * as well as outs allow. */
static void mem_diff(const mem_t &was, const char *s,
		     const std::vector<written> &outs, char *why, size_t n)
{
	size_t i = 0;

	for (auto &m : gmaps) {
		const char *a = was[i++].data(), *b = (const char *)m.first;
		const char *name = "an array no kernel argument names";
		int dtype = HK_F32;
		size_t e, esz;

		if (!memcmp(a, b, m.second.bytes))
			continue;
		for (const written &o : outs)
			if (o.p == m.first)
				name = o.name, dtype = o.dtype;
		esz = dtype == HK_F32 ? 4 : 2;
		for (e = 0; !memcmp(a + e * esz, b + e * esz, esz); e++)
			;
		snprintf(why, n, "%s[%zu]: forward %.9g, %s %.9g", name, e,
			 attn_val(a, e, dtype), s, attn_val(b, e, dtype));
		return;
	}
	snprintf(why, n, "nothing");
}

/*
 * Runs f's launch under every schedule; returns how many left other
 * bits than forward's, each named in a TAP failure (quiet: a comment).
 * Leaves forward's results.  Not a template: one instance of launch()
 * for all the kernels keeps the build short.
 */
static int launch_all(const char *kern, dim3 grid, dim3 block,
		      const std::vector<written> &outs,
		      const std::function<void()> &f, int quiet = 0)
{
	mem_t pre, fwd;
	int bad = 0;

	mem_save(pre);
	for (size_t i = 0; i < sizeof(scheds) / sizeof(scheds[0]); i++) {
		char why[200];

		if (i)
			mem_load(pre);
		hk_emu::sched = scheds[i].sched;
		hk_emu::sched_seed = scheds[i].seed;
		hk_emu::launch(grid, block, f);
		if (!i) {
			mem_save(fwd);
			continue;
		}
		if (mem_same(fwd))
			continue;
		mem_diff(fwd, scheds[i].name, outs, why, sizeof(why));
		bad++;
		if (quiet)
			t_diag("%s (%s): %s differs from forward: %s", kern,
			       case_name, scheds[i].name, why);
		else
			t_ok(0, "%s (%s): %s differs from forward: %s", kern,
			     case_name, scheds[i].name, why);
	}
	hk_emu::sched = hk_emu::SCHED_FWD;
	mem_load(fwd);
	sched_launches++;
	sched_bad += bad;
	return bad;
}

/* One line for the launches since the last: all schedules agreed. */
static void sched_done(void)
{
	t_ok(!sched_bad, "%s: %d launches, the same bits under all %zu "
	     "schedules", case_name, sched_launches,
	     sizeof(scheds) / sizeof(scheds[0]));
	sched_launches = sched_bad = 0;
}

static float rnd(void)
{
	return (float)((t_rand(&seed) >> 40) / (double)(1 << 23) - 1.0);
}

static float *vec(size_t n, float amp)
{
	float *p = (float *)malloc(n * sizeof(float));

	for (size_t i = 0; i < n; i++)
		p[i] = amp * rnd();
	return p;
}

static float *copy(const float *x, size_t n)
{
	float *p = (float *)malloc(n * sizeof(float));

	memcpy(p, x, n * sizeof(float));
	return p;
}

static unsigned ew(size_t n)
{
	return (unsigned)((n + TPB - 1) / TPB);
}

static unsigned rows(size_t n)
{
	return (unsigned)((n + WPB - 1) / WPB);
}

/* max |x - r| <= tol * max |r| + 1e-6, NaN failing (attn_check.h) */
static int close_to(const char *what, const float *x, const float *r,
		    size_t n, double tol)
{
	return attn_close(NULL, what, x, r, n, HK_F32, tol);
}

/* ---- races the schedules must catch ------------------------------------ */

/*
 * Thread t reads the value thread t + by (by < 32: lane + by of its own
 * warp) wrote to shared memory, the write and the read ordered by: 0
 * nothing, 1 __syncthreads, 2 only a warp exchange (which orders the
 * warp, not the block), 3 __syncwarp.
 */
static void racy_pass(float *out, unsigned by, int sync)
{
	__shared__ float s[256];
	unsigned t = threadIdx.x;
	unsigned p = by < 32 ? (t & ~31u) | ((t + by) & 31) :
		     (t + by) % blockDim.x;
	float x = (float)t;

	s[t] = x;
	if (sync == 1)
		__syncthreads();
	if (sync == 2)
		x = warp_sum(x);
	if (sync == 3)
		__syncwarp();
	out[t] = s[p] + x;
}

/* Two tiles through one buffer, the second written with (sync) or
 * without a barrier after the first one's reads: a tile loop lacking
 * its leading __syncthreads. */
static void racy_tiles(float *out, const float *in, int sync)
{
	__shared__ float s[256];
	unsigned t = threadIdx.x, n = blockDim.x;
	float acc = 0;

	for (int i = 0; i < 2; i++) {
		if (sync)
			__syncthreads();
		s[t] = in[i * n + t];
		__syncthreads();
		acc = acc * 2 + s[(t + 33) % n];
	}
	out[t] = acc;
}

/* Block b reads what block b + 1 writes: no barrier orders blocks. */
static void racy_grid(float *x)
{
	if (!threadIdx.x)
		x[blockIdx.x] += x[(blockIdx.x + 1) % gridDim.x];
}

/* Each flagged without its barrier, and not with it. */
static void races(void)
{
	static const struct {
		unsigned by;
		int sync, racy;
		const char *what;
	} pass[] = {
		{ 33, 0, 1, "another warp's write, no barrier" },
		{ 33, 1, 0, "another warp's write after __syncthreads" },
		{ 33, 2, 1, "another warp's write after only a shuffle" },
		{ 1, 0, 1, "another lane's write, no barrier" },
		{ 1, 3, 0, "another lane's write after __syncwarp" },
	};
	float *out = vec(128, 1), *in = vec(256, 1);

	snprintf(case_name, sizeof(case_name), "races");
	for (const auto &c : pass) {
		int bad = launch_all("racy_pass", dim3(1), dim3(128),
				     { { "out", out } }, [&] {
			racy_pass(out, c.by, c.sync);
		}, 1);

		t_ok(c.racy ? bad > 0 : !bad, "%s: %s (%d of %zu schedules "
		     "differ)", c.what, c.racy ? "flagged" : "clean", bad,
		     sizeof(scheds) / sizeof(scheds[0]) - 1);
	}
	for (int sync = 0; sync < 2; sync++) {
		int bad = launch_all("racy_tiles", dim3(1), dim3(128),
				     { { "out", out } }, [&] {
			racy_tiles(out, in, sync);
		}, 1);

		t_ok(sync ? !bad : bad > 0, "a tile overwritten %s: %s (%d "
		     "differ)", sync ? "after a barrier" : "with no barrier "
		     "after the last reads", sync ? "clean" : "flagged", bad);
	}
	t_ok(launch_all("racy_grid", dim3(8), dim3(32), { { "x", in } },
			[&] { racy_grid(in); }, 1) > 0,
	     "a block reading another block's write: flagged");
	sched_launches = sched_bad = 0;
	free(out), free(in);
}

/* ---- gpu_kern.cu against layers.c ---------------------------------------- */

static void layers(int n, int d, int V, int T)
{
	size_t nd = (size_t)n * d;
	float *x = vec(nd, 2), *g = vec(d, 1), *b = vec(d, 0.5f);
	float *y = vec(nd, 1), *ry = vec(nd, 1);
	float *mean = vec(n, 1), *rstd = vec(n, 1);
	float *rmean = vec(n, 1), *rrstd = vec(n, 1);
	float *dy = vec(nd, 1), *dx = vec(nd, 1), *rdx = copy(dx, nd);
	float *dg = vec(d, 1), *db = vec(d, 1), *rdg = vec(d, 1), *rdb = vec(d, 1);
	int acc = 1;
	char what[80];

	snprintf(what, sizeof(what), "n %d d %d", n, d);
	snprintf(case_name, sizeof(case_name), "layers %s", what);
	/* LayerNorm forward */
	launch_all("gk_ln_fwd", dim3(rows(n)), dim3(32 * WPB),
		   { { "y", y }, { "mean", mean }, { "rstd", rstd } }, [&] {
		gk_ln_fwd(y, mean, rstd, x, g, b, n, d);
	});
	ln_fwd(ry, rmean, rrstd, x, g, b, n, d);
	close_to("gk_ln_fwd y", y, ry, nd, 2e-5);
	close_to("gk_ln_fwd mean", mean, rmean, n, 2e-5);
	close_to("gk_ln_fwd rstd", rstd, rrstd, n, 2e-5);

	/* LayerNorm backward: dg, db written, dx accumulated */
	launch_all("gk_ln_bwd_dgdb", dim3(ew(d)), dim3(TPB),
		   { { "dg", dg }, { "db", db } }, [&] {
		gk_ln_bwd_dgdb(dg, db, dy, x, rmean, rrstd, n, d);
	});
	launch_all("gk_ln_bwd_dx", dim3(rows(n)), dim3(32 * WPB),
		   { { "dx", dx } }, [&] {
		gk_ln_bwd_dx(dx, dy, x, rmean, rrstd, g, n, d, acc);
	});
	memset(rdg, 0, d * sizeof(float));
	memset(rdb, 0, d * sizeof(float));
	ln_bwd(rdx, rdg, rdb, dy, x, rmean, rrstd, g, n, d, 1);
	close_to("gk_ln_bwd_dx (accumulating)", dx, rdx, nd, 2e-5);
	t_ok(!memcmp(dg, rdg, d * 4) && !memcmp(db, rdb, d * 4),
	     "gk_ln_bwd_dgdb: dg, db the CPU's bits (rows in order)");

	/* bias gradient, rows_init with and without a residual */
	launch_all("gk_bias_grad", dim3(ew(d)), dim3(TPB), { { "db", db } },
		   [&] { gk_bias_grad(db, dy, n, d); });
	bias_grad(rdb, dy, n, d);
	t_ok(!memcmp(db, rdb, d * 4), "gk_bias_grad: the CPU's bits");
	launch_all("gk_rows_init", dim3(ew(nd)), dim3(TPB), { { "y", y } },
		   [&] {
		gk_rows_init(y, b, x, n, d);
	});
	rows_init(ry, b, x, n, d);
	t_ok(!memcmp(y, ry, nd * 4), "gk_rows_init with a residual: exact");
	launch_all("gk_rows_init", dim3(ew(nd)), dim3(TPB), { { "y", y } },
		   [&] {
		gk_rows_init(y, b, NULL, n, d);
	});
	rows_init(ry, b, NULL, n, d);
	t_ok(!memcmp(y, ry, nd * 4), "gk_rows_init without: exact");

	/* GELU, backward in place as gpu_step.c runs it */
	{
		size_t nf = 4 * nd;
		float *u = vec(nf, 3), *o = vec(nf, 1), *ro = vec(nf, 1);
		float *d1 = vec(nf, 1), *rd1 = copy(d1, nf);

		launch_all("gk_gelu_fwd", dim3(ew(nf)), dim3(TPB),
			   { { "y", o } }, [&] {
			gk_gelu_fwd(o, u, nf);
		});
		gelu_fwd(ro, u, nf);
		close_to("gk_gelu_fwd", o, ro, nf, 2e-6);
		launch_all("gk_gelu_bwd", dim3(ew(nf)), dim3(TPB),
			   { { "dx", d1 } }, [&] {
			gk_gelu_bwd(d1, u, d1, nf);
		});
		gelu_bwd(rd1, u, rd1, nf);
		close_to("gk_gelu_bwd (in place)", d1, rd1, nf, 2e-6);
		free(u), free(o), free(ro), free(d1), free(rd1);
	}

	/* softmax cross-entropy: per-row losses, logits -> gradient */
	{
		float *l = vec((size_t)n * V, 4), *rl = copy(l, (size_t)n * V);
		float *loss = vec(n, 1);
		int *tgt = (int *)malloc(n * sizeof(int));
		double s = 0, ref;

		for (int r = 0; r < n; r++)
			tgt[r] = (int)(t_rand(&seed) % V);
		launch_all("gk_xent", dim3(rows(n)), dim3(32 * WPB),
			   { { "l", l }, { "loss", loss } }, [&] {
			gk_xent(l, loss, tgt, n, V);
		});
		ref = xent_fwd_bwd(rl, rl, tgt, n, V);
		for (int r = 0; r < n; r++)
			s += loss[r];
		t_ok(fabs(s / n - ref) <= 1e-5 * fabs(ref), "gk_xent: mean "
		     "loss %.7f, CPU %.7f", s / n, ref);
		close_to("gk_xent dlogits", l, rl, (size_t)n * V, 2e-5);
		free(l), free(rl), free(loss), free(tgt);
	}

	/* embeddings: forward, and the backward's two sums (model.c) */
	{
		int Vv = V, Bn = n / T;
		size_t nn = (size_t)Bn * T;
		float *wte = vec((size_t)Vv * d, 1), *wpe = vec((size_t)T * d, 1);
		float *xe = vec(nn * d, 1), *gte = vec((size_t)Vv * d, 1);
		float *rgte = copy(gte, (size_t)Vv * d), *gpe = vec((size_t)T * d, 1);
		float *rgpe = vec((size_t)T * d, 1), *dxe = vec(nn * d, 1);
		int *tok = (int *)malloc(nn * sizeof(int)), bad = 0;
		int nni = (int)nn;

		for (size_t r = 0; r < nn; r++)
			tok[r] = (int)(t_rand(&seed) % Vv);
		launch_all("gk_embed_fwd", dim3(ew(nn * d)), dim3(TPB),
			   { { "x", xe } }, [&] {
			gk_embed_fwd(xe, wte, wpe, tok, nni, T, d);
		});
		for (size_t r = 0; r < nn; r++)
			for (int c = 0; c < d; c++)
				bad += xe[r * d + c] != wte[(size_t)tok[r] * d + c] +
						       wpe[(r % T) * d + c];
		t_eq(bad, 0, "gk_embed_fwd: wte[tok] + wpe[t], exact");
		launch_all("gk_wte_bwd", dim3(ew(d)), dim3(TPB),
			   { { "gte", gte } }, [&] {
			gk_wte_bwd(gte, dxe, tok, nni, d);
		});
		launch_all("gk_wpe_bwd", dim3(ew((size_t)T * d)), dim3(TPB),
			   { { "gpe", gpe } }, [&] {
			gk_wpe_bwd(gpe, dxe, nni, T, d);
		});
		memset(rgpe, 0, (size_t)T * d * 4);
		for (size_t r = 0; r < nn; r++)	/* model.c's embed_bwd */
			for (int c = 0; c < d; c++) {
				rgte[(size_t)tok[r] * d + c] += dxe[r * d + c];
				rgpe[(r % T) * d + c] += dxe[r * d + c];
			}
		t_ok(!memcmp(gte, rgte, (size_t)Vv * d * 4) &&
		     !memcmp(gpe, rgpe, (size_t)T * d * 4),
		     "gk_wte_bwd, gk_wpe_bwd: model.c's bits (repeated tokens "
		     "summed in row order)");
		free(wte), free(wpe), free(xe), free(gte), free(rgte);
		free(gpe), free(rgpe), free(dxe), free(tok);
	}

	/* packing qkv rows into [B][H][T][hd] and back (attn.c's pack) */
	{
		int H = d % 3 == 0 ? 3 : 2, Bn = n / T, bad = 0;
		int hd = d / H, ld = 3 * d, off = d, back = 0;
		size_t nn = (size_t)Bn * T;
		float *src = vec(nn * ld, 1), *dst = vec(nn * d, 1);
		float *src2 = vec(nn * ld, 1), *src3 = copy(src2, nn * ld);

		launch_all("gk_pack", dim3(ew(nn * d)), dim3(TPB),
			   { { "dst", dst } }, [&] {
			gk_pack(dst, src, ld, off, Bn, T, d, H, back);
		});
		for (int bb = 0; bb < Bn; bb++)
			for (int h = 0; h < H; h++)
				for (int t = 0; t < T; t++)
					for (int j = 0; j < hd; j++)
						bad += dst[(((size_t)bb * H + h) * T + t) * hd + j] !=
						       src[((size_t)bb * T + t) * ld + off + h * hd + j];
		back = 1;
		launch_all("gk_pack back", dim3(ew(nn * d)), dim3(TPB),
			   { { "src", src2 } }, [&] {
			gk_pack(dst, src2, ld, off, Bn, T, d, H, back);
		});
		for (size_t r = 0; r < nn; r++)
			for (int c = 0; c < ld; c++) {
				float want = c >= off && c < off + d ?
					     src[r * ld + c] : src3[r * ld + c];

				bad += src2[r * ld + c] != want;
			}
		t_eq(bad, 0, "gk_pack: %d heads, forward and back, exact", H);
		free(src), free(dst), free(src2), free(src3);
	}
	sched_done();
	free(x), free(g), free(b), free(y), free(ry), free(mean), free(rstd);
	free(rmean), free(rrstd), free(dy), free(dx), free(rdx), free(dg);
	free(db), free(rdg), free(rdb);
}

/* ---- attention ---------------------------------------------------------- */

static uint16_t bf(float f)
{
	return __float2bfloat16_rn(f).x;
}

static void *arr(size_t n, int dtype, float amp)
{
	void *p = malloc(n * (dtype == HK_F32 ? 4 : 2));

	for (size_t i = 0; i < n; i++) {
		float x = amp * rnd();

		if (dtype == HK_F32)
			((float *)p)[i] = x;
		else
			((uint16_t *)p)[i] = bf(x);
	}
	return p;
}

static void attention(const struct attn_case *c, int mma)
{
	struct hk_attn a = {};
	size_t esz = c->dtype == HK_F32 ? 4 : 2;
	size_t nq = (size_t)c->B * c->H * c->Nq * c->d;
	size_t nk = (size_t)c->B * c->Hkv * c->Nk * c->d;
	size_t nr = (size_t)c->B * c->H * c->Nq;
	void *q = arr(nq, c->dtype, 1.5f), *k = arr(nk, c->dtype, 1.5f);
	void *v = arr(nk, c->dtype, 1), *dout = arr(nq, c->dtype, 1);
	void *o = malloc(nq * esz), *dq = malloc(nq * esz);
	void *dk = malloc(nk * esz), *dv = malloc(nk * esz);
	void *eo = malloc(nq * esz), *edq = malloc(nq * esz);
	void *edk = malloc(nk * esz), *edv = malloc(nk * esz);
	float *lse = (float *)malloc(nr * 4), *elsev = (float *)malloc(nr * 4);
	float *D = (float *)malloc(nr * 4);
	const void *K = k, *V = v;
	int32_t *tab = NULL;
	double tol = c->dtype == HK_F32 ? 2e-5 : 2e-2;
	char name[160];

	snprintf(name, sizeof(name), "%s B%d H%d/%d Nq%d Nk%d d%d%s%s%s",
		 mma ? "mma" : "simt", c->B, c->H, c->Hkv, c->Nq, c->Nk, c->d,
		 c->causal ? " causal" : "", c->dtype == HK_BF16 ? " bf16" :
		 " f32", c->bs ? " paged" : "");
	snprintf(case_name, sizeof(case_name), "%s", name);
	a.B = c->B, a.H = c->H, a.Hkv = c->Hkv, a.Nq = c->Nq, a.Nk = c->Nk;
	a.d = c->d, a.causal = c->causal, a.dtype = c->dtype;
	if (hk_attn_fwd(&a, q, k, v, o, lse) ||
	    hk_attn_bwd(&a, q, k, v, o, lse, dout, dq, dk, dv))
		t_fail_all("CPU attention: %s", hk_attn_strerror());
	memset(eo, 0xff, nq * esz), memset(edq, 0xff, nq * esz);
	memset(edk, 0xff, nk * esz), memset(edv, 0xff, nk * esz);
	if (c->bs) {
		int nb = (c->Nk + c->bs - 1) / c->bs, tot = c->B * nb + 1;

		tab = (int32_t *)malloc(tot * 4);
		for (int i = 0; i < tot; i++)
			tab[i] = (i * 7 + 3) % tot;
		K = attn_page(c, k, esz, tab, nb);
		V = attn_page(c, v, esz, tab, nb);
		a.block_table = tab, a.block_size = c->bs, a.max_blocks = nb;
	}
	{
		struct hk_attn r;
		struct args g;

		hk_attn_resolve(&a, &r);
		g = make_args(&r);
		if (!mma) {
			unsigned th = 32 * S_ROWS;
			dim3 gq((c->Nq + S_ROWS - 1) / S_ROWS, c->B * c->H);
			dim3 gk((c->Nk + S_ROWS - 1) / S_ROWS, c->B * c->Hkv);

			launch_all("fwd_simt", gq, dim3(th),
				   { { "o", eo, c->dtype }, { "lse", elsev } },
				   [&] { fwd_simt(g, q, K, V, eo, elsev); });
			launch_all("d_rows",
				   dim3((unsigned)((nr + S_ROWS - 1) / S_ROWS)),
				   dim3(th), { { "D", D } },
				   [&] { d_rows(g, eo, dout, D); });
			launch_all("bwd_dq", gq, dim3(th),
				   { { "dq", edq, c->dtype } }, [&] {
				bwd_dq(g, q, K, V, elsev, dout, D, edq);
			});
			launch_all("bwd_dkdv", gk, dim3(th),
				   { { "dk", edk, c->dtype },
				     { "dv", edv, c->dtype } }, [&] {
				bwd_dkdv(g, q, K, V, elsev, dout, D, edk, edv);
			});
		} else {
			typedef const __nv_bfloat16 *cb;
			typedef __nv_bfloat16 *b16;
			dim3 gq((c->Nq + ROWS - 1) / ROWS, c->B * c->H);
			dim3 gk((c->Nk + ROWS - 1) / ROWS, c->B * c->Hkv);
			dim3 th(32 * WARPS);

			launch_all("d_rows",
				   dim3((unsigned)((nr + S_ROWS - 1) / S_ROWS)),
				   dim3(32 * S_ROWS), { { "D", D } }, [&] {
				d_rows(g, o, dout, D);	/* the CPU's o */
			});
#define MMA_D(DD)							\
			case DD:					\
				launch_all("fwd_mma", gq, th,		\
					   { { "o", eo, HK_BF16 },	\
					     { "lse", elsev } }, [&] {	\
					fwd_mma<DD>(g, (cb)q, (cb)K, (cb)V,	\
						    (b16)eo, elsev);	\
				});					\
				launch_all("dq_mma", gq, th,		\
					   { { "dq", edq, HK_BF16 } }, [&] { \
					dq_mma<DD>(g, (cb)q, (cb)K, (cb)V,	\
						   lse, (cb)dout, D, (b16)edq); \
				});					\
				launch_all("dkdv_mma", gk, th,		\
					   { { "dk", edk, HK_BF16 },	\
					     { "dv", edv, HK_BF16 } }, [&] { \
					dkdv_mma<DD>(g, (cb)q, (cb)K, (cb)V,	\
						     lse, (cb)dout, D, (b16)edk, \
						     (b16)edv);		\
				});					\
				break;
			switch (c->d) {
			MMA_D(32) MMA_D(64) MMA_D(80) MMA_D(96) MMA_D(128)
			default:
				t_fail_all("mma case with d %d", c->d);
			}
#undef MMA_D
		}
	}
	attn_close(name, "o", eo, o, nq, c->dtype, tol);
	attn_lse_close(name, elsev, lse, nr, c->dtype);
	attn_close(name, "dq", edq, dq, nq, c->dtype, tol);
	attn_close(name, "dk", edk, dk, nk, c->dtype, tol);
	attn_close(name, "dv", edv, dv, nk, c->dtype, tol);
	sched_done();
	if (tab) {
		free(tab), free((void *)K), free((void *)V);
	}
	free(q), free(k), free(v), free(dout), free(o), free(dq), free(dk);
	free(dv), free(eo), free(edq), free(edk), free(edv), free(lse);
	free(elsev), free(D);
}

/* ---- adamw.cu against the CPU's scalar path ---------------------------- */

/*
 * adamw.cu's launch(), the one piece of its host side it leaves out under
 * HK_CUDA_EMU: the same grid (its blocks, a block per CHUNK elements of
 * each tensor), TPB threads and no dynamic shared memory, through
 * launch_all.  The rest of hk_adamw_step_cuda (validation, the skip on
 * args.found_inf, the check pass, tables of HK_CU_MAX_T tensors, fill()'s
 * choice of the vector path) runs as it is.  A vector access through a
 * pointer not aligned for it, which faults on a GPU but not here, is
 * failed before the launch.
 */
static int aw_launches, aw_vec;

static int launch(const struct cu_launch *L, unsigned blocks, int check,
		  cudaStream_t s)
{
	std::vector<written> outs;

	if (!L->count)
		return 0;
	for (int k = 0; k < L->count; k++) {
		const struct cu_tensor &t = L->t[k];
		uintptr_t ga = t.gbf ? 8 : 16, sa = t.sbf ? 8 : 16;
		int sd = t.sbf ? HK_BF16 : HK_F32;

		if (t.vec && !(aligned(t.p, 16) && aligned(t.pb, 8) &&
			       aligned(t.g, ga) && aligned(t.m, sa) &&
			       aligned(t.v, sa)))
			t_ok(0, "%s: tensor %d of n %zu: 16- or 8-byte "
			     "accesses on a pointer not aligned for them",
			     case_name, k, t.n);
		aw_vec += t.vec;
		outs.push_back({ "p", t.p, HK_F32 });
		outs.push_back({ "m", t.m, sd });
		outs.push_back({ "v", t.v, sd });
		if (t.pb)
			outs.push_back({ "param_bf16", t.pb, HK_BF16 });
	}
	if (check)
		outs.push_back({ "found_inf", L->set_inf, HK_F32 });
	aw_launches++;
	launch_all(check ? "check_kernel" : "adamw_kernel", dim3(blocks),
		   dim3(TPB), outs, [&] {
		if (check)
			check_kernel(*L);
		else
			adamw_kernel(*L);
	});
	return 0;
}

/*
 * One tensor on the emulated device (gmalloc'ed, each array ending at
 * its inaccessible page, the 0..15 bytes before it filled with 0xa5: a
 * vector access past the end reaches them without faulting) and on the
 * host for the CPU reference.  Array k (p, g, m, v, pb) starts one
 * element past a 16-byte boundary when bit k of offs is set.
 */
struct aw_tensor {
	size_t n, es[5], bytes[5];
	char *base[5], *d[5];
	std::vector<char> h[5];
	struct hk_adamw_args da, ha;
};

static const char *const aw_names[5] = { "p", "g", "m", "v", "param_bf16" };

static void aw_new(struct aw_tensor *t, const struct variant *vr, size_t n,
		   unsigned offs, uint64_t seed)
{
	t->n = n;
	for (int k = 0; k < 5; k++) {
		size_t es = adamw_ref_elsize(vr, k);
		size_t off = (offs >> k) & 1, len = n ? n : 1;

		t->es[k] = es;
		t->d[k] = NULL;
		if (k == 4 && !vr->pout)
			continue;
		t->bytes[k] = (len + off) * es;
		t->base[k] = (char *)malloc(t->bytes[k]);
		memset(t->base[k] + t->bytes[k], 0xa5,
		       (t->bytes[k] + 15) / 16 * 16 - t->bytes[k]);
		t->d[k] = t->base[k] + off * es;
		t->h[k].assign(len * es, 0);
	}
	adamw_ref_start(vr, n, seed, t->h[0].data(), t->h[2].data(),
			t->h[3].data());	/* test_adamw_gpu's values */
	for (int k = 0; k < 5; k++)
		if (t->d[k])
			memcpy(t->d[k], t->h[k].data(), n * t->es[k]);
	t->ha = adamw_ref_args(vr, n, 1);
	t->da = t->ha;
	t->ha.param = (float *)t->h[0].data();
	t->ha.grad = t->h[1].data();
	t->ha.exp_avg = t->h[2].data();
	t->ha.exp_avg_sq = t->h[3].data();
	t->ha.param_bf16 = vr->pout ? (uint16_t *)t->h[4].data() : NULL;
	t->da.param = (float *)t->d[0];
	t->da.grad = t->d[1];
	t->da.exp_avg = t->d[2];
	t->da.exp_avg_sq = t->d[3];
	t->da.param_bf16 = (uint16_t *)t->d[4];
}

static void aw_free(struct aw_tensor *t)
{
	for (int k = 0; k < 5; k++)
		if (t->d[k])
			free(t->base[k]);
}

/* New grads on both sides (test_adamw_gpu's: wide magnitudes, zeros). */
static void aw_grads(struct aw_tensor *t, const struct variant *vr,
		     uint64_t seed)
{
	double sc = vr->scale ? vr->scale : 1;

	for (size_t i = 0; i < t->n; i++) {
		float g = (float)(grand(&seed) * sc);

		if (vr->gdt)
			((uint16_t *)t->h[1].data())[i] = hk_bf16_from_f32(g);
		else
			((float *)t->h[1].data())[i] = g;
	}
	memcpy(t->d[1], t->h[1].data(), t->n * t->es[1]);
}

/* Sets grad element i to the bits x on both sides. */
static void aw_poke(struct aw_tensor *t, size_t i, uint32_t x)
{
	memcpy(&t->h[1][i * t->es[1]], &x, t->es[1]);	/* little-endian */
	memcpy(t->d[1] + i * t->es[1], &x, t->es[1]);
}

static int aw_nan(const char *x, size_t es)
{
	uint32_t u = 0;

	memcpy(&u, x, es);
	return es == 4 ? (u & 0x7fffffffu) > 0x7f800000u :
			 (u & 0x7fffu) > 0x7f80u;
}

/*
 * 1 if every array on the device holds the host's bytes and nothing
 * past an end was written; else says where, and 0.  nan_any: a NaN
 * matches any NaN (a GPU gives its canonical NaN, x86 the operand's).
 */
static int aw_same(const struct aw_tensor *t, int nan_any)
{
	for (int k = 0; k < 5; k++) {
		size_t es = t->es[k], end = (t->bytes[k] + 15) / 16 * 16;
		const char *d = t->d[k], *h = t->h[k].data();

		if (!d)
			continue;
		for (size_t i = 0; i < t->n; i++) {
			uint32_t a = 0, b = 0;

			if (!memcmp(d + i * es, h + i * es, es) ||
			    (nan_any && aw_nan(d + i * es, es) &&
			     aw_nan(h + i * es, es)))
				continue;
			memcpy(&a, d + i * es, es);
			memcpy(&b, h + i * es, es);
			t_diag("n %zu %s[%zu]: emu 0x%08x cpu 0x%08x", t->n,
			       aw_names[k], i, a, b);
			return 0;
		}
		for (size_t i = t->bytes[k]; i < end; i++)
			if ((unsigned char)t->base[k][i] != 0xa5) {
				t_diag("n %zu %s: byte %zu past its end "
				       "written", t->n, aw_names[k],
				       i - t->bytes[k]);
				return 0;
			}
	}
	return 1;
}

/* Storage key (adamw_ops.h's: bit 0 bf16 grad, 1 bf16 states, 2 a bf16
 * copy of p, 3 scaled) with the hyperparameters of variants[key % 6]
 * (weight decay 0 at keys 3, 9 and 15). */
static struct variant aw_variant(int key, char *name, size_t len)
{
	struct variant v = variants[key % 6];

	v.gdt = key & 1;
	v.sdt = key >> 1 & 1;
	v.pout = key >> 2 & 1;
	v.scale = key >> 3 & 1 ? (v.scale ? v.scale : 3) : 0;
	snprintf(name, len, "grad %s, states %s, %s, %s, wd %g",
		 v.gdt ? "bf16" : "f32", v.sdt ? "bf16" : "f32",
		 v.pout ? "bf16 copy" : "no copy",
		 v.scale ? "scaled" : "unscaled", v.wd);
	v.name = name;
	return v;
}

/*
 * Every storage variant over lengths with every tail (n = 1; less than
 * a vector; one past; a block of 256 threads one element short; a whole
 * block of CHUNK; three blocks, the last ending one element into its
 * second iteration) as one call (one launch), steps 1, 2 and 1000 (bias
 * corrections far from and near 1), each with new grads; pointers all
 * 16-byte aligned (the vector path), all one element off, or one array
 * off (the element path).  The CPU path's bits, as test_adamw_gpu wants.
 */
static void adamw_steps(void)
{
	static const size_t lens[] = { 1, 15, 16, 17, 1023, CHUNK,
				       2 * CHUNK + TPB * EPT + 5 };
	static const int64_t steps[] = { 1, 2, 1000 };
	enum { NL = sizeof(lens) / sizeof(lens[0]) };

	for (int key = 0; key < 16; key++) {
		char name[96];
		struct variant vr = aw_variant(key, name, sizeof(name));

		for (int o = 0; o < 3; o++) {
			unsigned offs = o == 0 ? 0 : o == 1 ? 0x1f :
					vr.pout ? 0x10 : 0x08;
			struct aw_tensor t[NL];
			struct hk_adamw_args ha[NL], da[NL];
			int rc = 0, same = 1;

			snprintf(case_name, sizeof(case_name), "adamw %s, %s",
				 name, o == 0 ? "aligned" : o == 1 ?
				 "all one element off" : "one array off");
			aw_vec = aw_launches = 0;
			for (int i = 0; i < NL; i++)
				aw_new(&t[i], &vr, lens[i], offs,
				       key * 100 + i);
			for (int64_t s : steps) {
				for (int i = 0; i < NL; i++) {
					aw_grads(&t[i], &vr, s * 1000 + i);
					t[i].ha.step = t[i].da.step = s;
					ha[i] = t[i].ha;
					da[i] = t[i].da;
				}
				rc |= hk_adamw_step_many(ha, NL);
				rc |= hk_adamw_step_cuda(da, NL, NULL, NULL);
			}
			for (int i = 0; i < NL; i++)
				same &= aw_same(&t[i], 0);
			t_ok(!rc && same && aw_launches == 3, "%s: %d lengths, "
			     "steps 1, 2, 1000: the CPU's bits", case_name, NL);
			t_eq(aw_vec, o ? 0 : 3 * NL, "%s: vector path %s",
			     case_name, o ? "never" : "for every tensor");
			sched_done();
			for (int i = 0; i < NL; i++)
				aw_free(&t[i]);
		}
	}
}

/*
 * More tensors than a launch takes (HK_CU_MAX_T), some empty, stepped,
 * then checked with a NaN in one of the second launch.
 */
static void adamw_many(void)
{
	enum { NT = HK_CU_MAX_T + 6 };
	const struct variant *vr = &variants[2];
	struct aw_tensor t[NT];
	struct hk_adamw_args ha[NT], da[NT];
	int *flag = (int *)malloc(sizeof(int)), rc, same = 1;

	snprintf(case_name, sizeof(case_name), "adamw %d tensors", NT);
	aw_launches = 0;
	for (int i = 0; i < NT; i++) {
		aw_new(&t[i], vr, i % 7 == 3 ? 0 : 1 + 997 * i, i & 1, i);
		aw_grads(&t[i], vr, 50 + i);
		ha[i] = t[i].ha;
		da[i] = t[i].da;
	}
	rc = hk_adamw_step_many(ha, NT);
	rc |= hk_adamw_step_cuda(da, NT, NULL, NULL);
	for (int i = 0; i < NT; i++)
		same &= aw_same(&t[i], 0);
	t_ok(!rc && same && aw_launches == 2, "%s (4 empty) in one call, 2 "
	     "launches (%d): the CPU's bits", case_name, aw_launches);
	aw_poke(&t[NT - 2], 5, 0x7fc00000u);
	for (int i = 0; i < NT; i++) {
		t[i].ha.flags = t[i].da.flags = HK_ADAMW_CHECK_FINITE;
		t[i].ha.step = t[i].da.step = 2;
		ha[i] = t[i].ha;
		da[i] = t[i].da;
	}
	*flag = 0;
	aw_launches = 0;
	rc = hk_adamw_step_many(ha, NT);
	rc = rc == HK_ADAMW_SKIPPED && !hk_adamw_step_cuda(da, NT, flag, NULL);
	t_ok(rc && *flag == 1 && aw_launches == 4, "%s: a NaN in tensor %d "
	     "(the second check launch) sets the flag (%d launches)",
	     case_name, NT - 2, aw_launches);
	same = 1;
	for (int i = 0; i < NT; i++)
		same &= aw_same(&t[i], 0);
	t_ok(same, "%s: nothing written, as the CPU skipped", case_name);
	sched_done();
	for (int i = 0; i < NT; i++)
		aw_free(&t[i]);
	free(flag);
}

/*
 * The found-inf contract (hk_adamw.h): with HK_ADAMW_CHECK_FINITE an inf
 * or NaN grad anywhere (each kind, at the first, a middle and the last
 * element of a tensor) sets the device flag and nothing is written,
 * where the CPU returns HK_ADAMW_SKIPPED; a flag already set skips the
 * step; a NaN in a tensor not checked is stepped, into NaNs where the
 * CPU's are; no flag with CHECK_FINITE, args.found_inf and bad args
 * launch nothing.
 */
static void adamw_finite(int gdt)
{
	static const uint32_t bad32[] = { 0x7f800000u, 0xff800000u,
					  0x7f800001u, 0xffc00000u };
	static const uint16_t bad16[] = { 0x7f80, 0xff80, 0x7fc0, 0xff81 };
	const struct variant *vr = &variants[gdt ? 4 : 0];
	struct aw_tensor t[3];
	struct hk_adamw_args ha[3], da[3];
	int *flag = (int *)malloc(sizeof(int)), ok = 1, rc;

	snprintf(case_name, sizeof(case_name), "adamw found-inf, %s grads",
		 gdt ? "bf16" : "f32");
	for (int i = 0; i < 3; i++) {
		aw_new(&t[i], vr, 5000 + 3 * i, i == 1 ? 0x1f : 0, i);
		aw_grads(&t[i], vr, 10 + i);
		t[i].ha.flags = t[i].da.flags = HK_ADAMW_CHECK_FINITE;
	}
	for (int b = 0; b < 4; b++) {
		struct aw_tensor *x = &t[(b + 1) % 3];
		size_t at[] = { 0, 4096 + 300, x->n - 1, 2555 };
		uint32_t was = 0, bad = gdt ? bad16[b] : bad32[b];

		memcpy(&was, x->d[1] + at[b] * x->es[1], x->es[1]);
		aw_poke(x, at[b], bad);
		for (int i = 0; i < 3; i++)
			ha[i] = t[i].ha, da[i] = t[i].da;
		*flag = 0;
		aw_launches = 0;
		rc = hk_adamw_step_many(ha, 3);
		ok &= rc == HK_ADAMW_SKIPPED &&
		      hk_adamw_step_cuda(da, 3, flag, NULL) == 0 &&
		      *flag == 1 && aw_launches == 2;
		for (int i = 0; i < 3; i++)
			ok &= aw_same(&t[i], 0);
		if (!ok)
			t_diag("0x%x at %zu of tensor %d", bad, at[b],
			       (b + 1) % 3);
		aw_poke(x, at[b], was);
	}
	t_ok(ok, "%s: inf, -inf and NaNs at the first, a middle and the last "
	     "element set the flag; nothing written", case_name);

	for (int i = 0; i < 3; i++)
		ha[i] = t[i].ha, da[i] = t[i].da;
	*flag = 0;
	rc = hk_adamw_step_many(ha, 3);
	t_ok(!rc && !hk_adamw_step_cuda(da, 3, flag, NULL) && *flag == 0 &&
	     aw_same(&t[0], 0) && aw_same(&t[1], 0) && aw_same(&t[2], 0),
	     "%s: all finite: flag left 0, stepped, the CPU's bits",
	     case_name);

	*flag = 1;
	for (int i = 0; i < 3; i++) {
		t[i].ha.flags = t[i].da.flags = 0;
		t[i].ha.step = t[i].da.step = 2;
		da[i] = t[i].da;
	}
	aw_launches = 0;
	t_ok(!hk_adamw_step_cuda(da, 3, flag, NULL) && aw_launches == 1 &&
	     aw_same(&t[0], 0) && aw_same(&t[1], 0) && aw_same(&t[2], 0),
	     "%s: flag already set: the step launched, nothing written",
	     case_name);

	aw_poke(&t[2], 17, gdt ? 0x7fc0u : 0x7fc00000u);
	t[0].ha.flags = t[0].da.flags = HK_ADAMW_CHECK_FINITE;
	for (int i = 0; i < 3; i++)
		ha[i] = t[i].ha, da[i] = t[i].da;
	*flag = 0;
	rc = hk_adamw_step_many(ha, 3);
	t_ok(!rc && !hk_adamw_step_cuda(da, 3, flag, NULL) && *flag == 0 &&
	     aw_same(&t[0], 1) && aw_same(&t[1], 1) && aw_same(&t[2], 1) &&
	     aw_nan(t[2].d[0] + 17 * 4, 4),
	     "%s: a NaN in a tensor not checked: stepped, p NaN where the "
	     "CPU's is, the rest its bits", case_name);

	aw_launches = 0;
	t_eq(hk_adamw_step_cuda(da, 3, NULL, NULL), -EINVAL,
	     "%s: CHECK_FINITE without a flag: -EINVAL (%s)", case_name,
	     hk_adamw_error());
	da[0].flags = 0;
	da[1].found_inf = 1;
	t_eq(hk_adamw_step_cuda(da, 3, flag, NULL), HK_ADAMW_SKIPPED,
	     "%s: args.found_inf: HK_ADAMW_SKIPPED", case_name);
	da[1].found_inf = 0;
	da[2].beta1 = 1;
	t_eq(hk_adamw_step_cuda(da, 3, flag, NULL), -EINVAL,
	     "%s: beta1 1: -EINVAL (%s)", case_name, hk_adamw_error());
	t_ok(!aw_launches && aw_same(&t[0], 1) && aw_same(&t[1], 1) &&
	     aw_same(&t[2], 1), "%s: those three launched nothing",
	     case_name);
	sched_done();
	for (int i = 0; i < 3; i++)
		aw_free(&t[i]);
	free(flag);
}

int main(void)
{
	static const struct attn_case simt[] = {
		/* hmm-train's presets: tiny (B 4, 2 heads of 32, T 32) and
		 * default's head (64 wide, T 128; 2 of its 6 heads, B 1) */
		{ 4, 2, 2, 32, 32, 32, 1, HK_F32, 0 },
		{ 1, 2, 2, 128, 128, 64, 1, HK_F32, 0 },
		{ 1, 2, 2, 21, 21, 48, 1, HK_F32, 0 },
		{ 1, 4, 2, 19, 11, 33, 1, HK_F32, 0 },	/* Nq > Nk: dead rows */
		{ 2, 2, 1, 13, 40, 80, 0, HK_F32, 0 },
		{ 1, 1, 1, 9, 9, 256, 1, HK_F32, 0 },
		{ 1, 4, 2, 20, 37, 64, 1, HK_F32, 8 },
		{ 1, 2, 2, 17, 17, 40, 1, HK_BF16, 0 },
	};
	static const struct attn_case mma[] = {
		{ 1, 2, 2, 70, 70, 64, 1, HK_BF16, 0 },
		{ 1, 2, 1, 33, 100, 128, 0, HK_BF16, 0 },
		{ 1, 2, 2, 50, 19, 80, 1, HK_BF16, 0 },	/* Nq > Nk */
		{ 2, 1, 1, 17, 17, 32, 0, HK_BF16, 0 },
		{ 1, 2, 2, 66, 66, 96, 1, HK_BF16, 0 },
		{ 1, 4, 2, 35, 75, 32, 1, HK_BF16, 16 },
	};

	/* rows with tails: 37 = 4 x 9 + 1 is no multiple of 8, d 48 and
	 * 40 none of 32, a vocabulary of 67 */
	races();
	layers(36, 48, 67, 9);
	layers(37, 40, 67, 37);
	layers(128, 64, 256, 32);	/* the tiny preset: B 4, T 32 */
	for (size_t i = 0; i < sizeof(simt) / sizeof(simt[0]); i++)
		attention(&simt[i], 0);
	for (size_t i = 0; i < sizeof(mma) / sizeof(mma[0]); i++)
		attention(&mma[i], 1);
	hk_adamw_force_isa(HK_ISA_SCALAR);	/* test_adamw_gpu's reference */
	adamw_steps();
	adamw_many();
	adamw_finite(0);
	adamw_finite(1);
	t_diag("%ld launches, %ld synchronisations emulated",
	       hk_emu::launches, hk_emu::syncs);
	return t_done();
}
