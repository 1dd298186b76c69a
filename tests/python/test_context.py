#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""test_context — hmm.Context and hmm.Tensor: a config by name, bytes
through map() as torch (DLPack, zero-copy) and numpy, evict to the store
and back, write back and keep resident, flush and reopen, the context
owning its tensors (a dropped Tensor object frees nothing), a torch map
outliving close(), a map torch refuses leaving no pin, and every bad
input an OSError with errno and libhmm's detail.  Both modes (tap.py: HMM_TEST_DAEMON)."""
import errno
import gc
import os
import pathlib

import tap
from tap import ok, raises, diag
import hmm
import torch

# -- errors, before any context --------------------------------------------
raises(lambda: hmm.Context(host_budget="2Q"), errno.EINVAL, "2Q",
       "a bad budget string")
raises(lambda: hmm.Context(host_budget="1G", chunk_size="2M"), errno.EINVAL,
       "chunk_size", "an unknown config key")
raises(lambda: hmm.Context(store=tap.scratch("no/such/folder/s"),
                           store_size="16M"),
       errno.ENOENT, "no/such/folder/s", "a store in a missing folder")
raises(lambda: hmm.Context(daemon=tap.scratch("nobody.sock")), errno.ENOENT,
       "nobody.sock", "hmmd not running at the socket")
raises(lambda: hmm.size_parse("12Q"), errno.EINVAL, "12Q", "size_parse")
ok(hmm.size_parse("2G") == 2 << 30 and hmm.size_parse(4096) == 4096,
   "size_parse reads K/M/G as hmm-train does")

with tap.context(host_budget="16M") as ctx:
    if tap.DAEMON:
        diag("shared mode through %s" % tap.DAEMON)
    raises(lambda: ctx.tensor("t", (0, 4)), errno.EINVAL, "shape[0]",
           "a zero dimension")
    raises(lambda: ctx.tensor("t", (4,), "complex64"), errno.EINVAL,
           "complex64", "an unknown dtype")
    raises(lambda: ctx.tensor("t", "12"), errno.EINVAL, "'12'",
           "a str as the shape (not (1, 2))")
    raises(lambda: ctx.tensor("t", (4.5,)), errno.EINVAL, "4.5",
           "a float dimension (not cut to 4)")
    raises(lambda: ctx.tensor("t", (2 ** 70,)), errno.EOVERFLOW,
           "past 64 bits", "a dimension past 64 bits")
    raises(lambda: ctx.tensor("a\0b", (4,)), errno.EINVAL, "NUL",
           "a name with a NUL (not cut to 'a')")
    raises(lambda: hmm.Context(host_budget="16M\0junk"), errno.EINVAL,
           "host_budget", "a config value with a NUL")
    t = ctx.tensor("w", (3, 1000), torch.float32)
    ok(t.shape == (3, 1000) and t.dtype == "float32" and t.nbytes == 12000,
       "a tensor's shape, dtype, bytes")
    with t.map("host", "discard") as x:
        ok(isinstance(x, torch.Tensor) and x.shape == (3, 1000) and
           x.dtype == torch.float32, "map yields a torch.Tensor of its shape")
        x.copy_(torch.arange(3000, dtype=torch.float32).view(3, 1000))
        p1 = x.data_ptr()
    del x
    with t.map("host", "r") as y:
        ok(y.data_ptr() == p1, "the same memory again: zero-copy")
        ok(torch.equal(y.flatten(), torch.arange(3000, dtype=torch.float32)),
           "the bytes written are read back")
        raises(t.free, errno.EBUSY, "w", "free while torch holds the map")
    del y
    gc.collect()
    with t.map("host", "r", as_="numpy") as a:
        ok(a.shape == (3, 1000) and float(a[2, 999]) == 2999.0,
           "a numpy map sees the same bytes")
    raises(lambda: t.map("host", "rwx").__enter__(), errno.EINVAL, "rwx",
           "a bad access")
    raises(lambda: t.prefetch("cache"), errno.EINVAL, "cache", "a bad tier")

    # evict to the store, read back through prefetch
    before = ctx.stats()["store"]["bytes_in"]
    t.evict("host")
    ctx.wait()
    r = t.residency()
    ok(r["store"] >= 12000, "evicted: the store holds it (%s)" % r)
    ok(ctx.stats()["store"]["bytes_in"] - before >= 12000,
       "stats count the store write")
    t.prefetch("host")
    ctx.wait()
    with t.map("host", "r") as y:
        ok(float(y[1, 5]) == 1005.0, "prefetched back with its bytes")
    del y

    # write back, keep resident: clean, so the evict after writes nothing
    with t.map("host", "rw") as x:
        x[2, 7] = -1.0
    del x
    before = ctx.stats()["store"]["bytes_in"]
    t.writeback()
    ctx.wait()
    wrote = ctx.stats()["store"]["bytes_in"] - before
    r = t.residency()
    ok(wrote >= 12000, "writeback: the store took it (%d bytes)" % wrote)
    ok(r["host"] >= 12000 and r["store"] >= 12000,
       "and it stayed at the host (%s)" % r)
    t.evict("host")
    ctx.wait()
    ok(ctx.stats()["store"]["bytes_in"] - before == wrote and
       t.residency()["host"] == 0, "the evict after it wrote nothing")
    with t.map("host", "r") as y:
        ok(float(y[2, 7]) == -1.0 and float(y[2, 8]) == 2008.0,
           "read back from the store with its bytes")
    del y
    raises(lambda: t.writeback(12000), errno.EINVAL, "w",
           "writeback past the end")
    raises(lambda: t.writeback(0, 0), errno.EINVAL, "w",
           "writeback of 0 bytes")
    t.free()
    raises(lambda: t.evict(), errno.EBADF, "w", "a freed tensor")
    raises(lambda: t.writeback(), errno.EBADF, "w", "writeback of a freed "
           "tensor")

