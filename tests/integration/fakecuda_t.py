# SPDX-License-Identifier: MIT
# fakecuda_t.py — what the fake driver's ctypes contract checks in
# test_cuda_fake.sh and test_uvm_fake.sh share (run through `contract` in
# fakecuda.sh): the fake loaded from argv[1] as `cu`, the driver's
# location and the fake's stats structures, the scalar types, and
# want(code, got, what), which prints one TAP line; done() exits 1 if any
# check failed.  Not a test itself.
import ctypes as C, sys
cu = C.CDLL(sys.argv[1])
class Loc(C.Structure): _fields_ = [("type", C.c_int), ("id", C.c_int)]
class Stats(C.Structure): _fields_ = [(k, C.c_uint64) for k in "calls violations leaks injected total used peak a s ctx mb md mdp pd ph de adv disc".split()]
U, Z, P, I = C.c_ulonglong, C.c_size_t, C.c_void_p, C.c_int
n = 0; bad = 0
def want(code, got, what):
    global n, bad
    n += 1
    print(("ok %d" if code == got else "not ok %d") % n, "-", what, "->", got, "" if code == got else "(want %d)" % code)
    bad += code != got
def done():
    sys.exit(1 if bad else 0)
