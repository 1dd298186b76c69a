#!/usr/bin/env bash
# test_uvm_fake — the "uvm" device (libhmm/src/engine/dev_uvm.c: managed
# memory that hmm prefetches) on the fake CUDA driver (tests/fakecuda),
# where no GPU is:
#  - the fake's managed memory keeps the driver's contracts
#    (cuMemAllocManaged size 0 / bad flags, prefetch and advice on memory
#    that is not managed, a bad location, device or flags, attribute
#    queries of the wrong size, cuMemFree of the middle) with the real
#    codes, and its range attributes say where a range was prefetched
#    and what it was advised;
#  - test_tensor_uvm (plain, the ASan and TSan builds when there, and in
#    shared mode through an hmmd) passes on it: bytes exact, ranges where
#    hmm moved them, the device budget kept, the fake reporting no
#    violation and no leak; evicted chunks discarded at the device (the
#    fake fills discarded 2 MiB pages with 0xa5, so a byte read back
#    from one would show), and with FAKECUDA_NODISCARD=1 (a driver
#    without discards) prefetched back instead;
#  - FAKECUDA_FAIL on cuMemAllocManaged, cuMemAdvise_v2 (at tensor
#    creation), cuMemDiscardAndPrefetchBatchAsync and, without
#    discards, cuMemPrefetchAsync_v2 (a map): the one call fails naming
#    its tensor, the next works, no byte lost;
#  - FAKECUDA_NOMANAGED=1: hmm_open says -ENODEV, "lacks managed memory".
# LD_LIBRARY_PATH puts the fake before any real driver.  Skipped when the
# fake or the test is not built.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/tests/unit/test_tensor_uvm
. "$(dirname "$0")/fakecuda.sh"
need "$bin"

# ---- the fake's managed-memory contracts (through ctypes) -----------------
if command -v python3 >/dev/null; then
	contract FAKECUDA_MEM=8M FAKECUDA_DELAY_US=100000 <<'EOF'
