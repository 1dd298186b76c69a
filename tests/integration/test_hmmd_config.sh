#!/usr/bin/env bash
# test_hmmd_config — hmmd's config keys host_dir, module, module_store and
# module_store_size (and their flags): good values run, bad ones exit with
# a log line naming the file, line, key or path.
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

# bad values: exit 2 (config) or 1 (cannot run), the reason named
printf '[hmmd]\nmodule_store_size = lots\n' >"$dir/bad.conf"
"$B/bin/hmmd" --config "$dir/bad.conf" --socket "$dir/s" 2>"$dir/log"
ok $([ $? = 2 ] && grep -q 'bad.conf:2: module_store_size: "lots"' "$dir/log"; echo $?) "module_store_size not a size: exit 2, file:line and key named"
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
t_done
