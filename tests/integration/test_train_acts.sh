#!/usr/bin/env bash
# test_train_acts — hmm-train --offload-activations: the block inputs go
# to the store and back, and the losses are bit-identical to the run that
# keeps them in DRAM (quarter budget: offloaded state; 1G: state in
# memory, where the store's only writes are the activations, so they
# must be exactly steps x activation_bytes); the summary's
# activation_bytes is (layers - 1) block inputs of batch x ctx x d floats;
# at the default preset (whose 3.9 MB of offloaded block inputs stand out
# of the page-level noise the tiny preset's 0.2 MB do not) the peak RSS
# drops by at least half of activation_bytes at the same budget.
# TAP; exit 0 pass, 1 fail, 77 skip.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-train
need "$bin"
scratch train-acts

steps=6
run() { # name, flags...
	local name=$1
	shift
	"$bin" --preset tiny --steps $steps --json "$@" >"$dir/$name.json" 2>"$dir/$name.err"
	ok $? "$name: runs ($*)"
	grep -o '"loss_hex":"[^"]*"' "$dir/$name.json" >"$dir/$name.loss"
}
run q --store "$dir/q.store"
run qa --store "$dir/qa.store" --offload-activations
run ma --host-budget 1G --offload-activations

ok $([ "$(wc -l <"$dir/q.loss")" -eq $steps ]; echo $?) "$steps losses"
cmp -s "$dir/q.loss" "$dir/qa.loss"
ok $? "quarter budget: losses bit-identical with and without offload"
cmp -s "$dir/q.loss" "$dir/ma.loss"
ok $? "in memory with offloaded activations: the same losses"

num() { tail -1 "$dir/$1.json" | grep -o "\"$2\":[0-9.e+-]*" | cut -d: -f2; }
want=$(( ($(num qa layers) - 1) * $(num qa batch) * $(num qa ctx) * $(num qa d) * 4 ))
ok $([ "$(num qa activation_bytes)" = $want ]; echo $?) "activation_bytes $(num qa activation_bytes) = (layers - 1) block inputs = $want"
ok $([ "$(num q activation_bytes)" = 0 ]; echo $?) "without the flag: activation_bytes 0"
wr=$(num ma store_write_bytes) rd=$(num ma store_read_bytes)
ok $([ "$wr" = $((steps * want)) ]; echo $?) "in memory: the store got exactly the activations, $wr = $steps x $want bytes"
ok $([ "$rd" -gt 0 ] && [ "$rd" -le "$wr" ]; echo $?) "and read them back: $rd bytes"
ok $(grep -q '"kept_activations":false' <(tail -1 "$dir/ma.json"); echo $?) "offloaded activations are recomputed, not kept"
qw=$(num q store_write_bytes) qaw=$(num qa store_write_bytes)
ok $([ "$qaw" -gt "$qw" ]; echo $?) "quarter budget: the store wrote more with offload ($qaw > $qw)"

# the RSS drop: the same default-preset budget with and without, 2 steps
run d --preset default --steps 2 --store "$dir/d.store"
run da --preset default --steps 2 --store "$dir/da.store" --offload-activations
rss=$(num d peak_rss_bytes) rssa=$(num da peak_rss_bytes) act=$(num da activation_bytes)
ok $([ -n "$rss" ] && [ -n "$rssa" ] && [ "$act" -gt 0 ] &&
	[ $((2 * (rss - rssa))) -ge "$act" ]; echo $?) \
	"default preset: peak RSS $rssa with offload, $rss without: $((rss - rssa)) bytes less, at least half the $act offloaded"
t_done
