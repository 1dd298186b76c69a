#!/usr/bin/env bash
# test_bench_tensors — `hmm-bench tensors --trace-dir DIR`: DIR/none.json,
# lru.json and sched.json are the user's names: one already there is
# refused (exit 2, named, untouched) unless --overwrite, which replaces
# it with a whole trace; a run stopped by SIGINT leaves the old file or a
# whole trace, never half of one, and no temporary; its own store
# (bench-tensors.store) is gone after every exit.  Small sizes: this
# checks the tool, it does not time.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-bench
need "$bin"
scratch bench-tensors
A="--layers 8 --layer-size 2M --chunk 1M --steps 2 --reps 2"

valid() { python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null; }
mkdir "$dir/tr"
echo '{"mine": "precious"}' >"$dir/tr/none.json"
HMM_TEST_DIR=$dir "$bin" tensors $A --trace-dir "$dir/tr" >/dev/null 2>"$dir/err"
rc=$?
ok $([ $rc = 2 ] && grep -q "$dir/tr/none.json exists; not overwritten (--overwrite" "$dir/err" && [ "$(cat "$dir/tr/none.json")" = '{"mine": "precious"}' ] && [ ! -e "$dir/tr/lru.json" ]; echo $?) "an existing none.json: exit 2 naming it, untouched, nothing run (rc $rc)"
# stopped early: the user's file still whole, no temporaries
HMM_TEST_DIR=$dir "$bin" tensors $A --trace-dir "$dir/tr" --overwrite >/dev/null 2>"$dir/err" &
pid=$!
for i in $(seq 200); do ls -A "$dir/tr" | grep -q '\.tmp$' && break; sleep 0.05; done
kill -INT $pid; wait $pid
rc=$?
ok $([ $rc = 130 ] && [ "$(cat "$dir/tr/none.json")" = '{"mine": "precious"}' ] && [ -z "$(ls -A "$dir/tr" | grep -v '^none.json$')" ] && [ -z "$(ls -A "$dir" | grep -v '^tr$\|^err$')" ]; echo $?) "SIGINT while the first trace is written: the old file whole, no temporary or store left (rc $rc: $(ls -A "$dir/tr" | tr '\n' ' '))"
# stopped later, whenever: every trace there is whole
HMM_TEST_DIR=$dir "$bin" tensors $A --trace-dir "$dir/tr" --overwrite >/dev/null 2>"$dir/err" &
pid=$!
for i in $(seq 400); do [ -e "$dir/tr/lru.json" ] && break; sleep 0.05; done
sleep 0.3
kill -INT $pid; wait $pid
bad=
for f in "$dir"/tr/*.json; do valid "$f" || bad="$bad $f"; done
ok $([ -z "$bad" ] && [ -z "$(ls -A "$dir/tr" | grep -v '\.json$')" ]; echo $?) "SIGINT later: every trace left is valid JSON, no temporary ($bad)"
HMM_TEST_DIR=$dir "$bin" tensors $A --trace-dir "$dir/tr" --overwrite >/dev/null 2>"$dir/err"
rc=$?
ok $([ $rc = 0 ] && valid "$dir/tr/none.json" && valid "$dir/tr/lru.json" && valid "$dir/tr/sched.json" && ! grep -q precious "$dir/tr/none.json" && [ "$(ls -A "$dir/tr" | wc -l)" = 3 ] && [ -z "$(ls -A "$dir" | grep -v '^tr$\|^err$')" ]; echo $?) "--overwrite: three whole traces, no temporary or store left (rc $rc)"
"$bin" tensors --overwrite >/dev/null 2>"$dir/err"
ok $([ $? = 2 ] && grep -q -- "--overwrite: only with --store or --trace-dir" "$dir/err"; echo $?) "--overwrite alone: exit 2"
t_done
