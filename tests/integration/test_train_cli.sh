#!/usr/bin/env bash
# test_train_cli — hmm-train's flags: byte sizes with K/M/G suffixes, a
# budget above the state keeps everything in memory, /N is the state
# over N, a budget below what
# one step maps is refused with the minimum, and bad flags are refused
# (exit 2) with a message naming the flag — all before any step runs.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-train
need "$bin"
sum() { "$bin" --preset tiny --steps 1 --json "$@" 2>/dev/null | tail -1; }

s=$(sum --host-budget 64G)
ok $(grep -q '"offloaded":false' <<<"$s"; echo $?) "--host-budget 64G: all in memory"
s=$(sum --host-budget 2M)
ok $(grep -q '"offloaded":true' <<<"$s" && grep -q '"host_budget":2097152,' <<<"$s"; echo $?) "--host-budget 2M = 2097152 bytes, offloaded"
s=$(sum --host-budget 3145728)
ok $(grep -q '"host_budget":3145728,' <<<"$s"; echo $?) "--host-budget in plain bytes"
s=$(sum --host-budget 2MiB)
ok $(grep -q '"host_budget":2097152,' <<<"$s"; echo $?) "--host-budget 2MiB"
s=$(sum --host-budget /2)
st=$(grep -o '"state_bytes":[0-9]*' <<<"$s" | cut -d: -f2)
ok $(grep -q "\"host_budget\":$((st / 2))," <<<"$s"; echo $?) "--host-budget /2: half the state ($st bytes)"
s=$(sum --host-budget 64G --host-budget /2)
ok $(grep -q "\"host_budget\":$((st / 2))," <<<"$s"; echo $?) "the last --host-budget wins"

