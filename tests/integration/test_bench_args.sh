#!/usr/bin/env bash
# test_bench_args — every hmm-bench subcommand reads its flags alike
# (tools/hmm-bench/args.c): --help and -h print the usage on stdout and
# exit 0; an unknown option, a stray argument, a flag without its value
# and a value out of range or with junk after it exit 2 with one line
# that names the flag and the value, the usage after it, and nothing is
# measured or left behind; --name=value is --name value.  A file named
# by a flag (tensors --store, io --file) that holds data is refused and
# left as it was.  Nothing here runs a benchmark but a tiny adamw and a
# tiny tensors.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-bench
need "$bin"
scratch bench-args

cmds="adamw attn io offload scale shared tensors train uvm"
for c in $cmds; do
	out=$("$bin" $c --help 2>"$dir/err"); rc=$?
	ok $([ $rc = 0 ] && grep -q "^usage: hmm-bench $c" <<<"$out" && [ ! -s "$dir/err" ]; echo $?) "$c --help: usage on stdout, exit 0"
	out=$("$bin" $c -h 2>/dev/null); rc=$?
	ok $([ $rc = 0 ] && grep -q "^usage: hmm-bench $c" <<<"$out"; echo $?) "$c -h"
done

# bad CMD PATTERN ARGS...: exit 2, the first line of stderr matches
# PATTERN (literally), the usage follows, nothing on stdout
bad() {
	local c=$1 pat=$2; shift 2
	(cd "$dir" && "$bin" $c "$@" >out 2>err)
	rc=$?
	echo "# $c $*: $(head -1 "$dir/err")"
	ok $([ $rc = 2 ] && head -1 "$dir/err" | grep -qF -- "$pat" && grep -q "^usage: hmm-bench $c" "$dir/err" && [ ! -s "$dir/out" ]; echo $?) "$c $*: exit 2 naming it"
}
for c in $cmds; do
	bad $c "hmm-bench $c: --bogus: unknown option" --bogus
	bad $c "hmm-bench $c: stray: unexpected argument" stray
	bad $c "hmm-bench $c: --json=1: takes no value" --json=1
done
bad adamw "--reps: needs a value" --reps
bad adamw "--reps 3x: want an integer from 1 to 1000" --reps 3x
bad adamw "--threads 65: want an integer from 1 to 64" --threads 65
bad adamw "--n 1.5M: want a size" --n 1.5M
bad adamw "--n 99999999999999999999: want a size" --n 99999999999999999999
bad adamw "--n 1MB: want a size" --n 1MB
bad io "--size 8MB: want a size" --size 8MB
bad io "--bs 4KB: want a size" --bs 4KB
bad attn "--d 0: want an integer from 1 to 256" --d 0
bad attn "--dtype f16: want f32 or bf16" --dtype f16
bad io "--bs 6000: want a size from 4K to 1G, a multiple of 4K" --bs 6000
bad io "--rw sideways: want read, write, randread or both" --rw sideways
bad io "--pages 4k,4k: want kinds" --pages 4k,4k
bad io "--size 4K: want at least --bs" --size 4K
bad io "--overwrite: only with --file" --overwrite
bad tensors "--overwrite: only with --store" --overwrite
bad offload "--chunk 5000: want" --chunk=5000
bad offload "--io-depth 0: want an integer from 1 to 4096" --io-depth 0
bad offload "--stripe 0: want N from 1 to 8" --stripe 0
bad offload "--n 1K: want at least one --chunk of fp32 parameters" --n 1K
bad offload "--n 1M: its default host budget, 4 B a parameter, holds less than 4 --chunk" --n 1M
bad offload "--budget 6M: want at least 4 --chunk" --n 1M --budget 6M
bad offload '--dir "": want a value, not empty' --dir ""
bad offload '--n "": want a size' --n=
bad scale "--steps 1: want an integer from 2" --steps 1
bad shared "--size 6M: want a multiple of --slice" --size 6M --slice 4M
bad shared "--memfd: not with --host-dir" --host-dir /dev/shm --memfd
bad shared "--host 2M: want at least the 2M chunks a --slice spans" --size 12M --slice 12K --host 2M
bad tensors "--compute-ratio nan: want a number from 0 to 100" --compute-ratio nan
bad tensors "--layers 3: want an integer from 4" --layers 3
bad train "--batch 0: want an integer from 1 to 4096" --batch 0
bad train "--preset list: want a preset's name" --preset list
bad attn "--torch-venv v: only with --vs-torch" --torch-venv v
bad train "--torch-venv v: only with --vs-torch" --torch-venv v
bad train "--store x.store: not with --vs-torch" --vs-torch --store x.store
bad train "--store $dir/none/x: $dir/none: No such file or directory" --store "$dir/none/x"
bad uvm "--block 3M: want a size from 2M to 1T, a multiple of 2M" --block 3M
# folders: one named by a flag, or the scratch folder, is never made; a
# missing one (or a file) is refused before anything runs, named
: >"$dir/afile"
bad offload "--dir $dir/none: No such file or directory" --dir "$dir/none"
bad offload "--dir $dir/afile: not a folder" --dir "$dir/afile"
bad scale "--dir $dir/none: No such file or directory" --dir "$dir/none"
bad shared "--dir $dir/none: No such file or directory" --dir "$dir/none"
bad shared "--dir $dir/afile: not a folder" --dir "$dir/afile"
bad tensors "--trace-dir $dir/none/t: No such file or directory" --trace-dir "$dir/none/t"
bad shared "--host-dir $dir/none: No such file or directory" --host-dir "$dir/none"
bad shared "--host-dir $dir/afile: not a folder" --host-dir "$dir/afile"
if [ "$(stat -f -c %T "$dir")" != tmpfs ]; then
	bad shared "--host-dir $dir: not a tmpfs" --host-dir "$dir"
