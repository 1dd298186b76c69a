#!/usr/bin/env bash
# test_train_data — --data FILE: a missing, empty, binary or too-short
# file is refused with a message naming the file and the reason, before
# any training (exit 2, no step line); a text file trains.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-train
need "$bin"
scratch train-data

refused() {	# file pattern what
	"$bin" --preset tiny --steps 2 --data "$1" >"$dir/out" 2>"$dir/err"
	rc=$?
	echo "# $(cat "$dir/err")"
	ok $([ $rc -eq 2 ] && grep -q -- "--data $1" "$dir/err" && grep -qi "$2" "$dir/err" && ! grep -q '^step' "$dir/out"; echo $?) "$3 refused (rc $rc)"
}
refused "$dir/nonexistent.txt" "no such file" "missing file"
: >"$dir/empty.txt"
refused "$dir/empty.txt" "empty" "empty file"
head -c 4096 /dev/urandom >"$dir/blob.bin"; printf '\0' >>"$dir/blob.bin"
refused "$dir/blob.bin" "binary" "binary file"
printf 'short text\n' >"$dir/short.txt"
refused "$dir/short.txt" "shorter than one sequence" "too-short file"
refused "$dir" "not a regular file" "a directory"

for i in $(seq 200); do echo "line $i of a small text file for hmm-train to read."; done >"$dir/text.txt"
"$bin" --preset tiny --steps 3 --data "$dir/text.txt" >"$dir/out" 2>"$dir/err"
ok $? "a text file trains"
ok $(grep -q "data: $dir/text.txt" "$dir/out"; echo $?) "the run names its data"
t_done
