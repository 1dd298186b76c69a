# SPDX-License-Identifier: MIT
"""python3 -m hmm.bench — a GPT the shape of hmm-train's default preset
(vocab 256, 128 tokens, width 384, 6 heads, 6 layers, batch 4: 10.8 M
parameters) trained in PyTorch on the CPU three ways, each in its own
process so that each peak RSS is its own:

  inmem      torch.optim.AdamW, everything in memory;
  hmm        hmm.torch.AdamW (overlap=True: each parameter stepped in
             the backward; --no-overlap: after it) +
             hmm.torch.offload_activations, the host
             budget a quarter of the training state (weights, grads, m
             and v: 16 bytes a parameter), master, m, v and activations in
             a store file under --dir (2 MiB chunks: huge pages);
  deepspeed  where `import deepspeed` works (scripts/peers.sh makes a venv
             with it; CI does not), DeepSpeed's ZeRO-Offload of the
             optimizer to NVMe with DeepSpeedCPUAdam; else null.

Prints one JSON object: tok_s_inmem, tok_s_hmm, tok_s_deepspeed (null
when absent), ratio_hmm_over_inmem, ratio_hmm_over_deepspeed (target
1.2), threads (torch's and the kernels', the same in every way; the
children get OMP_WAIT_POLICY=passive unless it is set), torch (its
version), peak_rss_inmem, peak_rss_hmm,
state_bytes, host_budget, and what the hmm run moved (activation_bytes a
step, store_bytes_written in all its steps), phases_s (forward, backward,
optimizer) and cpu_s (the process's CPU time) a timed step per way, the
hmm run's stall_s_hmm (a step's maps waiting for the host tier) and
store_io_s_hmm (a step's time the store was busy), and the losses of
each way.  With --reps N the ways run N times interleaved (every other
repetition in reverse order); every figure is then the median of the
repetitions', the ratios' ranges and each repetition's figures come
under ratio_*_range and per_rep.  loadavg (at the start and the end),
cpu_stall and io_stall (the share of the run in which some task waited
for a CPU, for I/O: /proc/pressure) say how busy the machine was.  A
benchmark, not a test: the first step is a warm-up, the rest are timed.

Scratch: a folder hmm-bench.XXXXXXXX made in --dir, else in $TMPDIR
(else /tmp), holds the store; a --dir or $TMPDIR that is missing, not a
folder or not writable is refused (exit 2, naming it), never swapped
for another.  The folder is removed on every exit: SIGINT, SIGTERM and
SIGHUP stop the running way's process group (SIGTERM, then SIGKILL
after 5 s), remove it, say so and exit 128 + the signal (a signal that
was ignored at start, as under nohup, stays ignored).  A SIGKILL of the
parent leaves the folder (its store is unlinked once open) for the
caller to remove; the running way gets SIGTERM (PR_SET_PDEATHSIG).
"""
import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

PRESET = dict(vocab=256, ctx=128, d=384, heads=6, layers=6, batch=4)