else
	skip "the scratch folder is a tmpfs"
fi
bad shared "--hmmd $dir/nohmmd: No such file or directory" --hmmd "$dir/nohmmd"
(cd "$dir" && HMM_TEST_DIR=$dir/none "$bin" tensors --layers 4 --steps 1 --reps 1 >out 2>err)
ok $([ $? = 2 ] && grep -qF "\$HMM_TEST_DIR $dir/none: No such file or directory" "$dir/err"; echo $?) "\$HMM_TEST_DIR missing: exit 2, named"
rm -f "$dir/afile"
# what hmm-train refuses (a preset it does not know, a foreign --store)
# is a bad value of hmm-bench train's too: exit 2, named once
"$bin" train --preset nope --steps 2 --reps 1 >/dev/null 2>"$dir/err"
ok $([ $? = 2 ] && grep -q "^hmm-train: --preset nope: unknown" "$dir/err" && ! grep -q "hmm-train: hmm-train:" "$dir/err"; echo $?) "train --preset nope: exit 2, the prefix not doubled"
printf 'precious' >"$dir/keep"
"$bin" train --preset tiny --store "$dir/keep" --steps 2 --reps 1 >/dev/null 2>"$dir/err"
ok $([ $? = 2 ] && grep -q "keep.*not an hmm store" "$dir/err" && [ "$(cat "$dir/keep")" = precious ]; echo $?) "train --store FOREIGN: exit 2, untouched"
rm -f "$dir/keep"
# a file a flag names in a folder that is not there: a bad value, exit 2
"$bin" io --file "$dir/none/x" --no-fio --size 1M --reps 1 >/dev/null 2>"$dir/err"
ok $([ $? = 2 ] && grep -q "io: --file $dir/none/x: No such file or directory" "$dir/err"; echo $?) "io --file in a missing folder: exit 2, named"
"$bin" tensors --store "$dir/none/x" --layers 4 --steps 1 --reps 1 >/dev/null 2>"$dir/err"
ok $([ $? = 2 ] && grep -q "tensors: --store $dir/none/x: No such file or directory" "$dir/err"; echo $?) "tensors --store in a missing folder: exit 2, named"
ok $([ -z "$(ls -A "$dir" | grep -Ev '^(out|err)$')" ]; echo $?) "the refused runs made nothing"

# outside a source tree, without $HMM_TEST_DIR: the scratch folder is
# $TMPDIR for every subcommand, and no build/tmp is made
mkdir -p "$dir/away" "$dir/tmpd"
(cd "$dir/away" && env -u HMM_TEST_DIR TMPDIR="$dir/tmpd" "$bin" tensors --layers 4 --layer-size 1M --chunk 256K --steps 1 --reps 1 >/dev/null 2>"$dir/err")
rc=$?
ok $([ $rc = 0 ] && [ -z "$(ls -A "$dir/away")" ] && [ -z "$(ls -A "$dir/tmpd")" ]; echo $?) "tensors outside the tree: no build/tmp made, its store in \$TMPDIR and gone (rc $rc, $(head -1 "$dir/err"))"
(cd "$dir/away" && env -u HMM_TEST_DIR TMPDIR="$dir/tmpd" "$bin" offload --n 1M --chunk 256K --reps 1 >/dev/null 2>"$dir/err")
rc=$?
ok $([ $rc = 0 ] && [ -z "$(ls -A "$dir/away")" ] && [ -z "$(ls -A "$dir/tmpd")" ]; echo $?) "offload outside the tree: no build/tmp, its store in \$TMPDIR and gone (rc $rc, $(head -1 "$dir/err"))"
rm -rf "$dir/away" "$dir/tmpd"

