#!/usr/bin/env bash
# test_train_store — a store on a full or a read-only file system, or in
# a place that cannot hold files, is reported with the path and the
# reason before training starts (no step runs, exit status non-zero).
# A foreign file, or a store holding a checkpoint's named tensors, is
# refused and left byte-identical unless --format is given.  The
# temporary store (no --store) is gone after SIGTERM or SIGKILL too, and
# so is a --ckpt store that no checkpoint was completed in.
# The full and read-only cases mount small tmpfs instances (root needed;
# they are skipped otherwise); the others need nothing.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-train
mounted=()
need "$bin"
cleanup() { for m in "${mounted[@]}"; do umount "$m" 2>/dev/null; done; rm -rf "$dir"; }
scratch train-store
trap cleanup EXIT

refused() {	# store-path pattern what
	"$bin" --preset tiny --steps 2 --store "$1" >"$dir/out" 2>"$dir/err"
	rc=$?
	echo "# $(grep -v '^blas' "$dir/err")"
	ok $([ $rc -ne 0 ] && grep -q -- "store $1" "$dir/err" && grep -qi "$2" "$dir/err" && ! grep -q '^step' "$dir/out"; echo $?) "$3: refused before training (rc $rc)"
}

mkdir -p "$dir/full" "$dir/ro"
if mount -t tmpfs -o size=1m tmpfs "$dir/full" 2>/dev/null; then
	mounted+=("$dir/full")
	refused "$dir/full/store" "needs .* free" "store on a full (1 MiB) file system"
	ok $([ ! -e "$dir/full/store" ]; echo $?) "no partial store file left behind"
else
	skip "cannot mount a tmpfs here (not root?)"; skip "same"
fi
if mount -t tmpfs -o ro,size=1m tmpfs "$dir/ro" 2>/dev/null; then
	mounted+=("$dir/ro")
	refused "$dir/ro/store" "read-only file system" "store on a read-only file system"
else
	skip "cannot mount a read-only tmpfs here (not root?)"
fi
refused "$dir/no/such/dir/store" "no such file or directory" "store in a missing directory"
echo "precious words" >"$dir/precious.txt"
refused "$dir/precious.txt" "not an hmm store" "an existing file that is not a store"
ok $([ "$(cat "$dir/precious.txt")" = "precious words" ]; echo $?) "and that file is untouched"
"$bin" --preset tiny --steps 1 --store "$dir/reuse" >/dev/null 2>&1 &&
	"$bin" --preset tiny --steps 1 --store "$dir/reuse" >/dev/null 2>"$dir/err"
ok $? "a store file from an earlier run is reused: $(cat "$dir/err")"
"$bin" --preset tiny --steps 1 --ckpt "$dir/c1" >/dev/null 2>"$dir/err"
ok $? "a run with --ckpt keeps its store: $(cat "$dir/err")"
cp "$dir/c1.store" "$dir/c1.copy"
refused "$dir/c1.store" "hmm store with [0-9]* named tensors" "a store holding a checkpoint, without --format"
ok $(cmp -s "$dir/c1.store" "$dir/c1.copy"; echo $?) "and the checkpoint's store is byte-identical"
"$bin" --preset tiny --steps 1 --ckpt "$dir/c1" >/dev/null 2>"$dir/err"
ok $([ $? -ne 0 ] && grep -q -- "--format" "$dir/err"; echo $?) "a second --ckpt to the same file is refused too, pointing at --format"
"$bin" --preset tiny --steps 1 --store "$dir/c1.store" --format >/dev/null 2>"$dir/err"
ok $? "--format formats it: $(cat "$dir/err")"
"$bin" --preset tiny --steps 1 --store "$dir/precious.txt" --format >/dev/null 2>"$dir/err"
ok $([ $? = 0 ] && [ "$(head -c 8 "$dir/precious.txt")" = HMMSTORE ]; echo $?) "--format formats a foreign file"
"$bin" --preset tiny --steps 1 --resume "$dir/c1" --format >/dev/null 2>"$dir/err"
ok $([ $? = 2 ] && grep -q -- "--format" "$dir/err"; echo $?) "--format with --resume: a usage error"
refused "/proc/hmm-train.store" "cannot open" "store under /proc"

