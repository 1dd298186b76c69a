#!/usr/bin/env bash
# test_bench_io — `hmm-bench io` runs and says what it measured: with
# --json the last line is one object with bench, rw, bs, qd and, per
# direction and buffer kind, <rw>_<kind>_MBps (ours_MBps for one cell),
# and with fio (the default, when installed) <rw>_fio_MBps and
# <rw>_ratio_<kind> on 4 KiB and huge pages, medians of 5 interleaved
# rounds; bad options exit 2.  The file: an existing non-empty --file is
# refused untouched (exit 2) unless --overwrite; a file the run made (its
# --file, or its own scratch file in the scratch folder) is gone after it, also
# after a failure and after SIGTERM.  DeepSpeed's aio ceiling
# (read/write_ds_MBps, read/write_ratio_ds_4k) is null, with a note,
# where its venv has no python or its python cannot run it; a SIGTERM
# while that python runs stops it too, so it cannot make its file again.
# fio runs on each kind's own page size: a fake fio on PATH records the
# GLIBC_TUNABLES it was given (glibc.malloc.hugetlb=1 for the huge
# cells, added to what the caller had; nothing added for the 4k ones),
# and each kind's ratio is against its own fio.  A fio that fails is
# reported with its exit status or signal, its file and its last words;
# a scratch file that cannot be removed is named (exit 1).  Small
# sizes: this checks the tool, it does not time.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-bench
need "$bin"
scratch bench-io

has() {	# json key...
	local j=$1; shift
	for k in "$@"; do echo "$j" | grep -q "\"$k\":" || return 1; done
}

for rw in read write randread; do
	out=$("$bin" io --file "$dir/f" --size 16M --bs 256K --qd 8 --rw $rw --pages 4k --no-fio --reps 1 --json 2>"$dir/err")
	rc=$?
	last=$(echo "$out" | tail -1)
	echo "# $last"
	ok $([ $rc = 0 ] && has "$last" bench rw bs qd ours_MBps ${rw}_4k_MBps registered_4k && echo "$last" | grep -q '"bench":"io"' && echo "$last" | grep -q "\"rw\":\"$rw\""; echo $?) "$rw: JSON last line with the fields"
	ok $([ ! -e "$dir/f" ]; echo $?) "$rw: the --file it made is removed"
done
out=$("$bin" io --file "$dir/f" --size 16M --bs 64K --qd 4 --rw write --extent --no-fio --reps 1 --json 2>&1 | tail -1)
ok $(echo "$out" | grep -q '"path":"extent"'; echo $?) "--extent goes through extents"
out=$("$bin" io --file "$dir/f" --size 16M --bs 64K --qd 4 --rw read --extent --no-fio --reps 2 --pages 4k,huge --json 2>&1 | tail -1)
ok $(has "$out" read_4k_MBps read_huge_MBps && echo "$out" | grep -q '"path":"extent"'; echo $?) "--extent reads back what its first pass wrote, reopened per kind"

