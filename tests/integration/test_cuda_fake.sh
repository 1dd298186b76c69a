#!/usr/bin/env bash
# test_cuda_fake — the "cuda" device (libhmm/src/engine/dev_cuda.c) on the
# fake CUDA driver (tests/fakecuda, built as $B/tests/fakecuda/
# libcuda.so.1), where no GPU is:
#  - the fake itself refuses misuse with the real driver's codes (a map
#    off the granularity, over a mapping, an unmap of nothing, a copy to
#    a reserved-but-unmapped address, calls before cuInit or without a
#    context, an overlapping host registration) and counts each;
#  - test_tensor_cuda (plain, and the ASan and TSan builds when there,
#    and in shared mode through an hmmd) passes on it, and the fake
#    reports no violation and no leak;
#  - FAKECUDA_NODEV=1 / =2: hmm_open says -ENODEV with the reason;
#  - FAKECUDA_FAIL=<entry>:N on the way to the device or back
#    (cuMemCreate, cuMemMap, cuMemSetAccess, a copy either way, an event
#    record, a synchronize), in both modes: the one call that needed it
#    fails naming its tensor, the bytes of every tensor stay intact;
#    under an eviction (no map waits for it): hmm_wait reports it;
#    while hmm_open sets up (stream, event, pinned staging,
#    cuMemGetInfo): -ENOMEM naming the call, everything undone;
#  - FAKECUDA_GRAN=4M (above the 2 MiB chunks): -EINVAL naming
#    chunk_bytes;
#  - FAKECUDA_MEM=20M and config.device_budget 0: the device's own
#    capacity (90% of free) holds, and the driver never runs out.
# LD_LIBRARY_PATH puts the fake before any real driver, so this runs
# the same where a GPU is (test_tensor_cuda runs there on the real one
# too).  Skipped when the fake or the test is not built.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/tests/unit/test_tensor_cuda
. "$(dirname "$0")/fakecuda.sh"
need "$bin"

# ---- the fake's own contract checks (through ctypes) ----------------------
if command -v python3 >/dev/null; then
	contract <<'EOF'
