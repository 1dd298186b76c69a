#!/usr/bin/env bash
# test_train_ckpt_crash — kill -9 inside a checkpoint never leaves one
# that cannot be resumed (issue 18 item 9).  A run resumed from step 8
# checkpoints at step 12 and is killed (HMM_TRAIN_CRASH_AT) after the
# new file is staged (store not flushed yet), after the store's flush
# (file not renamed yet) and after the rename (folder not synced yet);
# --resume then continues from step 8 or from step 12, whichever the
# store holds, with losses bit-identical to an uninterrupted run.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-train
need "$bin"
scratch train-ckpt-crash
losses() { grep -o '"step":[0-9]*,"loss":[^,]*,"loss_hex":"[^"]*"' "$1" | sed 's/"loss":[^,]*,//'; }
first() { losses "$1" | head -1 | grep -o '"step":[0-9]*' | cut -d: -f2; }

"$bin" --preset tiny --steps 16 --json >"$dir/full.json" 2>"$dir/err"
ok $? "uninterrupted 16 steps"
losses "$dir/full.json" >"$dir/full.l"

for point in staged:9 flushed:13 renamed:13; do
	at=${point%:*} from=${point#*:}
	rm -f "$dir"/c "$dir"/c.store "$dir"/c.tmp
	"$bin" --preset tiny --steps 8 --json --ckpt "$dir/c" >"$dir/a.json" 2>"$dir/err"
	ok $? "$at: 8 steps with --ckpt"
	{ HMM_TRAIN_CRASH_AT=$at "$bin" --preset tiny --steps 12 --json \
		--resume "$dir/c" --ckpt "$dir/c" >"$dir/b.json" 2>"$dir/err"; } 2>/dev/null
	ok $([ $? -eq 137 ]; echo $?) "$at: the checkpoint at step 12 killed (SIGKILL) $at"
	"$bin" --preset tiny --steps 16 --json --resume "$dir/c" --ckpt "$dir/c" >"$dir/c.json" 2>"$dir/err"
	rc=$?
	ok $([ $rc -eq 0 ] && [ "$(first "$dir/c.json")" = "$from" ]; echo $?) "$at: --resume works and continues from step $from (rc $rc, first step $(first "$dir/c.json")): $(head -c 300 "$dir/err")"
	ok $(cmp -s <(losses "$dir/c.json") <(sed -n "$from,16p" "$dir/full.l"); echo $?) "$at: losses of steps $from..16 bit-identical to the uninterrupted run"
	if [ "$at" = flushed ]; then
		ok $(grep -q "not renamed (interrupted); resuming from it" "$dir/err"; echo $?) "$at: the resume says it took the staged file"
	fi
	ok $([ ! -e "$dir/c.tmp" ] && "$bin" --preset tiny --steps 16 --json --resume "$dir/c" >"$dir/d.json" 2>"$dir/err" && [ "$(first "$dir/d.json")" = 17 ] || [ "$(first "$dir/d.json")" = "" ]; echo $?) "$at: the checkpoint at 16 is whole (no PATH.tmp left, resumes at its end)"
done
t_done
