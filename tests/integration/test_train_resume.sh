#!/usr/bin/env bash
# test_train_resume — a run checkpointed at step 8 and resumed to step 16
# gives bit-identical losses to an uninterrupted 16-step run, with the
# state in the store (quarter budget) and in memory; a damaged or
# mismatched checkpoint is refused with a clear message.
set -u
B=${HMM_BUILD:-build}
bin=$B/bin/hmm-train
dir=${HMM_TEST_DIR:-build/tmp}/train-resume.$$
n=0 failed=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
[ -x "$bin" ] || { echo "1..0 # SKIP $bin not built"; exit 77; }
mkdir -p "$dir" && trap 'rm -rf "$dir"' EXIT
losses() { grep -o '"step":[0-9]*,"loss":[^,]*,"loss_hex":"[^"]*"' "$1" | sed 's/"loss":[^,]*,//'; }

for budget in default 1G; do
	flag=; [ $budget = default ] || flag="--host-budget $budget"
	"$bin" --preset tiny --steps 16 --json $flag >"$dir/full.json" 2>"$dir/err"
	ok $? "$budget budget: uninterrupted 16 steps"
	"$bin" --preset tiny --steps 8 --json $flag --ckpt "$dir/c" >"$dir/a.json" 2>"$dir/err"
	ok $? "$budget budget: 8 steps with --ckpt"
	ok $([ -s "$dir/c" ] && [ ! -e "$dir/c.tmp" ]; echo $?) "checkpoint written, no temporary left"
	"$bin" --preset tiny --steps 16 --json $flag --resume "$dir/c" >"$dir/b.json" 2>"$dir/err"
	ok $? "$budget budget: --resume to step 16"
	losses "$dir/full.json" >"$dir/full.l"
	cat <(losses "$dir/a.json") <(losses "$dir/b.json") >"$dir/ab.l"
	ok $([ "$(wc -l <"$dir/ab.l")" -eq 16 ]; echo $?) "16 steps in the two halves"
	cmp -s "$dir/full.l" "$dir/ab.l"
	ok $? "$budget budget: resumed losses bit-identical to uninterrupted"
done

head -c 3000 "$dir/c" >"$dir/short"
"$bin" --preset tiny --steps 16 --resume "$dir/short" >/dev/null 2>"$dir/err"
rc=$?
ok $([ $rc -ne 0 ] && grep -q "short" "$dir/err" && grep -qi "truncated" "$dir/err"; echo $?) "truncated checkpoint refused: $(cat "$dir/err")"
cp "$dir/c" "$dir/bad" && printf 'X' | dd of="$dir/bad" bs=1 seek=5000 conv=notrunc 2>/dev/null
"$bin" --preset tiny --steps 16 --resume "$dir/bad" >/dev/null 2>"$dir/err"
ok $([ $? -ne 0 ] && grep -qi "checksum" "$dir/err"; echo $?) "damaged checkpoint refused: $(cat "$dir/err")"
"$bin" --preset small --steps 16 --resume "$dir/c" >/dev/null 2>"$dir/err"
ok $([ $? -ne 0 ] && grep -qi "preset" "$dir/err"; echo $?) "checkpoint of another preset refused: $(cat "$dir/err")"
echo "my notes" >"$dir/notes.txt"
"$bin" --preset tiny --steps 2 --ckpt "$dir/notes.txt" >"$dir/out" 2>"$dir/err"
ok $([ $? -eq 2 ] && grep -q "not an hmm-train checkpoint" "$dir/err" && ! grep -q '^step' "$dir/out" && [ "$(cat "$dir/notes.txt")" = "my notes" ]; echo $?) "--ckpt onto a file that is not a checkpoint: refused before training, file untouched"
"$bin" --preset tiny --steps 2 --ckpt "$dir/no/such/dir/c" >"$dir/out" 2>"$dir/err"
ok $([ $? -ne 0 ] && grep -q "cannot create" "$dir/err" && ! grep -q '^step' "$dir/out"; echo $?) "--ckpt into a missing folder: refused before training: $(cat "$dir/err")"
echo "1..$n"
exit $failed
