#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""test_activations — hmm.torch.offload_activations on a small
transformer: gradients bit-identical with and without it, the saved
tensors really went to the store (stats), small ones stayed, and every
hmm tensor it made is freed once autograd is done; written back and kept
(the default) a budget that holds them reads nothing back, evicted
(writeback=False) it reads them back, and a budget under them drops and
reads some, the same bits every way.  Both modes."""
import errno
import gc

import tap
from tap import ok, diag, raises
import hmm.torch
import torch

torch.manual_seed(3)
D, T, B = 64, 32, 4
model = torch.nn.Sequential(
    torch.nn.Embedding(256, D),
    torch.nn.TransformerEncoderLayer(D, 4, 4 * D, dropout=0.0,
                                     batch_first=True),
    torch.nn.TransformerEncoderLayer(D, 4, 4 * D, dropout=0.0,
                                     batch_first=True),
    torch.nn.Linear(D, 256))
x = torch.randint(0, 256, (B, T))
y = torch.randint(0, 256, (B, T))


def grads(ctx=None, min_bytes=0, keep_bytes=0, writeback=True):
    model.zero_grad(set_to_none=True)
    off = None
    if ctx is None:
        out = model(x)
    else:
        with hmm.torch.offload_activations(ctx, min_bytes=min_bytes,
                                               keep_bytes=keep_bytes,
                                               writeback=writeback) as off:
            out = model(x)
    loss = torch.nn.functional.cross_entropy(out.reshape(-1, 256),
                                             y.reshape(-1))
    loss.backward()
    return loss.item(), [p.grad.clone() for p in model.parameters()], off


loss0, g0, _ = grads()
with tap.context(host_budget="8M", chunk_bytes="64K") as ctx:
    st0 = ctx.stats()
    loss1, g1, off = grads(ctx, min_bytes=16 << 10)
    gc.collect()
    st1 = ctx.stats()
    ok(loss1 == loss0, "the loss is bit-identical (%r)" % loss1)
    ok(all(torch.equal(a, b) for a, b in zip(g0, g1)),
       "every gradient is bit-identical with offload_activations")
    ok(off.packed_bytes >= 256 << 10, "%d saved tensors, %d bytes packed"
       % (len(off.order), off.packed_bytes))
    wrote = st1["store"]["bytes_in"] - st0["store"]["bytes_in"]
    ok(wrote >= off.packed_bytes, "the store took them: %d bytes written"
       % wrote)
    ok(st1["tensors"] == st0["tensors"], "every packed tensor freed after "
       "the backward (%d tensors, %d before)" % (st1["tensors"],
                                                st0["tensors"]))
    # written back and kept: a budget that holds them all reads nothing
    # back; evicted instead, every one comes back from the store; the
    # same bits either way
    for wbk in (True, False):
        st0 = ctx.stats()
        loss2, g2, off = grads(ctx, min_bytes=16 << 10, writeback=wbk)
        gc.collect()
        st1 = ctx.stats()
        wrote = st1["store"]["bytes_in"] - st0["store"]["bytes_in"]
        read = st1["store"]["bytes_out"] - st0["store"]["bytes_out"]
        ok(loss2 == loss0 and all(torch.equal(a, b) for a, b in
                                  zip(g0, g2)),
           "writeback=%s: loss and gradients bit-identical" % wbk)
        ok(wrote >= off.packed_bytes, "writeback=%s: the store took them "
           "(%d bytes)" % (wbk, wrote))
        if wbk:
            ok(read == 0, "kept resident: the backward read nothing "
               "back (%d bytes)" % read)
        else:
            ok(read >= off.packed_bytes // 2, "evicted: the backward "
               "read them back (%d of %d bytes)" % (read, off.packed_bytes))
    _, _, big = grads(ctx, min_bytes=1 << 30)
    ok(len(big.order) == 0, "nothing under min_bytes is packed")
    # a second backward over the same saved tensors (retain_graph)
    model.zero_grad(set_to_none=True)
    with hmm.torch.offload_activations(ctx, min_bytes=16 << 10):
        out = model(x)
    loss = torch.nn.functional.cross_entropy(out.reshape(-1, 256),
                                             y.reshape(-1))
    loss.backward(retain_graph=True)
    model.zero_grad(set_to_none=True)
    loss.backward()
    ok(all(torch.equal(a, p.grad) for a, p in zip(g0, model.parameters())),
       "a second backward (retain_graph) unpacks them again, same grads")
    del loss, out
    # one tensor's bytes saved twice (softmax's output, then a view of
    # it by matmul) are packed once; written in between, twice
    w = torch.nn.Parameter(torch.randn(64, 32))
    a = torch.randn(128, 256, requires_grad=True)
    n = a.numel() * 4
    with hmm.torch.offload_activations(ctx, min_bytes=0) as off:
        s = a.softmax(-1)
        out = (s.view(512, 64) @ w).sum()
    ok(len(off.order) == 2 and off.packed_bytes == n,
       "a saved tensor and its view share their bytes (%d saved, %d "
       "bytes packed of %d)" % (len(off.order), off.packed_bytes, n))
    out.backward()
    ga = a.grad.clone()
    a.grad = None
    (a.softmax(-1).view(512, 64) @ w).sum().backward()
    ok(torch.equal(ga, a.grad), "and the gradient through both is "
       "bit-identical")
    b = torch.randn(128, 256, requires_grad=True).clone()
    with hmm.torch.offload_activations(ctx, min_bytes=0) as off:
        c = b.sin()
        with torch.no_grad():
            b.add_(1)
        d = b.cos()
    ok(off.packed_bytes == 2 * n, "a tensor written between two saves "
       "is packed twice (%d bytes of %d)" % (off.packed_bytes, 2 * n))
    del c, d, out, s
    gc.collect()
    ok(ctx.stats()["tensors"] == st0["tensors"], "every segment freed "
       "(%d tensors)" % ctx.stats()["tensors"])
if not tap.DAEMON:
    # a budget of 8 chunks, less than the 15 the activations fill: the
    # budget drops written-back chunks and the backward reads them back
    with tap.context(host_budget="512K", chunk_bytes="64K") as ctx:
        st0 = ctx.stats()
        loss3, g3, off = grads(ctx, min_bytes=16 << 10)
        gc.collect()
        st1 = ctx.stats()
        read = st1["store"]["bytes_out"] - st0["store"]["bytes_out"]
        ok(loss3 == loss0 and all(torch.equal(a, b) for a, b in
                                  zip(g0, g3)),
           "a budget under the activations: bit-identical gradients")
        ok(0 < read, "dropped for room and read back (%d of %d bytes)"
           % (read, off.packed_bytes))
        ok(st1["host"]["peak"] <= 512 << 10, "the budget held (peak %d)"
           % st1["host"]["peak"])
# its sizes and context checked at the with, not in the forward
with tap.context(host_budget="16M") as ctx:
    for kw, name in ((dict(min_bytes=-1), "min_bytes: size -1"),
                     (dict(keep_bytes=-5), "keep_bytes: size -5"),
                     (dict(ahead_bytes=1.5), "ahead_bytes: size 1.5"),
                     (dict(min_bytes="1Q"), "min_bytes: size '1Q'")):
        raises(lambda: hmm.torch.offload_activations(ctx, **kw).__enter__(),
               errno.EINVAL, name, "offload_activations %s refused" % name)
    raises(lambda: hmm.torch.offload_activations(None).__enter__(),
           errno.EINVAL, "ctx None", "offload_activations(None)")
    x = torch.ones(64, 64, requires_grad=True)
    with hmm.torch.offload_activations(ctx, min_bytes="1K") as off:
        y = (x * 2).sin().sum()
    y.backward()
    ok(off.packed_bytes >= 64 * 64 * 4, "min_bytes as a size string (\"1K\")")
raises(lambda: hmm.torch.offload_activations(ctx).__enter__(),
       errno.EBADF, "closed", "offload_activations of a closed context "
       "(it was taken, to fail in the forward)")

# a tensor unpacked for the backward (here grad_fn._saved_result) may
# outlive close(), as a torch map does: it read freed memory (SIGSEGV)
ctx = tap.context(host_budget="16M", chunk_bytes="64K")
a = torch.randn(256, 256, requires_grad=True)
with hmm.torch.offload_activations(ctx, min_bytes=0):
    e = a.exp()
saved = e.grad_fn._saved_result
ctx.close()
gc.collect()
ok(torch.equal(saved, a.detach().exp()),
   "a saved tensor read after close(): its bytes")
saved.mul_(2)
ok(torch.equal(saved, 2 * a.detach().exp()), "and it is writable")
if not tap.DAEMON:
    spath = tap.scratch("store.%d" % tap._stores)
    raises(lambda: hmm.Context(store=spath, store_size="16M"), errno.EBUSY,
           "in use", "the store stays open while it lives")
del saved, e
gc.collect()
if not tap.DAEMON:
    with hmm.Context(store=spath, store_size="16M", host_budget="8M"):
        ok(True, "once it goes, the context is closed: the store opens")
tap.done()
