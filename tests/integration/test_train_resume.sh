#!/usr/bin/env bash
# test_train_resume — a checkpoint is a flush of the store, not a copy:
# a run checkpointed at step 8 (a small file plus PATH.store) and resumed
# to step 16 gives bit-identical losses to an uninterrupted 16-step run,
# with the state in the store (quarter budget) and in memory (1G, where
# the store exists only for the checkpoint); training on after a
# checkpoint does not disturb it; a later checkpoint rewrites the file;
# a damaged, truncated, stale or mismatched checkpoint is refused with a
# clear message naming the path; the --ckpt folder's write probe touches
# no file of the user's.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-train
need "$bin"
scratch train-resume
losses() { grep -o '"step":[0-9]*,"loss":[^,]*,"loss_hex":"[^"]*"' "$1" | sed 's/"loss":[^,]*,//'; }
field() { grep '"summary":true' "$1" | grep -o "\"$2\":[0-9]*" | cut -d: -f2; }

for budget in default 1G; do
	flag=; [ $budget = default ] || flag="--host-budget $budget"
	rm -f "$dir"/c "$dir"/c.store
	"$bin" --preset tiny --steps 16 --json $flag >"$dir/full.json" 2>"$dir/err"
	ok $? "$budget budget: uninterrupted 16 steps"
	"$bin" --preset tiny --steps 8 --json $flag --ckpt "$dir/c" >"$dir/a.json" 2>"$dir/err"
	ok $? "$budget budget: 8 steps with --ckpt"
	ok $([ -s "$dir/c" ] && [ -s "$dir/c.store" ] && [ ! -e "$dir/c.tmp" ]; echo $?) "checkpoint file and its store written, no temporary left"
	sb=$(field "$dir/a.json" state_bytes) fb=$(field "$dir/a.json" ckpt_flush_bytes)
	cb=$(stat -c %s "$dir/c")
	ok $([ "$(field "$dir/a.json" ckpt_step)" = 8 ] && [ "$cb" = "$(field "$dir/a.json" ckpt_file_bytes)" ] && [ "$cb" -lt 4096 ] && [ $((cb * 1000)) -lt "$sb" ]; echo $?) "$budget budget: the checkpoint file is $cb bytes for a state of $sb bytes"
	ok $(grep -q "checkpoint at step 8: flushed the store $dir/c.store" "$dir/err"; echo $?) "$budget budget: the log says the checkpoint is a flush: $(cat "$dir/err")"
	if [ $budget = default ]; then
		# the state lives in the store: the flush writes only the
		# chunks dirty in DRAM, not the state again
		ok $([ "$fb" -gt 0 ] && [ $((fb * 2)) -lt "$sb" ]; echo $?) "quarter budget: the flush wrote $fb of $sb bytes (not a copy)"
	fi
	"$bin" --preset tiny --steps 16 --json $flag --resume "$dir/c" >"$dir/b.json" 2>"$dir/err"
	ok $? "$budget budget: --resume to step 16"
	losses "$dir/full.json" >"$dir/full.l"
	cat <(losses "$dir/a.json") <(losses "$dir/b.json") >"$dir/ab.l"
	ok $([ "$(wc -l <"$dir/ab.l")" -eq 16 ]; echo $?) "16 steps in the two halves"
	cmp -s "$dir/full.l" "$dir/ab.l"
	ok $? "$budget budget: resumed losses bit-identical to uninterrupted"
	# the resumed run trained on in the store without flushing: the
	# checkpoint's extents are untouched (copy-on-write until a flush)
	"$bin" --preset tiny --steps 16 --json $flag --resume "$dir/c" >"$dir/b2.json" 2>"$dir/err"
	ok $([ $? -eq 0 ] && cmp -s <(losses "$dir/b.json") <(losses "$dir/b2.json"); echo $?) "$budget budget: resuming the same checkpoint again gives the same losses"
done

# a checkpoint at or past --steps: nothing to train is bad input, said,
# exit 2, and no step, loss or summary is reported
for st in 8 5; do
	"$bin" --preset tiny --steps $st --json --resume "$dir/c" >"$dir/out" 2>"$dir/err"
	ok $([ $? -eq 2 ] && grep -q "checkpoint is at step 8 and --steps is $st: nothing to train" "$dir/err" && ! grep -q '"step"\|"summary"' "$dir/out"; echo $?) "--resume at step 8 with --steps $st: exit 2, said: $(cat "$dir/err")"
done

