# SPDX-License-Identifier: MIT
"""adamw — hmm.torch.AdamW: torch.optim.AdamW's math with its state in
hmm tensors, stepped by the bundled fused AdamW (libhk.so.0's
hk_offload_adamw_step, kernels/bind/hk_offload.h: prefetch k pieces
ahead, step one, write the last back).

The parameters are fp32, so the model's weights are the fp32 master (as
for torch.optim.AdamW): the step updates them in place, and reads the
gradient where autograd left it (hk_offload_adamw's param_host and
grad_host), with no copy of either.  Each parameter is cut in slices of
at most slice_bytes; a slice has two fp32 hmm tensors, m and v (in the
store, under the context's host budget), which the pipeline streams
chunk by chunk; the next slice's first m and v pieces are prefetched
before a slice's step.  (An earlier version also kept a master copy in
an hmm tensor and the gradient in another: two copies and a write of
4 bytes a parameter to the store each step, for bytes the model already
holds; measured at the default preset: the optimizer phase 0.65 s.)
AdamW is elementwise: the bits do not depend on the slicing, the host
budget or the pipeline depth.
"""
import ctypes
import errno
import itertools
import math

import torch

from .. import _lib
from .._lib import check

F32 = 0     # HK_ADAMW_F32
_serial = itertools.count()     # optimizers: their tensors' names


class _AdamwArgs(ctypes.Structure):     # struct hk_adamw_args
    _fields_ = [("n", ctypes.c_size_t), ("param", ctypes.c_void_p),
                ("param_bf16", ctypes.c_void_p), ("grad", ctypes.c_void_p),
                ("exp_avg", ctypes.c_void_p),
                ("exp_avg_sq", ctypes.c_void_p),
                ("grad_dtype", ctypes.c_int), ("state_dtype", ctypes.c_int),
                ("lr", ctypes.c_double), ("beta1", ctypes.c_double),
                ("beta2", ctypes.c_double), ("eps", ctypes.c_double),
                ("weight_decay", ctypes.c_double), ("step", ctypes.c_int64),
                ("grad_scale", ctypes.c_double), ("flags", ctypes.c_uint),
                ("found_inf", ctypes.c_int), ("name", ctypes.c_char_p)]


class _Offload(ctypes.Structure):       # struct hk_offload_adamw
    _fields_ = [("param", ctypes.c_void_p), ("param_bf16", ctypes.c_void_p),
                ("grad", ctypes.c_void_p), ("exp_avg", ctypes.c_void_p),
                ("exp_avg_sq", ctypes.c_void_p), ("hp", _AdamwArgs),
                ("chunk_bytes", ctypes.c_uint32), ("depth", ctypes.c_uint32),
                ("start", ctypes.c_uint64), ("done", ctypes.c_uint64),
                ("param_host", ctypes.c_void_p),
                ("grad_host", ctypes.c_void_p),
                ("host_n", ctypes.c_uint64)]


class _Slice:
    """Elements [lo, hi) of one parameter: its m and v."""

    def __init__(self, ctx, name, lo, hi):
        self.lo, self.hi, self.name = lo, hi, name
        n = hi - lo
        self.m = ctx.tensor(name + ".m", (n,))
        self.v = ctx.tensor(name + ".v", (n,))

    def put(self, t, src):
        """Copy the flat fp32 torch tensor src into hmm tensor t."""
        p = t.map_ptr(0, _lib.HMM_ALL, "host", "discard")
        ctypes.memmove(p, src.data_ptr(), src.numel() * 4)
        t.unmap_ptr(p)
        t.evict("host")

    def get(self, t, dst):
        p = t.map_ptr(0, _lib.HMM_ALL, "host", "r")
        ctypes.memmove(dst.data_ptr(), p, dst.numel() * 4)
        t.unmap_ptr(p)


