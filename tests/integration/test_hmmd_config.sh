#!/usr/bin/env bash
# test_hmmd_config — hmmd's config keys host_dir, module, module_store,
# module_store_size and format (and their flags): good values run, bad
# ones exit with a log line naming the file, line, key or path; a foreign
# store file is refused, untouched, unless --format (or format = 1); a
# start that fails makes no store, or removes the new one it made.
set -u
. "$(dirname "$0")/../t.sh"
need "$B/bin/hmmd" "$B/bin/hmmctl"
scratch hmmd-config
trap 'kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
pid=

# host_dir on a tmpfs, the module off, from the file: it serves
printf '[hmmd]\nhost_dir = /dev/shm\nmodule = none\nmodule_store = %s/m\nmodule_store_size = 2G\n' "$dir" >"$dir/good.conf"
"$B/bin/hmmd" --config "$dir/good.conf" --socket "$dir/s" --store "$dir/st" 2>"$dir/log" &
pid=$!
for i in $(seq 100); do [ -S "$dir/s" ] && break; sleep 0.05; done
"$B/bin/hmmctl" --socket "$dir/s" status >"$dir/status" 2>&1
ok $? "host_dir = /dev/shm, module = none: hmmd serves (hmmctl status)"
ok $([ ! -e "$dir/m" ]; echo $?) "module = none: no module store made"
kill $pid; wait $pid 2>/dev/null
ok $? "SIGTERM: exit 0"
# SIGHUP (a closed terminal) stops it as cleanly: exit 0, socket gone
"$B/bin/hmmd" --config "$dir/good.conf" --socket "$dir/s" --store "$dir/st" 2>"$dir/log" &
pid=$!
for i in $(seq 100); do [ -S "$dir/s" ] && break; sleep 0.05; done
kill -HUP $pid; wait $pid 2>/dev/null
ok $([ $? = 0 ] && [ ! -e "$dir/s" ] && grep -q 'stopped' "$dir/log"; echo $?) "SIGHUP: exit 0, the socket removed, 'stopped' logged"

# numeric keys of each kind, good values: hmmd serves with them
printf '[hmmd]\nmodule = none\nchunk_bytes = 64K\nwait_ms = 500\nmax_clients = 3\nverbose = 1\nhost_budget = 32M\n' >"$dir/num.conf"
"$B/bin/hmmd" --config "$dir/num.conf" --socket "$dir/s" --store "$dir/st2" 2>"$dir/log" &
pid=$!
for i in $(seq 100); do [ -S "$dir/s" ] && break; sleep 0.05; done
"$B/bin/hmmctl" --socket "$dir/s" status >"$dir/status" 2>&1
ok $(grep -q 'host budget 33554432 bytes, chunk 65536 bytes' "$dir/log"; echo $?) "chunk_bytes = 64K, host_budget = 32M taken (wait_ms, max_clients accepted)"
ok $(grep -q 'client 1: stats seq' "$dir/log"; echo $?) "verbose = 1: every message logged"
kill $pid; wait $pid 2>/dev/null

# the store's I/O knobs, from the file and as flags: in force in the log
# and the metrics (port 0: the kernel picks one, and the log names it)
printf '[hmmd]\nmodule = none\npool_bytes = 8M\nio_depth = 2\nqueue_depth = 16\n' >"$dir/io.conf"
"$B/bin/hmmd" --config "$dir/io.conf" --socket "$dir/s" --store "$dir/st3" 2>"$dir/log" &
pid=$!
for i in $(seq 100); do [ -S "$dir/s" ] && break; sleep 0.05; done
ok $(grep -q 'store pool 8388608 bytes.*, 2 I/Os in flight, queue depth 16' "$dir/log"; echo $?) "pool_bytes = 8M, io_depth = 2, queue_depth = 16 in force"
kill $pid; wait $pid 2>/dev/null
"$B/bin/hmmd" --module none --pool 12M --io-depth 3 --metrics 127.0.0.1:0 --socket "$dir/s" --store "$dir/st4" 2>"$dir/log" &
pid=$!
for i in $(seq 100); do [ -S "$dir/s" ] && break; sleep 0.05; done
ok $(grep -q 'store pool 12582912 bytes.*, 3 I/Os in flight, queue depth 64' "$dir/log"; echo $?) "--pool 12M --io-depth 3: in force, queue depth by default"
# --metrics PORT 0: the log names the port the kernel picked, and it answers
port=$(sed -n 's|.*metrics on http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p' "$dir/log")
body=
if [ -n "$port" ] && [ "$port" != 0 ] && exec 3<>"/dev/tcp/127.0.0.1/$port"; then
	printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
	body=$(timeout 5 cat <&3)
	exec 3<&-