# the temporary store (no --store) goes however the run ends: killed
# mid-run, SIGTERM or SIGKILL, it leaves no file in $TMPDIR
abs=$(cd "$(dirname "$bin")" && pwd)/${bin##*/}
for sig in TERM KILL; do
	mkdir -p "$dir/tmp$sig"
	(cd "$dir/tmp$sig" && TMPDIR="$dir/tmp$sig" exec "$abs" --preset default --steps 200 --host-budget /4 >out 2>err) &
	tp=$!
	for i in $(seq 200); do grep -q '^step' "$dir/tmp$sig/out" 2>/dev/null && break; sleep 0.05; done
	ok $(grep -q '^step' "$dir/tmp$sig/out"; echo $?) "SIG$sig: a run on a temporary store got to its first step"
	kill -$sig $tp; wait $tp 2>/dev/null
	ok $([ -z "$(ls "$dir/tmp$sig" | grep -Ev '^(out|err)$')" ]; echo $?) "SIG$sig mid-run: no store left in \$TMPDIR ($(ls "$dir/tmp$sig" | grep -Ev '^(out|err)$' | tr '\n' ' '))"
done
# a --ckpt store is scratch until a checkpoint is complete in it: a
# signal before that removes it (it was left, 79 MB for --preset small,
# with no PATH to resume); one holding a checkpoint stays, and resumes.
# SIGINT inherited ignored, as a script's background job starts: hmm-train
# stops on kill -INT all the same (it once ran on)
ckrun() {	# out args...: in the background, SIGINT ignored, until step 1
	local out=$1; shift
	(trap '' INT; exec "$abs" --preset tiny --steps 100000 "$@" >"$out" 2>&1) &
	tp=$!
	for i in $(seq 200); do grep -q '^step' "$out" 2>/dev/null && break; sleep 0.05; done
}
stop() {	# sig: signal the run, SIGKILL it if still there 10 s later; rc
	kill -$1 $tp
	for i in $(seq 100); do kill -0 $tp 2>/dev/null || break; sleep 0.1; done
	kill -KILL $tp 2>/dev/null
	wait $tp
}
mkdir -p "$dir/ck"
for sig in TERM INT HUP; do
	rm -f "$dir/ck/"*
	ckrun "$dir/ck.out" --ckpt "$dir/ck/c"
	stop $sig
	rc=$?
	ok $([ $rc = $((128 + $(kill -l $sig))) ] && [ -z "$(ls -A "$dir/ck")" ]; echo $?) "SIG$sig before any checkpoint: the run stops (rc $rc), its new PATH.store removed, nothing left ($(ls -A "$dir/ck" | tr '\n' ' '))"
done
"$abs" --preset tiny --steps 3 --ckpt "$dir/ck/c" >/dev/null 2>&1
cp "$dir/ck/c.store" "$dir/ck.copy"
ckrun "$dir/ck.out" --resume "$dir/ck/c" --ckpt "$dir/ck/c"
stop TERM
ok $([ "$(ls -A "$dir/ck" | tr '\n' ' ')" = "c c.store " ] && "$abs" --preset tiny --steps 5 --resume "$dir/ck/c" >/dev/null 2>&1; echo $?) "SIGTERM in a run resumed from a checkpoint: PATH and PATH.store stay, and resume"
rm -f "$dir/ck/"*
: >"$dir/ck/c.store"	# an empty file of the user's, taken as the store
ckrun "$dir/ck.out" --ckpt "$dir/ck/c"
stop TERM
ok $([ -e "$dir/ck/c.store" ]; echo $?) "SIGTERM: a PATH.store that was there before the run is not removed"
t_done