# the file: refused untouched, or --overwrite; scratch files go
printf 'precious' >"$dir/keep"
"$bin" io --file "$dir/keep" --size 16M --no-fio --reps 1 2>"$dir/err"
ok $([ $? = 2 ] && grep -q "io: --file .*keep: holds data; not overwritten" "$dir/err" && [ "$(cat "$dir/keep")" = precious ]; echo $?) "an existing non-empty --file: exit 2, untouched"
"$bin" io --file "$dir/keep" --overwrite --size 16M --bs 1M --qd 4 --rw read --pages 4k --no-fio --reps 1 >/dev/null 2>"$dir/err"
ok $([ $? = 0 ] && [ -s "$dir/keep" ] && [ "$(head -c 8 "$dir/keep")" != precious ]; echo $?) "--overwrite formats it (and leaves it: it was not ours)"
: >"$dir/empty"
"$bin" io --file "$dir/empty" --size 16M --bs 1M --qd 4 --rw read --pages 4k --no-fio --reps 1 >/dev/null 2>"$dir/err"
ok $([ $? = 0 ] && [ -e "$dir/empty" ] && [ ! -s "$dir/empty" ]; echo $?) "an empty --file is used and left empty again"
mkdir -p "$dir/tmp"
HMM_TEST_DIR=$dir/tmp "$bin" io --size 16M --bs 1M --qd 4 --rw write --pages 4k --no-fio --reps 1 >/dev/null 2>"$dir/err"
ok $([ $? = 0 ] && [ -z "$(ls -A "$dir/tmp")" ]; echo $?) "no --file: a scratch file in the scratch folder (\$HMM_TEST_DIR), removed at the end"
HMM_TEST_DIR=$dir/tmp "$bin" io --size 1T --bs 1M --qd 4 --rw read --pages 4k --no-fio --reps 1 >/dev/null 2>&1
ok $([ $? = 1 ] && [ -z "$(ls -A "$dir/tmp")" ]; echo $?) "a store that cannot be made (1T): exit 1, scratch removed"
HMM_TEST_DIR=$dir/tmp "$bin" io --size 1G --bs 4K --qd 1 --rw write --pages 4k --no-fio --reps 50 >/dev/null 2>&1 &
pid=$!
for i in $(seq 100); do [ -n "$(ls -A "$dir/tmp")" ] && break; sleep 0.05; done
sleep 0.3
kill -TERM $pid; wait $pid 2>/dev/null
ok $([ -z "$(ls -A "$dir/tmp")" ]; echo $?) "SIGTERM mid-run: scratch removed"
HMM_TEST_DIR=$dir/tmp "$bin" io --size 16M --bs 1M --qd 4 --rw read --pages 4k --no-fio --reps 3 2>/dev/null | head -c 1 >/dev/null
ok $([ ${PIPESTATUS[0]} = 141 ] && [ -z "$(ls -A "$dir/tmp")" ]; echo $?) "its reader gone (| head): SIGPIPE, scratch removed"

# DeepSpeed's aio ceiling: a venv without python, or one whose python
# cannot load it, leaves the ds fields null with a note; the run goes on
mkdir -p "$dir/nopy" "$dir/fakepy/bin"
out=$("$bin" io --file "$dir/f" --size 16M --bs 1M --qd 4 --pages 4k --no-fio --reps 1 --ds-venv "$dir/nopy" --json 2>"$dir/err" | tail -1)
rc=$?
ok $([ $rc = 0 ] && echo "$out" | grep -q '"read_ds_MBps":null' && echo "$out" | grep -q '"write_ratio_ds_4k":null' && grep -q "note: no DeepSpeed aio ceiling ($dir/nopy/bin/python" "$dir/err"; echo $?) "--ds-venv without python: exit 0, ds fields null, a note"
printf '#!/bin/sh\necho "ModuleNotFoundError: No module named deepspeed"\nexit 1\n' >"$dir/fakepy/bin/python"
chmod +x "$dir/fakepy/bin/python"
out=$(HMM_TORCH_VENV=$dir/fakepy "$bin" io --file "$dir/f" --size 16M --bs 1M --qd 4 --pages 4k --no-fio --reps 2 --json 2>"$dir/err" | tail -1)
rc=$?
ok $([ $rc = 0 ] && echo "$out" | grep -q '"read_ratio_ds_4k":null' && [ $(grep -c "No module named deepspeed" "$dir/err") = 1 ] && [ -z "$(ls "$dir" | grep '\.ds\.')" ] && [ ! -e "$dir/f" ]; echo $?) "\$HMM_TORCH_VENV whose python fails: null, one note, scratch files removed"
mkdir -p "$dir/okpy/bin"
printf '#!/bin/sh\n[ "$4 $5 $6" = "16777216 1048576 4" ] || exit 1\necho "ds 100 200"\n' >"$dir/okpy/bin/python"
chmod +x "$dir/okpy/bin/python"
out=$("$bin" io --file "$dir/f" --size 16M --bs 1M --qd 4 --pages 4k --no-fio --reps 1 --ds-venv "$dir/okpy" --json 2>"$dir/err" | tail -1)
ours=$(echo "$out" | sed -n 's/.*"read_4k_MBps":\([0-9.e+]*\).*/\1/p')
ratio=$(echo "$out" | sed -n 's/.*"read_ratio_ds_4k":\([0-9.e+]*\).*/\1/p')
ok $(echo "$out" | grep -q '"read_ds_MBps":200,' && echo "$out" | grep -q '"write_ds_MBps":100' && awk -v o="$ours" -v r="$ratio" 'BEGIN { d = r * 200 - o; exit !(o > 0 && d * d < o * o * 1e-8) }' && [ -z "$(ls "$dir" | grep '\.ds\.')" ]; echo $?) "a python that reports: ds MB/s per direction, ratio = ours 4k / ds"
# a python that ignores SIGTERM and would write the .ds file late: a
# SIGTERM to hmm-bench stops it (its process group) before the file goes
mkdir -p "$dir/slowpy/bin"
printf '#!/bin/sh\ntrap "" TERM\n: >"%s/started"\nsleep 3\necho late >"$3"\necho late >"%s/late"\necho "ds 1 1"\n' "$dir" "$dir" >"$dir/slowpy/bin/python"
chmod +x "$dir/slowpy/bin/python"
"$bin" io --file "$dir/f" --size 16M --bs 1M --qd 4 --pages 4k --no-fio --reps 1 --ds-venv "$dir/slowpy" --json >/dev/null 2>&1 &
pid=$!
for i in $(seq 200); do [ -e "$dir/started" ] && break; sleep 0.05; done
kill -TERM $pid; wait $pid 2>/dev/null
sleep 4
ok $([ -e "$dir/started" ] && [ ! -e "$dir/late" ] && [ -z "$(ls "$dir" | grep '\.ds\.')" ] && [ ! -e "$dir/f" ]; echo $?) "SIGTERM while DeepSpeed's python runs: the python is stopped, no .ds file made again"

