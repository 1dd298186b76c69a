/* SPDX-License-Identifier: MIT */
/*
 * cuda_emu.h — just enough of CUDA to run this repository's kernels on
 * the CPU, one block at a time, so that their index arithmetic, tails,
 * launch geometry, barriers and warp exchanges are checked against the
 * CPU references where no GPU is (tests/integration/test_gpu_emu.sh).
 *
 * Each thread of a block is a fiber with its own stack (a register
 * switch of our own on x86-64, ucontext elsewhere); a scheduler runs
 * every fiber until it finishes or reaches a synchronisation point:
 * __syncthreads() (every live thread of the block), __syncwarp() and
 * the shuffles (every live lane of the warp).  A barrier that can never
 * complete — threads of a block waiting at different barriers, a warp
 * exchange missing lanes that exited — is reported and aborts: that is
 * a hang or undefined behaviour on a GPU.  __shared__ arrays are static
 * (blocks run one after another), in one section filled with a NaN
 * pattern (0xff bytes) before each block, so a read of shared memory
 * no thread of the block wrote shows up as NaN.  The tensor-core mma
 * (attn_mma.cu's mma16816) is computed from the lanes' fragments as the
 * PTX ISA lays them out (hk_emu_mma16816), so fragment handling is
 * checked too.
 *
 * Races: between two synchronisation points the runnable fibers run in
 * the order hk_emu::sched says (pick()): forward (the default), reverse,
 * warp by warp up to the next __syncthreads forward or reverse, or a
 * seeded random one that also lets warps drift apart; blocks run in
 * order, reversed, or shuffled with it.  test_kern_emu runs each launch
 * under all of them and requires the same bits: two accesses by two
 * threads (or blocks) that no barrier orders run one way round in one
 * schedule and the other way in another, so a missing __syncthreads or
 * __syncwarp shows as a difference wherever the value read or left
 * differs.  Not caught: a race whose two orders leave the same bits (a
 * write of the value already there, a read that does not reach the
 * output), an interleaving inside a fiber's segment (a segment runs
 * whole: no thread sees another's write between two of its own
 * accesses), a shuffle or mma relied on to order memory in the warp
 * (taken here as a barrier; CUDA promises that only of __syncwarp),
 * weak memory (every fiber sees every write at once: no __threadfence
 * question is asked), and races on paths or shapes no test runs.  Not
 * emulated: timing and anything about the real hardware (register
 * limits, occupancy).
 *
 * Include this before the kernels' sources, with tests/gpu/emu first
 * on the include path (its cuda_runtime.h and cuda_bf16.h stand in for
 * the toolkit's).  Single-threaded: one launch at a time.
 */
#ifndef HK_CUDA_EMU_H
#define HK_CUDA_EMU_H

#define HK_CUDA_EMU 1

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <functional>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
/* every __shared__ array in one section, poisoned before each block */
#define __shared__ static __attribute__((section("hk_emu_shared")))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __grid_constant__
#define __restrict__

struct uint3 {
	unsigned x, y, z;
};
struct dim3 {
	unsigned x, y, z;
	dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c)
	{
	}
};

/* aligned as vector_types.h declares them (a GPU faults on less) */
struct __align__(8) uint2 {
	unsigned x, y;
};
struct __align__(16) float4 {
	float x, y, z, w;
};
static inline uint2 make_uint2(unsigned x, unsigned y)
{
	return uint2{ x, y };
}
static inline float4 make_float4(float x, float y, float z, float w)
{
	return float4{ x, y, z, w };
}

/* what the running fiber sees */
static uint3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;

static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
#define __expf(x) expf(x)	/* glibc declares its own __expf */
static inline float __fdividef(float a, float b) { return a / b; }
static inline unsigned __float_as_uint(float f)
{
	unsigned u;

	memcpy(&u, &f, 4);
	return u;
}
static inline float __uint_as_float(unsigned u)
{
	float f;

	memcpy(&f, &u, 4);
	return f;
}
/*
 * The IEEE round-to-nearest operations, which nvcc never contracts into
 * an fma nor approximates: the product goes through a volatile so that
 * g++ cannot fuse it either (-ffp-contract=fast where the CPU has fma);
 * division and sqrtf are correctly rounded on x86-64 (SSE) and AArch64.
 */
