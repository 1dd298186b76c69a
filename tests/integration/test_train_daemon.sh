#!/usr/bin/env bash
# test_train_daemon — hmm-train --daemon trains through a real hmmd (shared
# mode) with losses bit-identical to the embedded run, and a daemon that
# is not there is a clear error before training.
# TAP; exit 0 pass, 1 fail, 77 skip.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-train hmmd=$B/bin/hmmd
pid=
need "$bin" "$hmmd"
scratch train-daemon
trap '[ -n "$pid" ] && kill $pid 2>/dev/null && wait $pid; rm -rf "$dir"' EXIT

"$hmmd" --socket "$dir/s.sock" --store "$dir/hmmd.store" --module none >"$dir/hmmd.log" 2>&1 &
pid=$!
for _ in $(seq 50); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
ok $([ -S "$dir/s.sock" ]; echo $?) "hmmd listens"

steps=3
"$bin" --steps $steps --json --store "$dir/emb.store" >"$dir/emb.json" 2>"$dir/emb.err"
ok $? "embedded run"
"$bin" --steps $steps --json --daemon "unix:$dir/s.sock" >"$dir/d.json" 2>"$dir/d.err"
ok $? "run through hmmd"
[ $failed = 0 ] || tail -3 "$dir/d.err" | sed 's/^/# /'
grep -o '"loss_hex":"[^"]*"' "$dir/emb.json" >"$dir/emb.loss"
grep -o '"loss_hex":"[^"]*"' "$dir/d.json" >"$dir/d.loss"
ok $([ "$(wc -l <"$dir/d.loss")" -eq $steps ]; echo $?) "through hmmd: $steps losses"
cmp -s "$dir/emb.loss" "$dir/d.loss"
ok $? "losses bit-identical to the embedded run"

"$bin" --steps 1 --daemon "unix:$dir/none.sock" >"$dir/none.out" 2>"$dir/none.err"
rc=$?
ok $([ $rc -ne 0 ]; echo $?) "no daemon at the address: fails (rc $rc)"
ok $(grep -q "none.sock" "$dir/none.err"; echo $?) "the error names the socket: $(head -c 160 "$dir/none.err")"
ok $(cat "$dir/none.out" "$dir/none.err" | grep -q '^step'; [ $? -ne 0 ]; echo $?) "and no step ran"
t_done