"$bin" io --file "$dir/f" --bs 1000 >/dev/null 2>&1
ok $([ $? = 2 ]; echo $?) "a block size that is not a multiple of 4096: exit 2"
"$bin" io --pages 2m --size 1M >/dev/null 2>&1
ok $([ $? = 2 ]; echo $?) "an unknown --pages kind: exit 2"
"$bin" io --pages 4k,4k --size 1M >/dev/null 2>&1
ok $([ $? = 2 ]; echo $?) "a --pages kind twice: exit 2"
mkdir -p "$dir/fakefio"
cat > "$dir/fakefio/fio" <<'EOF2'
#!/bin/sh
# 1000 MB/s on 4 KiB pages, 2000 on THP; says what it was given
bw=1000000000
case ":${GLIBC_TUNABLES:-}:" in *:glibc.malloc.hugetlb=1:*) bw=2000000000;; esac
echo "${GLIBC_TUNABLES:-none}" >> "$FAKEFIO_LOG"
printf '{"jobs" : [ { "read" : { "bw_bytes" : %s }, "write" : { "bw_bytes" : %s } } ]}\n' $bw $bw
EOF2
chmod +x "$dir/fakefio/fio"
out=$(PATH="$dir/fakefio:$PATH" FAKEFIO_LOG="$dir/fio.log" GLIBC_TUNABLES=glibc.malloc.check=0 "$bin" io --file "$dir/f" --size 16M --bs 1M --qd 4 --rw read --pages 4k,huge --reps 5 --json 2>"$dir/err" | tail -1)
echo "# $out"
ok $([ "$(grep -cx 'glibc.malloc.check=0:glibc.malloc.hugetlb=1' "$dir/fio.log")" = 5 ] && [ "$(grep -cx 'glibc.malloc.check=0' "$dir/fio.log")" = 5 ] && [ "$(wc -l < "$dir/fio.log")" = 10 ]; echo $?) "fio once a round per page size: THP added to the caller's tunables for huge, nothing added for 4k"
ok $(echo "$out" | awk -F'"read_fio_MBps":|"read_fio_huge_MBps":|"read_4k_MBps":|"read_huge_MBps":|"read_ratio_4k":|"read_ratio_huge":' '{ split($2,a,","); split($3,b,","); split($4,c,","); split($5,d,","); split($6,e,","); split($7,f,",");
	# key order in the line: 4k_MBps, ratio_4k, huge_MBps, ratio_huge, fio_MBps, fio_huge_MBps
	exit !(e[1] == 1000 && f[1] == 2000 && b[1] > 0 && (b[1] - a[1] / 1000) ^ 2 < 1e-6 && (d[1] - c[1] / 2000) ^ 2 < 1e-6) }'; echo $?) "each kind's ratio is against fio on its own page size"
