# SPDX-License-Identifier: MIT
"""activations — hmm.torch.offload_activations: what autograd saves for
the backward goes to hmm tensors (and from there, asynchronously, to the
store), and comes back for the backward with prefetch in reverse order.

Over torch.autograd.graph.saved_tensors_hooks: pack copies a saved CPU
tensor of at least min_bytes (not a parameter or a view of one: those
stay alive anyway) to the end of an arena: a run of segments, each an
hmm byte tensor of 8 chunks, filled back to back (a tensor may straddle
two), so that every chunk is whole (huge pages where the chunk is a
multiple of 2 MiB; one chunk-sized write and read each) and a step
creates and frees a few segments instead of a tensor per saved tensor
(each new one faulted in page by page: 0.6 ms a pack at the default
preset).  A saved tensor whose bytes were packed already (the same
storage, offset, size and version, the first still alive: softmax's
output and its reshape, 10% of the preset's bytes) shares them.  Once
packed, the whole chunks older than the newest keep_bytes are written
back (hmm_writeback: the write runs on libhmm's I/O thread, pack does
not wait) and stay in host memory, clean: the host budget's LRU drops
them for nothing when it needs the room, oldest first, which are the
ones the backward wants last, and the backward finds the rest where
they are instead of reading them back (writeback=False evicts them
instead, as before hmm_writeback existed).
unpack prefetches the ahead_bytes below the tensor it is asked for (the
next ones the backward will want; those still resident cost nothing),
maps the tensor's bytes and returns them in place as a tensor of the
same shape, strides and dtype (the map lasts as long as that tensor;
one that straddles two segments is copied out instead).  The bytes are
the same, so the gradients are bit-identical.  A segment is freed once
autograd has dropped every tensor saved in it.
"""
import contextlib
import ctypes
import errno
import itertools
import weakref

import torch

from .. import _lib

SEG_CHUNKS = 8
_serial = itertools.count()     # offloaders: their tensors' names


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


