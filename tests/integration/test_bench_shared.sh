#!/usr/bin/env bash
# test_bench_shared — `hmm-bench shared` runs two clients through one
# hmmd and two embedded processes, and with --json its last line is one
# object with both store rates, both host peaks and their ratios; bad
# options exit 2; files of its names already in --dir are refused, and a
# SIGTERM leaves neither hmmd nor its files; a signal in the first
# phase stops the two worker processes; after a SIGKILL, hmmd stops and
# its socket goes.  Small sizes: this checks the
# tool, it does not time.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-bench
need "$bin"
need "$B/bin/hmmd"
scratch bench-shared

has() {	# json key...
	local j=$1; shift
	for k in "$@"; do echo "$j" | grep -q "\"$k\":" || return 1; done
}

out=$("$bin" shared --size 8M --slice 1M --host 4M --passes 2 --reps 2 --dir "$dir" --hmmd "$B/bin/hmmd" --json 2>"$dir/err")
rc=$?
last=$(echo "$out" | tail -1)
echo "# $last"
ok $([ $rc = 0 ] && echo "$last" | grep -q '"bench":"shared"' && has "$last" reps host_tier independent_store_mbps shared_store_mbps store_mbps_ratio independent_host_peak shared_host_peak peak_ratio; echo $?) "JSON last line with the fields"
ok $(echo "$last" | grep -q '"shared_host_peak":4194304'; echo $?) "one hmmd keeps both clients within its 4 MiB host budget"
ok $([ -z "$(ls "$dir" | grep -v err)" ]; echo $?) "no store, socket or tmpfs left behind"
if [ "$(id -u)" = 0 ]; then
	ok $(echo "$last" | grep -q '"host_tier":"tmpfs"'; echo $?) "as root: hmmd's host tier on a huge tmpfs it mounted"
fi
last=$("$bin" shared --size 8M --slice 1M --host 4M --passes 1 --reps 1 --memfd --dir "$dir" --hmmd "$B/bin/hmmd" --json 2>"$dir/err" | tail -1)
ok $(echo "$last" | grep -q '"host_tier":"memfd"'; echo $?) "--memfd: memfds"
# an hmmd that does not start: what it said is shown, not swallowed
printf '#!/bin/sh\necho "hmmd: store: something specific" >&2\nexit 1\n' >"$dir/badhmmd"
chmod +x "$dir/badhmmd"
"$bin" shared --size 8M --slice 1M --host 4M --reps 1 --memfd --dir "$dir" --hmmd "$dir/badhmmd" >/dev/null 2>"$dir/err"
ok $([ $? = 1 ] && grep -q "^hmmd: store: something specific" "$dir/err" && grep -q "cannot start $dir/badhmmd" "$dir/err" && [ -z "$(ls "$dir" | grep -v 'err\|badhmmd')" ]; echo $?) "hmmd refuses to start: its own words shown, exit 1, nothing left"
rm -f "$dir/badhmmd"
# a file of this run's names already there: refused, left untouched
printf 'precious' >"$dir/bench-shared.store"
"$bin" shared --size 8M --slice 1M --host 4M --reps 1 --memfd --dir "$dir" --hmmd "$B/bin/hmmd" >/dev/null 2>"$dir/err"
ok $([ $? = 1 ] && grep -q 'bench-shared.store: exists: not this run' "$dir/err" && [ "$(cat "$dir/bench-shared.store")" = precious ]; echo $?) "an existing bench-shared.store: refused, untouched"
rm -f "$dir/bench-shared.store"
# stopped by SIGTERM while it runs: hmmd stopped, nothing left (as root
# without --memfd: its tmpfs unmounted and gone too)
modes=--memfd
[ "$(id -u)" = 0 ] && modes="--memfd tmpfs"
for m in $modes; do
	"$bin" shared --size 64M --slice 1M --host 8M --passes 50 --reps 1 $([ $m = --memfd ] && echo --memfd) --dir "$dir" --hmmd "$B/bin/hmmd" >/dev/null 2>"$dir/err" &
	bpid=$!
	for i in $(seq 100); do [ -S "$dir/bench-shared.sock" ] && break; sleep 0.05; done
	sleep 0.5
	kill -TERM $bpid; wait $bpid 2>/dev/null
	sleep 0.3
	ok $([ -z "$(ls "$dir" | grep -v err)" ] && ! pgrep -f -- "--socket $dir/bench-shared.sock" >/dev/null && ! grep -q " $dir/bench-shared.shm " /proc/mounts; echo $?) "SIGTERM mid-run ($m): hmmd gone, no store, socket or mount left ($(ls "$dir" | grep -v err | tr '\n' ' '))"
done
# a signal in the first phase (two embedded worker processes): the
# workers are stopped too, before their stores go, whatever the signal
for sig in TERM INT HUP; do
	"$bin" shared --size 64M --slice 1M --host 8M --passes 50 --reps 1 --memfd --dir "$dir" --hmmd "$B/bin/hmmd" >/dev/null 2>"$dir/err" &
	bpid=$!
	# the two workers: forks of hmm-bench, its command line
	for i in $(seq 200); do [ "$(pgrep -fc -- "shared --size 64M .* --dir $dir ")" -ge 3 ] && break; sleep 0.05; done
	sleep 0.2
	kill -$sig $bpid; wait $bpid 2>/dev/null
	sleep 0.3
	left=$(pgrep -f -- "shared --size 64M .* --dir $dir ")
	[ -n "$left" ] && kill -KILL $left
	ok $([ -z "$left" ] && [ -z "$(ls "$dir" | grep -v err)" ]; echo $?) "SIG$sig while the two processes run: both stopped, nothing left (left: $left $(ls "$dir" | grep -v err | tr '\n' ' '))"
done
# SIGKILL cannot be caught: hmmd is told by the kernel (PDEATHSIG) and
# stops, removing its socket; its store and log (and as root the tmpfs)
# stay, as the man page says, and the next run refuses them until removed
"$bin" shared --size 64M --slice 1M --host 8M --passes 50 --reps 1 --memfd --dir "$dir" --hmmd "$B/bin/hmmd" >/dev/null 2>"$dir/err" &
bpid=$!
for i in $(seq 100); do [ -S "$dir/bench-shared.sock" ] && break; sleep 0.05; done
sleep 0.5
kill -KILL $bpid; wait $bpid 2>/dev/null
for i in $(seq 40); do pgrep -f -- "--socket $dir/bench-shared.sock" >/dev/null || break; sleep 0.1; done
left=$(pgrep -f -- "--socket $dir/bench-shared.sock|shared --size 64M .* --dir $dir ")
[ -n "$left" ] && kill -KILL $left
ok $([ -z "$left" ] && [ ! -e "$dir/bench-shared.sock" ]; echo $?) "SIGKILL: hmmd and the workers stop, the socket goes (left: $left $(ls "$dir" | grep -v err | tr '\n' ' '))"
rm -f "$dir"/bench-shared*
"$bin" shared --slice 1000 >/dev/null 2>&1
ok $([ $? = 2 ]; echo $?) "a slice that is not a multiple of 4096: exit 2"
t_done
