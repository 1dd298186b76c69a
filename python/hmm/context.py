# SPDX-License-Identifier: MIT
"""context — hmm.Context (a libhmm context) and hmm.Tensor (one tensor).

A Context owns its tensors: a tensor made (ctx.tensor) or opened
(ctx.open_tensor) stays in the context, and is saved by its flush(),
until Tensor.free() or close(); dropping the Tensor object frees
nothing (ctx.open_tensor(name) gives it back).  close() (or leaving
its `with`) frees every one of them, and a Tensor of a closed context
refuses every call.  map() pins a tensor resident at a tier and yields
it as a torch.Tensor (zero-copy through DLPack: the pin, and the
memory, last until the last reference to that tensor, views included,
is gone, even past close(): libhmm then closes the context when that
reference goes) or a numpy array (valid only inside the `with`).
Errors are OSError(errno, detail), bad arguments EINVAL naming them.
"""
import contextlib
import ctypes
import errno
import json
import operator
import os
import sys
import weakref

from . import _lib
from ._lib import check, lib

# libhmm's dtypes (hmm.h HMM_DTYPE_*) by numpy / torch name
DTYPES = {"float32": 1, "float64": 2, "float16": 3, "bfloat16": 4,
          "int8": 5, "uint8": 6, "int32": 7, "int64": 8}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


def dtype_code(dtype):
    """A libhmm dtype from one of DTYPES' names, a torch.dtype or a
    numpy dtype (or scalar type) of those in native byte order;
    OSError(EINVAL) naming anything else (None, float, "float",
    "torch.float32", numpy.dtype(">f4") on a little-endian host, ...)."""
    name = None
    torch, numpy = sys.modules.get("torch"), sys.modules.get("numpy")
    if isinstance(dtype, str):
        name = dtype
    elif torch is not None and isinstance(dtype, torch.dtype):
        name = str(dtype)[len("torch."):]
    elif numpy is not None and (isinstance(dtype, numpy.dtype) or (
            isinstance(dtype, type) and issubclass(dtype, numpy.generic))):
        d = numpy.dtype(dtype)
        # a byte-swapped one (">f4") is not its name: libhmm's and a
        # numpy map's bytes are native
        name = d.name if d.isnative else None
    if name not in DTYPES:
        raise OSError(errno.EINVAL, "dtype %r: not one of %s (or their "
                      "torch or numpy dtypes)" % (dtype, ", ".join(DTYPES)))
    return DTYPES[name]


def _tier(tier):
    if not isinstance(tier, str) or tier not in _lib.TIERS:
        raise OSError(errno.EINVAL, "tier %r: not device, host or store"
                      % (tier,))
    return _lib.TIERS[tier]


def _access(access):
    if not isinstance(access, str) or access not in _lib.ACCESS:
        raise OSError(errno.EINVAL, "access %r: not r, w, rw or discard"
                      % (access,))
    return _lib.ACCESS[access]


def _capsule(ptr):
    new = ctypes.pythonapi.PyCapsule_New
    new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p,
                                                   ctypes.c_char_p,
                                                   ctypes.c_void_p]
    return new(ptr, b"dltensor", None)


class _DLManagedTensor(ctypes.Structure):
    """dlpack.h's DLManagedTensor, as far as its deleter."""
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32),
                ("device_id", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("dtype", ctypes.c_uint32), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p),
                ("byte_offset", ctypes.c_uint64),
                ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.CFUNCTYPE(None, ctypes.c_void_p))]


def _from_dlpack(ptr):
    """A torch.Tensor of libhmm's export ptr.  Should torch refuse it
    (a device its build lacks, ...) before taking it (the capsule keeps
    the name "dltensor"), the export is still ours: its deleter ends the
    pin, and with it a close() waiting for it."""
    import torch.utils.dlpack
    cap = _capsule(ptr)
    try:
        return torch.utils.dlpack.from_dlpack(cap)
    except BaseException:
        valid = ctypes.pythonapi.PyCapsule_IsValid
        valid.restype, valid.argtypes = ctypes.c_int, [ctypes.py_object,
                                                       ctypes.c_char_p]
        if valid(cap, b"dltensor"):
            _DLManagedTensor.from_address(ptr.value).deleter(ptr.value)
        raise


def _config_get(cfg, key):
    buf = ctypes.create_string_buffer(256)
    check(lib.hmm_config_get(cfg, key.encode(), buf, 256), "hmm_config_get")
    return buf.value.decode()


def _config_keys():
    keys, i = set(), 0
    while True:
        k = lib.hmm_config_key(i)
        if not k:
            return keys
        keys.add(k.decode())
        i += 1