class _Segment:
    """One hmm byte tensor of the arena: bytes [base, base + size) of
    the packing order; freed when closed and no saved bytes use it."""

    def __init__(self, ctx, name, base, size):
        self.t = ctx.tensor(name, (size,), "uint8")
        self.chunk = ctx.chunk_bytes
        self.base, self.size = base, size
        self.live = 0           # _Bytes with a piece here
        self.closed = False     # no more packing into it
        self.written = 0        # [0, written) sent to the store (whole
        #                         chunks, or to the end): written back
        #                         and kept, or evicted

    def drop(self, off, n):
        """Bytes [off, off + n) are no longer wanted: the chunks they end
        (not the one they start in, which the bytes below may share)
        that were written back are dropped from host memory now (clean:
        no I/O), not when the whole segment goes."""
        self.live -= 1
        self.maybe_free()
        c = self.chunk
        lo = -(-off // c) * c
        hi = min(self.written, -(-(off + n) // c) * c)
        if self.t is not None and lo < hi:
            try:
                self.t.evict("host", lo, hi - lo)
            except OSError:
                pass            # the context closed

    def maybe_free(self):
        t = self.t
        if (self.closed and self.live == 0 and t is not None and
                t.ctx._h is not None):
            self.t = None
            try:
                t.free()
            except OSError:
                pass            # still mapped: hmm_close frees it


class _Pin:
    """A map of a segment held by a tensor over it (_Bytes.view).  It
    holds the context too (Context._hold): a tensor unpacked for the
    backward may outlive close() (grad_fn._saved_result, a view kept);
    its memory then goes with it, not under it."""

    def __init__(self, seg, p):
        self.seg, self.p = seg, p
        self.ctx = seg.t.ctx
        self.ctx._hold()
        seg.live += 1

    def __del__(self):
        seg = self.seg
        if seg.t is not None and seg.t.ctx._h is not None:
            try:
                seg.t.unmap_ptr(self.p)
            except OSError:
                pass
        seg.live -= 1
        seg.maybe_free()
        self.ctx._release()


class _Bytes:
    """The packed bytes of one or more saved tensors: [pos, pos + n) of
    the packing order, as (segment, offset, length) pieces."""

    def __init__(self, pieces, pos, n):
        self.pieces, self.pos, self.nbytes = pieces, pos, n
        for seg, _, _ in pieces:
            seg.live += 1

    def view(self, size, stride, dtype):
        """The bytes in place (one piece: a map, no copy) as a tensor of
        that layout, or None where they straddle two segments.  The map
        (and the segment) lives as long as the tensor does."""
        if len(self.pieces) != 1:
            return None
        seg, off, n = self.pieces[0]
        p = seg.t.map_ptr(off, n, "host", "r")
        arr = (ctypes.c_char * n).from_address(p)
        arr._pin = _Pin(seg, p)     # unmapped when torch lets arr go
        flat = torch.frombuffer(arr, dtype=torch.uint8).view(dtype)
        return flat.as_strided(size, stride)

    def read(self, dst):
        """Copy the bytes to the address dst."""
        for seg, off, n in self.pieces:
            p = seg.t.map_ptr(off, n, "host", "r")
            ctypes.memmove(dst, p, n)
            seg.t.unmap_ptr(p)
            dst += n

    def __del__(self):
        for seg, off, n in getattr(self, "pieces", ()):
            seg.drop(off, n)


class _Saved:
    """One packed tensor: its layout and its bytes."""

    def __init__(self, b, x):
        self.b = b
        self.size, self.stride, self.dtype = x.size(), x.stride(), x.dtype
        self.nbytes = b.nbytes
        self.index = b.pos

    def load(self):
        y = self.b.view(self.size, self.stride, self.dtype)
        if y is not None:
            return y
        y = torch.empty_strided(self.size, self.stride, dtype=self.dtype)
        self.b.read(y.data_ptr())
        return y


class _Offloader:
    """The hooks' state: the arena's segments in packing order, the
    newest keep_bytes of it left in host memory as they are (the
    backward wants those first), the older whole chunks written back
    and kept (hmm_writeback: the budget drops them for free when it
    needs the room) or, with writeback False, evicted; in the backward
    up to ahead_bytes below each unpacked tensor prefetched (what is
    still resident costs nothing)."""

    def __init__(self, ctx, min_bytes, keep_bytes, ahead_bytes, writeback):
        self.ctx, self.min_bytes = ctx, min_bytes
        self.serial = next(_serial)     # its tensors' names: unique
        self.keep_bytes, self.ahead_bytes = keep_bytes, ahead_bytes
        self.writeback = writeback
        self.chunk = ctx.chunk_bytes
        self.seg_bytes = SEG_CHUNKS * self.chunk
        self.segs = []          # in packing order
        self.pos = 0            # bytes packed, end of the arena
        self.evict_seg = 0      # segs[:evict_seg] are written whole
        self.order = []         # weak references to the _Saved, in order
        self.packed_bytes = 0   # bytes copied (a shared one once)
        self.shared = {}        # (ptr, n) -> (weak x, version, _Bytes)
        self.ahead = None       # [ahead, ...) prefetched or unpacked

    def _put(self, src, n):
        """Copy n bytes from address src to the arena's end (64-byte
        aligned: unpack hands them out in place)."""
        self.pos += -self.pos % 64
        pieces, pos = [], self.pos
        while n:
            if not self.segs or self.pos == self.segs[-1].base + \
                    self.segs[-1].size:
                if self.segs:
                    self.segs[-1].closed = True
                self.segs.append(_Segment(self.ctx, "act.%d.%d" % (
                    self.serial, len(self.segs)), self.pos,
                    self.seg_bytes))
            seg = self.segs[-1]
            off = self.pos - seg.base
            k = min(n, seg.size - off)
            # whole chunks from off's on: never read in (DISCARD)
            end = min(seg.size, -(-(off + k) // self.chunk) * self.chunk)
            p = seg.t.map_ptr(off, end - off, "host", "discard")
            ctypes.memmove(p, src, k)
            seg.t.unmap_ptr(p)
            pieces.append((seg, off, k))
            src += k
            n -= k
            self.pos += k
        return _Bytes(pieces, pos, self.pos - pos)

    def _evict(self):
        """Start the write-back of the whole chunks below pos -
        keep_bytes (after the forward, the last one too): kept resident
        (writeback) or dropped once written (evict)."""
        limit = self.pos - self.keep_bytes
        while self.evict_seg < len(self.segs):
            seg = self.segs[self.evict_seg]
            end = min(seg.size, self.pos - seg.base)   # packed
            hi = min(end, limit - seg.base)
            if hi < seg.size and not (seg.closed and hi == end):
                hi = hi // self.chunk * self.chunk  # whole chunks only
            if hi > seg.written and seg.t is not None:
                if self.writeback:
                    seg.t.writeback(seg.written, hi - seg.written)
                else:
                    seg.t.evict("host", seg.written, hi - seg.written)
                seg.written = hi
            if seg.written < seg.size:
                break
            self.evict_seg += 1

    def _prefetch(self, lo, hi):
        for seg in self.segs:
            a, b = max(lo, seg.base), min(hi, seg.base + seg.size)
            if a < b and seg.t is not None:
                seg.t.prefetch("host", a - seg.base, b - a)

    def pack(self, x):
        if (not isinstance(x, torch.Tensor) or x.device.type != "cpu" or
                x.layout != torch.strided or _is_param(x) or
                x.numel() * x.element_size() < self.min_bytes):
            return x
        n = x.numel() * x.element_size()
        b = None
        key = (x.data_ptr(), n)
        if _dense(x):
            # the same bytes, if the first is alive (so they are its)
            # and not written since (same version)
            old = self.shared.get(key)
            if old is not None and old[0]() is not None and \
                    old[1] == x._version:
                b = old[2]
        else:
            x = x.contiguous()
        if b is None:
            b = self._put(x.data_ptr(), n)
            self.packed_bytes += n
            self.shared[key] = (weakref.ref(x), x._version, b)
            self._evict()
        s = _Saved(b, x)
        self.order.append(weakref.ref(s))
        return s

    def unpack(self, s):
        if not isinstance(s, _Saved):
            return s
        # prefetch down from the lowest not yet asked for, ahead_bytes
        top = s.index + s.nbytes
        if self.ahead is None or self.ahead > top:
            self.ahead = top
        lo = max(0, s.index - self.ahead_bytes) // self.chunk * self.chunk
        if lo < self.ahead:
            self._prefetch(lo, self.ahead)
            self.ahead = lo
        return s.load()

    def close(self):
        """The forward is over: no more packing; the segments go once
        their saved tensors do."""
        self.shared.clear()
        for seg in self.segs:
            seg.closed = True
        self._evict()
        for seg in self.segs:
            seg.maybe_free()


@contextlib.contextmanager
def offload_activations(ctx, min_bytes=1 << 20, keep_bytes=None,
                        ahead_bytes=None, writeback=True):
    """with offload_activations(ctx): run the forward; the saved tensors
    of at least min_bytes go to ctx (hmm tensors: the newest keep_bytes,
    by default half the host budget, stay in host memory as they are;
    older ones are written to the store as they are packed and kept in
    host memory until the budget needs the room, or with
    writeback=False evicted), and come back in the backward with
    ahead_bytes prefetched (default a quarter of the host budget).
    Yields an object whose packed_bytes counts the bytes offloaded.
    The sizes are ints or size strings ("1M"), checked here: OSError
    (EINVAL) naming a bad one; a closed ctx is EBADF.  A tensor handed
    to the backward (or read through grad_fn._saved_*) lives past
    ctx.close(), as a torch map does."""
    from ..context import Context
    if not isinstance(ctx, Context):
        raise OSError(errno.EINVAL, "hmm.torch.offload_activations: ctx "
                      "%r: not an hmm.Context" % (ctx,))
    if ctx._h is None:
        raise OSError(errno.EBADF, "hmm.torch.offload_activations: ctx: "
                      "closed")
    b = ctx.host_budget
    sizes = {}
    for k, v, dflt in (("min_bytes", min_bytes, None),
                       ("keep_bytes", keep_bytes, b // 2),
                       ("ahead_bytes", ahead_bytes, b // 4)):
        try:
            sizes[k] = dflt if v is None and dflt is not None else \
                _lib.size_parse(v)
        except OSError as e:
            raise OSError(e.errno, "hmm.torch.offload_activations: %s: %s"
                          % (k, e.strerror)) from None
    off = _Offloader(ctx, sizes["min_bytes"], sizes["keep_bytes"],
                     sizes["ahead_bytes"], writeback)
    try:
        with torch.autograd.graph.saved_tensors_hooks(off.pack, off.unpack):
            yield off
    finally:
        off.close()