from fakecuda_t import *
class Flags(C.Structure): _fields_ = [("c", C.c_ubyte), ("g", C.c_ubyte), ("u", C.c_ushort), ("r", C.c_ubyte * 4)]
class Prop(C.Structure): _fields_ = [("type", C.c_int), ("ht", C.c_int), ("loc", Loc), ("w", C.c_void_p), ("f", Flags)]
class Acc(C.Structure): _fields_ = [("loc", Loc), ("flags", C.c_int)]
cu.cuMemMap.argtypes = [U, Z, Z, U, U]; cu.cuMemUnmap.argtypes = [U, Z]
cu.cuMemSetAccess.argtypes = [U, Z, C.POINTER(Acc), Z]
cu.cuMemAddressReserve.argtypes = [C.POINTER(U), Z, Z, U, U]
cu.cuMemAddressFree.argtypes = [U, Z]; cu.cuMemRelease.argtypes = [U]
cu.cuMemCreate.argtypes = [C.POINTER(U), Z, C.POINTER(Prop), U]
cu.cuMemcpyHtoDAsync_v2.argtypes = [U, P, Z, P]
cu.cuMemcpyDtoHAsync_v2.argtypes = [P, U, Z, P]
cu.cuMemHostRegister_v2.argtypes = [P, Z, C.c_uint]; cu.cuMemHostUnregister.argtypes = [P]
G = 2 << 20
h = U(); va = U(); ctx = P(); s = P()
want(3, cu.cuMemAddressReserve(C.byref(va), G, 0, 0, 0), "reserve before cuInit: NOT_INITIALIZED")
want(0, cu.cuInit(0), "cuInit")
want(201, cu.cuMemAddressReserve(C.byref(va), G, 0, 0, 0), "reserve without a current context: INVALID_CONTEXT")
want(0, cu.cuDevicePrimaryCtxRetain(C.byref(ctx), 0), "retain the primary context")
want(0, cu.cuCtxSetCurrent(ctx), "make it current")
prop = Prop(1, 0, Loc(1, 0))
want(1, cu.cuMemAddressReserve(C.byref(va), G + 4096, 0, 0, 0), "reserve off the granularity: INVALID_VALUE")
want(0, cu.cuMemAddressReserve(C.byref(va), 4 * G, 0, 0, 0), "reserve 8 MiB")
want(1, cu.cuMemCreate(C.byref(h), 4096, C.byref(prop), 0), "create 4 KiB: INVALID_VALUE")
want(0, cu.cuMemCreate(C.byref(h), G, C.byref(prop), 0), "create 2 MiB")
want(1, cu.cuMemMap(va.value + 4096, G, 0, h.value, 0), "map off the granularity: INVALID_VALUE")
want(0, cu.cuMemMap(va.value, G, 0, h.value, 0), "map")
want(1, cu.cuMemMap(va.value, G, 0, h.value, 0), "map over a mapping: INVALID_VALUE")
want(1, cu.cuMemUnmap(va.value + G, G), "unmap of nothing mapped: INVALID_VALUE")
buf = C.create_string_buffer(G)
want(1, cu.cuMemcpyHtoDAsync_v2(va.value, buf, 4096, None), "copy before cuMemSetAccess: INVALID_VALUE")
want(0, cu.cuMemSetAccess(va.value, G, C.byref(Acc(Loc(1, 0), 3)), 1), "set access read-write")
want(0, cu.cuStreamCreate(C.byref(s), 1), "stream")
want(1, cu.cuMemcpyHtoDAsync_v2(va.value + G, buf, 4096, s), "copy to reserved, unmapped: INVALID_VALUE")
want(1, cu.cuMemcpyHtoDAsync_v2(va.value + G - 4096, buf, 8192, s), "copy past the mapping: INVALID_VALUE")
want(0, cu.cuMemHostRegister_v2(buf, G, 0), "register a host range")
want(712, cu.cuMemHostRegister_v2(C.addressof(buf) + 4096, 4096, 0), "register inside it: HOST_MEMORY_ALREADY_REGISTERED")
buf[0:4] = b"abcd"
want(0, cu.cuMemcpyHtoDAsync_v2(va.value, buf, 4096, s), "async copy from pinned memory")
want(0, cu.cuStreamSynchronize(s), "synchronize")
back = C.create_string_buffer(4096)
want(0, cu.cuMemcpyDtoHAsync_v2(back, va.value, 4096, s), "copy back (pageable: synchronous)")
want(1, int(back.raw[:4] == b"abcd"), "the bytes went through the device")
want(1, cu.cuMemAddressFree(va.value, 4 * G), "free a reservation with a mapping: INVALID_VALUE")
want(0, cu.cuMemRelease(h.value), "release while mapped (allowed: freed at unmap)")
want(1, cu.cuMemRelease(h.value), "release twice: INVALID_VALUE")
want(0, cu.cuMemUnmap(va.value, G), "unmap")
want(0, cu.cuMemAddressFree(va.value, 4 * G), "free the reservation")
want(713, cu.cuMemHostUnregister(C.addressof(buf) + 4096), "unregister not the start: HOST_MEMORY_NOT_REGISTERED")
want(0, cu.cuMemHostUnregister(buf), "unregister")
want(0, cu.cuStreamDestroy_v2(s), "destroy the stream")
st = Stats(); cu.fakecuda_stats(C.byref(st))
want(14, st.violations, "every misuse counted as a violation")
want(0, st.used, "no device memory left allocated")
want(0, cu.cuDevicePrimaryCtxRelease_v2(0), "release the context")
done()
EOF
	ok $rc "the fake refuses misuse with the real driver's codes ($(grep -c '^ok' "$tmp/contract.log") checks)"
	ok $(grep -q 'summary: .*violations 14 leaks 0 ' "$tmp/contract.rep"; echo $?) "... and reports each, no leak"
fi