from fakecuda_t import *
cu.cuMemAllocManaged.argtypes = [C.POINTER(U), Z, C.c_uint]
cu.cuMemFree_v2.argtypes = [U]
cu.cuMemPrefetchAsync_v2.argtypes = [U, Z, Loc, C.c_uint, P]
cu.cuMemAdvise_v2.argtypes = [U, Z, I, Loc]
cu.cuMemRangeGetAttribute.argtypes = [P, Z, I, U, Z]
cu.cuMemRangeGetAttributes.argtypes = [C.POINTER(P), C.POINTER(Z), C.POINTER(I), Z, U, Z]
def attr(a, p, size, nbytes=4):
    v = (I * (nbytes // 4))()
    r = cu.cuMemRangeGetAttribute(v, nbytes, a, p, size)
    return v[0] if r == 0 else ("error %d" % r)
M = 1 << 20
DEV, HOST, NUMA, CPU, INVALID = Loc(1, 0), Loc(2, 0), Loc(3, 0), -1, -2
p = U(); q = U(); ctx = P(); s = P()
want(0, cu.cuInit(0), "cuInit")
want(0, cu.cuDevicePrimaryCtxRetain(C.byref(ctx), 0), "retain")
want(0, cu.cuCtxSetCurrent(ctx), "current")
want(1, cu.cuMemAllocManaged(C.byref(p), 0, 1), "allocate 0 bytes: INVALID_VALUE")
want(1, cu.cuMemAllocManaged(C.byref(p), M, 4), "flags CU_MEM_ATTACH_SINGLE: INVALID_VALUE")
want(1, cu.cuMemAllocManaged(C.byref(p), M, 3), "flags GLOBAL|HOST: INVALID_VALUE")
want(1, cu.cuMemAllocManaged(None, M, 1), "dptr NULL: INVALID_VALUE")
want(0, cu.cuMemAllocManaged(C.byref(p), 6 * M, 1), "allocate 6 MiB, CU_MEM_ATTACH_GLOBAL")
want(0, cu.cuMemAllocManaged(C.byref(q), 4 * M, 2), "allocate 4 MiB, CU_MEM_ATTACH_HOST")
C.memset(p.value, 0x5a, 4096)
want(0x5a, C.cast(p.value, C.POINTER(C.c_ubyte))[0], "the pointer works on the host")
want(INVALID, attr(4, p.value, M), "never prefetched: last prefetch location CU_DEVICE_INVALID")
want(INVALID, attr(2, p.value, M), "no preferred location: CU_DEVICE_INVALID")
want(0, cu.cuStreamCreate(C.byref(s), 1), "stream")
want(1, cu.cuMemPrefetchAsync_v2(p.value, M, DEV, 1, s), "prefetch flags 1: INVALID_VALUE")
want(101, cu.cuMemPrefetchAsync_v2(p.value, M, Loc(1, 1), 0, s), "prefetch to device 1: INVALID_DEVICE")
want(1, cu.cuMemPrefetchAsync_v2(p.value, M, Loc(7, 0), 0, s), "prefetch to location type 7: INVALID_VALUE")
buf = C.create_string_buffer(M)
want(1, cu.cuMemPrefetchAsync_v2(C.addressof(buf), 4096, DEV, 0, s), "prefetch of malloc'ed memory: INVALID_VALUE")
want(1, cu.cuMemPrefetchAsync_v2(p.value + 5 * M, 2 * M, DEV, 0, s), "prefetch past the allocation: INVALID_VALUE")
want(400, cu.cuMemPrefetchAsync_v2(p.value, M, DEV, 0, P(8)), "prefetch on no stream: INVALID_HANDLE")
want(0, cu.cuMemPrefetchAsync_v2(p.value + 100, 2 * M, DEV, 0, s), "prefetch 2 MiB (unaligned start) to the GPU")
want(0, attr(4, p.value, 2 * M), "... last prefetch location device 0 (rounded out to pages)")
want(1, attr(7, p.value, 2 * M), "... type CU_MEM_LOCATION_TYPE_DEVICE")
want(INVALID, attr(4, p.value, 4 * M), "a range half prefetched: CU_DEVICE_INVALID")
want(0, cu.cuMemPrefetchAsync_v2(p.value, M, NUMA, 0, None), "prefetch 1 MiB to host NUMA node 0 (NULL stream)")
want(CPU, attr(4, p.value, M), "... last prefetch location CU_DEVICE_CPU")
want(2, attr(7, p.value, M), "... type CU_MEM_LOCATION_TYPE_HOST")
want(0, cu.cuMemPrefetchAsync_v2(q.value, 4 * M, DEV, 0, s), "prefetch 4 MiB more: the 8 MiB device is short")
st = Stats(); cu.fakecuda_stats(C.byref(st))
want(5 * M + 4096, st.md, "device-resident managed bytes counted (1 MiB back at the host; one page more: the unaligned start)")
want(0, cu.cuMemPrefetchAsync_v2(p.value + 2 * M, 4 * M, DEV, 0, s), "prefetch 4 MiB past the device: the driver evicts others")
cu.fakecuda_stats(C.byref(st))
want(1, int(st.de > 0 and st.md <= 8 * M), "... driver_evicted %d, resident %d within the device" % (st.de, st.md))
want(1, cu.cuMemAdvise_v2(p.value, M, 7, DEV), "advice 7: INVALID_VALUE")
want(1, cu.cuMemAdvise_v2(p.value, M, 5, NUMA), "accessed-by a host NUMA node: INVALID_VALUE")
want(101, cu.cuMemAdvise_v2(p.value, M, 3, Loc(1, 2)), "preferred device 2: INVALID_DEVICE")
want(1, cu.cuMemAdvise_v2(C.addressof(buf), 4096, 1, DEV), "advice on malloc'ed memory: INVALID_VALUE")
want(0, cu.cuMemAdvise_v2(p.value, 2 * M, 3, HOST), "preferred location host")
want(0, cu.cuMemAdvise_v2(p.value, 2 * M, 5, DEV), "accessed by device 0")
want(0, cu.cuMemAdvise_v2(p.value, M, 1, Loc(99, 99)), "read mostly (location ignored)")
want(CPU, attr(2, p.value, 2 * M), "preferred location: CU_DEVICE_CPU")
want(2, attr(5, p.value, 2 * M), "preferred location type: HOST")
want(0, attr(3, p.value, 2 * M, 12), "accessed by: device 0 first")
v = (I * 3)(); cu.cuMemRangeGetAttribute(v, 12, 3, p.value, 2 * M)
want(INVALID, v[1], "... CU_DEVICE_INVALID in the extra space")
want(1, attr(1, p.value, M), "read mostly over the advised MiB")
want(0, attr(1, p.value, 2 * M), "not over 2 MiB")
want(0, cu.cuMemAdvise_v2(p.value, 2 * M, 4, Loc(99, 99)), "unset preferred location (location ignored)")
want(INVALID, attr(2, p.value, 2 * M), "... preferred CU_DEVICE_INVALID again")
want(0, cu.cuMemAdvise_v2(p.value, 2 * M, 6, DEV), "unset accessed by")
want(INVALID, attr(3, p.value, 2 * M, 4), "... accessed by nobody")
v = I()
want(1, cu.cuMemRangeGetAttribute(C.byref(v), 8, 4, p.value, M), "last prefetch with dataSize 8: INVALID_VALUE")
want(1, cu.cuMemRangeGetAttribute(C.byref(v), 6, 3, p.value, M), "accessed by with dataSize 6: INVALID_VALUE")
want(1, cu.cuMemRangeGetAttribute(C.byref(v), 4, 9, p.value, M), "attribute 9: INVALID_VALUE")
a, b = I(), I()
data = (P * 2)(C.cast(C.byref(a), P), C.cast(C.byref(b), P)); sizes = (Z * 2)(4, 4); attrs = (I * 2)(4, 2)
want(0, cu.cuMemRangeGetAttributes(data, sizes, attrs, 2, p.value, M), "two attributes at once")
want(1, int(a.value == CPU and b.value == INVALID), "... last prefetch CPU, no preferred location")
want(1, cu.cuMemRangeGetAttributes(data, sizes, attrs, 0, p.value, M), "numAttributes 0: INVALID_VALUE")
# discards (CUDA 13): contents indeterminate (0xa5 here), 2 MiB pages
A = (U * 1); N = (Z * 1); s2 = P()
cu.cuMemDiscardBatchAsync.argtypes = [P, P, Z, C.c_ulonglong, P]
cu.cuMemDiscardAndPrefetchBatchAsync.argtypes = [P, P, Z, P, P, Z, C.c_ulonglong, P]
want(0, int(p.value % (2 * M)), "a managed allocation starts at a 2 MiB page")
want(0, cu.cuStreamCreate(C.byref(s2), 1), "a stream for the discards")
C.memset(p.value, 0x11, 6 * M)
want(1, cu.cuMemDiscardBatchAsync(A(p.value), N(M), 1, 1, s2), "discard flags 1: INVALID_VALUE")
want(1, cu.cuMemDiscardBatchAsync(A(p.value), N(M), 0, 0, s2), "discard count 0: INVALID_VALUE")
want(1, cu.cuMemDiscardBatchAsync(A(p.value), N(M), 1, 0, None), "discard on the legacy NULL stream: INVALID_VALUE")
want(1, cu.cuMemDiscardBatchAsync(A(C.addressof(buf)), N(4096), 1, 0, s2), "discard of malloc'ed memory: INVALID_VALUE")
want(0, cu.cuMemDiscardBatchAsync(A(p.value + 2 * M), N(4096), 1, 0, s2), "discard 4 KiB in the second 2 MiB page")
bs = C.cast(p.value, C.POINTER(C.c_ubyte))
want(0x11, bs[2 * M], "... in stream order: not yet run (each stream op waits 0.1 s here)")
want(0, cu.cuStreamSynchronize(s2), "synchronize the stream")
want(1, int(bs[2 * M] == 0xa5 and bs[4 * M - 1] == 0xa5 and bs[2 * M - 1] == 0x11 and bs[4 * M] == 0x11), "... its whole 2 MiB page indeterminate (0xa5), the neighbours kept")
one = (Loc * 1)(DEV); zero = (Z * 1)(0)
want(1, cu.cuMemDiscardAndPrefetchBatchAsync(A(p.value), N(2 * M), 1, one, (Z * 1)(1), 1, 0, s2), "discard+prefetch whose first location index is 1: INVALID_VALUE")
want(0, cu.cuMemDiscardAndPrefetchBatchAsync(A(p.value), N(2 * M), 1, one, zero, 1, 0, s2), "discard and prefetch the first 2 MiB to the GPU")
want(0, cu.cuStreamSynchronize(s2), "synchronize the stream")
want(0, attr(4, p.value, 2 * M), "... last prefetch location device 0")
want(0xa5, bs[0], "... its contents indeterminate")
cu.fakecuda_stats(C.byref(st))
want(4096 + 2 * M, st.disc, "the discarded bytes counted")
want(0, cu.cuStreamDestroy_v2(s2), "destroy the discards' stream")
want(1, cu.cuMemFree_v2(p.value + 4096), "free inside an allocation: INVALID_VALUE")
want(0, cu.cuMemFree_v2(p.value), "free")
want(1, cu.cuMemFree_v2(p.value), "free twice: INVALID_VALUE")
want(0, cu.cuStreamDestroy_v2(s), "destroy the stream")
cu.fakecuda_stats(C.byref(st))
want(4 * M, st.mb, "the other allocation still counted")
want(25, st.violations, "every misuse counted as a violation")
want(0, cu.cuDevicePrimaryCtxRelease_v2(0), "release the context (q leaks)")
cu.fakecuda_stats(C.byref(st))
want(0, st.mb + st.md, "the context's destroy freed it")
done()
EOF
	ok $rc "the fake's managed memory keeps the driver's contracts ($(grep -c '^ok' "$tmp/contract.log") checks)"
	ok $(grep -q 'summary: .*violations 25 leaks 1 ' "$tmp/contract.rep" &&
	     grep -q 'LEAK .*managed allocation' "$tmp/contract.rep"; echo $?) "... reports each, and the allocation left at the context's destroy"
fi

# ---- test_tensor_uvm on the fake (plain, ASan, TSan, shared) --------------
run_variants test_tensor_uvm
# a driver without discards (older than CUDA 13, or a sandbox's): the
# evicted chunks are prefetched back instead
run nodiscard FAKECUDA_NODISCARD=1 -- "$bin"
ok $([ $rc = 0 ]; echo $?) "test_tensor_uvm passes on the fake without discards (prefetched back)"
ok $(clean nodiscard; echo $?) "... with no contract violation and no leak"

# ---- one driver call failing: the one libhmm call fails, nothing lost -----
modes=embedded; [ -x "$B/bin/hmmd" ] && modes="embedded shared"
for f in cuMemAllocManaged:2 cuMemAdvise_v2:3 cuMemDiscardAndPrefetchBatchAsync:3 \
	 cuMemPrefetchAsync_v2:3; do
	nd=0 ms=$modes
	[ "${f%%:*}" = cuMemPrefetchAsync_v2 ] && nd=1
	# shared mode's staged maps populate with a prefetch (dev_stage.c)
	[ "${f%%:*}" = cuMemDiscardAndPrefetchBatchAsync ] && ms=embedded
	for m in $ms; do
		run fail HMM_TEST_MODE=$m HMM_BUILD="$B" FAKECUDA_NODISCARD=$nd FAKECUDA_FAIL=$f -- "$bin" fail
		ok $([ $rc = 0 ] && grep -q 'injected failure' "$tmp/fail.rep"; echo $?) "$f failing ($m): an error naming the tensor, all bytes intact"
		ok $(clean fail; echo $?) "... with no contract violation and no leak"
	done
done

run nomanaged FAKECUDA_NOMANAGED=1 -- "$bin" nomanaged
ok $([ $rc = 0 ]; echo $?) "no managed memory: -ENODEV naming it"
ok $(clean nomanaged; echo $?) "... with no contract violation and no leak"

t_done