def peak_rss():
    """This process's peak resident set (VmHWM), bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def gpt(torch, c):
    """The preset's GPT: pre-norm blocks, causal attention, GELU MLP,
    the head tied to the token embedding."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            d = c["d"]
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            B, T, D = x.shape
            h = c["heads"]
            q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
            q, k, v = (t.view(B, T, h, D // h).transpose(1, 2)
                       for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(D // h)
            mask = torch.ones(T, T, dtype=torch.bool).triu(1)
            att = att.masked_fill(mask, float("-inf")).softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, D)
            x = x + self.proj(y)
            return x + self.out(nn.functional.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(c["vocab"], c["d"])
            self.pos = nn.Parameter(torch.randn(c["ctx"], c["d"]) * 0.02)
            self.blocks = nn.ModuleList(Block() for _ in range(c["layers"]))
            self.ln = nn.LayerNorm(c["d"])

        def forward(self, idx):
            x = self.tok(idx) + self.pos[:idx.shape[1]]
            for b in self.blocks:
                x = b(x)
            return self.ln(x) @ self.tok.weight.t()

    m = GPT()
    for name, p in m.named_parameters():    # GPT-2's initialisation
        if p.dim() == 2:
            torch.nn.init.normal_(p, 0.0, 0.02)
    return m


def die_with_parent():
    """The child: SIGTERM when the parent dies, SIGKILL included (Linux's
    PR_SET_PDEATHSIG), so that no run outlives it."""
    parent = os.environ.get("HMM_BENCH_PARENT")
    if not parent:
        return                  # run by hand
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if str(os.getppid()) != parent:
        os.kill(os.getpid(), signal.SIGTERM)    # gone before the prctl


def one_way(a):
    """The child: train --steps steps one way, print its JSON line."""
    import torch

    die_with_parent()

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    c = PRESET
    model = gpt(torch, c)
    n = sum(p.numel() for p in model.parameters())
    state = 16 * n
    budget = int(state * a.budget_frac) // (64 << 10) * (64 << 10)
    g = torch.Generator().manual_seed(2)
    data = torch.randint(0, c["vocab"], (a.steps, c["batch"], c["ctx"] + 1),
                         generator=g)
    res = dict(way=a.way, params=n, state_bytes=state, torch=torch.__version__)
    ctx = None
    hooks = contextlib.nullcontext
    if a.way == "inmem":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    elif a.way == "hmm":
        import hmm
        import hmm.torch
        store = os.path.join(a.dir, "bench.%d.store" % os.getpid())
        try:
            ctx = hmm.Context(store=store, store_size=str(4 * state),
                              host_budget=budget, chunk_bytes="2M")
        finally:
            # open: it lives on until the close; a failed open may have
            # made none, and its error is the one to show
            with contextlib.suppress(FileNotFoundError):
                os.unlink(store)
        opt = hmm.torch.AdamW(model.parameters(), lr=1e-3, ctx=ctx,
                              overlap=a.overlap)
        hooks = lambda: hmm.torch.offload_activations(  # noqa: E731
            ctx, min_bytes=a.min_bytes)
        res["host_budget"] = budget
    else:
        opt, model = deepspeed_engine(a, model, budget)
        if opt is None:
            print(json.dumps(dict(res, tok_s=None, error=model)))
            return
        torch.set_num_threads(a.threads)    # as the others, whatever
        res["host_budget"] = budget         # deepspeed set
    losses, t0, packed = [], None, 0
    phase = [0.0, 0.0, 0.0]     # forward, backward, optimizer (timed steps)
    for s in range(a.steps):
        if s == 1:
            t0, c0 = time.perf_counter(), time.process_time()
            st0 = ctx.stats() if ctx is not None else None
            phase = [0.0, 0.0, 0.0]
        x, y = data[s, :, :-1], data[s, :, 1:]
        t = [time.perf_counter()]
        with hooks() as off:
            logits = model(x)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, c["vocab"]), y.reshape(-1))
        t.append(time.perf_counter())
        if a.way == "deepspeed":
            model.backward(loss)
            t.append(time.perf_counter())
            model.step()
        else:
            opt.zero_grad(set_to_none=False)
            loss.backward()
            t.append(time.perf_counter())
            opt.step()
        t.append(time.perf_counter())
        for i in range(3):
            phase[i] += t[i + 1] - t[i]
        if off is not None:
            packed = off.packed_bytes
        del logits, off
        losses.append(loss.item())
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    res.update(threads=torch.get_num_threads(),
               tok_s=(a.steps - 1) * c["batch"] * c["ctx"] / dt,
               step_s=dt / (a.steps - 1), cpu_s=cpu / (a.steps - 1),
               losses=losses,
               fwd_s=phase[0] / (a.steps - 1), bwd_s=phase[1] / (a.steps - 1),
               opt_s=phase[2] / (a.steps - 1),
               peak_rss=peak_rss())
    if ctx is not None:
        st = ctx.stats()
        res.update(activation_bytes=packed,
                   store_bytes_written=st["store"]["bytes_in"],
                   store_bytes_read=st["store"]["bytes_out"],
                   host_peak=st["host"]["peak"],
                   # a timed step's waits of maps for the host tier and
                   # time the store was busy
                   stall_s=(st["host"]["stall_s"] - st0["host"]["stall_s"])
                   / (a.steps - 1),
                   store_io_s=(st["store"]["io_s"] - st0["store"]["io_s"])
                   / (a.steps - 1))
        del opt
        ctx.close()
    print(json.dumps(res))


def deepspeed_engine(a, model, budget):
    """DeepSpeed's ZeRO-Offload with the optimizer state swapped to NVMe
    (DeepSpeedCPUAdam), or (None, why) when it cannot run here."""
    # one process, no launcher: a world of one over gloo, on the CPU
    for k, v in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"),
                 ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29533"),
                 ("DS_ACCELERATOR", "cpu")):
        os.environ.setdefault(k, v)
    try:
        import deepspeed
    except ImportError as e:
        return None, "deepspeed not importable: %s" % e
    try:
        deepspeed.init_distributed(dist_backend="gloo")
    except Exception as e:  # noqa: BLE001 -- reported as null
        return None, "deepspeed.init_distributed: %s" % e
    conf = {
        "train_micro_batch_size_per_gpu": PRESET["batch"],
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
        "zero_optimization": {
            "stage": 3,
            "offload_optimizer": {"device": "nvme", "nvme_path": a.dir,
                                  "pin_memory": False},
            "offload_param": {"device": "cpu"},
        },
        "aio": {"block_size": 1 << 20, "queue_depth": 8},
    }
    try:
        engine, opt, _, _ = deepspeed.initialize(
            model=model, model_parameters=model.parameters(), config=conf)
    except Exception as e:  # noqa: BLE001 -- any failure: reported as null
        return None, "deepspeed.initialize: %s" % e
    return opt, engine