# config fields that name files: str, bytes or os.PathLike, as open() takes
_PATHS = ("store_path", "daemon", "trace_path", "host_dir")


def _config_value(k, v):
    """v as hmm_config_set reads it (bytes)."""
    if k in _PATHS:
        what = "store" if k == "store_path" else k     # as passed
        try:
            b = os.fsencode(v)
        except TypeError:
            raise OSError(errno.EINVAL, "hmm.Context: %s %r: not a path "
                          "(str, bytes or os.PathLike)" % (what, v)) \
                from None
        if b"\0" in b:
            raise OSError(errno.EINVAL, "hmm.Context: %s %r: holds a NUL "
                          "byte" % (what, v))
        return b
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise OSError(errno.EINVAL, "hmm.Context: %s %r: not a str or int"
                      % (k, v))
    return _lib.cstr("hmm.Context: " + k, str(v))


class Context:
    """A libhmm context.

    Context(store=None, host_budget="1G", daemon=None, **config): every
    keyword is a field of struct hmm_config set by name (hmm_config_set:
    store_size, device, device_budget, chunk_bytes, policy, wait_ms,
    flags, ...), values as str or int; sizes take K/M/G.  store (and
    trace_path, host_dir) is a path: str, bytes or os.PathLike.  daemon
    is hmmd's socket ("unix:PATH" or a PATH): shared mode.  None leaves
    a field at its default; an unknown key is EINVAL even then.
    chunk_bytes and host_budget are the context's own: in shared mode
    hmmd's chunk size, whatever config says.
    """

    def __init__(self, store=None, host_budget="1G", daemon=None, **config):
        self._h = None
        self._holds = 0         # raw maps that outlive close (_hold)
        self._closing = None    # the handle close() left to the last
        self._live = {}         # handle -> name: the tensors it holds
        self._objs = weakref.WeakValueDictionary()  # handle -> Tensor
        keys = _config_keys()
        for k in config:        # first: a bad key is wrong even with None
            if k in ("store_path", "daemon", "host_budget") or \
               k not in keys:
                raise OSError(errno.EINVAL, "hmm.Context: key %r: %s" % (
                    k, "pass it as store=" if k == "store_path" else
                    "not a config key (hmm_config_set)"))
        if daemon is not None:
            daemon = os.fsdecode(_config_value("daemon", daemon))
            if not daemon.startswith("unix:"):
                daemon = "unix:" + daemon
        config.update(store_path=store, host_budget=host_budget,
                      daemon=daemon)
        cfg = lib.hmm_config_new()
        if not cfg:
            raise OSError(errno.ENOMEM, "hmm_config_new: out of memory")
        keep = []       # string values live until hmm_open copies them
        try:
            for k, v in config.items():
                if v is None:
                    continue
                b = _config_value(k, v)
                keep.append(b)
                check(lib.hmm_config_set(cfg, k.encode(), b), "hmm.Context")
            h = ctypes.c_void_p()
            check(lib.hmm_open(cfg, ctypes.byref(h)), "hmm.Context")
            self._h = h
            self.host_budget = int(_config_get(cfg, "host_budget"))
            # saved tensors to check new names against (embedded only:
            # hmmd keeps a client's tensors apart from its saved ones)
            self._saved = daemon is None and \
                "store_keep" in _config_get(cfg, "flags").split(",")
        finally:
            lib.hmm_config_free(cfg)
        # the chunk size in use: hmmd's in shared mode (the stats say)
        self.chunk_bytes = self.stats()["chunk_bytes"]

    def _handle(self):
        if self._h is None:
            raise OSError(errno.EBADF, "hmm.Context: closed")
        return self._h

    def tensor(self, name, shape, dtype="float32"):
        """A new tensor, contents zero, held by this context until
        Tensor.free() or close().  Its name is its key: flush() saves it
        under it and open_tensor() finds it, so a name this context
        holds, or (store_keep) a tensor of the store saved under it, is
        EEXIST: open_tensor(name) gives that one (free() it to make a
        new one)."""
        name_b = _lib.cstr("hmm.Context.tensor: name", name)
        code = dtype_code(dtype)
        h = self._handle()
        if name in self._live.values():
            raise OSError(errno.EEXIST, "hmm.Context.tensor: tensor %s: "
                          "this context holds one of that name "
                          "(open_tensor gives it)" % name)
        if self._saved:
            t = ctypes.c_void_p()
            if lib.hmm_tensor_open(h, name_b, ctypes.byref(t)) == 0:
                self._tensor(t, name)   # held, as open_tensor would
                raise OSError(errno.EEXIST, "hmm.Context.tensor: tensor "
                              "%s: the store holds one of that name, "
                              "saved by a flush (open_tensor gives it)"
                              % name)
        return Tensor._new(self, name, shape, code)

    def open_tensor(self, name):
        """The tensor of that name: the one this context holds already
        (made or opened; the same Tensor object while one is alive),
        else one saved by an earlier context's flush() (this context
        opened with flags="store_keep")."""
        name_b = _lib.cstr("hmm.Context.open_tensor: name", name)
        h = self._handle()
        for k, n in self._live.items():
            if n == name:
                return self._tensor(ctypes.c_void_p(k), name)
        t = ctypes.c_void_p()
        check(lib.hmm_tensor_open(h, name_b, ctypes.byref(t)),
              "hmm.Context.open_tensor")
        return self._tensor(t, name)

    def _tensor(self, t, name):
        """The Tensor of handle t, made once: the context keeps the
        handle, the object may come and go."""
        obj = self._objs.get(t.value)
        if obj is None:
            obj = Tensor(self, t, name)
            self._live[t.value] = name
            self._objs[t.value] = obj
        return obj

    def wait(self, tensor=None):
        """Wait for prefetches and evictions in flight (of one tensor)."""
        if tensor is not None and (not isinstance(tensor, Tensor) or
                                   tensor.ctx is not self):
            raise OSError(errno.EINVAL, "hmm.Context.wait: %r: not a "
                          "Tensor of this context" % (tensor,))
        check(lib.hmm_wait(self._handle(), tensor._handle() if tensor
                           else None), "hmm.Context.wait")

    def flush(self):
        """Write every dirty chunk and the table of tensors: a checkpoint
        of every tensor the context holds, Tensor object or not."""
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
        """Free every tensor and the context (without a flush).  A torch
        map still referenced (or a tensor hmm.torch.offload_activations
        gave the backward) keeps its memory (and the store) until it
        goes; every call on the context or its tensors is EBADF."""
        if self._h is None:
            return
        for t in list(self._objs.values()):
            t._t = None         # hmm_close frees them
        self._live.clear()
        h, self._h = self._h, None
        if self._holds:
            self._closing = h   # _release closes it
        else:
            lib.hmm_close(h)

    def _hold(self):
        """A raw map (map_ptr) handed to torch as memory of its own
        (torch.frombuffer: hmm.torch's activations) is to outlive
        close(), as a DLPack map does: close() then leaves hmm_close to
        the last _release()."""
        self._handle()
        self._holds += 1

    def _release(self):
        self._holds -= 1
        if not self._holds and self._closing is not None:
            h, self._closing = self._closing, None
            lib.hmm_close(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_h", None) is not None:   # __init__ may fail
            self.close()


class Tensor:
    """One libhmm tensor of a Context (ctx.tensor / ctx.open_tensor)."""

    def __init__(self, ctx, handle, name):
        self.ctx, self._t, self.name = ctx, handle, name
        self.nbytes = lib.hmm_tensor_bytes(handle)
        self.dtype = DTYPE_NAMES.get(lib.hmm_tensor_dtype(handle))
        sh = lib.hmm_tensor_shape(handle)
        self.shape = tuple(sh[i] for i in range(lib.hmm_tensor_ndim(handle)))

    @classmethod
    def _new(cls, ctx, name, shape, code):
        name_b = _lib.cstr("hmm.Context.tensor: name", name)
        try:
            if isinstance(shape, (str, bytes)):   # iterable, not a shape
                raise TypeError
            shape = tuple(shape if hasattr(shape, "__len__") else (shape,))
            if any(isinstance(s, bool) for s in shape):     # not 1 or 0
                raise TypeError
            shape = tuple(operator.index(s) for s in shape)
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
        return ctx._tensor(t, name)

    def _handle(self):
        if self._t is None:
            raise OSError(errno.EBADF, "hmm tensor %s: freed, or its "
                          "context closed" % self.name)
        return self._t

    def _u64(self, param, v, none=None):
        return _lib.as_u64("hmm tensor %s: %s" % (self.name, param), v,
                           none)

    @contextlib.contextmanager
    def map(self, tier="host", access="rw", as_="torch"):
        """Pin the whole tensor at tier ("host" or "device") with access
        ("r", "w", "rw", "discard") and yield it as a torch.Tensor
        (as_="torch": zero-copy through DLPack; the pin lasts until the
        last reference to it is gone, after close() too) or a numpy array
        (as_="numpy", host tier, not bfloat16, which numpy lacks: valid
        inside the with only; read-only for "r").  "r" does not mark
        the tensor written: what is written through a torch map of "r"
        (torch has no read-only tensors) is lost when the chunk is
        evicted.  A close() inside the with leaves nothing for its end
        to unmap."""
        code, tc = _access(access), _tier(tier)
        if as_ == "torch":
            mt = ctypes.c_void_p()
            check(lib.hmm_dlpack_export(self._handle(), tc, code,
                                        ctypes.byref(mt)),
                  "hmm tensor %s: map" % self.name)
            x = _from_dlpack(mt)
            try:
                yield x
            finally:
                del x
        elif as_ == "numpy":
            import numpy
            if tier != "host":
                raise OSError(errno.EINVAL, "hmm tensor %s: a numpy map is "
                              "host-tier only" % self.name)
            if self.dtype not in numpy.sctypeDict:
                raise OSError(errno.EINVAL, "hmm tensor %s: dtype %s has no "
                              "numpy dtype (map it as torch)"
                              % (self.name, self.dtype))
            p = self.map_ptr(0, None, "host", access)
            try:
                buf = (ctypes.c_char * self.nbytes).from_address(p)
                a = numpy.frombuffer(buf, dtype=self.dtype).reshape(
                    self.shape)
                # "r" does not mark the chunks dirty: a write would be
                # dropped by the next eviction, so none is let through
                a.flags.writeable = access != "r"
                yield a
            finally:
                if self._t is not None:     # close() ended the pin
                    self.unmap_ptr(p)
        else:
            raise OSError(errno.EINVAL, "hmm tensor %s: as_ %r: not torch "
                          "or numpy" % (self.name, as_))

    def map_ptr(self, off, length, tier="host", access="rw"):
        """hmm_map: the address of byte off of [off, off + length) (None:
        to the end), pinned (unmap_ptr drops it)."""
        off = self._u64("offset", off)
        length = self._u64("length", length, _lib.HMM_ALL)
        tc, code = _tier(tier), _access(access)
        p = ctypes.c_void_p()
        check(lib.hmm_map(self._handle(), off, length, tc, code,
                          ctypes.byref(p)),
              "hmm tensor %s: map" % self.name)
        return p.value

    def unmap_ptr(self, p):
        """Drop the pin of map_ptr's address p."""
        p = self._u64("address", p)
        check(lib.hmm_unmap(self._handle(), p),
              "hmm tensor %s: unmap" % self.name)

    def prefetch(self, tier="host", off=0, length=None):
        """Start moving [off, off + length) (None: to the end) to tier;
        returns at once."""
        off = self._u64("offset", off)
        length = self._u64("length", length, _lib.HMM_ALL)
        check(lib.hmm_prefetch(self._handle(), off, length, _tier(tier)),
              "hmm tensor %s: prefetch" % self.name)

    def evict(self, tier="host", off=0, length=None):
        """Start moving the unpinned chunks of [off, off + length) (None:
        to the end) out of tier; returns at once."""
        off = self._u64("offset", off)
        length = self._u64("length", length, _lib.HMM_ALL)
        check(lib.hmm_evict(self._handle(), off, length, _tier(tier)),
              "hmm tensor %s: evict" % self.name)

    def writeback(self, off=0, n=None):
        """Start writing the dirty, unmapped host chunks of [off, off +
        n) (n None: to the end) to the store; returns at once.  They
        stay resident and become clean, so the budget drops them without
        I/O when it needs the room; a write's error comes from the next
        ctx.wait() or flush() (in shared mode perhaps from this call)."""
        off = self._u64("offset", off)
        n = self._u64("length", n, _lib.HMM_ALL)
        check(lib.hmm_writeback(self._handle(), off, n),
              "hmm tensor %s: writeback" % self.name)

    def residency(self):
        """Bytes per tier now: {"device": .., "host": .., "store": ..}."""
        b = (ctypes.c_uint64 * 3)()
        check(lib.hmm_tensor_residency(self._handle(), b),
              "hmm tensor %s: residency" % self.name)
        return {k: b[v] for k, v in _lib.TIERS.items()}

    def free(self):
        """Free the tensor in every tier (-EBUSY while it is mapped); the
        context no longer holds it, a flush no longer saves it.  Again
        on a freed tensor it does nothing; on a tensor of a closed
        context (which close() freed) it is EBADF, as every call is."""
        if self._t is None:
            if self.ctx._h is None:
                raise OSError(errno.EBADF, "hmm tensor %s: free: its "
                              "context is closed" % self.name)
            return
        check(lib.hmm_tensor_free(self._t), "hmm tensor %s: free"
              % self.name)
        k, self._t = self._t.value, None
        self.ctx._live.pop(k, None)
        self.ctx._objs.pop(k, None)