fi
ok $(grep -q '^hmm_store_io_depth 3' <<<"$body"; echo $?) "--metrics 127.0.0.1:0: the log names port $port, which serves the metrics"
# GET /metrics with a query string (a scrape config's params:) is served;
# a request line that is not HTTP gets 400 at once, not after the 1 s
# read timeout
http() {	# request (printf format) -> the answer, and its ms in $ms
	local t0=$(date +%s%N)
	body=
	if [ -n "$port" ] && exec 3<>"/dev/tcp/127.0.0.1/$port"; then
		printf "$1" >&3
		body=$(timeout 5 cat <&3 | tr -d '\0')
		exec 3<&-
	fi
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
}
http 'GET /metrics?x=1 HTTP/1.0\r\n\r\n'
ok $(head -1 <<<"$body" | grep -q '^HTTP/1.0 200 OK' && grep -q '^hmm_store_io_depth 3' <<<"$body"; echo $?) "GET /metrics?x=1: 200 and the metrics ($(head -1 <<<"$body" | tr -d '\r'))"
http '\001\002garbage\r\n\r\n'
ok $(head -1 <<<"$body" | grep -q '^HTTP/1.0 400 Bad Request' && [ $ms -lt 500 ]; echo $?) "a garbage request line: 400 in $ms ms ($(head -1 <<<"$body" | tr -d '\r'))"
http 'GET /metricsx HTTP/1.0\r\n\r\n'
ok $(head -1 <<<"$body" | grep -q '^HTTP/1.0 404 Not Found'; echo $?) "GET /metricsx: 404"
kill $pid; wait $pid 2>/dev/null
"$B/bin/hmmd" --module none --io-depth 4097 --socket "$dir/s" --store "$dir/st5" 2>"$dir/log"
ok $([ $? = 2 ] && grep -q 'io_depth: "4097" is not 0..4096' "$dir/log"; echo $?) "--io-depth 4097: exit 2, key and value named"

# hmmctl checks its words before it connects: exit 2 naming the word,
# though no hmmd listens there
ctlbad() {	# pattern args...
	local pat=$1; shift
	"$B/bin/hmmctl" --socket "$dir/none" "$@" 2>"$dir/log"
	ok $([ $? = 2 ] && grep -qF -- "$pat" "$dir/log"; echo $?) "hmmctl $*: exit 2, before connecting"
}
ctlbad 'set-quota: HOST "lots": not a byte size' set-quota 1 lots
ctlbad 'set-quota: CLIENT "x": not a client id' set-quota x 1M
ctlbad 'set-quota: STORE "-1": not a byte size' set-quota 1 1M 0 -1
ctlbad 'evict: tier "gpu": host or device' evict w gpu
ctlbad 'stats: option "--yaml": only --json' stats --yaml
ctlbad 'tensors: argument "x": unexpected' tensors x
ctlbad 'evict: wants TENSOR' evict
ctlbad '--socket "": want a path' --socket "" status
HMMD_SOCKET= "$B/bin/hmmctl" status 2>"$dir/log"
ok $([ $? = 2 ] && grep -q 'HMMD_SOCKET is set but empty' "$dir/log"; echo $?) "HMMD_SOCKET= hmmctl status: exit 2, the variable named"
"$B/bin/hmmctl" --socket "$dir/none" status 2>"$dir/log"
ok $([ $? = 1 ] && grep -q "$dir/none" "$dir/log"; echo $?) "hmmctl status with no hmmd: exit 1, the socket named"