if not tap.DAEMON:
    # a flush is a checkpoint: a context with store_keep reopens by name
    path = tap.scratch("keep.store")
    with hmm.Context(store=path, store_size="32M", host_budget="8M") as c:
        k = c.tensor("kept", (1024,), "int64")
        with k.map("host", "discard", as_="numpy") as a:
            a[:] = range(1024)
        c.flush()
    with hmm.Context(store=path, host_budget="8M", flags="store_keep") as c:
        k = c.open_tensor("kept")
        with k.map("host", "r", as_="numpy") as a:
            ok(k.shape == (1024,) and int(a.sum()) == 1023 * 512,
               "flush, then open_tensor in a new context: the same bytes")
        raises(lambda: c.open_tensor("absent"), errno.ENOENT, "absent",
               "open_tensor of a name not saved")
raises(lambda: ctx.tensor("late", (1,)), errno.EBADF, "closed",
       "a closed context")

# -- arguments: every bad one an OSError(EINVAL) naming it ------------------
raises(lambda: hmm.Context(host_budget="16M", chunk_sizee=None),
       errno.EINVAL, "chunk_sizee", "an unknown config key, even as None")
raises(lambda: hmm.Context(store_path="x", host_budget="16M"), errno.EINVAL,
       "store=", "store_path as a key (store= is the path)")
raises(lambda: hmm.Context(store=123, store_size="16M"), errno.EINVAL,
       "store 123", "a store that is not a path")
raises(lambda: hmm.size_parse(True), errno.EINVAL, "True", "size_parse(True)")
raises(lambda: hmm.size_parse(2 ** 70), errno.ERANGE, str(2 ** 70),
       "size_parse past 2**64 - 1, as the str")
raises(lambda: hmm.size_parse("18446744073709551616"), errno.ERANGE,
       "18446744073709551616", "size_parse of that str")