WAYS = ("inmem", "hmm", "deepspeed")


def _size(s):
    """--min-bytes: an int or a size string, as hmm.size_parse reads."""
    from ._lib import size_parse
    try:
        return int(s)           # a negative one is refused by name below
    except ValueError:
        pass
    try:
        return size_parse(s)
    except OSError as e:
        raise argparse.ArgumentTypeError(e.strerror) from None


def main():
    ap = argparse.ArgumentParser(prog="python3 -m hmm.bench",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=6,
                    help="steps per way, the first untimed (default 6)")
    ap.add_argument("--budget-frac", type=float, default=0.25,
                    help="hmm's host budget over the state (default 0.25)")
    ap.add_argument("--min-bytes", type=_size, default=64 << 10,
                    help="smallest activation offloaded, bytes or a size "
                    "(64K, 1M; default 64K)")
    ap.add_argument("--no-overlap", dest="overlap", action="store_false",
                    help="hmm's AdamW steps after the backward, not in it")
    ap.add_argument("--dir", default=None,
                    help="where the scratch folder with the store goes "
                    "(default $TMPDIR, else /tmp; removed at exit)")
    ap.add_argument("--threads", type=int,     # a str default: type reads it
                    default=os.environ.get("HK_THREADS", "2"),
                    help="torch's and the kernels' threads in every way "
                    "(default $HK_THREADS, else 2)")
    ap.add_argument("--ways", default="inmem,hmm,deepspeed")
    ap.add_argument("--reps", type=int, default=1,
                    help="repetitions, the ways interleaved (every other "
                    "rep in reverse); the figures are their medians "
                    "(default 1)")
    ap.add_argument("--way", choices=WAYS, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.steps < 2:
        ap.error("--steps: at least 2 (one warm-up, one timed)")
    if a.reps < 1:
        ap.error("--reps: at least 1")
    if not 0 < a.budget_frac < math.inf:
        ap.error("--budget-frac %r: must be above 0 and finite"
                 % a.budget_frac)
    if a.min_bytes < 0:
        ap.error("--min-bytes %d: negative" % a.min_bytes)
    if a.threads < 1:
        ap.error("--threads %d: at least 1" % a.threads)
    base, what = scratch_base(a)
    if not os.path.isdir(base):
        ap.error("%s %s: not a folder" % (what, base))
    if not os.access(base, os.W_OK | os.X_OK):
        ap.error("%s %s: not writable" % (what, base))
    ways = a.ways.split(",")
    for w in ways:
        if w not in WAYS:
            ap.error("--ways %r: %r is not one of %s"
                     % (a.ways, w, ", ".join(WAYS)))
    if len(set(ways)) != len(ways):
        ap.error("--ways %r: a way twice" % a.ways)
    if a.way:
        return one_way(a)
    stop = Stopper()
    top = None
    try:
        with stop.held():       # made and named, or neither
            try:
                top = tempfile.mkdtemp(prefix="hmm-bench.", dir=base)
            except OSError as e:    # a read-only file system, as root
                ap.error("%s %s: cannot make a folder in it: %s"
                         % (what, base, e.strerror))
        try:
            out = run_all(a, ways, top, stop)
        finally:
            with stop.held():   # removed whole, whatever comes
                shutil.rmtree(top, True)
                if os.path.lexists(top):
                    print("hmm.bench: cannot remove %s: left" % top,
                          file=sys.stderr)
        print(json.dumps(out))
    except Stopped as e:
        stopped(e, top)


def scratch_base(a):
    """Where the scratch folder goes and what named it: --dir, else
    $TMPDIR, else /tmp; never another (tempfile's quiet fallback)."""
    if a.dir is not None:
        return a.dir, "--dir"
    if os.environ.get("TMPDIR"):
        return os.environ["TMPDIR"], "$TMPDIR"
    return "/tmp", "scratch folder"


class Stopped(BaseException):
    """SIGINT, SIGTERM or SIGHUP: the parent stops.  way: the run it
    stopped, if one was running."""
    def __init__(self, sig):
        super().__init__(sig)
        self.sig, self.way = sig, None


class Stopper:
    """Turns SIGINT, SIGTERM and SIGHUP into Stopped in the main thread,
    once, and never inside a held() section (there it is raised as the
    section ends).  A signal ignored at start (nohup) stays ignored."""
    SIGS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self):
        self.sig, self.hold, self.raised = None, 0, False
        for s in self.SIGS:
            if signal.getsignal(s) != signal.SIG_IGN:
                signal.signal(s, self.on_signal)

    def on_signal(self, sig, frame):
        if self.sig is not None:
            return              # stopping already: the first one counts
        self.sig = sig
        self.check()

    def check(self):
        if self.sig is not None and not self.hold and not self.raised:
            self.raised = True
            raise Stopped(self.sig)

    @contextlib.contextmanager
    def held(self):
        self.hold += 1
        try:
            yield
        finally:
            self.hold -= 1
        self.check()


