#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""test_adamw — hmm.torch.AdamW: the same steps as torch.optim.AdamW on
the same gradients (a few fp32 ulps apart: FMA and one rounding of the
per-step constants), bit-identical between a host budget of a few chunks
and one that holds everything, its state really in the store, and
state_dict / load_state_dict continuing a run exactly.  Both modes."""
import errno

import tap
from tap import ok, raises, diag
import hmm._lib
import hmm.torch
import torch

HP = dict(lr=3e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.05)
SHAPES = [(300, 257), (257,), (64, 1000), (7,)]   # 2 slices, odd sizes


def params():
    g = torch.Generator().manual_seed(1)
    return [torch.nn.Parameter(torch.randn(s, generator=g)) for s in SHAPES]


def grads(step):
    g = torch.Generator().manual_seed(100 + step)
    return [torch.randn(s, generator=g) * (0.1 + step) for s in SHAPES]


def run(make, steps, ps=None):
    ps = ps or params()
    opt = make(ps)
    for k in range(steps):
        for p, g in zip(ps, grads(k)):
            p.grad = g
        opt.step()
    return ps, opt


def ulps(a, b, lr=HP["lr"]):
    """Largest |a - b| in ulps of the larger of |a|, |b| and lr (the
    update's own scale: a weight that crosses zero keeps lr's rounding)."""
    m = torch.maximum(a.abs(), b.abs()).clamp(min=lr)
    ulp = torch.pow(2.0, torch.floor(torch.log2(m)) - 23)
    return ((a - b).abs() / ulp).max().item()


STEPS = 5
with tap.context(host_budget="512K", chunk_bytes="64K",
                 store_size="64M") as small:
    # each step's roundings differ by a few ulps (FMA, the constants
    # rounded once): bound them per step taken
    for steps in (1, STEPS):
        ref, _ = run(lambda ps: torch.optim.AdamW(ps, **HP), steps)
        got, _ = run(lambda ps: hmm.torch.AdamW(
            ps, ctx=small, slice_bytes=128 << 10, **HP), steps)
        worst = max(ulps(a.detach(), b.detach()) for a, b in zip(ref, got))
        ok(worst <= 4 * steps, "%d steps: within %g ulps of "
           "torch.optim.AdamW (bound %d)" % (steps, worst, 4 * steps))
    st = small.stats()
    state = sum(p.numel() for p in got) * 12
    ok(st["store"]["bytes_in"] >= state,
       "the state went through the store (%d bytes written, state %d)"
       % (st["store"]["bytes_in"], state))
    if not tap.DAEMON:      # shared: hmmd's peak, of every client
        ok(st["host"]["peak"] <= 512 << 10, "host peak %d within the "
           "512 KiB budget" % st["host"]["peak"])

    # checkpoint after 3 steps, continue in a new optimizer: same bits
    half, hopt3 = run(lambda ps: hmm.torch.AdamW(ps, ctx=small, **HP), 3)
    sd = hopt3.state_dict()
    ok(int(sd["state"][0]["step"]) == 3 and
       sd["state"][2]["exp_avg"].shape == SHAPES[2],
       "state_dict is torch.optim.AdamW's format")
    tcheck = torch.optim.AdamW(params(), **HP)
    tcheck.load_state_dict(sd)
    ok(True, "torch.optim.AdamW loads it")

with tap.context(host_budget="64M", store_size="128M") as big:
    rest = hmm.torch.AdamW(half, ctx=big, **HP)
    rest.load_state_dict(sd)
    for k in range(3, STEPS):
        for p, g in zip(half, grads(k)):
            p.grad = g
        rest.step()
    ok(all(torch.equal(a, b) for a, b in zip(got, half)),
       "3 steps, state_dict, load_state_dict, 2 steps: bit-identical to 5")
    big_ps, _ = run(lambda ps: hmm.torch.AdamW(ps, ctx=big, **HP), STEPS)
    ok(all(torch.equal(a, b) for a, b in zip(got, big_ps)),
       "bit-identical between a 512 KiB and a 64 MiB host budget")
    # weights the caller changes between steps are what the next steps
    pt, ot = run(lambda ps: torch.optim.AdamW(ps, **HP), 2)
    ph, oh = run(lambda ps: hmm.torch.AdamW(ps, ctx=big, **HP), 2)
    for ps, o in ((pt, ot), (ph, oh)):
        with torch.no_grad():
            for p, g in zip(ps, grads(2)):
                p.mul_(0.5)
                p.grad = g
        o.step()
    worst = max(ulps(a.detach(), b.detach()) for a, b in zip(pt, ph))
    ok(worst <= 12, "weights changed between steps are stepped as "
       "torch.optim.AdamW steps them (%g ulps)" % worst)

    # a parameter group added after construction gets its state then
    extra = [torch.nn.Parameter(torch.linspace(-1, 1, 1000))
             for _ in range(2)]
    topt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], **HP)
    opt = hmm.torch.AdamW([torch.nn.Parameter(torch.zeros(1))], ctx=big,
                          **HP)
    for o, e in ((topt, extra[0]), (opt, extra[1])):
        o.add_param_group({"params": [e], "lr": 0.1})
        e.grad = torch.linspace(1, 2, 1000)
        o.step()
    ok(ulps(extra[0].detach(), extra[1].detach(), 0.1) <= 4 and
       not torch.equal(extra[1].detach(), torch.linspace(-1, 1, 1000)),
       "add_param_group: the new group is stepped with its own lr")
    raises(lambda: hmm.torch.AdamW([torch.nn.Parameter(
        torch.zeros(4, dtype=torch.float64))], ctx=big), errno.EINVAL,
        "float64", "a float64 parameter")
    for kw, name in ((dict(lr=-1), "lr -1"),
                     (dict(lr=float("nan")), "lr nan"),
                     (dict(lr=float("inf")), "lr inf"),
                     (dict(eps=float("nan")), "eps nan"),
                     (dict(weight_decay=float("inf")), "weight_decay inf"),
                     (dict(betas=(float("nan"), 0.9)), "betas[0] nan"),
                     (dict(betas=(0.9, 1.0)), "betas[1] 1.0")):
        raises(lambda: hmm.torch.AdamW(params(), ctx=big, **kw),
               errno.EINVAL, name, "hyperparameter %s refused" % name)
    raises(lambda: hmm.torch.AdamW(params(), ctx=None), errno.EINVAL,
           "ctx None", "ctx=None")
    # torch.optim.AdamW's other keywords: taken at values that change
    # nothing (amsgrad=False was a TypeError), refused where they would
    rest = dict(maximize=False, foreach=None, fused=None, capturable=False,
                differentiable=False)
    ta, _ = run(lambda ps: hmm.torch.AdamW(
        ps, HP["lr"], HP["betas"], HP["eps"], HP["weight_decay"], False,
        ctx=big, **rest), 2)
    tb, _ = run(lambda ps: hmm.torch.AdamW(ps, ctx=big, **HP), 2)
    ok(all(torch.equal(x, y) for x, y in zip(ta, tb)),
       "torch.optim.AdamW's keywords at their defaults (amsgrad "
       "positional too): the same bits")
    for k in ("amsgrad", "maximize", "capturable", "differentiable"):
        raises(lambda: hmm.torch.AdamW(params(), ctx=big, **{k: True}),
               errno.EINVAL, "%s True: not supported" % k,
               "%s=True refused" % k)
    # a state of another size than its parameter: refused, nothing loaded
    p5 = torch.nn.Parameter(torch.zeros(5))
    o5 = hmm.torch.AdamW([p5], ctx=big, **HP)
    p6 = torch.nn.Parameter(torch.zeros(6))
    t6 = torch.optim.AdamW([p6], **HP)
    p6.grad = torch.ones(6)
    t6.step()
    raises(lambda: o5.load_state_dict(t6.state_dict()), errno.EINVAL,
           "parameter 0: exp_avg of 6 elements for a parameter of 5",
           "load_state_dict of a 6-element state into 5")
    ok(o5.state[p5]["step"] == 0, "and nothing was loaded")
    # add_param_group checks as the constructor does, adding nothing on
    # a refusal (a float64 parameter was taken and stepped as fp32
    # bytes: half its elements changed, garbage)
    ng = len(opt.param_groups)
    d64 = torch.nn.Parameter(torch.ones(4, dtype=torch.float64))
    raises(lambda: opt.add_param_group({"params": [d64]}), errno.EINVAL,
           "float64", "add_param_group of a float64 parameter")
    raises(lambda: opt.add_param_group({"params": [torch.nn.Parameter(
        torch.ones(4))], "lr": float("nan")}), errno.EINVAL, "lr nan",
        "add_param_group with lr nan")
    raises(lambda: opt.add_param_group({"params": [torch.nn.Parameter(
        torch.ones(4))], "betas": (2, 3)}), errno.EINVAL, "betas[0] 2",
        "add_param_group with betas (2, 3)")
    ok(len(opt.param_groups) == ng, "and none of them was added")
    # depth and slice_bytes checked here (depth -1 wrapped to 2**32 - 1,
    # "2" and "1M" were a TypeError in the first step)
    for kw, name in ((dict(depth=-1), "depth -1"), (dict(depth="2"),
                                                    "depth '2'"),
                     (dict(depth=2 ** 32), "depth %d" % 2 ** 32),
                     (dict(slice_bytes=-5), "slice_bytes: size -5"),
                     (dict(slice_bytes=1.5e6), "slice_bytes: size 1500000.0"),
                     (dict(slice_bytes=0), "slice_bytes 0")):
        raises(lambda: hmm.torch.AdamW(params(), ctx=big, **kw),
               errno.EINVAL, name, "%s refused" % name)
    sb, _ = run(lambda ps: hmm.torch.AdamW(ps, ctx=big, slice_bytes="64K",
                                           **HP), 2)
    ref2, _ = run(lambda ps: hmm.torch.AdamW(ps, ctx=big, **HP), 2)
    ok(all(torch.equal(x, y) for x, y in zip(sb, ref2)),
       "slice_bytes as a size string (\"64K\"): the same bits")
    # a strided parameter (a transpose) is stepped as torch steps it (it
    # was EINVAL in step(), after the parameters before it were stepped)
    def strided():
        g = torch.Generator().manual_seed(7)
        return [torch.nn.Parameter(torch.randn(40, 30, generator=g).t())]
    pt, ph = strided(), strided()
    to, ho = torch.optim.AdamW(pt, **HP), hmm.torch.AdamW(ph, ctx=big, **HP)
    for k in range(3):
        for ps in (pt, ph):
            ps[0].grad = torch.linspace(-1, 1 + k, 1200).view(30, 40)
        to.step()
        ho.step()
    worst = ulps(pt[0].detach(), ph[0].detach())
    ok(not ph[0].is_contiguous() and worst <= 12, "a transposed parameter "
       "is stepped as torch.optim.AdamW steps it (%g ulps)" % worst)
    sdt = ho.state_dict()
    ok(sdt["state"][0]["exp_avg"].shape == (30, 40) and torch.allclose(
        sdt["state"][0]["exp_avg"], to.state[pt[0]]["exp_avg"]),
        "and its exp_avg in state_dict is torch's")
    # load_state_dict checks everything first, loading nothing on a
    # refusal (a NaN step was a ValueError after the groups and states
    # were replaced; amsgrad or maximize were taken and ignored)
    ok(ho.state[ph[0]]["step"] == 3, "3 steps")
    for mut, name in (
            (lambda d: d["state"][0].update(step=torch.tensor(float("nan"))),
             "step tensor(nan)"),
            (lambda d: d["state"][0].update(step=-2), "step -2"),
            (lambda d: d["state"][0].update(exp_avg=[0.0] * 1200),
             "exp_avg is list"),
            (lambda d: d["param_groups"][0].update(amsgrad=True),
             "amsgrad True"),
            (lambda d: d["param_groups"][0].update(maximize=True),
             "maximize True")):
        bad = ho.state_dict()
        mut(bad)
        raises(lambda: ho.load_state_dict(bad), errno.EINVAL, name,
               "load_state_dict with %s refused" % name)
    ok(ho.state[ph[0]] == {"step": 3} and "amsgrad" not in
       ho.param_groups[0], "and nothing was loaded")
    ho.load_state_dict(sdt)
    for ps in (pt, ph):
        ps[0].grad = torch.ones(30, 40)
    to.step()
    ho.step()
    ok(ulps(pt[0].detach(), ph[0].detach()) <= 16,
       "a good state_dict then loads and steps on")
    # the kernels' own calls (their restypes were once a Python function)
    hk = hmm._lib.hk()
    ok(isinstance(hk.hk_adamw_isa(), bytes) and hk.hk_adamw_isa(),
       "hk_adamw_isa() names the kernel's ISA (%r)" % hk.hk_adamw_isa())
    ok(hk.hk_adamw_error() is None or isinstance(hk.hk_adamw_error(), bytes),
       "hk_adamw_error() is a C string")
    # an optimizer's m and v go with it (the context would keep them)
    before = big.stats()["tensors"]
    o5 = None
    ok(big.stats()["tensors"] == before - 2, "a dropped optimizer frees its "
       "m and v")
# overlap=True: each parameter stepped in the backward, as soon as its
# gradient is complete (the tied weight once, after both uses): the same
# bits as stepping after it, and step() steps nothing twice
def overlap_run(ctx, overlap, steps=4):
    torch.manual_seed(5)
    emb = torch.nn.Embedding(64, 48)
    mlp = torch.nn.Sequential(torch.nn.Linear(48, 96), torch.nn.GELU(),
                              torch.nn.Linear(96, 48))
    ps = list(emb.parameters()) + list(mlp.parameters())
    opt = hmm.torch.AdamW(ps, ctx=ctx, overlap=overlap, **HP)
    x = torch.randint(0, 64, (8, 16))
    for _ in range(steps):
        opt.zero_grad(set_to_none=False)
        h = mlp(emb(x))
        (h @ emb.weight.t()).square().mean().backward()    # tied
        opt.step()
    return [p.detach().clone() for p in ps], opt


with tap.context(host_budget="1M", chunk_bytes="64K",
                 store_size="64M") as c:
    a, _ = overlap_run(c, False)
    b, ob = overlap_run(c, True)
    ok(all(torch.equal(x, y) for x, y in zip(a, b)),
       "overlap=True: bit-identical weights after 4 steps")
    ok(all(ob.state[p]["step"] == 4 for g in ob.param_groups
           for p in g["params"]), "each parameter stepped once a step")
    ok(len(ob._last) == sum(len(g["params"]) for g in ob.param_groups),
       "every parameter was stepped in the backward (%d)" % len(ob._last))

# shared mode: slices sized by hmmd's chunk (64 KiB there), not the
# client's default 2 MiB, which a 1 MiB quota could never hold
with tap.context(host_budget="1M", store_size="64M",
                 chunk_bytes="64K" if not tap.DAEMON else None) as c:
    lin = torch.nn.Linear(512, 512)
    o = hmm.torch.AdamW(lin.parameters(), ctx=c)
    lin(torch.ones(2, 512)).sum().backward()
    try:
        o.step()
        ok(True, "a step in a 1 MiB budget (chunk %d)" % c.chunk_bytes)
    except OSError as e:
        ok(False, "a step in a 1 MiB budget: %s" % e)
tap.done()
