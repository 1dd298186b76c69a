#!/usr/bin/env bash
# test_bench_scale — where `hmm-bench scale` and `hmm-bench train` put
# hmm-train's store, and what they say when it fails: a copy of
# hmm-bench beside a fake hmm-train (hmm-bench runs the hmm-train next
# to it) that records the --store it is given, makes it and prints a
# summary.  The store is in the scratch folder (scale --dir, train
# $HMM_TEST_DIR), never hmm-train's default place, and gone after the
# run; an existing one is refused; hmm-train killed by a signal is said
# with the signal.  A fake: this checks the tool, it does not time.
set -u
. "$(dirname "$0")/../t.sh"
need "$B/bin/hmm-bench"
scratch bench-scale
mkdir -p "$dir/bin" "$dir/sd" "$dir/tmp" "$dir/cwd"
cp "$B/bin/hmm-bench" "$dir/bin/"
bin=$dir/bin/hmm-bench
cat >"$dir/bin/hmm-train" <<EOF
#!/bin/sh
store= prev=
for a; do [ "\$prev" = --store ] && store=\$a; prev=\$a; done
echo "\${store:-none}" >>"$dir/stores"
[ -n "\$store" ] && printf x >"\$store"
[ -n "\${FAKE_KILL:-}" ] && [ -n "\$store" ] && kill -9 \$\$
echo '{"summary":true,"step_s_median":0.1,"tok_s":10,"step_flops":1e9,"peak_rss_bytes":1,"host_budget":1,"state_bytes":4,"store_read_bytes":0,"store_write_bytes":0,"stall_s":0,"params":1,"vocab":1,"ctx":1,"d":1,"heads":1,"layers":1,"batch":1,"threads":1}'
EOF
chmod +x "$dir/bin/hmm-train"

# train: with $HMM_TEST_DIR, from a folder without build/, no TMPDIR
(cd "$dir/cwd" && env -u TMPDIR HMM_TEST_DIR="$dir/tmp" "$bin" train --steps 2 --reps 1 >/dev/null 2>"$dir/err")
rc=$?
ok $([ $rc = 0 ] && grep -qx "$dir/tmp/hmm-bench-train.store" "$dir/stores" && [ -z "$(find "$dir/tmp" "$dir/cwd" -mindepth 1)" ]; echo $?) "train: the store in \$HMM_TEST_DIR, gone after (rc $rc: $(sort -u "$dir/stores" | tr '\n' ' '))"
rm -f "$dir/stores"
(cd "$dir/cwd" && env -u TMPDIR -u HMM_TEST_DIR "$bin" scale --steps 2 --reps 1 --dir "$dir/sd" >/dev/null 2>"$dir/err")
rc=$?
ok $([ $rc = 0 ] && [ "$(grep -c "^$dir/sd/hmm-bench-scale.store$" "$dir/stores")" = 3 ] && [ -z "$(find "$dir/sd" "$dir/cwd" -mindepth 1)" ]; echo $?) "scale --dir: each offloaded run's store in DIR, gone after (rc $rc: $(sort -u "$dir/stores" | tr '\n' ' '))"
# a store of that name already there: refused, untouched
printf precious >"$dir/sd/hmm-bench-scale.store"
"$bin" scale --steps 2 --reps 1 --dir "$dir/sd" >/dev/null 2>"$dir/err"
ok $([ $? = 1 ] && grep -q "hmm-bench-scale.store: exists" "$dir/err" && [ "$(cat "$dir/sd/hmm-bench-scale.store")" = precious ]; echo $?) "scale: an existing hmm-bench-scale.store: refused, untouched"
rm -f "$dir/sd/hmm-bench-scale.store"
# hmm-train killed: the signal said; its store gone
FAKE_KILL=1 "$bin" scale --steps 2 --reps 1 --dir "$dir/sd" >/dev/null 2>"$dir/err"
rc=$?
ok $([ $rc = 1 ] && grep -q "hmm-train --json --preset default .*: killed by signal 9 (Killed)" "$dir/err" && [ -z "$(ls -A "$dir/sd")" ]; echo $?) "scale: hmm-train killed by SIGKILL: the signal named, nothing left (rc $rc: $(tail -1 "$dir/err"))"
t_done