# fio that fails: how (its exit status, or the signal that killed it),
# on which file, and its own last words are said, not "fio failed"
cat > "$dir/fakefio/fio" <<'EOF2'
#!/bin/sh
echo "fio: pid=0, err=28/file:filesetup.c:235, func=write, error=No space left on device" >&2
[ -n "${FAKEFIO_KILL:-}" ] && kill -9 $$
exit 1
EOF2
PATH="$dir/fakefio:$PATH" "$bin" io --file "$dir/f" --size 16M --bs 1M --qd 4 --rw read --pages 4k --reps 5 >/dev/null 2>"$dir/err"
ok $([ $? = 1 ] && grep -q "fio on $dir/f exited with status 1" "$dir/err" && grep -q "^  fio: pid=0, err=28.*No space left on device" "$dir/err" && [ ! -e "$dir/f" ]; echo $?) "fio exits 1: its status, the file and its error said ($(head -c 300 "$dir/err" | tr '\n' '|'))"
PATH="$dir/fakefio:$PATH" FAKEFIO_KILL=1 "$bin" io --file "$dir/f" --size 16M --bs 1M --qd 4 --rw read --pages 4k --reps 5 >/dev/null 2>"$dir/err"
ok $([ $? = 1 ] && grep -q "fio on $dir/f killed by signal 9 (Killed)" "$dir/err"; echo $?) "fio killed by SIGKILL: the signal named ($(head -1 "$dir/err"))"
# a scratch file that cannot be removed at the end (its folder made
# immutable while the run writes it) is said, naming it, and fails the
# run; nothing is said when all goes (the runs above)
if mkdir "$dir/imm" && chattr +i "$dir/imm" 2>/dev/null && chattr -i "$dir/imm"; then
	HMM_TEST_DIR=$dir/imm "$bin" io --size 64M --bs 1M --qd 4 --rw write --pages 4k --no-fio --reps 20 >/dev/null 2>"$dir/err" &
	pid=$!
	for i in $(seq 200); do [ -n "$(ls -A "$dir/imm")" ] && break; sleep 0.05; done
	chattr +i "$dir/imm"
	wait $pid
	rc=$?
	chattr -i "$dir/imm"
	ok $([ $rc = 1 ] && grep -q "^hmm-bench: $dir/imm/.*: cannot remove this run's scratch file: Operation not permitted (left behind)" "$dir/err"; echo $?) "a scratch file that cannot be removed: named with the error, exit 1 (rc $rc: $(tail -1 "$dir/err"))"
	rm -rf "$dir/imm"
else
	skip "chattr +i does not work here (not root, or the file system)"
fi
if command -v fio >/dev/null; then
	out=$("$bin" io --file "$dir/f" --size 32M --bs 1M --qd 8 --json 2>"$dir/err")
	rc=$?
	last=$(echo "$out" | tail -1)
	echo "# $last"
	ok $([ $rc = 0 ] && has "$last" read_fio_MBps write_fio_MBps read_ratio_4k read_ratio_huge write_ratio_4k write_ratio_huge registered_4k registered_huge && echo "$last" | grep -q '"reps":5'; echo $?) "default: read and write, 4k and huge pages, against fio, medians of 5"
	ok $(echo "$out" | grep -c '^io: ' | grep -qx 4; echo $?) "four lines, one per cell, each with its ratio"
	out=$("$bin" io --file "$dir/f" --size 32M --bs 1M --qd 8 --rw read --pages 4k --vs-fio --json 2>"$dir/err" | tail -1)
	ok $(has "$out" ours_MBps fio_MBps ratio; echo $?) "one cell: ours_MBps, fio_MBps, ratio"
	# fio's jobs as processes run in sessions of their own, out of
	# reach of its group's kill: a SIGTERM to hmm-bench must stop
	# every fio process before the file goes (fio.c runs --thread)
	"$bin" io --file "$dir/f" --size 64M --bs 4K --qd 1 --rw read --pages 4k --reps 5 >/dev/null 2>&1 &
	pid=$!
	for i in $(seq 600); do pgrep -f "filename=$dir/f " >/dev/null && break; sleep 0.05; done
	sleep 0.3
	nfio=$(pgrep -fc "filename=$dir/f ")
	kill -TERM $pid; wait $pid 2>/dev/null
	sleep 0.5
	left=$(pgrep -f "filename=$dir/f ")
	[ -n "$left" ] && kill -KILL $left
	ok $([ "$nfio" = 1 ] && [ -z "$left" ] && [ ! -e "$dir/f" ]; echo $?) "SIGTERM while fio runs: fio ($nfio process) stopped, the file removed"
else
	skip "fio not installed"
	skip "fio not installed"
	skip "fio not installed"
	skip "fio not installed"
fi
t_done
