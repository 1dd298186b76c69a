# SPDX-License-Identifier: MIT
"""context — hmm.Context (a libhmm context) and hmm.Tensor (one tensor).

A Context owns its tensors: close() (or leaving its `with`) frees every
one of them, and a Tensor of a closed context refuses every call.
map() pins a tensor resident at a tier and yields it as a torch.Tensor
(zero-copy through DLPack: the pin lasts until the last reference to
that tensor, views included, is gone) or a numpy array (valid only
inside the `with`).  Errors are OSError(errno, detail).
"""
import contextlib
import ctypes
import errno
import json
import operator
import weakref

from . import _lib
from ._lib import check, lib

# libhmm's dtypes (hmm.h HMM_DTYPE_*) by numpy / torch name
DTYPES = {"float32": 1, "float64": 2, "float16": 3, "bfloat16": 4,
          "int8": 5, "uint8": 6, "int32": 7, "int64": 8}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


def dtype_code(dtype):
    """A libhmm dtype from a torch.dtype, numpy dtype or name."""
    name = str(dtype).rsplit(".", 1)[-1]
    if name not in DTYPES:
        try:
            import numpy
            name = numpy.dtype(dtype).name
        except (ImportError, TypeError):
            pass
    if name not in DTYPES:
        raise OSError(errno.EINVAL, "dtype %r: not one of %s"
                      % (dtype, ", ".join(DTYPES)))
    return DTYPES[name]


def _tier(tier):
    if tier not in _lib.TIERS:
        raise OSError(errno.EINVAL, "tier %r: not device, host or store"
                      % (tier,))
    return _lib.TIERS[tier]


def _capsule(ptr):
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p,
                                                   ctypes.c_char_p,
                                                   ctypes.c_void_p]
    return new(ptr, b"dltensor", None)


def _config_get(cfg, key):
    buf = ctypes.create_string_buffer(256)
    check(lib.hmm_config_get(cfg, key.encode(), buf, 256), "hmm_config_get")
    return buf.value.decode()


