#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""test_bench — `python3 -m hmm.bench` runs its ways and prints the
summary the issue asks for (not a timing test: two steps, two
repetitions, figures only checked for being there and sane, the ratio
the median of the repetitions'), with the hmm way's first loss equal
to the in-memory one, refuses --reps 0 and an unusable $TMPDIR, stops
its way's run and removes its folder on SIGTERM, SIGHUP and SIGINT, and
leaves no file behind.
Embedded only."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import tap
from tap import ok, diag
import hmm

if tap.DAEMON:
    tap.skip_all("the benchmark opens its own store: embedded only")
d = tap.scratch("bench")
os.mkdir(d)
env = dict(os.environ, PYTHONPATH=os.path.dirname(
    os.path.dirname(os.path.abspath(hmm.__file__))))
bad = subprocess.run([sys.executable, "-m", "hmm.bench", "--reps", "0",
                      "--dir", d], stderr=subprocess.PIPE, text=True,
                     timeout=60, env=env)
ok(bad.returncode == 2 and "--reps: at least 1" in bad.stderr,
   "--reps 0 is refused, naming --reps (%s)" % bad.stderr.strip()[-60:])
# every bad argument refused up front (argparse: exit 2, naming it), no
# child run, no traceback
for args, names in ((["--ways", "inmem,"], "'' is not one of"),
                    (["--ways", "inmem,foo"], "'foo' is not one of"),
                    (["--ways", "hmm,hmm"], "a way twice"),
                    (["--budget-frac", "0"], "--budget-frac 0.0"),
                    (["--budget-frac", "-1"], "--budget-frac -1.0"),
                    (["--threads", "0"], "--threads 0"),
                    (["--min-bytes", "-1"], "--min-bytes -1"),
                    (["--budget-frac", "inf"], "--budget-frac inf"),
                    (["--budget-frac", "nan"], "--budget-frac nan"),
                    (["--min-bytes", "1Q"], "size '1Q'"),
                    # 64K, as --help writes its default, is taken: the
                    # error is the next argument's (it was not an int)
                    (["--min-bytes", "64K", "--ways", "foo"],
                     "'foo' is not one of"),
                    (["--dir", d + "/missing"], "missing: not a folder"),
                    (["--way", "foo"], "invalid choice")):
    bad = subprocess.run([sys.executable, "-m", "hmm.bench", "--dir", d,
                          *args], stderr=subprocess.PIPE, text=True,
                         timeout=60, env=env)
    ok(bad.returncode == 2 and names in bad.stderr and
       "Traceback" not in bad.stderr, "%s refused (%s)"
       % (" ".join(args), bad.stderr.strip()[-70:]))
bad = subprocess.run([sys.executable, "-m", "hmm.bench", "--dir", d],
                     stderr=subprocess.PIPE, text=True, timeout=60,
                     env=dict(env, HK_THREADS="x"))
ok(bad.returncode == 2 and "--threads: invalid int value: 'x'" in
   bad.stderr and "Traceback" not in bad.stderr,
   "HK_THREADS=x refused as --threads x (%s)" % bad.stderr.strip()[-60:])
# the default folder is $TMPDIR's, never another: one that cannot be
# used is refused, named (it once went to /tmp quietly)
with open(d + "/file", "w") as f:
    f.write("x")
for tmp, names in ((d + "/missing", "missing: not a folder"),
                   (d + "/file", "file: not a folder")):
    bad = subprocess.run([sys.executable, "-m", "hmm.bench", "--steps", "2",
                          "--ways", "inmem"], stderr=subprocess.PIPE,
                         text=True, timeout=120, env=dict(env, TMPDIR=tmp))
    ok(bad.returncode == 2 and "$TMPDIR " + tmp in bad.stderr and
       names in bad.stderr, "TMPDIR=%s refused, named (%s)"
       % (tmp, bad.stderr.strip()[-70:]))
os.unlink(d + "/file")


def way_pids():
    """The pids of a way's run, by its --dir in d."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if (d + "/hmm-bench.").encode() in f.read():
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


# SIGTERM and SIGHUP do what SIGINT does: the running way's process
# group stopped, the folder removed, a line saying so, death by the
# signal (they once left the way running and the folder behind)
for sig, way in ((signal.SIGTERM, "inmem"), (signal.SIGHUP, "hmm"),
                 (signal.SIGINT, "hmm")):
    with open(tap.scratch("bench.err"), "w+") as ef:
        p = subprocess.Popen([sys.executable, "-m", "hmm.bench", "--steps",
                              "500", "--ways", way, "--dir", d],
                             stdout=subprocess.DEVNULL, stderr=ef, env=env)
        for _ in range(600):
            if way_pids():
                break
            time.sleep(0.1)
        time.sleep(1)
        p.send_signal(sig)
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        time.sleep(0.2)
        left, gone = way_pids(), os.listdir(d)
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        ef.seek(0)
        err = ef.read()
    ok(p.returncode == -sig and not left and gone == [] and
       "%s: stopped the %s run" % (sig.name, way) in err and
       "removed " + d in err, "%s: the %s run stopped, the folder removed "
       "(exit %s, left %s %s: %s)" % (sig.name, way, p.returncode, left,
                                      gone, err.strip()[-90:]))
    for x in gone:
        shutil.rmtree(os.path.join(d, x), True)
r = subprocess.run([sys.executable, "-m", "hmm.bench", "--steps", "2",
                    "--reps", "2", "--dir", d], stdout=subprocess.PIPE,
                   text=True, timeout=280, env=env)
ok(r.returncode == 0, "python3 -m hmm.bench --steps 2 --reps 2 exits 0")
try:
    out = json.loads(r.stdout)
except ValueError:
    out = {}
    diag(r.stdout[-500:])
keys = ["tok_s_inmem", "tok_s_hmm", "tok_s_deepspeed",
        "ratio_hmm_over_inmem", "peak_rss_hmm", "peak_rss_inmem",
        "state_bytes", "host_budget"]
ok(all(k in out for k in keys), "the summary has %s" % ", ".join(keys))
ok(out.get("tok_s_inmem", 0) > 0 and out.get("tok_s_hmm", 0) > 0 and
   out.get("peak_rss_hmm", 0) > 0, "both ways ran: %s tok/s, %s tok/s"
   % (out.get("tok_s_inmem"), out.get("tok_s_hmm")))
ok(out.get("state_bytes") == 16 * out.get("params", -1) and
   abs(out.get("host_budget", 0) - out["state_bytes"] / 4) < (64 << 10),
   "host budget a quarter of the state (%s of %s)"
   % (out.get("host_budget"), out.get("state_bytes")))
try:
    import deepspeed  # noqa: F401
except ImportError:
    ok(out.get("tok_s_deepspeed", 0) is None, "no deepspeed: its figure "
       "is null (%s)" % out.get("deepspeed_error"))
reps = out.get("per_rep", [])
rat = sorted(x.get("ratio_hmm_over_inmem") or 0 for x in reps)
ok(len(reps) == 2 and out.get("reps") == 2 and
   abs(out.get("ratio_hmm_over_inmem", -1) - sum(rat) / 2) < 1e-9 and
   out.get("ratio_hmm_over_inmem_range") == rat,
   "two repetitions, the ratio their median (%s of %s)"
   % (out.get("ratio_hmm_over_inmem"), rat))
ok(all(out.get("cpu_s", {}).get(w, 0) > 0 for w in ("inmem", "hmm")) and
   out.get("stall_s_hmm", -1) >= 0 and len(out.get("loadavg", [])) == 2,
   "CPU time per way, the hmm way's stalls and the load are there (%s)"
   % out.get("cpu_s"))
losses = out.get("losses", {})
ok(losses.get("inmem", [0])[0] == losses.get("hmm", [1])[0],
   "the first loss is the same both ways")
ok(out.get("activation_bytes", 0) > 0, "activations went to hmm (%s bytes "
   "a step)" % out.get("activation_bytes"))
ok(os.listdir(d) == [], "no scratch file left in --dir")
tap.done()
