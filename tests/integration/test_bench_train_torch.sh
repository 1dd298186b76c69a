#!/usr/bin/env bash
# test_bench_train_torch — `hmm-bench train --vs-torch` runs hmm-train
# and the same GPT in Debian's torch and, with --json, ends with one
# object holding both tok/s and their ratio (consistent with each other);
# a --torch-venv (or $HMM_TORCH_VENV) without a python fails naming it;
# torch runs with OMP_WAIT_POLICY=passive unless the caller set it;
# a --store path with a space and a ';' reaches hmm-train as it is;
# --torch-venv without
# --vs-torch is a usage error.  The tiny preset, 2 steps: this checks the
# tool, it does not time.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-bench
need "$bin" "$B/bin/hmm-train"
/usr/bin/python3 -c "import torch" 2>/dev/null || skip_all "no torch in /usr/bin/python3 (python3-torch)"
scratch bench-train-torch

num() { echo "$last" | grep -o "\"$1\":[0-9.e+-]*" | cut -d: -f2; }
last=$("$bin" train --vs-torch --preset tiny --steps 2 --reps 1 --json 2>"$dir/err" | tail -1)
rc=$?
echo "# $last"
ok $([ $rc = 0 ] && echo "$last" | grep -q '"bench":"train_vs_torch"'; echo $?) "runs; JSON last line"
h=$(num tok_s_hmm) t=$(num tok_s_torch) r=$(num ratio) tr=$(num tok_s_torch_recompute)
ok $(awk -v h="$h" -v t="$t" -v tr="$tr" 'BEGIN { exit !(h > 0 && t > 0 && tr > 0) }'; echo $?) "tok_s_hmm $h, tok_s_torch $t, recomputing $tr: all measured"
ok $(awk -v h="$h" -v t="$t" -v r="$r" 'BEGIN { d = h / t - r; exit !(d < 0.01 * r && d > -0.01 * r) }'; echo $?) "ratio $r is tok_s_hmm / tok_s_torch"
ok $(echo "$last" | grep -q '"torch_version":"1\.'; echo $?) "Debian's torch 1.x ran: $(echo "$last" | grep -o '"torch_version":"[^"]*"')"

"$bin" train --vs-torch --torch-venv "$dir/novenv" --preset tiny --steps 2 --reps 1 --json >"$dir/out" 2>"$dir/err"
rc=$?
ok $([ $rc = 1 ] && grep -q "$dir/novenv/bin/python could not run" "$dir/err"; echo $?) "a venv without python: exit 1 naming it (rc $rc)"
HMM_TORCH_VENV=$dir/envvenv "$bin" train --vs-torch --preset tiny --steps 2 --reps 1 --json >"$dir/out" 2>"$dir/err"
rc=$?
ok $([ $rc = 1 ] && grep -q "$dir/envvenv/bin/python could not run" "$dir/err"; echo $?) "HMM_TORCH_VENV without python: exit 1 naming it (rc $rc)"
# torch's environment: OMP_WAIT_POLICY=passive unless the caller set it
mkdir -p "$dir/fake/bin"
cat >"$dir/fake/bin/python" <<EOF
#!/bin/sh
echo "\${OMP_WAIT_POLICY-unset}" >>"$dir/omp"
echo "torch 0.0fake \${10} 100 90"
EOF
chmod +x "$dir/fake/bin/python"
env -u OMP_WAIT_POLICY "$bin" train --vs-torch --torch-venv "$dir/fake" --preset tiny --steps 2 --reps 1 --json >"$dir/out" 2>"$dir/err"
ok $([ $? = 0 ] && [ "$(sort -u "$dir/omp")" = passive ]; echo $?) "torch runs with OMP_WAIT_POLICY=passive ($(sort -u "$dir/omp" | tr '\n' ' '))"
rm -f "$dir/omp"
OMP_WAIT_POLICY=active "$bin" train --vs-torch --torch-venv "$dir/fake" --preset tiny --steps 2 --reps 1 --json >"$dir/out" 2>"$dir/err"
ok $([ $? = 0 ] && [ "$(sort -u "$dir/omp")" = active ]; echo $?) "a caller's OMP_WAIT_POLICY=active is kept ($(sort -u "$dir/omp" | tr '\n' ' '))"
# hmm-train's arguments go to it as they are, with no shell between
mkdir -p "$dir/a b"
"$bin" train --preset tiny --steps 2 --reps 1 --store "$dir/a b/x;y.store" --json >"$dir/out" 2>"$dir/err"
rc=$?
ok $([ $rc = 0 ] && [ -s "$dir/a b/x;y.store" ] && grep -q '"bench":"train"' "$dir/out"; echo $?) "--store with a space and a ';' in its path: the store is there (rc $rc)"
"$bin" train --torch-venv "$dir" --json >/dev/null 2>"$dir/err"
ok $([ $? = 2 ] && grep -q "usage" "$dir/err"; echo $?) "--torch-venv without --vs-torch: usage, exit 2"
t_done
