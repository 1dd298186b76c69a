#!/usr/bin/env bash
# test_train_daemon — hmm-train --daemon trains through a real hmmd (shared
# mode) with losses bit-identical to the embedded run, a daemon that is
# not there is a clear error before training, and one that dies mid-run
# is named with its socket.
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

# hmmd's 2 MiB chunks are larger than tiny's own: a budget that would do
# embedded pins more there, and is refused before any map with the
# number to give (exit 2, bad input), which then runs
"$bin" --preset tiny --steps 2 --daemon "unix:$dir/s.sock" >"$dir/small.out" 2>"$dir/small.err"
rc=$?
give=$(sed -n 's/.*give --host-budget \([0-9]*M\) or more.*/\1/p' "$dir/small.err")
ok $([ $rc = 2 ] && grep -q "below the .* this run needs mapped at once in hmmd's 2 MiB chunks" "$dir/small.err" && [ -n "$give" ] && ! grep -q '^step\|initialising' "$dir/small.out" "$dir/small.err"; echo $?) "tiny on hmmd's 2M chunks, default budget: exit 2 with the minimum ($(head -c 200 "$dir/small.err"))"
"$bin" --preset tiny --steps 2 --host-budget "${give:-1G}" --daemon "unix:$dir/s.sock" >"$dir/small.out" 2>"$dir/small.err"
ok $? "--host-budget $give, the minimum it named: runs"
# the header says whose store it is: hmmd's, no file of ours
"$bin" --steps 1 --daemon "unix:$dir/s.sock" >"$dir/small.out" 2>&1
ok $(grep -q "store hmmd's (--daemon unix:$dir/s.sock)" "$dir/small.out" && ! grep -q 'hmm-train\.[0-9]*\.store' "$dir/small.out"; echo $?) "offloaded: the header names hmmd's store, no file of ours: $(grep -m1 'training state' "$dir/small.out")"

# no file of ours, not even a scratch store reserved and unlinked: run
# outside a source tree with $TMPDIR missing (a store file of ours would
# fail to be made there, exit 2)
mkdir -p "$dir/away"
(cd "$dir/away" && TMPDIR=$dir/notmp "$bin" --steps 1 --daemon "unix:$dir/s.sock" >"$dir/away.out" 2>&1)
rc=$?
ok $([ $rc = 0 ] && grep -q "store hmmd's" "$dir/away.out" && [ -z "$(ls -A "$dir/away")" ]; echo $?) "offloaded through hmmd: no store file of ours is made (rc $rc: $(grep -v '^blas' "$dir/away.out" | grep -m1 'error\|store' | cut -c1-120))"
# a checkpoint is a flush of our own store: with --daemon it named an
# empty file of ours (never resumable) while the state was in hmmd's, so
# --ckpt, --resume, --store and --format are refused, nothing made
for f in "--ckpt $dir/c" "--resume $dir/c" "--store $dir/x.store" "--format"; do
	"$bin" --preset tiny --steps 1 --host-budget "${give:-1G}" --daemon "unix:$dir/s.sock" $f >"$dir/f.out" 2>"$dir/f.err"
	rc=$?
	ok $([ $rc = 2 ] && grep -q -- "${f%% *}.*not with --daemon" "$dir/f.err" && ! grep -q '^step' "$dir/f.out" && [ ! -e "$dir/c" ] && [ ! -e "$dir/c.store" ] && [ ! -e "$dir/x.store" ]; echo $?) "--daemon with $f: exit 2, nothing made (rc $rc: $(head -1 "$dir/f.err"))"
done
# the store's bytes in --json are this run's, not hmmd's since its start
# (every earlier client's): two like runs read alike
rd() { grep -o '"store_read_bytes":[0-9]*' "$1" | tail -1 | cut -d: -f2; }
for i in 1 2; do
	"$bin" --steps 2 --json --daemon "unix:$dir/s.sock" >"$dir/r$i.json" 2>/dev/null
done
r1=$(rd "$dir/r1.json") r2=$(rd "$dir/r2.json")
d=$(( ${r2:-0} - ${r1:-0} )); d=${d#-}
ok $([ -n "$r1" ] && [ -n "$r2" ] && [ "$r1" -gt 0 ] && [ $((d * 10)) -le "$r1" ]; echo $?) "store_read_bytes is the run's own: $r1 then $r2 for two like runs"

"$bin" --steps 1 --daemon "unix:$dir/none.sock" >"$dir/none.out" 2>"$dir/none.err"
rc=$?
ok $([ $rc -ne 0 ]; echo $?) "no daemon at the address: fails (rc $rc)"
ok $(grep -q "none.sock" "$dir/none.err"; echo $?) "the error names the socket: $(head -c 160 "$dir/none.err")"
ok $(cat "$dir/none.out" "$dir/none.err" | grep -q '^step'; [ $? -ne 0 ]; echo $?) "and no step ran"
# hmmd killed mid-run: the run stops naming hmmd and its socket (it said
# only "step 2: Transport endpoint is not connected")
"$hmmd" --socket "$dir/k.sock" --store "$dir/k.store" --module none >"$dir/k.log" 2>&1 &
kp=$!
for _ in $(seq 50); do [ -S "$dir/k.sock" ] && break; sleep 0.1; done
"$bin" --steps 100000 --daemon "unix:$dir/k.sock" >"$dir/k.out" 2>"$dir/k.err" &
tp=$!
for _ in $(seq 200); do grep -q '^step' "$dir/k.out" 2>/dev/null && break; sleep 0.05; done
kill -KILL $kp; wait $kp 2>/dev/null
for _ in $(seq 100); do kill -0 $tp 2>/dev/null || break; sleep 0.1; done
kill -KILL $tp 2>/dev/null; wait $tp
rc=$?
ok $([ $rc = 1 ] && grep -q "hmmd at unix:$dir/k.sock is gone (" "$dir/k.err"; echo $?) "hmmd killed mid-run: exit 1 naming hmmd and its socket (rc $rc): $(grep -v '^blas' "$dir/k.err" | tail -1)"
t_done
