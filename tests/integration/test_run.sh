#!/usr/bin/env bash
# test_run — tests/run, the one runner: exit 0 passes, 77 skips, anything
# else fails, and the last line counts them; a test during which the
# kernel log gained a WARNING: or BUG: line fails even when it exited 0
# or 77, with the line in its log, while a warning logged before it is
# not blamed on it and an ordinary kernel line fails nothing; the same in
# a log without timestamps; where the log cannot be read, tests run
# unchecked and the runner says so.  The kernel log here is a file
# ($T_DMESG="cat FILE") the fake tests append to: nothing is written to
# the real one.
set -u
. "$(dirname "$0")/../t.sh"
scratch run
run=$(dirname "$0")/../run
kl=$dir/kmsg

mk() {	# NAME SHELL-LINE: a test program
	printf '#!/bin/sh\n%s\n' "$2" >"$dir/$1" && chmod +x "$dir/$1"
}
# runner ARGS...: tests/run on the fake log, output in $out, status in $rc
runner() {
	out=$(T_DMESG="cat $kl" "$run" -l "$dir/logs" "$@" 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# /'
}

printf '[    1.000000] boot\n[    2.500000] WARNING: CPU: 0 PID: 1 at old.c:1 old+0x0\n' >"$kl"
mk pass 'exit 0'
mk skip 'echo "1..0 # SKIP not here"; exit 77'
mk fail 'exit 3'
mk warn "echo '[    3.000000] WARNING: CPU: 1 PID: 9 at new.c:2 new+0x0' >>$kl"
mk bug "echo '[    4.000000] BUG: kernel NULL pointer dereference' >>$kl; exit 77"
mk note "echo '[    5.000000] loop0: detected capacity change' >>$kl"
runner p="$dir/pass" s="$dir/skip" f="$dir/fail" w="$dir/warn" b="$dir/bug" n="$dir/note"
ok $([ $rc = 1 ]; echo $?) "exit 1 when a test failed"
ok $(echo "$out" | tail -1 | grep -qx '2 passed, 3 failed, 1 skipped'; echo $?) "counted: 2 passed, 3 failed, 1 skipped"
ok $(echo "$out" | grep -q '^PASS  p '; echo $?) "a warning from before the test is not blamed on it"
ok $(echo "$out" | grep -q '^FAIL  w .*rc=kernel' && grep -q 'new.c:2' "$dir/logs/w.log"; echo $?) "exit 0 with a new WARNING: fails, the line in its log"
ok $(echo "$out" | grep -q '^FAIL  b .*rc=kernel'; echo $?) "exit 77 with a new BUG: fails"
ok $(echo "$out" | grep -q '^PASS  n '; echo $?) "an ordinary kernel line fails nothing"
ok $(echo "$out" | grep -q '^FAIL  f .*rc=3'; echo $?) "exit 3 fails with its status"

printf 'boot\nWARNING: old\n' >"$kl"	# printk.time=0: no timestamps
mk warn "echo 'WARNING: new' >>$kl"
runner p="$dir/pass" w="$dir/warn" p2="$dir/pass"
ok $(echo "$out" | grep -q '^PASS  p ' && echo "$out" | grep -q '^FAIL  w .*rc=kernel' && echo "$out" | grep -q '^PASS  p2 '; echo $?) "no timestamps: by line count, the same"

out=$(T_DMESG=false "$run" -l "$dir/logs" w="$dir/warn" 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
ok $([ $rc = 0 ] && echo "$out" | grep -q 'not readable here: not checked' && echo "$out" | grep -q '^PASS  w '; echo $?) "kernel log not readable: tests run unchecked, and it says so"
t_done