ok(hmm.size_parse(2 ** 64 - 1) == 2 ** 64 - 1, "size_parse(2**64 - 1)")
with tap.context(host_budget="16M") as c:
    for dt in (None, "float", float, int, "x.int8", "torch.float32",
               torch.bool):
        raises(lambda: c.tensor("d", (2,), dt), errno.EINVAL, repr(dt),
               "dtype %r refused" % (dt,))
    import numpy
    ok(c.tensor("n16", (2,), numpy.float16).dtype == "float16" and
       c.tensor("nd", (2,), numpy.dtype("int8")).dtype == "int8",
       "numpy dtypes taken")
    t = c.tensor("w", (1000,), "float32")
    for what, fn, names in [
            ("map_ptr offset '0'", lambda: t.map_ptr("0", 10), "offset '0'"),
            ("map_ptr offset 1.0", lambda: t.map_ptr(1.0, 10), "offset 1.0"),
            ("map_ptr offset None", lambda: t.map_ptr(None, 10),
             "offset None"),
            ("map_ptr offset -1", lambda: t.map_ptr(-1, 10), "offset -1"),
            ("map_ptr offset 2**64 + 400 (not 400)",
             lambda: t.map_ptr(2 ** 64 + 400, 4), "offset %d" % (2 ** 64 + 400)),
            ("map_ptr length -1", lambda: t.map_ptr(0, -1), "length -1"),
            ("map_ptr length True", lambda: t.map_ptr(0, True),
             "length True"),
            ("map_ptr access 'x'", lambda: t.map_ptr(0, 10, "host", "x"),
             "access 'x'"),
            ("prefetch offset '0'", lambda: t.prefetch("host", "0"),
             "offset '0'"),
            ("evict offset 1.5", lambda: t.evict("host", 1.5), "offset 1.5"),
            ("evict length -1", lambda: t.evict("host", 0, -1), "length -1"),
            ("writeback offset '0'", lambda: t.writeback("0"), "offset '0'"),
            ("writeback length -1", lambda: t.writeback(0, -1), "length -1"),
            ("unmap_ptr None", lambda: t.unmap_ptr(None), "address None"),
            ("wait('x')", lambda: c.wait("x"), "'x'"),
            ("map tier ['host']", lambda: t.map(["host"]).__enter__(),
             "['host']")]:
        raises(fn, errno.EINVAL, names, what)
    raises(lambda: t.map_ptr(-1, 10), errno.EINVAL, "w:", "naming the tensor")
    ok(t.residency()["host"] == 0, "none of them pinned or moved anything")
    b = c.tensor("b", (4,), "bfloat16")
    raises(lambda: b.map("host", "r", as_="numpy").__enter__(), errno.EINVAL,
           "bfloat16", "a numpy map of bfloat16 (numpy has none)")
    b.free()
    ok(True, "and it pinned nothing: free works")
    # a byte-swapped numpy dtype is not its name: libhmm's bytes (and a
    # numpy map's) are native (it was taken as float32)
    swapped = numpy.dtype("float32").newbyteorder()
    raises(lambda: c.tensor("sw", (2,), swapped), errno.EINVAL,
           swapped.str, "a byte-swapped numpy dtype refused")
    # a bool is not a dimension, as it is not an offset (True was 1)
    raises(lambda: c.tensor("tb", (True, 4)), errno.EINVAL, "True",
           "a bool in the shape refused")
    # a numpy map of "r" is read-only: "r" marks nothing dirty, so a
    # write through it was lost at the next eviction
    r = c.tensor("ro", (16,), "int32")
    with r.map("host", "w", as_="numpy") as a:
        a[:] = 5
    try:
        with r.map("host", "r", as_="numpy") as a:
            a[0] = 9
        ok(False, "a numpy map of 'r' refuses a write")
    except ValueError:
        ok(True, "a numpy map of 'r' refuses a write")
    r.evict("host")
    c.wait()
    with r.map("host", "rw", as_="numpy") as a:
        ok(a.flags.writeable and int(a[0]) == 5,
           "the bytes as written, and 'rw' is writable")
    r.free()
# a close() inside a numpy map's with: its end has nothing to unmap (it
# raised EBADF, hiding whatever ended the with)
c = tap.context(host_budget="16M")
t = c.tensor("nc", (8,), "int32")
try:
    with t.map("host", "rw", as_="numpy") as a:
        c.close()
    ok(True, "close() inside a numpy map's with: its end raises nothing")
except OSError as e:
    ok(False, "close() inside a numpy map's with: its end raised %r" % e)

# -- the context owns its tensors --------------------------------------------
def make(c, name, v):
    t = c.tensor(name, (256,), "int64")
    with t.map("host", "w", as_="numpy") as a:
        a[:] = v


with tap.context(host_budget="16M") as c:
    # shared mode: hmmd's count, with what other clients saved (flush)
    base = c.stats()["tensors"]
    make(c, "kept", 42)
    gc.collect()
    ok(c.stats()["tensors"] == base + 1,
       "a dropped Tensor object frees nothing")
    k = c.open_tensor("kept")
    with k.map("host", "r", as_="numpy") as a:
        ok(int(a.sum()) == 42 * 256, "open_tensor gives it back, its bytes")
    ok(c.open_tensor("kept") is k, "the same Tensor object while it lives")
    raises(lambda: c.tensor("kept", (4,)), errno.EEXIST, "kept",
           "a second tensor of a name the context holds")
    ok(c.open_tensor("kept").residency()["host"] > 0 and
       c.stats()["tensors"] == base + 1,
       "a temporary open_tensor frees nothing")
    k.free()
    ok(c.stats()["tensors"] == base, "free() frees it")
    if not tap.DAEMON:
        raises(lambda: c.open_tensor("kept"), errno.ENOENT, "kept",
               "a freed tensor is not open_tensor's any more")
        raises(k.residency, errno.EBADF, "kept", "nor its object's")

