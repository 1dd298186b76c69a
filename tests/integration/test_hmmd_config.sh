#!/usr/bin/env bash
# test_hmmd_config — hmmd's config keys host_dir, module, module_store,
# module_store_size and format (and their flags): good values run, bad
# ones exit with a log line naming the file, line, key or path; a foreign
# store file is refused, untouched, unless --format (or format = 1).
set -u
B=${HMM_BUILD:-build}
d=${HMM_TEST_DIR:-build/tmp}/hmmd-config.$$
n=0 failed=0
ok() { n=$((n + 1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi; }
[ -x "$B/bin/hmmd" ] && [ -x "$B/bin/hmmctl" ] || { echo "1..0 # SKIP hmmd or hmmctl not built"; exit 77; }
mkdir -p "$d" && trap 'kill $pid 2>/dev/null; rm -rf "$d"' EXIT
pid=

# host_dir on a tmpfs, the module off, from the file: it serves
printf '[hmmd]\nhost_dir = /dev/shm\nmodule = none\nmodule_store = %s/m\nmodule_store_size = 2G\n' "$d" >"$d/good.conf"
"$B/bin/hmmd" --config "$d/good.conf" --socket "$d/s" --store "$d/st" 2>"$d/log" &
pid=$!
for i in $(seq 100); do [ -S "$d/s" ] && break; sleep 0.05; done
"$B/bin/hmmctl" --socket "$d/s" status >"$d/status" 2>&1
ok $? "host_dir = /dev/shm, module = none: hmmd serves (hmmctl status)"
ok $([ ! -e "$d/m" ]; echo $?) "module = none: no module store made"
kill $pid; wait $pid 2>/dev/null
ok $? "SIGTERM: exit 0"

# bad values: exit 2 (config) or 1 (cannot run), the reason named
printf '[hmmd]\nmodule_store_size = lots\n' >"$d/bad.conf"
"$B/bin/hmmd" --config "$d/bad.conf" --socket "$d/s" 2>"$d/log"
ok $([ $? = 2 ] && grep -q 'bad.conf:2: module_store_size: "lots"' "$d/log"; echo $?) "module_store_size not a size: exit 2, file:line and key named"
printf '[hmmd]\nhost_dir =\n' >"$d/bad.conf"
"$B/bin/hmmd" --config "$d/bad.conf" --socket "$d/s" 2>"$d/log"
ok $([ $? = 2 ] && grep -q 'host_dir: empty' "$d/log"; echo $?) "empty host_dir: exit 2"
"$B/bin/hmmd" --host-dir "$d" --socket "$d/s" --store "$d/st" 2>"$d/log"
ok $([ $? = 1 ] && grep -q "host_dir '$d': not a tmpfs" "$d/log"; echo $?) "--host-dir on a disk: exit 1, the path named"
"$B/bin/hmmd" --host-dir "$d/none" --socket "$d/s" --store "$d/st" 2>"$d/log"
ok $([ $? = 1 ] && grep -q "$d/none" "$d/log"; echo $?) "--host-dir missing: exit 1, the path named"
"$B/bin/hmmd" --module "$d/nodev" --socket "$d/s" --store "$d/st" 2>"$d/log"
ok $([ $? = 1 ] && grep -q "$d/nodev" "$d/log"; echo $?) "an explicit module that is absent: exit 1, named"
ok $([ ! -e "$d/s" ]; echo $?) "no socket left behind"

# a foreign store: refused and untouched; --format / format = 1 format it
head -c 4194304 /dev/urandom >"$d/foreign" && cp "$d/foreign" "$d/foreign.copy"
"$B/bin/hmmd" --module none --socket "$d/s" --store "$d/foreign" 2>"$d/log"
ok $([ $? = 1 ] && grep -q "$d/foreign: foreign data" "$d/log"; echo $?) "a foreign store file: exit 1, path and foreign data named"
ok $(cmp -s "$d/foreign" "$d/foreign.copy"; echo $?) "and the file is untouched"
printf '[hmmd]\nformat = yes\n' >"$d/bad.conf"
"$B/bin/hmmd" --config "$d/bad.conf" --socket "$d/s" 2>"$d/log"
ok $([ $? = 2 ] && grep -q 'bad.conf:2: format: "yes"' "$d/log"; echo $?) "format = yes: exit 2, key named"
for how in flag key; do
	cp "$d/foreign.copy" "$d/foreign"
	if [ $how = flag ]; then
		"$B/bin/hmmd" --module none --socket "$d/s" --store "$d/foreign" --store-size 64M --format 2>"$d/log" &
	else
		printf '[hmmd]\nformat = 1\n' >"$d/fmt.conf"
		"$B/bin/hmmd" --config "$d/fmt.conf" --module none --socket "$d/s" --store "$d/foreign" --store-size 64M 2>"$d/log" &
	fi
	pid=$!
	for i in $(seq 100); do [ -S "$d/s" ] && break; sleep 0.05; done
	"$B/bin/hmmctl" --socket "$d/s" status >"$d/status" 2>&1
	ok $? "format by $how: hmmd serves on the formatted store"
	kill $pid; wait $pid 2>/dev/null
	ok $([ "$(head -c 8 "$d/foreign")" = HMMSTORE ]; echo $?) "format by $how: the file is an hmm store now"
done
pid=
echo "1..$n"
exit $failed
