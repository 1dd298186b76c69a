/* SPDX-License-Identifier: MIT */
/*
 * hk.h — what every kernel in kernels/core shares: the instruction-set
 * choice and a tiny parallel-for.  kernels/core knows nothing of tiers:
 * pure functions over pointers (DESIGN.md "Kernels").
 *
 * ISA: hk_isa() returns the best level this CPU runs (cpuid), lowered by
 * the environment variable HK_ISA=scalar|avx2|avx512|amx so that tests can
 * force each path.  Kernel files named *_avx2.c / *_avx512.c / *_amx.c are
 * compiled with that ISA's flags and are called only when hk_isa() allows
 * it; each kernel has an ops table filled per ISA and picked once.  A
 * kernel without a path of some level runs its best lower one (AdamW at
 * HK_ISA_AMX runs its AVX-512 path; so does fp32 attention).
 *
 * Threads: hk_parallel(n, fn, arg) runs fn(arg, i, n) for i in [0, n) on
 * hk_threads() threads (HK_THREADS, default the online CPUs, at most
 * 64: a value that is not a count from 1 to 64 is said on stderr and
 * the default used; hk_set_threads() changes it), the caller
 * being one of them; it returns when all are done.  Calls from several
 * threads at once are serialised.  fn runs on a pool thread or the caller.
 */
#ifndef HK_H
#define HK_H

#include <stddef.h>
#include <stdint.h>

#define HK_ISA_SCALAR	0
#define HK_ISA_AVX2	1	/* AVX2 + FMA + F16C */
#define HK_ISA_AVX512	2	/* AVX-512 F/BW/VL/DQ */
#define HK_ISA_AMX	3	/* AVX512 + AVX512-BF16 + AMX-TILE/BF16
				   (tiles run after hk_amx_enable()) */

int hk_isa(void);			/* best allowed, cached after first call */
int hk_isa_supported(int isa);		/* 1 if the CPU runs it */
/*
 * AMX tiles need Linux's permission (arch_prctl ARCH_REQ_XCOMP_PERM; the
 * first tile instruction without it is a SIGILL).  hk_isa() does not ask
 * (a granted process needs larger signal stacks); the AMX path asks
 * before its first use, as does hk_isa_supported(HK_ISA_AMX): 1 if
 * granted (asked once per process), 0 if refused or no AMX.
 */
int hk_amx_enable(void);
const char *hk_isa_name(int isa);	/* "scalar", "avx2", "avx512", "amx" */

int hk_threads(void);
void hk_set_threads(int n);		/* 1..64; takes effect on next hk_parallel */
void hk_parallel(int n, void (*fn)(void *arg, int i, int n), void *arg);

/* Split [0, len) into part i of n, boundaries rounded to `align` elements
 * (a cache line's worth) so threads never share a line. */
static inline void hk_split(size_t len, int i, int n, size_t align,
			    size_t *lo, size_t *hi)
{
	size_t per = (len + n - 1) / n;

	per = (per + align - 1) / align * align;
	*lo = per * i < len ? per * i : len;
	*hi = per * (i + 1) < len ? per * (i + 1) : len;
}

#endif /* HK_H */