if not tap.DAEMON:
    # flush saves what the context holds, Tensor objects or not
    path = tap.scratch("own.store")
    with hmm.Context(store=path, store_size="32M", host_budget="8M") as c:
        make(c, "a", 7)
        c.flush()
    with hmm.Context(store=path, host_budget="8M", flags="store_keep") as c:
        ok(int(sum(c.open_tensor("a").residency().values())) >= 0,
           "reopened after its Tensor object went")
        raises(lambda: c.tensor("b", (2,)).free() or c.tensor("a", (2,)),
               errno.EEXIST, "a", "a new tensor of a name open here")
        c.flush()
    with hmm.Context(store=path, host_budget="8M", flags="store_keep") as c:
        raises(lambda: c.tensor("a", (2,)), errno.EEXIST, "saved by a flush",
               "a new tensor of a name saved in the store")
        with c.open_tensor("a").map("host", "r", as_="numpy") as a:
            ok(int(a.sum()) == 7 * 256, "a temporary open_tensor, a flush: "
               "the tensor is still saved, its bytes")

    # a store path as bytes or os.PathLike, not str(b"...")
    for kind, p in (("bytes", os.fsencode(tap.scratch("b.store"))),
                    ("PathLike", pathlib.Path(tap.scratch("p.store")))):
        with hmm.Context(store=p, store_size="16M", host_budget="8M"):
            ok(os.path.exists(os.fsdecode(p)), "store=%s: that file" % kind)

# -- ctx.chunk_bytes is the chunk in use (shared: hmmd's) -------------------
with tap.context(host_budget="16M", chunk_bytes="128K") as c:
    want = int(os.environ.get("HMM_TEST_DAEMON_CHUNK", 0)) or 128 << 10
    ok(c.chunk_bytes == want, "chunk_bytes %d: the context's (%d)"
       % (c.chunk_bytes, want))

# -- torch refusing an export (a device its build lacks) keeps no pin -------
import torch.utils.dlpack
c = tap.context(host_budget="16M")
t = c.tensor("refused", (1024,), "float32")
real = torch.utils.dlpack.from_dlpack


def refuse(cap):
    raise RuntimeError("refused by the test")


torch.utils.dlpack.from_dlpack = refuse
try:
    with t.map("host", "rw") as x:
        ok(False, "a map torch refuses yields nothing")
except RuntimeError as e:
    ok("refused by the test" in str(e), "torch's own error comes through")
finally:
    torch.utils.dlpack.from_dlpack = real
ok(c.stats()["host"]["pinned"] == 0, "and the export's pin is ended")
t.free()
ok(True, "so free works")
t.free()
ok(True, "and again does nothing (the context is open)")
c.close()
if not tap.DAEMON:
    spath = tap.scratch("store.%d" % tap._stores)
    with hmm.Context(store=spath, store_size="16M", host_budget="8M"):
        ok(True, "close() closed the store at once: it opens")

# -- close() with a torch map alive: the map keeps its memory ---------------
c = tap.context(host_budget="16M")
t = c.tensor("live", (1024,), "float32")
with t.map("host", "rw") as x:
    x.fill_(7)
c.close()
ok(float(x.sum()) == 7 * 1024, "a torch map outlives close(): its bytes")
x[3] = 1
ok(float(x[3]) == 1.0, "and it is writable")
raises(t.residency, errno.EBADF, "live", "its tensor after close")
raises(c.flush, errno.EBADF, "closed", "its context after close")
# free() too: "a Tensor of a closed context refuses every call" (before,
# it returned quietly); of a freed tensor of an open context it is a no-op
raises(t.free, errno.EBADF, "closed", "free() of its tensor after close")
if not tap.DAEMON:
    spath = tap.scratch("store.%d" % tap._stores)
    raises(lambda: hmm.Context(store=spath, store_size="16M"), errno.EBUSY,
           "in use", "the store stays open while the map lives")
del x
gc.collect()
if not tap.DAEMON:
    with hmm.Context(store=spath, store_size="16M", host_budget="8M"):
        ok(True, "the last reference gone: the store closed, it opens")
tap.done()