# ---- test_tensor_cuda on the fake (plain, ASan, TSan, shared) -------------
run_variants test_tensor_cuda

run nodev1 FAKECUDA_NODEV=1 -- "$bin"
ok $([ $rc = 77 ] && grep -q 'device cuda: cuInit: no CUDA-capable device' "$tmp/nodev1.log"; echo $?) "FAKECUDA_NODEV=1: -ENODEV, 'cuInit: no CUDA-capable device'"
run nodev2 FAKECUDA_NODEV=2 -- "$bin"
ok $([ $rc = 77 ] && grep -q '0 GPU(s) visible' "$tmp/nodev2.log"; echo $?) "FAKECUDA_NODEV=2: -ENODEV, '0 GPU(s) visible'"

# a failure on the way to the device or back: the one call that needed
# it fails naming its tensor; in both modes where hmmd is built
modes=embedded; [ -x "$B/bin/hmmd" ] && modes="embedded shared"
for f in cuMemCreate:2 cuMemMap:3 cuMemSetAccess:2 cuMemcpyHtoDAsync_v2:4 cuEventRecord:3 cuStreamSynchronize:2 cuMemcpyDtoHAsync_v2:1; do
	for m in $modes; do
		run fail HMM_TEST_MODE=$m HMM_BUILD="$B" FAKECUDA_FAIL=$f -- "$bin" fail
		ok $([ $rc = 0 ] && grep -q 'injected failure' "$tmp/fail.rep"; echo $?) "$f failing mid-run ($m): an error naming the tensor, all bytes intact"
		ok $(clean fail; echo $?) "... with no contract violation and no leak"
		case $f in cuMemCreate:* | cuMemMap:* | cuMemSetAccess:*)
			ok $(grep -q "device memory: device cuda: ${f%%:*} " "$tmp/fail.log"; echo $?) "... the detail keeps the driver's own words (${f%%:*})" ;;
		esac
	done
done

# a failure of an eviction's copy back, which no map waits for: hmm_wait
# reports it, every map works, no byte lost (once: retried at once;
# twice: that chunk stays at the device and another is evicted)
for f in cuMemcpyDtoHAsync_v2:1 cuMemcpyDtoHAsync_v2:1,cuMemcpyDtoHAsync_v2:2; do
	run evictfail FAKECUDA_FAIL=$f -- "$bin" evictfail
	ok $([ $rc = 0 ] && grep -q 'injected failure' "$tmp/evictfail.rep"; echo $?) "$f under eviction: hmm_wait says so, every map works, all bytes intact"
	ok $(clean evictfail; echo $?) "... with no contract violation and no leak"
done

# a failure while hmm_open sets the device up: -ENOMEM, all undone
for f in cuStreamCreate:1 cuEventCreate:2 cuMemHostRegister_v2:1 cuMemHostRegister_v2:2 cuMemGetInfo_v2:1; do
	c=${f%%:*}; c=${c%_v2}
	run openfail FAKECUDA_FAIL=$f -- "$bin" openfail "$c"
	ok $([ $rc = 0 ]; echo $?) "$f failing in hmm_open: -ENOMEM naming it, the next open works"
	ok $(clean openfail; echo $?) "... with no contract violation and no leak"
done

# no device_budget: the device's own capacity, with 20 MiB on the device
run nobudget FAKECUDA_MEM=20M -- "$bin" nobudget
ok $([ $rc = 0 ] && grep -q 'within the 18874368-byte budget (the device' "$tmp/nobudget.log"; echo $?) "device_budget 0 on a 20 MiB device: 64 MiB cycled within 18 MiB, the driver never out of memory"
ok $(clean nobudget; echo $?) "... with no contract violation and no leak"

run gran FAKECUDA_GRAN=4M -- "$bin" gran
ok $([ $rc = 0 ]; echo $?) "granularity 4 MiB above 2 MiB chunks: -EINVAL naming chunk_bytes"
ok $(clean gran; echo $?) "... with no contract violation and no leak"

t_done
