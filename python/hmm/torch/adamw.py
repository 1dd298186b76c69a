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

import torch

from .. import _lib
from .._lib import check

F32 = 0     # HK_ADAMW_F32


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
    stepped in place), m and v in hmm tensors of ctx.  depth: the
    pipeline's pieces read ahead (0 = 2); slice_bytes: the most of one
    parameter's m and v in one hmm tensor each (default host_budget / 16,
    at least one chunk, at most 16 MiB).  state_dict() flushes the
    context (a checkpoint of m and v) and returns torch.optim.AdamW's
    format; load_state_dict() takes it."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=1e-2, *, ctx, depth=0, slice_bytes=None):
        if lr < 0 or eps < 0 or weight_decay < 0 or \
           not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError("hmm.torch.AdamW: lr %r, betas %r, eps %r, "
                             "weight_decay %r out of range"
                             % (lr, betas, eps, weight_decay))
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay))
        self.ctx, self.depth = ctx, depth
        cb = ctx.chunk_bytes
        sb = slice_bytes or min(16 << 20, ctx.host_budget // 16)
        self.slice_elems = max(cb, sb // cb * cb) // 4
        self._slices = {}
        self._names = []        # keeps the C name strings alive
        _lib.hk()
        for i, p in enumerate(self._params()):
            if p.dtype != torch.float32 or p.device.type != "cpu":
                raise OSError(errno.EINVAL, "hmm.torch.AdamW: parameter %d "
                              "is %s on %s, not float32 on cpu"
                              % (i, p.dtype, p.device))
            self._init_param(i, p)

    def _params(self):
        for g in self.param_groups:
            yield from g["params"]

    def _init_param(self, i, p):
        flat = p.detach().reshape(-1)
        sl = []
        for lo in range(0, flat.numel(), self.slice_elems):
            hi = min(lo + self.slice_elems, flat.numel())
            sl.append(_Slice(self.ctx, "adamw.p%d.%d"
                             % (i, lo // self.slice_elems), lo, hi))
        self._slices[p] = sl
        self.state[p] = {"step": 0}

    def _step_slice(self, group, st, s, grad, flat, nxt):
        """The step of slice s: the weights flat and the gradient grad
        in place, m and v streamed."""
        ctx = self.ctx
        if nxt is not None:         # the next slice's first pieces
            ahead = min(2 * ctx.chunk_bytes, nxt.m.nbytes)
            nxt.m.prefetch("host", 0, ahead)
            nxt.v.prefetch("host", 0, ahead)
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
                if p.grad is not None]
        for g, p in work:
            if p.grad.is_sparse:
                raise OSError(errno.EINVAL, "hmm.torch.AdamW: sparse grads")
            if p not in self._slices:       # a group added since
                self._init_param(len(self._slices), p)
            self.state[p]["step"] += 1
        flat_slices = [(g, p, s) for g, p in work for s in self._slices[p]]
        grads = {p: p.grad.detach().reshape(-1).contiguous()
                 for _, p in work}
        for k, (g, p, s) in enumerate(flat_slices):
            nxt = flat_slices[k + 1][2] if k + 1 < len(flat_slices) else None
            if not p.data.is_contiguous():
                raise OSError(errno.EINVAL, "hmm.torch.AdamW: a parameter "
                              "of shape %s is not contiguous"
                              % (tuple(p.shape),))
            flat = p.data.view(-1)
            self._step_slice(g, self.state[p], s, grads[p], flat, nxt)
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