class Context:
    """A libhmm context.

    Context(store=None, host_budget="1G", daemon=None, **config): every
    keyword is a field of struct hmm_config set by name (hmm_config_set:
    store_size, device, device_budget, chunk_bytes, policy, wait_ms,
    flags, ...), values as strings or ints; sizes take K/M/G.  daemon is
    hmmd's socket ("unix:PATH" or a PATH): shared mode.  None leaves a
    field at its default.
    """

    def __init__(self, store=None, host_budget="1G", daemon=None, **config):
        if daemon is not None and not str(daemon).startswith("unix:"):
            daemon = "unix:" + str(daemon)
        config.update(store_path=store, host_budget=host_budget,
                      daemon=daemon)
        self._h = None
        self._tensors = weakref.WeakSet()
        cfg = lib.hmm_config_new()
        if not cfg:
            raise OSError(errno.ENOMEM, "hmm_config_new: out of memory")
        keep = []       # string values live until hmm_open copies them
        try:
            for k, v in config.items():
                if v is None:
                    continue
                b = _lib.cstr("hmm.Context: " + k, str(v))
                keep.append(b)
                check(lib.hmm_config_set(cfg, _lib.cstr("hmm.Context: key", k),
                                         b), "hmm.Context")
            h = ctypes.c_void_p()
            check(lib.hmm_open(cfg, ctypes.byref(h)), "hmm.Context")
            self._h = h
            self.chunk_bytes = int(_config_get(cfg, "chunk_bytes"))
            self.host_budget = int(_config_get(cfg, "host_budget"))
        finally:
            lib.hmm_config_free(cfg)

    def _handle(self):
        if self._h is None:
            raise OSError(errno.EBADF, "hmm.Context: closed")
        return self._h

    def tensor(self, name, shape, dtype="float32"):
        """A new tensor, contents zero."""
        return Tensor._new(self, name, shape, dtype_code(dtype))

    def open_tensor(self, name):
        """A tensor saved by an earlier context's flush() (this context
        opened with flags="store_keep")."""
        t = ctypes.c_void_p()
        check(lib.hmm_tensor_open(self._handle(),
                                  _lib.cstr("hmm.Context.open_tensor: name",
                                            name), ctypes.byref(t)),
              "hmm.Context.open_tensor")
        return Tensor(self, t, name)

    def wait(self, tensor=None):
        """Wait for prefetches and evictions in flight (of one tensor)."""
        check(lib.hmm_wait(self._handle(), tensor._handle() if tensor
                           else None), "hmm.Context.wait")

    def flush(self):
        """Write every dirty chunk and the table of tensors: a checkpoint."""
        check(lib.hmm_flush(self._handle()), "hmm.Context.flush")

    def step_begin(self):
        check(lib.hmm_step_begin(self._handle()), "hmm.Context.step_begin")

    def step_end(self):
        check(lib.hmm_step_end(self._handle()), "hmm.Context.step_end")

    def stats(self):
        """hmm_stats as a dict (hmm_stats_json's object)."""
        cap = 4096
        while True:
            buf = ctypes.create_string_buffer(cap)
            n = check(lib.hmm_stats_json(self._handle(), buf, cap),
                      "hmm.Context.stats")
            if n < cap:
                return json.loads(buf.value.decode())
            cap = n + 1

    def close(self):
        """Free every tensor and the context (without a flush)."""
        if self._h is None:
            return
        for t in list(self._tensors):
            t._t = None         # hmm_close frees them
        lib.hmm_close(self._h)
        self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class Tensor:
    """One libhmm tensor of a Context (ctx.tensor / ctx.open_tensor)."""

    def __init__(self, ctx, handle, name):
        self.ctx, self._t, self.name = ctx, handle, name
        self.nbytes = lib.hmm_tensor_bytes(handle)
        self.dtype = DTYPE_NAMES.get(lib.hmm_tensor_dtype(handle))
        sh = lib.hmm_tensor_shape(handle)
        self.shape = tuple(sh[i] for i in range(lib.hmm_tensor_ndim(handle)))
        ctx._tensors.add(self)

    @classmethod
    def _new(cls, ctx, name, shape, code):
        name_b = _lib.cstr("hmm.Context.tensor: name", name)
        try:
            if isinstance(shape, (str, bytes)):   # iterable, not a shape
                raise TypeError
            shape = tuple(operator.index(s) for s in
                          (shape if hasattr(shape, "__len__") else (shape,)))
        except TypeError:
            raise OSError(errno.EINVAL, "hmm.Context.tensor: tensor %s: "
                          "shape %r: not integers" % (name, shape)) from None
        if any(not -2**63 <= s < 2**63 for s in shape):
            raise OSError(errno.EOVERFLOW, "hmm.Context.tensor: tensor %s: "
                          "shape %r: past 64 bits" % (name, shape))
        arr = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        t = ctypes.c_void_p()
        check(lib.hmm_tensor_new(ctx._handle(), name_b, code,
                                 len(shape), arr, ctypes.byref(t)),
              "hmm.Context.tensor")
        return cls(ctx, t, name)

    def _handle(self):
        if self._t is None:
            raise OSError(errno.EBADF, "hmm tensor %s: freed, or its "
                          "context closed" % self.name)
        return self._t

    @contextlib.contextmanager
    def map(self, tier="host", access="rw", as_="torch"):
        """Pin the whole tensor at tier ("host" or "device") with access
        ("r", "w", "rw", "discard") and yield it as a torch.Tensor
        (as_="torch": zero-copy through DLPack; the pin lasts until the
        last reference to it is gone) or a numpy array (as_="numpy",
        host tier: valid inside the with only)."""
        code = _lib.ACCESS.get(access)
        if code is None:
            raise OSError(errno.EINVAL, "access %r: not r, w, rw or "
                          "discard" % (access,))
        if as_ == "torch":
            import torch.utils.dlpack
            mt = ctypes.c_void_p()
            check(lib.hmm_dlpack_export(self._handle(), _tier(tier), code,
                                        ctypes.byref(mt)),
                  "hmm tensor %s: map" % self.name)
            x = torch.utils.dlpack.from_dlpack(_capsule(mt))
            try:
                yield x
            finally:
                del x
        elif as_ == "numpy":
            import numpy
            if tier != "host":
                raise OSError(errno.EINVAL, "hmm tensor %s: a numpy map is "
                              "host-tier only" % self.name)
            p = self.map_ptr(0, _lib.HMM_ALL, "host", access)
            try:
                buf = (ctypes.c_char * self.nbytes).from_address(p)
                yield numpy.frombuffer(buf, dtype=self.dtype).reshape(
                    self.shape)
            finally:
                self.unmap_ptr(p)
        else:
            raise OSError(errno.EINVAL, "as_ %r: not torch or numpy"
                          % (as_,))

    def map_ptr(self, off, length, tier="host", access="rw"):
        """hmm_map: the address of byte off, pinned (unmap_ptr drops it)."""
        p = ctypes.c_void_p()
        check(lib.hmm_map(self._handle(), off, length, _tier(tier),
                          _lib.ACCESS[access], ctypes.byref(p)),
              "hmm tensor %s: map" % self.name)
        return p.value

    def unmap_ptr(self, p):
        check(lib.hmm_unmap(self._handle(), p),
              "hmm tensor %s: unmap" % self.name)

    def prefetch(self, tier="host", off=0, length=_lib.HMM_ALL):
        """Start moving [off, off + length) to tier; returns at once."""
        check(lib.hmm_prefetch(self._handle(), off, length, _tier(tier)),
              "hmm tensor %s: prefetch" % self.name)

    def evict(self, tier="host", off=0, length=_lib.HMM_ALL):
        """Start moving the unpinned chunks out of tier; returns at once."""
        check(lib.hmm_evict(self._handle(), off, length, _tier(tier)),
              "hmm tensor %s: evict" % self.name)

    def writeback(self, off=0, n=None):
        """Start writing the dirty, unmapped host chunks of [off, off +
        n) (n None: to the end) to the store; returns at once.  They
        stay resident and become clean, so the budget drops them without
        I/O when it needs the room; a write's error comes from the next
        ctx.wait() or flush() (in shared mode perhaps from this call)."""
        check(lib.hmm_writeback(self._handle(), off,
                                _lib.HMM_ALL if n is None else n),
              "hmm tensor %s: writeback" % self.name)

    def residency(self):
        """Bytes per tier now: {"device": .., "host": .., "store": ..}."""
        b = (ctypes.c_uint64 * 3)()
        check(lib.hmm_tensor_residency(self._handle(), b),
              "hmm tensor %s: residency" % self.name)
        return {k: b[v] for k, v in _lib.TIERS.items()}

    def free(self):
        """Free the tensor in every tier (-EBUSY while it is mapped)."""
        if self._t is None:
            return
        check(lib.hmm_tensor_free(self._t), "hmm tensor %s: free"
              % self.name)
        self._t = None
        self.ctx._tensors.discard(self)

    def __del__(self):
        if self._t is not None and self.ctx._h is not None:
            if lib.hmm_tensor_free(self._t) == 0:
                self._t = None