# bad values: exit 2 (config) or 1 (cannot run), the reason named
printf '[hmmd]\nmodule_store_size = lots\n' >"$dir/bad.conf"
"$B/bin/hmmd" --config "$dir/bad.conf" --socket "$dir/s" 2>"$dir/log"
ok $([ $? = 2 ] && grep -q 'bad.conf:2: module_store_size: "lots"' "$dir/log"; echo $?) "module_store_size not a size: exit 2, file:line and key named"
# each kind of numeric key: out of its range, exit 2 with the reason
badkey() {	# key value pattern
	printf '[hmmd]\n%s = %s\n' "$1" "$2" >"$dir/bad.conf"
	timeout 5 "$B/bin/hmmd" --module none --config "$dir/bad.conf" --socket "$dir/s" 2>"$dir/log"
	ok $([ $? = 2 ] && grep -qF "bad.conf:2: $1: \"$2\" $3" "$dir/log"; echo $?) "$1 = $2: exit 2, $3"
}
badkey chunk_bytes 5000 "is out of range"
badkey pool_bytes 5000 "is out of range"
badkey pool_bytes 2G "is out of range"
badkey queue_depth 5000 "is not 0..4096"
badkey io_depth -1 "is not 0..4096"
badkey wait_ms 5G "is not a number (want 0..4294967295)"
badkey wait_ms 4294967296 "is not 0..4294967295"
badkey max_clients 0 "is not 1..256"
badkey max_clients 3x "is not a number (want 1..256)"
badkey verbose 2 "is not 0..1"
badkey store_size -1 "is not a size"
badkey host_budget 0 "is out of range"
badkey client_quota 0 "is out of range"
badkey store_size 0 "is out of range"
badkey module_store_size 0 "is out of range"
badkey chunk_bytes 0 "is out of range"
badkey host_budget 64MB "is not a size (e.g. 8G, 512M)"
badkey host_budget 1.5G "is not a size (e.g. 8G, 512M)"
badkey host_budget 99999999999T "is out of range"
# "#" starts a comment only at the start of a line (";" after a space
# ends a value): a value with one is refused as what it is not
badkey wait_ms "5 # five" "is not a number (want 0..4294967295)"
badkey metrics 0.0.0.0:0 "is not loopback (127.0.0.0/8 only)"
# a file that says something hmmd would not do: exit 2, one line naming
# file, line and key (or section), nothing started
badfile() {	# printf-format pattern desc
	printf "$1" >"$dir/bad.conf"
	timeout 5 "$B/bin/hmmd" --module none --config "$dir/bad.conf" --socket "$dir/s" --store "$dir/stb" 2>"$dir/log"
	ok $([ $? = 2 ] && grep -qF -- "bad.conf:$2" "$dir/log" && [ "$(wc -l <"$dir/log")" = 1 ] && [ ! -e "$dir/stb" ]; echo $?) "$3: exit 2, $(head -1 "$dir/log" | sed 's|.*bad.conf|bad.conf|')"
}
badfile '[hmmd]\nhost_budget = 32M\nhost_budget = 64M\n' '3: host_budget: set again (first on line 2)' "a key set twice"
badfile '[hmmd]\nwait_ms = 5\n[hmmd]\nchunk_bytes = 64K\n' '3: [hmmd] again (first on line 1)' "a second [hmmd] section"
badfile '[hmmd]\nwait_ms = 5\n  chunk_bytes = 64K\n' '3: wait_ms: set again (first on line 2): an indented line' "an indented line after a key"
badfile '[hmmd]\nwait_ms = 5\n[other]\n' '3: section [other]: only [hmmd] is known' "another section, with no key"
badfile '[hmmd]\nwait_ms = 5\0000\n' '2: wait_ms: a NUL byte in the line' "a NUL byte inside a value"
badfile "[hmmd]\nsocket = /$(printf 'x%.0s' $(seq 250))\n" '2: a line longer than' "a line longer than libinih reads at once"
# flags go through the same parser: exit 2 at once, one line naming the
# key and the value, no second line (nothing was started)
badflag() {	# pattern args...
	local pat=$1; shift
	timeout 5 "$B/bin/hmmd" --module none --socket "$dir/s" --store "$dir/stf" "$@" 2>"$dir/log"
	ok $([ $? = 2 ] && grep -qF -- "$pat" "$dir/log" && [ "$(wc -l <"$dir/log")" = 1 ] && [ ! -e "$dir/s" ] && [ ! -e "$dir/stf" ]; echo $?) "hmmd $*: exit 2, one line: $(head -1 "$dir/log")"
}
badflag 'metrics: "0.0.0.0:0" is not loopback (127.0.0.0/8 only)' --metrics 0.0.0.0:0
badflag 'metrics: "127.0.0.1:99999" has a port not in 0..65535' --metrics 127.0.0.1:99999
badflag 'metrics: "127.0.0.1" is not IPV4:PORT' --metrics 127.0.0.1
badflag 'socket_group: "nosuchgroup" is no group' --group nosuchgroup
badflag 'host_budget: "0" is out of range' --host-budget 0
badflag 'chunk_bytes: "0" is out of range' --chunk 0
badflag 'client_quota: "0" is out of range' --client-quota 0
badflag 'store_size: "0" is out of range' --store-size 0
# a socket path no Unix socket can have: a usage error before the store
# is made (it was exit 1 at the bind, after the store)
badflag "longer than the 107 a Unix socket's path may have" --socket "$dir/$(printf 's%.0s' $(seq 110))"
badflag 'host_budget: "64MB"' --host-budget 64MB
badflag "config $dir: Is a directory" --config "$dir"
printf '[hmmd]\nno_such_key = 1\n' >"$dir/bad.conf"
"$B/bin/hmmd" --config "$dir/bad.conf" --socket "$dir/s" 2>"$dir/log"
ok $([ $? = 2 ] && grep -q 'bad.conf:2: unknown key "no_such_key"' "$dir/log"; echo $?) "an unknown key: exit 2, named"
printf '[hmmd]\nhost_dir =\n' >"$dir/bad.conf"
"$B/bin/hmmd" --config "$dir/bad.conf" --socket "$dir/s" 2>"$dir/log"
ok $([ $? = 2 ] && grep -q 'host_dir: empty' "$dir/log"; echo $?) "empty host_dir: exit 2"
"$B/bin/hmmd" --host-dir "$dir" --socket "$dir/s" --store "$dir/st" 2>"$dir/log"
ok $([ $? = 1 ] && grep -q "host_dir '$dir': not a tmpfs" "$dir/log"; echo $?) "--host-dir on a disk: exit 1, the path named"
"$B/bin/hmmd" --host-dir "$dir/none" --socket "$dir/s" --store "$dir/st" 2>"$dir/log"
ok $([ $? = 1 ] && grep -q "$dir/none" "$dir/log"; echo $?) "--host-dir missing: exit 1, the path named"
"$B/bin/hmmd" --module "$dir/nodev" --socket "$dir/s" --store "$dir/st" 2>"$dir/log"
ok $([ $? = 1 ] && grep -q "$dir/nodev" "$dir/log"; echo $?) "an explicit module that is absent: exit 1, named"
ok $([ ! -e "$dir/s" ]; echo $?) "no socket left behind"