def stopped(e, top):
    """Say what a stop did, then die of the signal (so a shell sees it:
    exit status 128 + the signal)."""
    name = signal.Signals(e.sig).name
    what = ["stopped the %s run (its process group)" % e.way] if e.way \
        else []
    if top is not None and not os.path.lexists(top):
        what.append("removed %s" % top)
    print("hmm.bench: %s: %s" % (name, ", ".join(what) or "stopped"),
          file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(e.sig, signal.SIG_DFL)
    os.kill(os.getpid(), e.sig)
    sys.exit(128 + e.sig)


def run_all(a, ways, top, stop):
    """Every repetition of every way: the summary."""
    reps = []
    # the same threads everywhere; OpenMP threads that spin while they
    # wait made torch 2-4x slower on a loaded 2-core machine
    env = dict(os.environ, HK_THREADS=str(a.threads),
               HMM_BENCH_PARENT=str(os.getpid()))
    env.setdefault("OMP_WAIT_POLICY", "passive")
    load = [os.getloadavg()[0]]
    psi0, t0 = stall_us(), time.monotonic()
    for r in range(a.reps):
        runs = {}
        # interleaved, every other rep in reverse: a drift in the
        # machine's load weighs on every way alike
        for w in (ways if r % 2 == 0 else ways[::-1]):
            runs[w] = run_way(a, w, top, env, stop)
        reps.append(summary(a, runs))
    load.append(os.getloadavg()[0])
    psi1, wall = stall_us(), (time.monotonic() - t0) * 1e6
    out = {k: median([s[k] for s in reps]) for k in reps[0]}
    if a.reps > 1:
        out["ratio_hmm_over_inmem_range"] = span(
            [s["ratio_hmm_over_inmem"] for s in reps])
        out["ratio_hmm_over_deepspeed_range"] = span(
            [s["ratio_hmm_over_deepspeed"] for s in reps])
        out["per_rep"] = [{k: s[k] for k in REP_KEYS} for s in reps]
    out.update(reps=a.reps, loadavg=load,
               cpu_stall=(psi1[0] - psi0[0]) / wall if psi0[0] is not None
               else None,
               io_stall=(psi1[1] - psi0[1]) / wall if psi0[1] is not None
               else None)
    return out


REP_KEYS = ("tok_s_inmem", "tok_s_hmm", "tok_s_deepspeed",
            "ratio_hmm_over_inmem", "ratio_hmm_over_deepspeed",
            "peak_rss_inmem", "peak_rss_hmm")


def run_way(a, w, top, env, stop):
    """One way in its own process group, so that a stop reaches all
    it started: its JSON line."""
    with stop.held():           # started and known, or not started
        p = subprocess.Popen(
            [sys.executable, "-m", "hmm.bench", "--way", w,
             "--dir", top, "--steps", str(a.steps),
             "--budget-frac", str(a.budget_frac),
             "--min-bytes", str(a.min_bytes),
             *([] if a.overlap else ["--no-overlap"]),
             "--threads", str(a.threads)],
            stdout=subprocess.PIPE, text=True, env=env,
            start_new_session=True)
    try:
        out, _ = p.communicate()
    except Stopped as e:
        e.way = w
        kill_group(p)
        raise
    except BaseException:
        kill_group(p)
        raise
    if p.returncode:
        sys.exit("hmm.bench: the %s run failed (exit %d)"
                 % (w, p.returncode))
    return json.loads(out.strip().splitlines()[-1])


def kill_group(p, grace=5.0):
    """Stop p's process group: SIGTERM, SIGKILL after grace seconds;
    p is reaped."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(wait)
            break
        except subprocess.TimeoutExpired:
            continue
    if p.stdout:
        p.stdout.close()


def summary(a, runs):
    """The summary of one repetition's runs."""
    get = lambda w, k: runs.get(w, {}).get(k)  # noqa: E731
    out = dict(tok_s_inmem=get("inmem", "tok_s"),
               tok_s_hmm=get("hmm", "tok_s"),
               tok_s_deepspeed=get("deepspeed", "tok_s"))
    out["ratio_hmm_over_inmem"] = (out["tok_s_hmm"] / out["tok_s_inmem"]
                                   if out["tok_s_hmm"] and out["tok_s_inmem"]
                                   else None)
    out["ratio_hmm_over_deepspeed"] = (
        out["tok_s_hmm"] / out["tok_s_deepspeed"]
        if out["tok_s_hmm"] and out["tok_s_deepspeed"] else None)
    out.update(peak_rss_hmm=get("hmm", "peak_rss"),
               peak_rss_inmem=get("inmem", "peak_rss"),
               peak_rss_deepspeed=get("deepspeed", "peak_rss"),
               state_bytes=get("inmem", "state_bytes") or
               get("hmm", "state_bytes"),
               host_budget=get("hmm", "host_budget"),
               host_peak=get("hmm", "host_peak"),
               activation_bytes=get("hmm", "activation_bytes"),
               store_bytes_written=get("hmm", "store_bytes_written"),
               steps=a.steps, params=get("inmem", "params"),
               threads=a.threads, torch=get("inmem", "torch") or
               get("hmm", "torch"),
               phases_s={w: [r.get(k) for k in ("fwd_s", "bwd_s", "opt_s")]
                         for w, r in runs.items() if r.get("tok_s")},
               cpu_s={w: r.get("cpu_s") for w, r in runs.items()
                      if r.get("tok_s")},
               stall_s_hmm=get("hmm", "stall_s"),
               store_io_s_hmm=get("hmm", "store_io_s"),
               deepspeed_error=get("deepspeed", "error"),
               losses={w: r.get("losses") for w, r in runs.items()})
    return out


def stall_us():
    """(cpu, io): the microseconds in which some task waited for a CPU,
    for I/O (/proc/pressure's "some" totals); None where absent."""
    out = []
    for kind in ("cpu", "io"):
        try:
            with open("/proc/pressure/" + kind) as f:
                out.append(int(f.readline().rsplit("total=", 1)[1]))
        except (OSError, IndexError, ValueError):
            out.append(None)
    return out


def median(xs):
    """The median of the numbers in xs (nested: element by element; the
    rest, the first of xs); None where every one is None."""
    if isinstance(xs[0], dict):
        return {k: median([x.get(k) for x in xs]) for k in xs[0]}
    if isinstance(xs[0], list) and all(isinstance(x, list) for x in xs):
        return [median(list(col)) for col in zip(*xs)]
    nums = sorted(x for x in xs if isinstance(x, (int, float)) and
                  not isinstance(x, bool))
    if not nums:
        return xs[0]
    k = len(nums)
    m = nums[k // 2] if k % 2 else (nums[k // 2 - 1] + nums[k // 2]) / 2
    return round(m) if all(isinstance(x, int) for x in nums) else m


def span(xs):
    nums = [x for x in xs if x is not None]
    return [min(nums), max(nums)] if nums else None


if __name__ == "__main__":
    main()
