#!/usr/bin/env bash
# test_train_loss — the main job learns: hmm-train with no arguments but
# --json (default preset, default steps, quarter host budget, synthetic
# corpus) ends with a loss below the preset's stated loss_max (printed by
# --preset list, set in tools/hmm-train/preset.c), far below uniform
# (ln 256 = 5.55); the state was offloaded and the peak RSS stayed within
# the host budget plus 128 MiB.  Takes about a minute on 2 idle cores.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-train
need "$bin"
scratch train-loss

max=$("$bin" --preset list | awk '$1 == "default" { for (i = 1; i < NF; i++) if ($i == "loss_max") print $(i + 1) }' | tr -d :)
ok $([ -n "$max" ]; echo $?) "default preset states loss_max ($max)"
"$bin" --json --store "$dir/store" >"$dir/out.json" 2>"$dir/err"
ok $? "hmm-train (default preset) runs"
sum=$(tail -1 "$dir/out.json")
echo "# $sum"
num() { echo "$sum" | grep -o "\"$1\":[0-9.e+-]*" | cut -d: -f2; }
last=$(num loss_last) first=$(num loss_first)
ok $(awk -v l="$last" -v m="$max" 'BEGIN { exit !(l < m) }'; echo $?) "final loss $last < $max (first $first)"
ok $(grep -q '"offloaded":true' <<<"$sum"; echo $?) "the state was offloaded (quarter budget)"
rss=$(num peak_rss_bytes) budget=$(num host_budget)
ok $([ "$rss" -le $((budget + (128 << 20))) ]; echo $?) "peak RSS $rss <= host budget $budget + 128 MiB"
t_done