# a start that cannot serve fails before it makes a store (the socket and
# the metrics port are taken first), and one that fails later (the
# module, after the engine) removes the new store it made, never an old one
ok $([ -s "$dir/st" ] && [ "$(head -c 8 "$dir/st")" = HMMSTORE ]; echo $?) "an explicit module that is absent: the existing store kept"
"$B/bin/hmmd" --module none --metrics 127.0.0.1:0 --socket "$dir/live" --store "$dir/st6" --store-size 64M 2>"$dir/live.log" &
pid=$!
for i in $(seq 100); do [ -S "$dir/live" ] && break; sleep 0.05; done
port=$(sed -n 's|.*metrics on http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p' "$dir/live.log")
echo precious >"$dir/file"
nostore() {	# what, then hmmd's flags: exit 1, no new store, no socket
	local what=$1
	shift
	"$B/bin/hmmd" --store "$dir/new" --store-size 64M "$@" 2>"$dir/log"
	ok $([ $? = 1 ] && [ ! -e "$dir/new" ] && [ ! -e "$dir/s" ] && [ ! -e "$dir/s.new" ]; echo $?) "$what: exit 1, no store, no socket left ($(tail -1 "$dir/log"))"
	rm -f "$dir/new"
}
nostore "a missing socket folder" --module none --socket "$dir/nodir/s"
nostore "a socket path that is a file" --module none --socket "$dir/file"
ok $([ "$(cat "$dir/file")" = precious ]; echo $?) "and the file is untouched"
# PATH.new, where the socket is bound before its rename: a file of the
# user's there was unlinked unlooked (and hmmd served)
echo precious >"$dir/s.new"
timeout 5 "$B/bin/hmmd" --module none --socket "$dir/s" --store "$dir/new" --store-size 64M 2>"$dir/log"
ok $([ $? = 1 ] && [ "$(cat "$dir/s.new")" = precious ] && [ ! -e "$dir/s" ] && [ ! -e "$dir/new" ] && grep -q "socket $dir/s.new: exists and is not a socket" "$dir/log"; echo $?) "a file at the socket's PATH.new: exit 1, named, untouched ($(head -1 "$dir/log"))"
rm -f "$dir/s.new" "$dir/new"
nostore "a live socket" --module none --socket "$dir/live"
"$B/bin/hmmctl" --socket "$dir/live" status >"$dir/status" 2>&1
ok $? "and the hmmd serving it still serves"
nostore "a --metrics port in use ($port)" --module none --socket "$dir/s" --metrics "127.0.0.1:$port"
nostore "an absent module (after the engine)" --module "$dir/nodev" --socket "$dir/s"
ok $(grep -q "removed the store $dir/new" "$dir/log"; echo $?) "and the log names the store removed"
kill $pid; wait $pid 2>/dev/null
pid=