class AdamW(torch.optim.Optimizer):
    """torch.optim.AdamW (decoupled weight decay; no amsgrad, no
    maximize) over fp32 CPU parameters (themselves the master weights,
    stepped in place; strided ones through a contiguous copy), m and v
    in hmm tensors of ctx.  depth: the pipeline's pieces read ahead, an
    int (0 = enough to fill the context's io_depth with reads, at least
    2); slice_bytes: the most of one parameter's m and v in one hmm
    tensor each, an int or a size string (default host_budget / 16, at
    most 16 MiB; at least one chunk).  A parameter that is not float32
    on cpu, a bad hyperparameter, depth or slice_bytes is
    OSError(EINVAL) naming it, here or in add_param_group (which then
    adds nothing).  overlap=True steps each
    parameter in the backward, as soon as its gradient is complete
    (a hook after autograd accumulates it), so that m and v stream
    while the backward computes, and prefetches the first pieces of the
    parameter that came next in the last backward; step() then steps
    only the parameters the backward did not (call it after each
    backward as usual).  That takes one backward per step: no gradient
    accumulation over backwards, no clipping by a global norm.
    state_dict() flushes the context (a checkpoint of m and v) and
    returns torch.optim.AdamW's format; load_state_dict() takes it.
    torch.optim.AdamW's other keywords are taken where they change
    nothing here: amsgrad, maximize, capturable and differentiable
    False, foreach and fused any value (the step is one fused kernel
    either way); amsgrad=True and the like are OSError(EINVAL)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=1e-2, amsgrad=False, *, ctx, depth=0,
                 slice_bytes=None, overlap=False, maximize=False,
                 foreach=None, capturable=False, differentiable=False,
                 fused=None):
        from ..context import Context
        if not isinstance(ctx, Context):
            raise OSError(errno.EINVAL, "hmm.torch.AdamW: ctx %r: not an "
                          "hmm.Context" % (ctx,))
        _check_amsgrad(dict(amsgrad=amsgrad, maximize=maximize,
                            capturable=capturable,
                            differentiable=differentiable))
        _check_hp(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        if isinstance(depth, bool) or not isinstance(depth, int) or \
                not 0 <= depth < 2**32:
            raise OSError(errno.EINVAL, "hmm.torch.AdamW: depth %r: not an "
                          "int in [0, 2**32)" % (depth,))
        cb = ctx.chunk_bytes
        if slice_bytes is None:
            sb = min(16 << 20, ctx.host_budget // 16)
        else:
            try:
                sb = _lib.size_parse(slice_bytes)
            except OSError as e:
                raise OSError(e.errno, "hmm.torch.AdamW: slice_bytes: %s"
                              % e.strerror) from None
            if not sb:
                raise OSError(errno.EINVAL, "hmm.torch.AdamW: slice_bytes "
                              "%r: zero" % (slice_bytes,))
        self._tag = "adamw%d" % next(_serial)   # unique in the context
        self._slices = {}
        self.ctx, self.depth = ctx, depth
        self.slice_elems = max(cb, sb // cb * cb) // 4
        self._overlap = overlap
        self._hooks = []        # handles and AccumulateGrad nodes
        _lib.hk()
        # add_param_group checks each group's parameters and makes their
        # m and v (and hooks)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay))
        self._stepped = set()   # stepped in this backward (overlap)
        self._order = []        # the order they were, last backward
        self._last = []
        self._ahead_list = []   # their slices, in that order
        self._done = 0          # slices stepped in this backward
        self._pf = 0            # _ahead_list[:_pf] prefetched
        self._pf_limit = ctx.host_budget // 8

    def add_param_group(self, param_group):
        """torch's, with this optimizer's checks first (nothing is added
        where one fails): every parameter float32 on cpu and the group's
        hyperparameters as the constructor's; its m and v are made."""
        if not isinstance(param_group, dict):
            raise OSError(errno.EINVAL, "hmm.torch.AdamW.add_param_group: "
                          "%r: not a dict" % (param_group,))
        ps = param_group.get("params")
        if isinstance(ps, set) or ps is None:
            return super().add_param_group(param_group)     # torch's error
        ps = [ps] if isinstance(ps, torch.Tensor) else list(ps)
        base = len(self._slices)
        for i, p in enumerate(ps):
            _check_param(p, "parameter %d" % (base + i))
        hp = dict(self.defaults)
        hp.update((k, v) for k, v in param_group.items() if k != "params")
        _check_amsgrad(hp)
        _check_hp(**{k: hp[k] for k in ("lr", "betas", "eps",
                                        "weight_decay") if k in hp})
        param_group = dict(param_group, params=ps)
        if "betas" in param_group:
            param_group["betas"] = tuple(param_group["betas"])
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        for p in group["params"]:
            self._init_param(len(self._slices), p)
            if self._overlap:
                self._hook(group, p)

    def _hook(self, group, p):
        """Call _ready(group, p) once autograd has accumulated p.grad."""
        if hasattr(p, "register_post_accumulate_grad_hook"):   # torch 2.1
            self._hooks.append(p.register_post_accumulate_grad_hook(
                lambda q, g=group: self._ready(g, q)))
            return
        # torch 1.13: a hook after p's AccumulateGrad node, which the
        # tensor holds weakly: keep it alive, or the hook goes with it
        acc = p.view_as(p).grad_fn.next_functions[0][0]
        self._hooks.append(acc)
        self._hooks.append(acc.register_hook(
            lambda *_, q=p, g=group: self._ready(g, q)))

    @torch.no_grad()
    def _ready(self, group, p):
        """overlap: step p in the backward, prefetching the first slice
        of the one that came after it in the last backward."""
        if p in self._stepped or p.grad is None:
            return
        # the slices of the last backward's order, read ahead up to an
        # eighth of the budget past the one stepped now
        k, sl = self._done, self._ahead_list
        self._pf = max(self._pf, k)
        while self._pf < len(sl) and self._pf_bytes(k) < self._pf_limit:
            self._prefetch(sl[self._pf], whole=True)
            self._pf += 1
        self._step_param(group, p, None, now=True)
        self._done += len(self._slices[p])
        self._stepped.add(p)
        self._order.append(p)

    def _pf_bytes(self, k):
        """Bytes of m and v read ahead past slice k of the order."""
        return sum(2 * s.m.nbytes for s in self._ahead_list[k:self._pf])

    def _prefetch(self, s, whole=False):
        """The first pieces of slice s's m and v (whole: all of them)."""
        ahead = s.m.nbytes if whole else min(2 * self.ctx.chunk_bytes,
                                            s.m.nbytes)
        s.m.prefetch("host", 0, ahead)
        s.v.prefetch("host", 0, ahead)

    def _step_slice_async(self, group, st, s, grad, flat, nxt):
        """overlap: the step of slice s in the backward, in one piece
        (the kernel is elementwise: the same bits as piece by piece),
        without waiting for its write-back: m and v are mapped whole
        (their reads prefetched when s was next), stepped by
        hk_adamw_step and evicted; a write-back's error surfaces at
        step()'s wait."""
        if nxt is not None:
            self._prefetch(nxt)
        n = s.hi - s.lo
        pm = s.m.map_ptr(0, _lib.HMM_ALL, "host", "rw")
        try:
            pv = s.v.map_ptr(0, _lib.HMM_ALL, "host", "rw")
            try:
                a = _AdamwArgs(n=n, param=flat.data_ptr() + 4 * s.lo,
                               grad=grad.data_ptr() + 4 * s.lo,
                               exp_avg=pm, exp_avg_sq=pv,
                               grad_dtype=F32, state_dtype=F32)
                name = s.name.encode()
                a.lr, a.eps = group["lr"], group["eps"]
                a.beta1, a.beta2 = group["betas"]
                a.weight_decay = group["weight_decay"]
                a.step, a.name = st["step"], name
                hk = _lib.hk()
                check(hk.hk_adamw_step(ctypes.byref(a)), "hmm.torch.AdamW",
                      hk.hk_adamw_error)
            finally:
                s.v.unmap_ptr(pv)
        finally:
            s.m.unmap_ptr(pm)
        s.m.evict("host")
        s.v.evict("host")

    def _step_param(self, group, p, after, now=False):
        """One step of p (all its slices); after: the slice to prefetch
        once the last is under way; now: without waiting for the
        write-backs (in the backward)."""
        if p.grad.is_sparse:
            raise OSError(errno.EINVAL, "hmm.torch.AdamW: sparse grads")
        _check_param(p, "a parameter")
        if p not in self._slices:           # put in a group by hand
            self._init_param(len(self._slices), p)
        st = self.state[p]
        st["step"] += 1
        grad = p.grad.detach().reshape(-1).contiguous()
        # strided weights (a transpose as a parameter) are stepped in a
        # contiguous copy, in their logical order, and copied back
        strided = not p.data.is_contiguous()
        data = p.data.contiguous() if strided else p.data
        flat = data.view(-1)
        sl = self._slices[p]
        for k, s in enumerate(sl):
            nxt = sl[k + 1] if k + 1 < len(sl) else after
            # whole m and v pinned: only where they take a quarter budget
            if now and 8 * s.m.nbytes <= self.ctx.host_budget:
                self._step_slice_async(group, st, s, grad, flat, nxt)
            else:
                self._step_slice(group, st, s, grad, flat, nxt)
        if strided:
            p.data.copy_(data)

    def _params(self):
        for g in self.param_groups:
            yield from g["params"]

    def _init_param(self, i, p):
        flat = p.detach().reshape(-1)
        sl = []
        for lo in range(0, flat.numel(), self.slice_elems):
            hi = min(lo + self.slice_elems, flat.numel())
            sl.append(_Slice(self.ctx, "%s.p%d.%d"
                             % (self._tag, i, lo // self.slice_elems),
                             lo, hi))
        self._slices[p] = sl
        self.state[p] = {"step": 0}

    def _step_slice(self, group, st, s, grad, flat, nxt):
        """The step of slice s: the weights flat and the gradient grad
        in place, m and v streamed."""
        ctx = self.ctx
        if nxt is not None:         # the next slice's first pieces
            self._prefetch(nxt)
        o = _Offload(exp_avg=s.m._handle(), exp_avg_sq=s.v._handle(),
                     chunk_bytes=ctx.chunk_bytes, depth=self.depth,
                     param_host=flat.data_ptr() + 4 * s.lo,
                     grad_host=grad.data_ptr() + 4 * s.lo,
                     host_n=s.hi - s.lo)
        name = s.name.encode()
        o.hp.lr, o.hp.eps = group["lr"], group["eps"]
        o.hp.beta1, o.hp.beta2 = group["betas"]
        o.hp.weight_decay = group["weight_decay"]
        o.hp.step, o.hp.name = st["step"], name
        hk = _lib.hk()
        r = hk.hk_offload_adamw_step(ctx._handle(), ctypes.byref(o))
        check(r, "hmm.torch.AdamW", hk.hk_offload_error)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        work = [(g, p) for g in self.param_groups for p in g["params"]
                if p.grad is not None and p not in self._stepped]
        for k, (g, p) in enumerate(work):
            nxt = work[k + 1][1] if k + 1 < len(work) else None
            self._step_param(g, p, self._slices[nxt][0]
                             if nxt in self._slices else None)
        if self._order:
            self._last = self._order
            self._ahead_list = [s for q in self._last
                                for s in self._slices[q]]
            self.ctx.wait()     # the write-backs of the backward's steps
        self._order, self._done, self._pf = [], 0, 0
        self._stepped = set()
        return loss

    def state_dict(self):
        """A checkpoint (hmm_flush), then torch.optim.AdamW's format."""
        self.ctx.flush()
        sd = super().state_dict()
        for i, p in enumerate(self._params()):
            st = {"step": torch.tensor(float(self.state[p]["step"]))}
            for key, attr in (("exp_avg", "m"), ("exp_avg_sq", "v")):
                t = torch.empty(p.numel(), dtype=torch.float32)
                for s in self._slices[p]:
                    s.get(getattr(s, attr), t[s.lo:s.hi])
                st[key] = t.view_as(p)
            sd["state"][i] = st
        return sd

    def load_state_dict(self, state_dict):
        """torch.optim.AdamW's format.  Checked before anything is
        loaded, each an OSError(EINVAL) naming it: a state's exp_avg or
        exp_avg_sq not a tensor of its parameter's size, its step not a
        whole number >= 0, a group's hyperparameters as the
        constructor's, amsgrad or maximize set (unsupported)."""
        ps = list(self._params())
        what = "hmm.torch.AdamW.load_state_dict: "
        for i, st in state_dict.get("state", {}).items():
            if not isinstance(i, int) or not 0 <= i < len(ps):
                continue        # torch's own load says
            for key in ("exp_avg", "exp_avg_sq"):
                if key not in st:
                    continue
                v = st[key]
                if not isinstance(v, torch.Tensor) or v.is_sparse or \
                        v.is_complex():
                    raise OSError(errno.EINVAL, what + "parameter %d: %s "
                                  "is %s, not a real dense tensor"
                                  % (i, key, type(v).__name__))
                if v.numel() != ps[i].numel():
                    raise OSError(errno.EINVAL, what + "parameter %d: %s "
                                  "of %d elements for a parameter of %d"
                                  % (i, key, v.numel(), ps[i].numel()))
            step = st.get("step", 0)
            try:
                f = float(step.item() if torch.is_tensor(step) else step)
                if isinstance(step, bool) or not f.is_integer() or f < 0:
                    raise ValueError
            except (TypeError, ValueError, RuntimeError):
                raise OSError(errno.EINVAL, what + "parameter %d: step %r: "
                              "not a whole number >= 0" % (i, step)) \
                    from None
        for g in state_dict.get("param_groups", ()):
            _check_amsgrad(g, what)
            _check_hp(**{k: g[k] for k in
                         ("lr", "betas", "eps", "weight_decay") if k in g})
        super().load_state_dict(state_dict)
        for p in self._params():
            st = self.state[p]
            step = st.get("step", 0)
            step = int(step.item() if torch.is_tensor(step) else step)
            for s in self._slices[p]:
                for key, attr in (("exp_avg", "m"), ("exp_avg_sq", "v")):
                    src = st[key].detach().reshape(-1).float().contiguous() \
                        if key in st else torch.zeros(p.numel())
                    s.put(getattr(s, attr), src[s.lo:s.hi].contiguous())
            self.state[p] = {"step": step}

    def __del__(self):
        """Its m and v go with it (the context would keep them: it owns
        what is not freed)."""
        for sl in getattr(self, "_slices", {}).values():
            for s in sl:
                for t in (s.m, s.v):
                    try:
                        t.free()
                    except OSError:
                        pass    # the context closed: freed with it


def _check_param(p, which):
    """A parameter this optimizer steps: a float32 tensor on cpu; else
    OSError(EINVAL) naming it (which: "parameter 3", "a parameter")."""
    if not isinstance(p, torch.Tensor) or p.dtype != torch.float32 or \
            p.device.type != "cpu":
        raise OSError(errno.EINVAL, "hmm.torch.AdamW: %s is %s on %s, not "
                      "float32 on cpu" % (which, getattr(p, "dtype", type(p)),
                                          getattr(p, "device", "-")))


def _check_amsgrad(group, what="hmm.torch.AdamW: "):
    """amsgrad, maximize, capturable and differentiable (torch.optim.
    AdamW's) are not supported: set, OSError(EINVAL) rather than a step
    without them."""
    for k in ("amsgrad", "maximize", "capturable", "differentiable"):
        if group.get(k):
            raise OSError(errno.EINVAL, "%s%s %r: not supported"
                          % (what, k, group[k]))


def _check_hp(lr=0.0, betas=(0.0, 0.0), eps=0.0, weight_decay=0.0):
    """The hyperparameters torch.optim.AdamW takes: finite, lr, eps and
    weight_decay >= 0, betas in [0, 1); else OSError(EINVAL) naming the
    first one that is not (NaN passes every < test: checked apart)."""
    try:
        b1, b2 = betas
    except (TypeError, ValueError):
        raise OSError(errno.EINVAL, "hmm.torch.AdamW: betas %r: not two "
                      "numbers" % (betas,)) from None
    for name, v, hi in (("lr", lr, math.inf), ("eps", eps, math.inf),
                        ("weight_decay", weight_decay, math.inf),
                        ("betas[0]", b1, 1), ("betas[1]", b2, 1)):
        try:
            f = float(v) if not isinstance(v, bool) else math.nan
        except (TypeError, ValueError):
            f = math.nan
        if not math.isfinite(f) or not 0 <= f < hi:
            raise OSError(errno.EINVAL, "hmm.torch.AdamW: %s %r: not a "
                          "finite number in [0, %s)" % (name, v, hi))