# a file named by a flag: one holding data, or a device, is refused
# untouched without --overwrite; a new path is made and removed at exit
printf 'precious' >"$dir/keep"
"$bin" tensors --store "$dir/keep" --layers 4 --steps 1 --reps 1 >/dev/null 2>"$dir/err"
ok $([ $? = 2 ] && grep -q 'tensors: --store .*keep: holds data; not overwritten' "$dir/err" && [ "$(cat "$dir/keep")" = precious ]; echo $?) "tensors --store FILE with data: exit 2, the file untouched"
"$bin" io --file "$dir/keep" --no-fio --size 1M --reps 1 >/dev/null 2>"$dir/err"
ok $([ $? = 2 ] && grep -q 'io: --file .*keep: holds data' "$dir/err" && [ "$(cat "$dir/keep")" = precious ]; echo $?) "io --file FILE with data: exit 2, the file untouched"
"$bin" tensors --store /dev/null --layers 4 --steps 1 --reps 1 >/dev/null 2>"$dir/err"
ok $([ $? = 2 ] && grep -q 'not a regular file' "$dir/err"; echo $?) "tensors --store /dev/null: a device, refused"
rm -f "$dir/keep"
"$bin" tensors --store "$dir/new.store" --layer-size 1M --chunk 256K --layers 4 --steps 1 --reps 1 >/dev/null 2>"$dir/err"
ok $([ $? = 0 ] && [ ! -e "$dir/new.store" ]; echo $?) "tensors --store NEW: measured, and the file it made is gone"

# tensors' own store: one already there is not its to format; a signal
# mid-run removes the one it made
printf 'precious' >"$dir/bench-tensors.store"
HMM_TEST_DIR=$dir "$bin" tensors --layers 4 --layer-size 1M --chunk 256K --steps 1 --reps 1 >/dev/null 2>"$dir/err"
ok $([ $? = 1 ] && grep -q 'bench-tensors.store: exists' "$dir/err" && [ "$(cat "$dir/bench-tensors.store")" = precious ]; echo $?) "tensors: its store name taken: exit 1, the file untouched"
rm -f "$dir/bench-tensors.store"
HMM_TEST_DIR=$dir "$bin" tensors --layers 16 --layer-size 8M --steps 50 --reps 9 >/dev/null 2>&1 &
pid=$!
for i in $(seq 100); do [ -e "$dir/bench-tensors.store" ] && break; sleep 0.05; done
sleep 0.3
kill -TERM $pid; wait $pid
ok $([ -e "$dir/bench-tensors.store" ]; [ $? = 1 ]; echo $?) "tensors: SIGTERM mid-run leaves no store"

# sizes below a chunk: the store and budget are sized in whole chunks
out=$("$bin" tensors --store "$dir/small.store" --layers 4 --layer-size 4097 --chunk 4K --steps 1 --reps 1 --json 2>"$dir/err" | tail -1)
ok $([ $? = 0 ] && python3 -c 'import json,sys; json.loads(sys.argv[1])' "$out" && [ ! -e "$dir/small.store" ]; echo $?) "tensors --layer-size 4097 --chunk 4K: measured, valid JSON, nothing left ($(head -1 "$dir/err"))"

# the man page as a reader sees it: ".BR --overwrite ; 77 when ..." ran
# its words together ("--overwrite;77whenasubcommandcannot")
man1=$(dirname "$0")/../../man/hmm-bench.1
if command -v groff >/dev/null && [ -f "$man1" ]; then
	txt=$(groff -man -Tascii -P-cbou "$man1" 2>/dev/null | tr -s ' \n' '  ')
	ok $(grep -q -- '--overwrite; 77 when a subcommand cannot run here' <<<"$txt"; echo $?) "man hmm-bench: EXIT STATUS reads '--overwrite; 77 when ...'"
else
	skip "groff or man/hmm-bench.1 not here"
fi

# --name=value is --name value; the last of a flag given twice wins
out=$("$bin" adamw --n=64K --threads=2 --threads 1 --reps=1 --json 2>&1 | tail -1)
echo "# $out"
ok $(grep -q '"bench":"adamw","threads":1,' <<<"$out" && grep -q '"n":65536,' <<<"$out"; echo $?) "adamw --n=64K --threads=2 --threads 1: 64K parameters, 1 thread"
t_done
