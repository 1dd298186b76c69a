#!/usr/bin/env bash
# test_bench_offload_stripe — `hmm-bench offload --stripe`: N files in
# --dir or the paths given make the store's members (JSON store_members),
# every file it made is gone after the run; a bad N is a usage error
# (exit 2) and an existing path is refused (exit 1), the existing file
# untouched; --segment cuts the states into that many parameters'
# segments (JSON segments), and a segment of 0 is a usage error; a fio
# that fails is reported in its own words, with its file.  Small sizes: this checks the flags, it
# does not time.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-bench
need "$bin"
command -v fio >/dev/null || skip_all "needs fio (the bench's io floor)"
scratch bench-offload-stripe

run() {	# args...: the JSON line, or nothing
	"$bin" offload --n 1M --chunk 64K --reps 1 --json "$@" 2>"$dir/err" |
		grep '^{'
}

out=$(run --dir "$dir" --stripe 3)
echo "# $out"
ok $(echo "$out" | grep -q '"store_members":3'; echo $?) "--stripe 3: three members"
ok $([ -z "$(ls -A "$dir" | grep -v '^err$')" ]; echo $?) "--stripe 3: no file left in --dir"
out=$(run --dir "$dir" --stripe "$dir/x.store,$dir/y.store")
ok $(echo "$out" | grep -q '"store_members":2'; echo $?) "--stripe PATH,PATH: two members"
ok $([ ! -e "$dir/x.store" ] && [ ! -e "$dir/y.store" ]; echo $?) "the paths it made are removed"
out=$(run --dir "$dir")
ok $(echo "$out" | grep -q '"store_members":1'; echo $?) "no --stripe: one file"
ok $(echo "$out" | grep -Eq '"io_floor_qd":(16|64),' &&
     echo "$out" | grep -Eq '"warmup_step_s":[0-9]'; echo $?) \
	"the floor names its fio queue depth; the warm-up round is reported"
# segments of 21 MiB of fio each: 96K (2.6 MiB) ran in under fio's 1 ms
# resolution on a fast disk, which the bench refuses to time
out=$(run --dir "$dir" --n 2M --segment 768K)
ok $(echo "$out" | grep -q '"segments":3,' &&
     echo "$out" | grep -Eq '"step_s":[0-9.e-]+,"io_floor_s":[0-9.e-]+,' &&
     [ -z "$(ls -A "$dir" | grep -v '^err$')" ]; echo $?) \
	"--segment 768K: 2M parameters in 3 segments, timed, nothing left"
"$bin" offload --n 256K --chunk 64K --reps 1 --dir "$dir" --segment 0 >/dev/null 2>"$dir/err"
ok $([ $? = 2 ] && grep -q -- '--segment 0: want a size' "$dir/err" && grep -q -- '--segment PARAMS' "$dir/err"; echo $?) "--segment 0: a usage error naming it"
"$bin" offload --n 256K --chunk 64K --reps 1 --dir "$dir" --stripe 9 >/dev/null 2>"$dir/err"
ok $([ $? = 2 ] && grep -q -- '--stripe 9: want N from 1 to 8' "$dir/err"; echo $?) "--stripe 9: a usage error naming it"
printf 'precious' >"$dir/keep"
"$bin" offload --n 256K --chunk 64K --reps 1 --dir "$dir" --stripe "$dir/new.store,$dir/keep" >/dev/null 2>"$dir/err"
ok $([ $? = 1 ] && grep -q "keep: exists" "$dir/err" && [ "$(cat "$dir/keep")" = precious ] && [ ! -e "$dir/new.store" ]; echo $?) "an existing path: refused, untouched, nothing left"
# fio that fails (its file system full): fio's own words and the file
# are said, not "did not run (is fio installed?)"
mkdir -p "$dir/fakefio"
printf '#!/bin/sh\necho "fio: ENOSPC on laying out file, stopping" >&2\nexit 1\n' >"$dir/fakefio/fio"
chmod +x "$dir/fakefio/fio"
PATH="$dir/fakefio:$PATH" "$bin" offload --n 256K --chunk 64K --reps 1 --dir "$dir" >/dev/null 2>"$dir/err"
ok $([ $? = 1 ] && grep -q "fio on $dir/hmm-bench-offload.fio exited with status 1" "$dir/err" && grep -q "^  fio: ENOSPC on laying out file" "$dir/err" && ! grep -q "is fio installed" "$dir/err" && [ -z "$(ls -A "$dir" | grep -v '^err$\|^fakefio$\|^keep$')" ]; echo $?) "fio fails: its error and file said, nothing left ($(head -2 "$dir/err" | tr '\n' '|'))"
t_done
