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
 * the OS saves tile state (XCR0 bits 17, 18), and Linux grants this
 * process the tile data (arch_prctl ARCH_REQ_XCOMP_PERM, once; without it
 * the first tile instruction is a SIGILL).
 */
static int amx_usable(unsigned edx7)
{
	static int granted = -1;
	unsigned a, b, c, d;

	if (!(edx7 & (1u << 22)) || !(edx7 & (1u << 24)) ||
	    !__get_cpuid_count(7, 1, &a, &b, &c, &d) || !(a & (1u << 5)) ||
	    !xcr0_has(0x60000))
		return 0;
	if (granted < 0)	/* ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA */
		granted = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
	return granted;
}

int hk_isa_supported(int isa)
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
	if (isa == HK_ISA_AMX)
		return amx_usable(d);
	return 0;
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
	while (best > HK_ISA_SCALAR && !hk_isa_supported(best))
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