# a later checkpoint in the same store rewrites the file: 8 -> 12 -> 16
cp "$dir/c" "$dir/c8"
"$bin" --preset tiny --steps 12 --json --resume "$dir/c" --ckpt "$dir/c" >"$dir/b12.json" 2>"$dir/err"
ok $([ $? -eq 0 ] && [ "$(field "$dir/b12.json" ckpt_step)" = 12 ]; echo $?) "--resume c --ckpt c advances the checkpoint to step 12"
"$bin" --preset tiny --steps 16 --json --resume "$dir/c" >"$dir/b16.json" 2>"$dir/err"
cat <(losses "$dir/a.json") <(losses "$dir/b12.json") <(losses "$dir/b16.json")  >"$dir/abc.l"
ok $([ $? -eq 0 ] && cmp -s "$dir/full.l" "$dir/abc.l"; echo $?) "8 + 4 + 4 steps through two checkpoints: bit-identical"
cp "$dir/c8" "$dir/c"
"$bin" --preset tiny --steps 16 --resume "$dir/c" >/dev/null 2>"$dir/err"
ok $([ $? -ne 0 ] && grep -q "$dir/c" "$dir/err" && grep -q "another checkpoint" "$dir/err"; echo $?) "a stale file (its store flushed since) refused: $(cat "$dir/err")"
"$bin" --preset tiny --steps 16 --resume "$dir/c" --ckpt "$dir/other" >"$dir/out" 2>"$dir/err"
ok $([ $? -eq 2 ] && grep -q "ckpt must be $dir/c" "$dir/err" && ! grep -q '^step' "$dir/out"; echo $?) "--ckpt elsewhere than --resume (would replace its checkpoint): refused"
cp "$dir/c8" "$dir/moved"
"$bin" --preset tiny --steps 16 --resume "$dir/moved" >/dev/null 2>"$dir/err"
ok $([ $? -ne 0 ] && grep -q "$dir/moved.store" "$dir/err"; echo $?) "a checkpoint without its store refused: $(cat "$dir/err")"

# --store named explicitly: kept, recorded absolute in the file
"$bin" --preset tiny --steps 8 --json --store "$dir/s.store" --ckpt "$dir/e" >"$dir/a.json" 2>"$dir/err" &&
	"$bin" --preset tiny --steps 16 --json --resume "$dir/e" >"$dir/b.json" 2>"$dir/err"
ok $([ $? -eq 0 ] && [ ! -e "$dir/e.store" ] && grep -q "$(cd "$dir" && pwd)/s.store" "$dir/e" && cmp -s "$dir/full.l" <(cat <(losses "$dir/a.json") <(losses "$dir/b.json")); echo $?) "--store with --ckpt: the named store is the checkpoint's; resume bit-identical"

sz=$(stat -c %s "$dir/c8")
head -c $((sz / 2)) "$dir/c8" >"$dir/short"
"$bin" --preset tiny --steps 16 --resume "$dir/short" >/dev/null 2>"$dir/err"
rc=$?
ok $([ $rc -ne 0 ] && grep -q "short" "$dir/err" && grep -qi "truncated" "$dir/err"; echo $?) "truncated checkpoint refused: $(cat "$dir/err")"
cp "$dir/c8" "$dir/bad" && printf 'X' | dd of="$dir/bad" bs=1 seek=90 conv=notrunc 2>/dev/null
cp "$dir/c.store" "$dir/bad.store"
"$bin" --preset tiny --steps 16 --resume "$dir/bad" >/dev/null 2>"$dir/err"
ok $([ $? -ne 0 ] && grep -q "$dir/bad" "$dir/err" && grep -qi "checksum" "$dir/err"; echo $?) "damaged checkpoint refused: $(cat "$dir/err")"
"$bin" --preset small --steps 16 --resume "$dir/c8" >/dev/null 2>"$dir/err"
ok $([ $? -ne 0 ] && grep -q "$dir/c8" "$dir/err" && grep -qi "preset" "$dir/err"; echo $?) "checkpoint of another preset refused: $(cat "$dir/err")"
echo "my notes" >"$dir/notes.txt"
"$bin" --preset tiny --steps 2 --ckpt "$dir/notes.txt" >"$dir/out" 2>"$dir/err"
ok $([ $? -eq 2 ] && grep -q "not an hmm-train checkpoint" "$dir/err" && ! grep -q '^step' "$dir/out" && [ "$(cat "$dir/notes.txt")" = "my notes" ]; echo $?) "--ckpt onto a file that is not a checkpoint: refused before training, file untouched"
# the folder's write probe has no name (or one of its own): it once was
# PATH.probe, opened with O_TRUNC and removed, a file of the user's too
mkdir "$dir/p"
echo "my notes" >"$dir/p/c.probe"
"$bin" --preset tiny --steps 2 --ckpt "$dir/p/c" >"$dir/out" 2>"$dir/err"
ok $([ $? -eq 0 ] && [ "$(cat "$dir/p/c.probe" 2>/dev/null)" = "my notes" ]; echo $?) "--ckpt PATH leaves a file PATH.probe of the user's as it was"
ok $([ "$(ls -A "$dir/p" | tr '\n' ' ')" = "c c.probe c.store " ]; echo $?) "and makes only PATH and PATH.store ($(ls -A "$dir/p" | tr '\n' ' '))"
"$bin" --preset tiny --steps 2 --ckpt "$dir/no/such/dir/c" >"$dir/out" 2>"$dir/err"
ok $([ $? -ne 0 ] && grep -q "cannot create" "$dir/err" && grep -q "$dir/no/such/dir/c" "$dir/err" && ! grep -q '^step' "$dir/out"; echo $?) "--ckpt into a missing folder: refused before training: $(cat "$dir/err")"
t_done