# the output goes to the scratch folder, removed however the script ends
# (it was /tmp/hmm-train-cli.PID, left there by a signal)
scratch train-cli
bad() {	# pattern what args...
	local pat=$1 what=$2; shift 2
	"$bin" --preset tiny --steps 2 "$@" >"$dir/bad.out" 2>&1
	rc=$?
	echo "# $(grep -v '^blas' "$dir/bad.out" | head -2)"
	ok $([ $rc -eq 2 ] && grep -qi -- "$pat" "$dir/bad.out" && ! grep -q '^step' "$dir/bad.out"; echo $?) "$what: exit 2"
	rm -f "$dir/bad.out"
}
bad "below the" "a budget too small for one step" --host-budget 100K
bad "--host-budget 1.5G" "a fractional size" --host-budget 1.5G
bad "--host-budget 12Q" "an unknown suffix" --host-budget 12Q
bad "--host-budget 64MB" "MB, not read as MiB" --host-budget 64MB
bad "--host-budget /0" "a fraction /0" --host-budget /0
bad "--host-budget /x" "a fraction /x" --host-budget /x
bad "--steps" "--steps 0" --steps 0
bad "--steps 2147483648: at most 2147483647" "--steps 2^31" --steps 2147483648
bad "--steps 99999999999999: at most" "--steps 10^14" --steps 99999999999999
bad "--preset huge" "an unknown preset" --preset huge
bad "unexpected" "a stray argument" extra
bad "--lr" "a bad --lr" --lr 7
bad "--seed" "a bad --seed" --seed x
bad "--seed 99999999999999999999" "a --seed past 2^63 (not clamped)" --seed 99999999999999999999
bad "--threads x" "a bad --threads" --threads x
bad "--io-depth 0" "--io-depth 0" --io-depth 0
bad "--pool 2Q" "a bad --pool" --pool 2Q
# an empty path was the cwd: --ckpt "" trained, then left .store and
# .tmp there and failed
bin=$(cd "$(dirname "$bin")" && pwd)/${bin##*/}
for f in --ckpt --store --data --report --resume; do
	(cd "$dir" && "$bin" --preset tiny --steps 2 $f "" >out 2>err)
	rc=$?
	ok $([ $rc = 2 ] && grep -q -- "$f \"\": want a value" "$dir/err" && [ -z "$(ls -A "$dir" | grep -Ev '^(out|err)$')" ]; echo $?) "$f \"\": exit 2, nothing made in the cwd"
done

# --report replaces only a report: it once overwrote whatever it was given
printf 'precious user data\n' >"$dir/foreign.txt"
"$bin" --preset tiny --steps 2 --report "$dir/foreign.txt" >"$dir/out" 2>"$dir/err"
ok $([ $? = 2 ] && grep -q "not an hmm-train report; refusing" "$dir/err" && [ "$(cat "$dir/foreign.txt")" = "precious user data" ] && ! grep -q '^step' "$dir/out"; echo $?) "--report FILE of other data: exit 2 before step 1, the file intact"
"$bin" --preset tiny --steps 2 --report "$dir/r.html" >/dev/null 2>&1 &&
	"$bin" --preset tiny --steps 3 --report "$dir/r.html" >"$dir/out" 2>&1
ok $([ $? = 0 ] && grep -q "report written to $dir/r.html" "$dir/out"; echo $?) "--report over an earlier report replaces it"
rm -f "$dir/foreign.txt" "$dir/r.html"

# the knobs: in the JSON summary and the header line, as in force
s=$(sum --threads 1 --pool 8M --io-depth 2 --queue-depth 16 --host-budget 2M)
ok $(grep -q '"threads":1,"pool_bytes":8388608,"io_depth":2,"queue_depth":16,' <<<"$s"; echo $?) "--threads 1 --pool 8M --io-depth 2 --queue-depth 16 in force"
s=$(sum)
ok $(grep -q "\"threads\":$(getconf _NPROCESSORS_ONLN)," <<<"$s" && grep -q '"pool_bytes":4194304,"io_depth":4,"queue_depth":64,' <<<"$s"; echo $?) "defaults: online CPUs, 4 MiB pool, 4 in flight, queue 64"
h=$("$bin" --preset tiny --steps 1 --threads 1 --io-depth 3 --host-budget 2M 2>&1 | grep 'kernel threads')
echo "# $h"
ok $(grep -q '1 kernel threads; store pool 4.0 MiB, 3 I/Os in flight, queue depth 64' <<<"$h"; echo $?) "the header line shows them"
h=$("$bin" --preset tiny --steps 1 --pool 4K --host-budget 2M 2>&1 | grep 'kernel threads')
ok $(grep -q 'store pool 4 KiB,' <<<"$h"; echo $?) "--pool 4K shows as 4 KiB, not 0.0 MiB"
for kv in "--io-depth 5000:config.io_depth 5000" "--queue-depth 4097:config.queue_depth 4097" "--threads 65:config.kernel_threads 65" "--pool 5000:config.pool_bytes 5000"; do
	e=$("$bin" --preset tiny --steps 1 ${kv%%:*} 2>&1)
	ok $([ $? -ne 0 ] && grep -q -- "${kv#*:}" <<<"$e" && ! grep -q '^step' <<<"$e"; echo $?) "${kv%%:*} refused naming ${kv#*:}"
done
for v in abc 0 65 2x; do	# atoi ran "abc" on one thread, silently
	e=$(HK_THREADS=$v "$bin" --preset tiny --steps 1 --json 2>&1)
	ok $(grep -q "HK_THREADS=\"$v\": not a count from 1 to 64" <<<"$e" && grep -q "\"threads\":$(getconf _NPROCESSORS_ONLN)," <<<"$e"; echo $?) "HK_THREADS=$v: said, and the online CPUs used"
done
ok $("$bin" --preset list | grep -q '^default'; echo $?) "--preset list"
ok $("$bin" --help | grep -q -- '--host-budget' && "$bin" --help | grep -q -- '--io-depth'; echo $?) "--help"
t_done
