#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""test_bench — `python3 -m hmm.bench` runs its ways and prints the
summary the issue asks for (not a timing test: two steps, figures only
checked for being there and sane), with the hmm way's first loss equal
to the in-memory one, and leaves no file behind.  Embedded only."""
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
r = subprocess.run([sys.executable, "-m", "hmm.bench", "--steps", "2",
                    "--dir", d], stdout=subprocess.PIPE, text=True,
                   timeout=280, env=env)
ok(r.returncode == 0, "python3 -m hmm.bench --steps 2 exits 0")
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
losses = out.get("losses", {})
ok(losses.get("inmem", [0])[0] == losses.get("hmm", [1])[0],
   "the first loss is the same both ways")
ok(out.get("activation_bytes", 0) > 0, "activations went to hmm (%s bytes "
   "a step)" % out.get("activation_bytes"))
ok(os.listdir(d) == [], "no scratch file left in --dir")
tap.done()