# a foreign store: refused and untouched; --format / format = 1 format it
head -c 4194304 /dev/urandom >"$dir/foreign" && cp "$dir/foreign" "$dir/foreign.copy"
"$B/bin/hmmd" --module none --socket "$dir/s" --store "$dir/foreign" 2>"$dir/log"
ok $([ $? = 1 ] && grep -q "$dir/foreign: foreign data" "$dir/log"; echo $?) "a foreign store file: exit 1, path and foreign data named"
ok $(cmp -s "$dir/foreign" "$dir/foreign.copy"; echo $?) "and the file is untouched"
printf '[hmmd]\nformat = yes\n' >"$dir/bad.conf"
"$B/bin/hmmd" --config "$dir/bad.conf" --socket "$dir/s" 2>"$dir/log"
ok $([ $? = 2 ] && grep -q 'bad.conf:2: format: "yes"' "$dir/log"; echo $?) "format = yes: exit 2, key named"
for how in flag key; do
	cp "$dir/foreign.copy" "$dir/foreign"
	if [ $how = flag ]; then
		"$B/bin/hmmd" --module none --socket "$dir/s" --store "$dir/foreign" --store-size 64M --format 2>"$dir/log" &
	else
		printf '[hmmd]\nformat = 1\n' >"$dir/fmt.conf"
		"$B/bin/hmmd" --config "$dir/fmt.conf" --module none --socket "$dir/s" --store "$dir/foreign" --store-size 64M 2>"$dir/log" &
	fi
	pid=$!
	for i in $(seq 100); do [ -S "$dir/s" ] && break; sleep 0.05; done
	"$B/bin/hmmctl" --socket "$dir/s" status >"$dir/status" 2>&1
	ok $? "format by $how: hmmd serves on the formatted store"
	kill $pid; wait $pid 2>/dev/null
	ok $([ "$(head -c 8 "$dir/foreign")" = HMMSTORE ]; echo $?) "format by $how: the file is an hmm store now"
done
pid=
t_done
