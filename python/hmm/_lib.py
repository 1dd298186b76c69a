# SPDX-License-Identifier: MIT
"""_lib — loads libhmm.so.0 and libhk.so.0 and declares the C calls.

The libraries are taken from $HMM_LIB_DIR when it is set (the tree's
build/lib, as the tests do), else from the dynamic linker's paths (an
installed libhmm).  Every call that returns -errno goes through check(),
which raises OSError(errno, detail) with libhmm's (or the kernels') detail
sentence.  No struct layout crosses the boundary: the config is set by
name (hmm_config_set) and the stats are read as JSON (hmm_stats_json).
"""
import ctypes
import errno as _errno
import operator
import os

vp = ctypes.c_void_p
u32, u64, i64 = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int64
charp = ctypes.c_char_p      # not cstr: that is the converter below

HMM_ALL = 2**64 - 1
TIERS = {"device": 0, "host": 1, "store": 2}
ACCESS = {"r": 1, "w": 2, "rw": 3, "discard": 4}


def _load(name):
    d = os.environ.get("HMM_LIB_DIR")
    path = os.path.join(d, name) if d else name
    try:
        return ctypes.CDLL(path)
    except OSError as e:
        raise OSError(_errno.ENOENT, "hmm: cannot load %s (%s); build it "
                      "with make, set HMM_LIB_DIR to its folder or make "
                      "install" % (path, e)) from None


def _declare(lib, decls):
    for name, res, args in decls:
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


lib = _load("libhmm.so.0")
_declare(lib, [
    ("hmm_config_new", vp, []),
    ("hmm_config_free", None, [vp]),
    ("hmm_config_set", ctypes.c_int, [vp, charp, charp]),
    ("hmm_config_get", ctypes.c_int, [vp, charp, charp, ctypes.c_size_t]),
    ("hmm_config_key", charp, [ctypes.c_uint]),
    ("hmm_open", ctypes.c_int, [vp, ctypes.POINTER(vp)]),
    ("hmm_close", None, [vp]),
    ("hmm_tensor_new", ctypes.c_int, [vp, charp, u32, ctypes.c_uint,
                                      ctypes.POINTER(i64),
                                      ctypes.POINTER(vp)]),
    ("hmm_tensor_open", ctypes.c_int, [vp, charp, ctypes.POINTER(vp)]),
    ("hmm_tensor_free", ctypes.c_int, [vp]),
    ("hmm_tensor_bytes", u64, [vp]),
    ("hmm_tensor_dtype", u32, [vp]),
    ("hmm_tensor_ndim", ctypes.c_uint, [vp]),
    ("hmm_tensor_shape", ctypes.POINTER(i64), [vp]),
    ("hmm_tensor_residency", ctypes.c_int, [vp, ctypes.POINTER(u64)]),
    ("hmm_map", ctypes.c_int, [vp, u64, u64, ctypes.c_int, ctypes.c_uint,
                               ctypes.POINTER(vp)]),
    ("hmm_unmap", ctypes.c_int, [vp, vp]),
    ("hmm_prefetch", ctypes.c_int, [vp, u64, u64, ctypes.c_int]),
    ("hmm_evict", ctypes.c_int, [vp, u64, u64, ctypes.c_int]),
    ("hmm_writeback", ctypes.c_int, [vp, u64, u64]),
    ("hmm_wait", ctypes.c_int, [vp, vp]),
    ("hmm_flush", ctypes.c_int, [vp]),
    ("hmm_step_begin", ctypes.c_int, [vp]),
    ("hmm_step_end", ctypes.c_int, [vp]),
    ("hmm_stats_json", ctypes.c_int, [vp, charp, ctypes.c_size_t]),
    ("hmm_strerror", charp, [ctypes.c_int]),
    ("hmm_size_parse", ctypes.c_int, [charp, ctypes.POINTER(u64)]),
    ("hmm_last_error", charp, []),
    ("hmm_dlpack_export", ctypes.c_int, [vp, ctypes.c_int, ctypes.c_uint,
                                         ctypes.POINTER(vp)]),
])

_hk = None


def hk():
    """libhk.so.0 (the kernels), loaded on first use: only the optimizer
    needs it."""
    global _hk
    if _hk is None:
        _hk = _load("libhk.so.0")
        _declare(_hk, [
            ("hk_offload_adamw_step", ctypes.c_int, [vp, vp]),
            ("hk_offload_error", charp, []),
            ("hk_adamw_step", ctypes.c_int, [vp]),
            ("hk_adamw_error", charp, []),
            ("hk_adamw_isa", charp, []),
        ])
    return _hk


def _text(b):
    return b.decode("utf-8", "replace") if b else ""


def check(r, what="", detail=None):
    """r < 0: raise OSError(-r, 'what: detail'); else return r."""
    if r >= 0:
        return r
    d = _text(detail() if detail else lib.hmm_last_error())
    if not d:
        d = _text(lib.hmm_strerror(r))
    raise OSError(-r, "%s: %s" % (what, d) if what else d)


def cstr(what, s):
    """s as the C string libhmm reads: a str without NUL, else
    OSError(EINVAL) naming what (a NUL would cut it short unseen)."""
    if not isinstance(s, str):
        raise OSError(_errno.EINVAL, "%s %r: not a str" % (what, s))
    if "\0" in s:
        raise OSError(_errno.EINVAL, "%s %r: holds a NUL byte" % (what, s))
    return s.encode()


def size_parse(s):
    """A byte size as hmm-train reads it ("2G", "64K", 4096) -> int:
    a str, or an int in [0, 2**64) (past it ERANGE, as the same number
    written as a str); anything else (bool, float, bytes) EINVAL."""
    if isinstance(s, int) and not isinstance(s, bool):
        if s < 0:
            raise OSError(_errno.EINVAL, "size %d: negative" % s)
        if s > HMM_ALL:
            raise OSError(_errno.ERANGE, "size %d: past 2**64 - 1" % s)
        return s
    if not isinstance(s, str):
        raise OSError(_errno.EINVAL, "size %r: not a str or int" % (s,))
    v = u64()
    r = lib.hmm_size_parse(cstr("size", s), ctypes.byref(v))
    if r < 0:
        raise OSError(-r, "size '%s': not a size (e.g. 4096, 64K, 2M, 1G)"
                      % s)
    return v.value


def as_u64(what, v, none=None):
    """v as the uint64 an offset or length is in hmm.h: an int (or
    anything with __index__, not a bool) in [0, 2**64); None -> none
    where the caller documents it (none not None).  Else OSError(EINVAL)
    naming what (the tensor and the parameter) and v: ctypes would raise
    a bare ArgumentError, or wrap a negative or larger int silently."""
    if v is None and none is not None:
        return none
    try:
        if isinstance(v, bool):
            raise TypeError
        i = operator.index(v)
    except TypeError:
        raise OSError(_errno.EINVAL, "%s %r: not an integer" % (what, v)) \
            from None
    if not 0 <= i <= HMM_ALL:
        raise OSError(_errno.EINVAL, "%s %d: outside [0, 2**64)"
                      % (what, i))
    return i


def lib_path():
    """Where libhmm.so.0 was loaded from."""
    return lib._name
