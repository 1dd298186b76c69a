// SPDX-License-Identifier: MIT
/* isa.c — which instruction set the kernels may use (see hk.h). */
#include <cpuid.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hk.h"

static int xcr0_has(unsigned mask)
{
	unsigned lo, hi;

	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (lo & mask) == mask;
}

/*
 * AMX-BF16 (edx bit 22), AMX-TILE (24), AVX512-BF16 (leaf 7.1 eax bit 5),
 * the OS saves tile state (XCR0 bits 17, 18).
 */
static int amx_cpu(unsigned edx7)
{
	unsigned a, b, c, d;

	return (edx7 & (1u << 22)) && (edx7 & (1u << 24)) &&
	       __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5)) &&
	       xcr0_has(0x60000);
}

/* The CPU and the OS run isa (cpuid and XCR0 only). */
static int cpu_has(int isa)
{
	unsigned a, b, c, d;

	if (isa == HK_ISA_SCALAR)
		return 1;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return 0;
	/* OSXSAVE, AVX, FMA, F16C */
	if (!(c & (1u << 27)) || !(c & (1u << 28)) || !(c & (1u << 12)) ||
	    !(c & (1u << 29)) || !xcr0_has(0x6))
		return 0;
	if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
		return 0;
	if (isa == HK_ISA_AVX2)
		return !!(b & (1u << 5));
	/* F, DQ, BW, VL and OS saves zmm */
	if (!(b & (1u << 16)) || !(b & (1u << 17)) || !(b & (1u << 30)) ||
	    !(b & (1u << 31)) || !xcr0_has(0xe6))
		return 0;
	if (isa == HK_ISA_AVX512)
		return 1;
	return isa == HK_ISA_AMX && amx_cpu(d);
}

int hk_amx_enable(void)
{
	static int granted = -1;	/* any thread; the answer never changes */
	int g = __atomic_load_n(&granted, __ATOMIC_RELAXED);

	if (g < 0) {	/* ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA */
		g = cpu_has(HK_ISA_AMX) &&
		    syscall(SYS_arch_prctl, 0x1023, 18) == 0;
		__atomic_store_n(&granted, g, __ATOMIC_RELAXED);
	}
	return g;
}

/* AVX512-BF16 (leaf 7.1 eax bit 5) beside AVX-512: vdpbf16ps (attn.h). */
int hk_avx512_bf16(void)
{
	static int has = -1;	/* any thread; the answer never changes */
	int h = __atomic_load_n(&has, __ATOMIC_RELAXED);
	unsigned a, b, c, d;

	if (h < 0) {
		h = cpu_has(HK_ISA_AVX512) &&
		    __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
		__atomic_store_n(&has, h, __ATOMIC_RELAXED);
	}
	return h;
}

int hk_isa_supported(int isa)
{
	if (isa == HK_ISA_AMX)
		return hk_amx_enable();
	return isa >= HK_ISA_SCALAR && isa < HK_ISA_AMX && cpu_has(isa);
}

const char *hk_isa_name(int isa)
{
	static const char *const names[] = { "scalar", "avx2", "avx512", "amx" };

	return isa >= 0 && isa <= HK_ISA_AMX ? names[isa] : "?";
}

int hk_isa(void)
{
	static int cached = -1;
	const char *env;
	int best;

	if (cached >= 0)
		return cached;
	best = HK_ISA_AMX;
	while (best > HK_ISA_SCALAR && !cpu_has(best))
		best--;
	env = getenv("HK_ISA");
	if (env) {
		for (int i = HK_ISA_SCALAR; i <= HK_ISA_AMX; i++)
			if (!strcmp(env, hk_isa_name(i)) && i < best)
				best = i;
	}
	cached = best;
	return best;
}
