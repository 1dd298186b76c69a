#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# test_dlpack.py LIBHMM CFG_SIZE HOST_BUDGET_OFFSET [DAEMON_OFFSET ADDR]
# — run by test_dlpack (with the last two in shared mode: config.daemon
# is set to ADDR, the hmmd the C test started):
# loads libhmm.so through ctypes, writes a tensor, exports it with
# hmm_dlpack_export, imports it with torch.utils.dlpack.from_dlpack and
# checks the bytes; then checks that dropping the torch tensor ran the
# deleter (the tensor is no longer mapped).  Exit 0 ok, 1 fail, 77 no torch.
import ctypes
import gc
import sys

try:
    import torch
    import torch.utils.dlpack
except ImportError:
    print("torch absent")
    sys.exit(77)

lib = ctypes.CDLL(sys.argv[1])
cfg_size, hb_off = int(sys.argv[2]), int(sys.argv[3])
vp = ctypes.c_void_p
lib.hmm_open.argtypes = [vp, ctypes.POINTER(vp)]
lib.hmm_tensor_new.argtypes = [vp, ctypes.c_char_p, ctypes.c_uint32,
                               ctypes.c_uint, ctypes.POINTER(ctypes.c_int64),
                               ctypes.POINTER(vp)]
lib.hmm_map.argtypes = [vp, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int,
                        ctypes.c_uint, ctypes.POINTER(vp)]
lib.hmm_unmap.argtypes = [vp, vp]
lib.hmm_dlpack_export.argtypes = [vp, ctypes.c_int, ctypes.c_uint,
                                  ctypes.POINTER(vp)]
lib.hmm_tensor_free.argtypes = [vp]
lib.hmm_close.argtypes = [vp]
lib.hmm_last_error.restype = ctypes.c_char_p

cfg = ctypes.create_string_buffer(cfg_size)
lib.hmm_config_default(cfg)
ctypes.c_uint64.from_buffer(cfg, hb_off).value = 64 << 20
if len(sys.argv) > 5:  # shared mode: through the same hmmd
    daemon = ctypes.create_string_buffer(sys.argv[5].encode())
    ctypes.c_void_p.from_buffer(cfg, int(sys.argv[4])).value = \
        ctypes.addressof(daemon)
h = vp()
assert lib.hmm_open(cfg, ctypes.byref(h)) == 0, lib.hmm_last_error()
shape = (ctypes.c_int64 * 2)(4, 1000)
t = vp()
assert lib.hmm_tensor_new(h, b"dl", 1, 2, shape, ctypes.byref(t)) == 0
p = vp()
assert lib.hmm_map(t, 0, 2**64 - 1, 1, 4, ctypes.byref(p)) == 0
arr = (ctypes.c_float * 4000).from_address(p.value)
for i in range(4000):
    arr[i] = i * 0.5
lib.hmm_unmap(t, p)

mt = vp()
assert lib.hmm_dlpack_export(t, 1, 1, ctypes.byref(mt)) == 0
capsule_new = ctypes.pythonapi.PyCapsule_New
capsule_new.restype = ctypes.py_object
capsule_new.argtypes = [vp, ctypes.c_char_p, vp]
x = torch.utils.dlpack.from_dlpack(capsule_new(mt, b"dltensor", None))
fails = 0
if tuple(x.shape) != (4, 1000) or x.dtype != torch.float32:
    print("wrong shape/dtype", x.shape, x.dtype)
    fails += 1
if not torch.equal(x.flatten(), torch.arange(4000, dtype=torch.float32) * 0.5):
    print("wrong bytes")
    fails += 1
if lib.hmm_tensor_free(t) != -16:
    print("tensor not mapped while torch holds it")
    fails += 1
del x
gc.collect()
r = lib.hmm_tensor_free(t)
if r != 0:
    print("deleter did not unmap:", r, lib.hmm_last_error())
    fails += 1
lib.hmm_close(h)
print("torch.from_dlpack: %s" % ("ok" if not fails else "FAILED"))
sys.exit(1 if fails else 0)
