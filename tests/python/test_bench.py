#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""test_bench — `python3 -m hmm.bench` runs its ways and prints the
summary the issue asks for (not a timing test: two steps, two
repetitions, figures only checked for being there and sane, the ratio
the median of the repetitions'), with the hmm way's first loss equal
to the in-memory one, refuses --reps 0, and leaves no file behind.
Embedded only."""
import json
import os
import subprocess
import sys

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
                    (["--dir", d + "/missing"], "missing: not a folder"),
                    (["--way", "foo"], "invalid choice")):
    bad = subprocess.run([sys.executable, "-m", "hmm.bench", "--dir", d,
                          *args], stderr=subprocess.PIPE, text=True,
                         timeout=60, env=env)
    ok(bad.returncode == 2 and names in bad.stderr and
       "Traceback" not in bad.stderr, "%s refused (%s)"
       % (" ".join(args), bad.stderr.strip()[-70:]))
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
