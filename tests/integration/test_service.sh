#!/usr/bin/env bash
# test_service — hmmd as a service after `make install PREFIX=P`: the unit
# names P's hmmd and config and passes `systemd-analyze verify`; it runs
# as user hmm with StateDirectory=hmm and RuntimeDirectory=hmm; sysusers.d
# makes the hmm user and group in a scratch root; the installed config
# holds every key of daemon/config.c's tables and man/hmmd.8 documents
# each one; hmmd starts from the installed config.
set -u
. "$(dirname "$0")/../t.sh"
need "$B/bin/hmmd"
scratch service
dir=$(cd "$dir" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
p=$dir/p
unit=$p/lib/systemd/system/hmmd.service

make -s -C "$root" B="$(cd "$B" && pwd)" PREFIX="$p" install-bin install-service \
	>"$dir/log" 2>&1
ok $? "make install-bin install-service PREFIX=scratch"
ok $(grep -qx "ExecStart=$p/bin/hmmd --config $p/etc/hmm/hmmd.conf --host-dir /run/hmm/host" "$unit"; echo $?) \
	"the unit's ExecStart: the installed hmmd and config, no /usr/local"
for k in User=hmm Group=hmm StateDirectory=hmm RuntimeDirectory=hmm \
	 "AmbientCapabilities=CAP_SYS_ADMIN CAP_IPC_LOCK"; do
	grep -qx "$k" "$unit" || { echo "# no $k"; miss=1; }
done
ok ${miss:-0} "User/Group hmm, StateDirectory and RuntimeDirectory hmm, CAP_SYS_ADMIN ambient"

# systemd-analyze runs here when it passes a unit known to be good
printf '[Service]\nExecStart=/bin/true\n' >"$dir/probe.service"
if systemd-analyze verify --man=no "$dir/probe.service" >/dev/null 2>&1; then
	systemd-analyze verify --man=no "$unit" >"$dir/verify" 2>&1
	ok $? "systemd-analyze verify hmmd.service: clean"
	ok $([ ! -s "$dir/verify" ]; echo $?) "  and silent"
	sed 's/^/# /' "$dir/verify"
else
	skip "systemd-analyze cannot run here"
	skip "systemd-analyze cannot run here"
fi

if command -v systemd-sysusers >/dev/null; then
	mkdir -p "$dir/root/etc"
	systemd-sysusers --root="$dir/root" "$p/lib/sysusers.d/hmm.conf" >/dev/null 2>&1
	ok $(grep -q '^hmm:x:[0-9]*:$' "$dir/root/etc/group" &&
	     grep -q '^hmm:x:[0-9]*:[0-9]*:.*:/var/lib/hmm:' "$dir/root/etc/passwd"; echo $?) \
		"sysusers.d/hmm.conf: user and group hmm, home /var/lib/hmm"
else
	skip "no systemd-sysusers"
fi

# every config key: in the installed config and in man/hmmd.8
keys=$(sed -n 's/^\t{ "\([a-z_]*\)", OFF(.*/\1/p' "$root/daemon/config.c")
ok $([ "$(echo $keys | wc -w)" -ge 15 ]; echo $?) "daemon/config.c: $(echo $keys | wc -w) keys found"
for k in $keys; do
	grep -Eq "^;? ?$k = " "$p/etc/hmm/hmmd.conf" || { echo "# $k not in hmmd.conf"; cmiss=1; }
	grep -qx ".B $k" "$root/man/hmmd.8" || { echo "# $k not in man/hmmd.8"; mmiss=1; }
done
ok ${cmiss:-0} "the installed hmmd.conf shows every key"
ok ${mmiss:-0} "man/hmmd.8 CONFIGURATION FILE documents every key"

# the installed config, with this test's paths, is one hmmd accepts
sed -e "s,^socket = .*,socket = $dir/s," -e "s,^store = .*,store = $dir/st," \
    -e 's,^store_size = .*,store_size = 16M,' -e 's,^host_budget = .*,host_budget = 32M,' \
    -e 's,^client_quota = .*,client_quota = 16M,' -e 's,^socket_group = .*,,' \
    "$p/etc/hmm/hmmd.conf" >"$dir/hmmd.conf"
"$p/bin/hmmd" --config "$dir/hmmd.conf" --module none 2>"$dir/log" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$dir"' EXIT
for i in $(seq 100); do [ -S "$dir/s" ] && break; sleep 0.05; done
ok $([ -S "$dir/s" ]; echo $?) "hmmd serves from the installed config"
kill $pid; wait $pid
ok $? "SIGTERM: exit 0"
t_done
