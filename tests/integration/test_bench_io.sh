#!/usr/bin/env bash
# test_bench_io — `hmm-bench io` runs and says what it measured: with
# --json the last line is one object with bench, rw, bs, qd, ours_MBps
# (and fio_MBps and ratio with --vs-fio, when fio is installed); bad
# options exit 2.  Small sizes: this checks the tool, it does not time.
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
	out=$("$bin" io --file "$dir/f" --size 16M --bs 256K --qd 8 --rw $rw --reps 1 --json 2>"$dir/err")
	rc=$?
	last=$(echo "$out" | tail -1)
	echo "# $last"
	ok $([ $rc = 0 ] && has "$last" bench rw bs qd ours_MBps && echo "$last" | grep -q '"bench":"io"' && echo "$last" | grep -q "\"rw\":\"$rw\""; echo $?) "$rw: JSON last line with the fields"
done
out=$("$bin" io --file "$dir/f" --size 16M --bs 64K --qd 4 --rw write --extent --reps 1 --json 2>&1 | tail -1)
ok $(echo "$out" | grep -q '"path":"extent"'; echo $?) "--extent goes through extents"
"$bin" io --file "$dir/f" --bs 1000 >/dev/null 2>&1
ok $([ $? = 2 ]; echo $?) "a block size that is not a multiple of 4096: exit 2"
"$bin" io --size 1M >/dev/null 2>&1
ok $([ $? = 2 ]; echo $?) "no --file: exit 2"
if command -v fio >/dev/null; then
	out=$("$bin" io --file "$dir/f" --size 32M --bs 1M --qd 8 --rw read --vs-fio --json 2>"$dir/err")
	rc=$?
	last=$(echo "$out" | tail -1)
	echo "# $last"
	ok $([ $rc = 0 ] && has "$last" ours_MBps fio_MBps ratio && echo "$last" | grep -q '"reps":5'; echo $?) "--vs-fio: fio_MBps and ratio, medians of 5"
else
	skip "fio not installed"
fi
t_done
