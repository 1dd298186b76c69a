#!/usr/bin/env bash
# test_train_blas — when OpenBLAS has picked a pre-AVX2 core on a CPU with
# AVX2 and FMA (Debian's 0.3.21 does on some AMD parts), hmm-train says
# so, sets OPENBLAS_CORETYPE, restarts itself and then runs the AVX2
# core, with the same losses.  The misdetection is simulated with
# HMM_TRAIN_BLAS_PRETEND (read only before the restart).
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-train
need "$bin"
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo || skip_all "no AVX2+FMA here"
scratch train-blas

"$bin" --preset tiny --steps 3 --json >"$dir/plain.json" 2>"$dir/plain.err"
ok $? "plain run"
HMM_TRAIN_BLAS_PRETEND=Prescott "$bin" --preset tiny --steps 3 --json >"$dir/fix.json" 2>"$dir/fix.err"
ok $? "run with a simulated misdetection"
sed 's/^/# /' "$dir/fix.err"
ok $(grep -q "picked core Prescott.*restarting with OPENBLAS_CORETYPE=\(Zen\|Haswell\)" "$dir/fix.err"; echo $?) "it says what it found and what it sets"
ok $(grep -q "now runs core" "$dir/fix.err"; echo $?) "after the restart it says which core runs"
ok $([ "$(grep -c '"step"' "$dir/fix.json")" -eq 3 ]; echo $?) "one set of steps (restarted once, not twice)"
if grep -q "restarting with" "$dir/plain.err"; then	# this machine misdetects
	ok $(grep -q "now runs core" "$dir/plain.err"; echo $?) "plain run: the real misdetection was fixed: $(head -1 "$dir/plain.err")"
else
	ok $(! grep -q "OPENBLAS_CORETYPE" "$dir/plain.err"; echo $?) "a correct detection prints nothing about it"
fi
t_done
