#!/usr/bin/env bash
# test_train_budget — hmm-train's losses are bit-identical whether the
# training state fits in memory or lives mostly in the store (a quarter
# budget), for the same seed; and the quarter run really used the store.
# TAP; exit 0 pass, 1 fail, 77 skip.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-train
need "$bin"
scratch train-budget

steps=12
"$bin" --preset tiny --steps $steps --json --host-budget 1G >"$dir/mem.json" 2>"$dir/mem.err"
ok $? "unlimited budget: runs"
"$bin" --preset tiny --steps $steps --json --store "$dir/store" >"$dir/q.json" 2>"$dir/q.err"
ok $? "quarter budget (the default): runs"

grep -o '"loss_hex":"[^"]*"' "$dir/mem.json" >"$dir/mem.loss"
grep -o '"loss_hex":"[^"]*"' "$dir/q.json" >"$dir/q.loss"
ok $([ "$(wc -l <"$dir/mem.loss")" -eq $steps ]; echo $?) "unlimited: $steps losses"
cmp -s "$dir/mem.loss" "$dir/q.loss"
ok $? "losses bit-identical over $steps steps"
[ $failed = 0 ] || diff "$dir/mem.loss" "$dir/q.loss" | head -5 | sed 's/^/# /'

sum=$(tail -1 "$dir/q.json")
num() { echo "$sum" | grep -o "\"$1\":[0-9.e+-]*" | cut -d: -f2; }
echo "# quarter: $sum"
ok $(grep -q '"offloaded":true' <<<"$sum"; echo $?) "quarter run is offloaded"
state=$(num state_bytes) budget=$(num host_budget)
ok $([ $((budget * 4)) -le $((state + 4)) ]; echo $?) "host budget $budget is a quarter of state $state"
rd=$(num store_read_bytes) wr=$(num store_write_bytes)
ok $([ "${rd%.*}" -gt 0 ] && [ "${wr%.*}" -gt 0 ]; echo $?) "the store was used: read $rd, written $wr bytes"
ok $(grep -q '"offloaded":false' <(tail -1 "$dir/mem.json"); echo $?) "unlimited run stays in memory"
t_done
