#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""test_context — hmm.Context and hmm.Tensor: a config by name, bytes
through map() as torch (DLPack, zero-copy) and numpy, evict to the store
and back, write back and keep resident, flush and reopen, and every bad input an OSError with errno and
libhmm's detail.  Both modes (tap.py: HMM_TEST_DAEMON)."""
import errno
import gc

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
tap.done()
