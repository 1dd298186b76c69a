# SPDX-License-Identifier: MIT
"""activations — hmm.torch.offload_activations: what autograd saves for
the backward goes to hmm tensors (and from there, asynchronously, to the
store), and comes back for the backward with prefetch in reverse order.

Over torch.autograd.graph.saved_tensors_hooks: pack copies a saved CPU
tensor of at least min_bytes (not a parameter or a view of one: those
stay alive anyway)
into a new hmm tensor of its bytes, and starts the eviction of the
tensors packed before it beyond the newest keep_bytes; unpack
prefetches ahead_bytes of those packed before it (the next ones the
backward will want), maps it, copies it into a tensor of the same shape,
strides and dtype.  The
bytes are the same, so the gradients are bit-identical.  The hmm tensor
is freed when autograd drops what it saved.
"""
import contextlib
import ctypes
import weakref

import torch

from .. import _lib


def _dense(x):
    """True when x's elements fill [data_ptr, + numel) exactly (any
    permutation of a contiguous layout), so its bytes copy as one run."""
    dims = sorted((st, sz) for st, sz in zip(x.stride(), x.size()) if sz > 1)
    want = 1
    for st, sz in dims:
        if st != want:
            return False
        want *= sz
    return True


def _is_param(x):
    """A parameter, or a view of one (Linear saves weight.t()): alive
    anyway, so not worth a copy."""
    return any(t is not None and t.is_leaf and t.requires_grad
               for t in (x, x._base))


class _Saved:
    """One packed tensor: its layout and the hmm tensor of its bytes."""

    def __init__(self, ctx, x, name):
        if not _dense(x):
            x = x.contiguous()
        self.size, self.stride, self.dtype = x.size(), x.stride(), x.dtype
        self.nbytes = x.numel() * x.element_size()
        self.t = ctx.tensor(name, (self.nbytes,), "uint8")
        p = self.t.map_ptr(0, _lib.HMM_ALL, "host", "discard")
        ctypes.memmove(p, x.data_ptr(), self.nbytes)
        self.t.unmap_ptr(p)

    def load(self):
        y = torch.empty_strided(self.size, self.stride, dtype=self.dtype)
        p = self.t.map_ptr(0, _lib.HMM_ALL, "host", "r")
        ctypes.memmove(y.data_ptr(), p, self.nbytes)
        self.t.unmap_ptr(p)
        return y

    def __del__(self):
        t = getattr(self, "t", None)
        if t is not None and t.ctx._h is not None:
            try:
                t.free()
            except OSError:
                pass            # still mapped: hmm_close frees it


class _Offloader:
    """The hooks' state: the packed tensors in order (weakly: autograd
    owns them), the newest keep_bytes of them left in host memory (the
    backward wants those first), the older ones evicted; in the backward
    up to ahead_bytes of the next ones prefetched."""

    def __init__(self, ctx, min_bytes, keep_bytes, ahead_bytes):
        self.ctx, self.min_bytes = ctx, min_bytes
        self.keep_bytes, self.ahead_bytes = keep_bytes, ahead_bytes
        self.order = []         # weak references, in packing order
        self.packed_bytes = 0
        self.kept = 0           # order[kept:] are not yet evicted
        self.kept_bytes = 0
        self.ahead = None       # order[ahead:] were prefetched or unpacked

    def _at(self, j):
        return self.order[j]()

    def pack(self, x):
        if (not isinstance(x, torch.Tensor) or x.device.type != "cpu" or
                x.layout != torch.strided or _is_param(x) or
                x.numel() * x.element_size() < self.min_bytes):
            return x
        s = _Saved(self.ctx, x, "act.%d" % len(self.order))
        s.index = len(self.order)
        self.order.append(weakref.ref(s))
        self.packed_bytes += s.nbytes
        self.kept_bytes += s.nbytes
        while self.kept_bytes > self.keep_bytes and self.kept < s.index + 1:
            old = self._at(self.kept)
            if old is not None:
                self.kept_bytes -= old.nbytes
                old.t.evict("host")
            self.kept += 1
        return s

    def unpack(self, s):
        if not isinstance(s, _Saved):
            return s
        # prefetch down from the lowest not yet asked for, ahead_bytes
        if self.ahead is None or self.ahead > s.index:
            self.ahead = s.index
        want, j = 0, s.index - 1
        while j >= 0 and want < self.ahead_bytes:
            prev = self._at(j)
            if prev is not None:
                want += prev.nbytes
                if j < self.ahead:
                    prev.t.prefetch("host")
            j -= 1
        self.ahead = min(self.ahead, j + 1)
        return s.load()


@contextlib.contextmanager
def offload_activations(ctx, min_bytes=1 << 20, keep_bytes=None,
                        ahead_bytes=None):
    """with offload_activations(ctx): run the forward; the saved tensors
    of at least min_bytes go to ctx (hmm tensors: the newest keep_bytes
    stay in host memory, older ones are evicted to the store), and come
    back in the backward with ahead_bytes prefetched (both default to a
    quarter of the host budget).  Yields an object whose packed_bytes
    counts the bytes offloaded."""
    q = ctx.host_budget // 4
    off = _Offloader(ctx, min_bytes, q if keep_bytes is None else keep_bytes,
                     q if ahead_bytes is None else ahead_bytes)
    with torch.autograd.graph.saved_tensors_hooks(off.pack, off.unpack):
        yield off