static inline float __fmul_rn(float a, float b)
{
	volatile float r = a * b;

	return r;
}
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float __fmaf_rn(float a, float b, float c)
{
	return fmaf(a, b, c);
}

namespace hk_emu {

enum { RUN, AT_BLOCK, AT_WARP, DONE };
enum { STACK = 256 << 10, MAXT = 1024 };

struct fiber {
#ifdef __x86_64__
	void *sp;
#else
	ucontext_t ctx;
#endif
	int state;
	unsigned tid;
	unsigned xgen;		/* warp exchanges done: the buffer's parity */
};

#ifdef __x86_64__
/*
 * A switch without swapcontext's signal-mask system calls (a launch
 * makes millions): callee-saved registers on the old stack, its stack
 * pointer to *from, then the same from to.  A new fiber's stack holds
 * six zeros and the address of trampoline() to return to, with the
 * alignment of a function just called.
 */
extern "C" void hk_emu_switch(void **from, void *to);
__asm__(".text\n"
	".globl hk_emu_switch\n"
	".hidden hk_emu_switch\n"
	".type hk_emu_switch, @function\n"
	"hk_emu_switch:\n"
	"	pushq %rbp\n	pushq %rbx\n	pushq %r12\n"
	"	pushq %r13\n	pushq %r14\n	pushq %r15\n"
	"	movq %rsp, (%rdi)\n"
	"	movq %rsi, %rsp\n"
	"	popq %r15\n	popq %r14\n	popq %r13\n"
	"	popq %r12\n	popq %rbx\n	popq %rbp\n"
	"	ret\n"
	".size hk_emu_switch, .-hk_emu_switch\n");

static void *sched_sp;
#else
static ucontext_t sched;
#endif
static fiber fibers[MAXT];
static char *stacks[MAXT];
static fiber *cur;
static std::function<void()> body;
/* per warp, per lane, two buffers: a lane that reaches the next
 * exchange first writes the other one, so one barrier an exchange */
static uint32_t xch[2][MAXT / 32][32][4];
static uint32_t xchb[2][MAXT / 32][32][2];
static long launches, syncs;
static unsigned long releases;	/* block barriers completed */

/*
 * The order run_block runs the threads in between synchronisation
 * points (pick() says each): FWD, the default, and the others that
 * test_kern_emu runs every launch under too, requiring the same bits:
 * a difference is a race no barrier orders.  RAND's generator starts
 * from sched_seed at each launch, so a launch is the same each run.
 */
enum { SCHED_FWD, SCHED_REV, SCHED_WFWD, SCHED_WREV, SCHED_RAND };
static int sched;
static uint64_t sched_seed, sched_rng;

static uint64_t rng(void)	/* splitmix64 */
{
	uint64_t z = (sched_rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void fail(const char *what)
{
	static const char *const name[] = { "forward", "reverse",
		"warps forward", "warps reverse", "random" };

	fprintf(stderr, "cuda_emu: %s (block %u,%u thread %u, schedule %s "
		"%llu)\n", what, blockIdx.x, blockIdx.y, cur ? cur->tid : 0u,
		name[sched], (unsigned long long)sched_seed);
	abort();
}

static inline void to_sched(void)
{
#ifdef __x86_64__
	hk_emu_switch(&cur->sp, sched_sp);
#else
	swapcontext(&cur->ctx, &sched);
#endif
}

static inline void to_fiber(fiber *f)
{
#ifdef __x86_64__
	hk_emu_switch(&sched_sp, f->sp);
#else
	swapcontext(&sched, &f->ctx);
#endif
}

static void trampoline()
{
	body();
	cur->state = DONE;
	to_sched();
	abort();	/* never resumed */
}

static void fiber_init(fiber *f, char *stack)
{
#ifdef __x86_64__
	uintptr_t top = ((uintptr_t)stack + STACK) & ~(uintptr_t)15;
	void **sp = (void **)top;

	*--sp = NULL;			/* trampoline()'s return address */
	*--sp = (void *)trampoline;	/* where the switch returns to */
	for (int i = 0; i < 6; i++)
		*--sp = NULL;		/* rbp rbx r12 r13 r14 r15 */
	f->sp = sp;
#else
	getcontext(&f->ctx);
	f->ctx.uc_stack.ss_sp = stack;
	f->ctx.uc_stack.ss_size = STACK;
	f->ctx.uc_link = NULL;
	makecontext(&f->ctx, trampoline, 0);
#endif
}

static inline void wait_at(int st)
{
	syncs++;
	cur->state = st;
	to_sched();
}

/* per warp of the running block, its lanes in state RUN */
static unsigned wrun[MAXT / 32];

/*
 * The threads to run this round, in order, into ord; returns how many.
 * FWD and REV run every runnable thread, ascending or descending: warps
 * in lockstep, one segment (to the next synchronisation point) each.
 * WFWD and WREV run only the first (last) warp with a runnable thread,
 * lanes ascending (descending), so each warp runs on to its next
 * __syncthreads before the next warp starts: of two accesses by two
 * threads that no barrier orders, WFWD runs one first and WREV the
 * other, as far apart as the barriers allow.  RAND holds back a random
 * half of the warps for the round and shuffles the rest: warps drift
 * apart as they may on a GPU.
 */
static unsigned pick(unsigned n, unsigned *ord)
{
	int rev = sched == SCHED_REV || sched == SCHED_WREV;
	unsigned k = 0, nw = (n + 31) / 32;
	uint64_t hold;

	if (sched == SCHED_FWD || sched == SCHED_REV) {
		for (unsigned i = 0; i < n; i++) {
			unsigned t = rev ? n - 1 - i : i;

			if (fibers[t].state == RUN)
				ord[k++] = t;
		}
		return k;
	}
	if (sched == SCHED_WFWD || sched == SCHED_WREV) {
		for (unsigned i = 0; i < nw && !k; i++) {
			unsigned w = rev ? nw - 1 - i : i;

			for (unsigned l = 0; l < 32 && wrun[w]; l++) {
				unsigned t = w * 32 + (rev ? 31 - l : l);

				if (t < n && fibers[t].state == RUN)
					ord[k++] = t;
			}
		}
		return k;
	}
	hold = rng();		/* bit w: warp w waits this round */
	for (int all = 0; all < 2 && !k; all++)
		for (unsigned t = 0; t < n; t++)
			if (fibers[t].state == RUN &&
			    (all || !((hold >> (t / 32)) & 1)))
				ord[k++] = t;
	for (unsigned i = k; i > 1; i--) {
		unsigned j = (unsigned)(rng() % i), x = ord[i - 1];

		ord[i - 1] = ord[j];
		ord[j] = x;
	}
	return k;
}

/*
 * Releases warp w if its live lanes all wait at the same exchange;
 * returns whether it did.  Aborts on one that cannot complete.
 */
static int release_warp(unsigned n, unsigned w)
{
	unsigned at = 0, done = 0, lanes = 0;

	for (unsigned t = w * 32; t < n && t < w * 32 + 32; t++) {
		lanes++;
		at += fibers[t].state == AT_WARP;
		done += fibers[t].state == DONE;
	}
	if (!at || at + done != lanes)
		return 0;	/* others run or wait at a block barrier */
	if (done) {
		cur = &fibers[w * 32];
		fail("a full-mask warp exchange with lanes that have exited "
		     "(or that skipped exchanges: divergent shuffles)");
	}
	for (unsigned t = w * 32 + 1; t < w * 32 + lanes; t++)
		if (fibers[t].xgen != fibers[w * 32].xgen) {
			cur = &fibers[t];
			fail("lanes of a warp at different exchanges "
			     "(divergent shuffles)");
		}
	for (unsigned t = w * 32; t < w * 32 + lanes; t++)
		fibers[t].state = RUN;
	wrun[w] = lanes;
	return 1;
}

/* Runs one block to completion; aborts on a barrier that cannot end. */
static void run_block(unsigned n)
{
	static unsigned ord[MAXT];
	unsigned live = n, at_block = 0, run = n;

	for (unsigned t = 0; t < n; t++) {
		fiber *f = &fibers[t];

		if (!stacks[t] && !(stacks[t] = (char *)malloc(STACK)))
			fail("no memory for a stack");
		fiber_init(f, stacks[t]);
		f->state = RUN;
		f->xgen = 0;
		f->tid = t;
	}
	for (unsigned w = 0; w * 32 < n; w++)
		wrun[w] = n - w * 32 < 32 ? n - w * 32 : 32;
	while (live) {
		unsigned k = pick(n, ord), ran = 0;	/* a bit a warp */
		int released = 0;

		for (unsigned i = 0; i < k; i++) {
			unsigned t = ord[i];

			cur = &fibers[t];
			threadIdx.x = t, threadIdx.y = 0, threadIdx.z = 0;
			to_fiber(cur);
			/* back at a barrier or done: no longer runnable */
			wrun[t / 32]--;
			ran |= 1u << (t / 32);
			live -= cur->state == DONE;
			at_block += cur->state == AT_BLOCK;
		}
		cur = NULL;
		run -= k;
		if (live && at_block == live) {
			releases++;
			for (unsigned t = 0; t < n; t++)
				if (fibers[t].state == AT_BLOCK) {
					fibers[t].state = RUN;
					wrun[t / 32]++;
				}
			run = live;
			at_block = 0;
			continue;
		}
		for (unsigned w = 0; ran; w++, ran >>= 1)
			if ((ran & 1) && release_warp(n, w)) {
				run += wrun[w];
				released = 1;
			}
		if (live && !released && !run)
			fail("deadlock: threads wait at different barriers "
			     "(__syncthreads in divergent code?)");
	}
}

} /* namespace hk_emu */
extern "C" char __start_hk_emu_shared[] __attribute__((weak));
extern "C" char __stop_hk_emu_shared[] __attribute__((weak));
namespace hk_emu {

/*
 * The i-th block of nb to run: in order for FWD and WFWD, reversed for
 * REV and WREV, in a random order (an affine one: a stride prime to
 * nb) for RAND, so that a block reading what another block of the same
 * launch writes shows too.
 */
static unsigned block_at(unsigned i, unsigned nb)
{
	static unsigned mul, add;

	if (sched == SCHED_FWD || sched == SCHED_WFWD)
		return i;
	if (sched == SCHED_REV || sched == SCHED_WREV)
		return nb - 1 - i;
	if (!i) {
		unsigned a, b;

		mul = 1 + (unsigned)(rng() % nb);
		add = (unsigned)(rng() % nb);
		for (;; mul = mul % nb + 1) {	/* on to one prime to nb */
			for (a = mul, b = nb; b;) {
				unsigned r = a % b;

				a = b, b = r;
			}
			if (a == 1)
				break;
		}
	}
	return (unsigned)(((uint64_t)i * mul + add) % nb);
}

template <typename F>
static void launch(dim3 grid, dim3 block, F f)
{
	unsigned n = block.x * block.y * block.z, nb = grid.x * grid.y;

	if (block.y != 1 || block.z != 1 || grid.z != 1 || n == 0 ||
	    n > MAXT || grid.x == 0 || grid.y == 0 || grid.y > 65535 ||
	    (uint64_t)grid.x * grid.y > 0xffffffffu)
		fail("launch shape this emulator (or the GPU) does not take");
	launches++;
	sched_rng = sched_seed;
	gridDim = grid;
	blockDim = block;
	body = f;
	for (unsigned i = 0; i < nb; i++) {
		unsigned b = block_at(i, nb);

		blockIdx.x = b % grid.x, blockIdx.y = b / grid.x;
		blockIdx.z = 0;
		memset(__start_hk_emu_shared, 0xff,	/* NaN */
		       __stop_hk_emu_shared - __start_hk_emu_shared);
		run_block(n);
	}
}

} /* namespace hk_emu */

/* ---- intrinsics ---------------------------------------------------------- */

static inline void __syncthreads()
{
	hk_emu::wait_at(hk_emu::AT_BLOCK);
}

/* nonzero if v is for any thread of the block that has not exited: the
 * first thread past the first barrier clears (thread 0 may have exited) */
static inline int __syncthreads_or(int v)
{
	static int acc;
	static unsigned long gen;

	hk_emu::wait_at(hk_emu::AT_BLOCK);	/* the last result read */
	if (gen != hk_emu::releases) {
		gen = hk_emu::releases;
		acc = 0;
	}
	hk_emu::wait_at(hk_emu::AT_BLOCK);
	if (v)
		acc = 1;
	hk_emu::wait_at(hk_emu::AT_BLOCK);
	return acc;
}

static inline void __syncwarp(unsigned mask = 0xffffffffu)
{
	if (mask != 0xffffffffu)
		hk_emu::fail("__syncwarp with a partial mask");
	hk_emu::cur->xgen++;	/* counted as an exchange: lanes must agree */
	hk_emu::wait_at(hk_emu::AT_WARP);
}

/* every lane posts its word, all read their source lane's (a lane that
 * goes on to the next exchange writes the other buffer) */
static inline uint32_t hk_emu_shfl(unsigned mask, uint32_t v, int src)
{
	unsigned t = hk_emu::cur->tid, w = t / 32, lane = t % 32;
	unsigned x = hk_emu::cur->xgen++ & 1;

	if (mask != 0xffffffffu)
		hk_emu::fail("shuffle with a partial mask");
	hk_emu::xch[x][w][lane][0] = v;
	hk_emu::wait_at(hk_emu::AT_WARP);
	return hk_emu::xch[x][w][src & 31][0];
}

static inline float __shfl_xor_sync(unsigned m, float v, int o)
{
	return __uint_as_float(hk_emu_shfl(m, __float_as_uint(v),
					   (hk_emu::cur->tid % 32) ^ o));
}
static inline int __shfl_xor_sync(unsigned m, int v, int o)
{
	return (int)hk_emu_shfl(m, (uint32_t)v, (hk_emu::cur->tid % 32) ^ o);
}
static inline float __shfl_sync(unsigned m, float v, int src)
{
	return __uint_as_float(hk_emu_shfl(m, __float_as_uint(v), src));
}

/*
 * mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 from each lane's
 * fragments, laid out as the PTX ISA says (g = lane / 4, t = lane % 4;
 * the lower 16 bits of a register hold the lower-indexed element):
 * A a[0] = (g, 2t..2t+1), a[1] = (g+8, 2t..), a[2] = (g, 2t+8..),
 * a[3] = (g+8, 2t+8..); B b[0] = (k 2t..2t+1, n g), b[1] = (k 2t+8..,
 * n g); C c[0..1] = (g, 2t..2t+1), c[2..3] = (g+8, 2t..2t+1).
 */
static inline float hk_emu_bf(uint32_t reg, int hi)
{
	return __uint_as_float((hi ? reg >> 16 : reg & 0xffff) << 16);
}

static inline void hk_emu_mma16816(float c[4], const uint32_t a[4],
				   const uint32_t b[2])
{
	unsigned t = hk_emu::cur->tid, w = t / 32, lane = t % 32;
	unsigned x = hk_emu::cur->xgen++ & 1;
	uint32_t (*ra)[4] = hk_emu::xch[x][w], (*rb)[2] = hk_emu::xchb[x][w];
	float A[16][16], B[16][8];

	for (int i = 0; i < 4; i++)
		ra[lane][i] = a[i];
	rb[lane][0] = b[0];
	rb[lane][1] = b[1];
	hk_emu::wait_at(hk_emu::AT_WARP);
	for (int l = 0; l < 32; l++) {
		int g = l / 4, tt = l % 4;

		for (int h = 0; h < 2; h++) {
			A[g][2 * tt + h] = hk_emu_bf(ra[l][0], h);
			A[g + 8][2 * tt + h] = hk_emu_bf(ra[l][1], h);
			A[g][2 * tt + 8 + h] = hk_emu_bf(ra[l][2], h);
			A[g + 8][2 * tt + 8 + h] = hk_emu_bf(ra[l][3], h);
			B[2 * tt + h][g] = hk_emu_bf(rb[l][0], h);
			B[2 * tt + 8 + h][g] = hk_emu_bf(rb[l][1], h);
		}
	}
	{
		int g = lane / 4, tt = lane % 4;

		for (int e = 0; e < 4; e++) {
			int r = g + (e >= 2 ? 8 : 0), col = 2 * tt + (e & 1);
			float s = 0;

			for (int k = 0; k < 16; k++)
				s += A[r][k] * B[k][col];
			c[e] += s;
		}
	}
}

#endif /* HK_CUDA_EMU_H */
