# SPDX-License-Identifier: MIT
"""activations — hmm.torch.offload_activations: what autograd saves for
the backward goes to hmm tensors (and from there, asynchronously, to the
store), and comes back for the backward with prefetch in reverse order.

Over torch.autograd.graph.saved_tensors_hooks: pack copies a saved CPU
tensor of at least min_bytes (not a parameter: those stay alive anyway)
into a new hmm tensor of its bytes and starts its eviction; unpack
prefetches the `depth` tensors packed before it (the next ones the
backward will want), maps it, copies it into a tensor of the same shape,
strides and dtype, and lets its host copy go (clean: no write).  The
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
        self.t.evict("host")

    def load(self):
        y = torch.empty_strided(self.size, self.stride, dtype=self.dtype)
        p = self.t.map_ptr(0, _lib.HMM_ALL, "host", "r")
        ctypes.memmove(y.data_ptr(), p, self.nbytes)
        self.t.unmap_ptr(p)
        self.t.evict("host")
        return y

    def __del__(self):
        t = getattr(self, "t", None)
        if t is not None and t.ctx._h is not None:
            t.free()


class _Offloader:
    def __init__(self, ctx, min_bytes, depth):
        self.ctx, self.min_bytes, self.depth = ctx, min_bytes, depth
        self.order = []         # weak references, in packing order
        self.packed_bytes = 0

    def pack(self, x):
        if (not isinstance(x, torch.Tensor) or x.device.type != "cpu" or
                x.layout != torch.strided or
                (x.is_leaf and x.requires_grad) or
                x.numel() * x.element_size() < self.min_bytes):
            return x
        s = _Saved(self.ctx, x, "act.%d" % len(self.order))
        s.index = len(self.order)
        self.order.append(weakref.ref(s))
        self.packed_bytes += s.nbytes
        return s

    def unpack(self, s):
        if not isinstance(s, _Saved):
            return s
        for j in range(s.index - 1, max(s.index - 1 - self.depth, -1), -1):
            prev = self.order[j]()
            if prev is not None:
                prev.t.prefetch("host")
        return s.load()


@contextlib.contextmanager
def offload_activations(ctx, min_bytes=1 << 20, depth=4):
    """with offload_activations(ctx): run the forward; the saved tensors
    of at least min_bytes go to ctx (hmm tensors, evicted to its store).
    Yields an object whose packed_bytes counts the bytes offloaded."""
    off = _Offloader(ctx, min_bytes, depth)
    with torch.autograd.graph.saved_tensors_hooks(off.pack, off.unpack):
        yield off
