#!/usr/bin/env bash
# test_kmod_install — the module for real machines, into a scratch root:
# `make kmod-install DESTDIR=` puts hmmk.ko under updates/ with depmod's
# index naming it and the modules-load.d snippet; its MODULE_VERSION is
# the tree's VERSION; `make install-dkms` gives a source tree whose
# dkms.conf builds hmmk.ko with `dkms build` (scratch DKMS tree and
# signing key: nothing outside it is touched).
set -u
. "$(dirname "$0")/../t.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
[ -f "$root/kmod/hmmk.ko" ] || skip_all "kmod/hmmk.ko not built (make kmod)"
kver=$(modinfo -F vermagic "$root/kmod/hmmk.ko" | awk '{print $1}')
[ -e "/lib/modules/$kver/build/Makefile" ] || skip_all "no /lib/modules/$kver/build"
scratch kmod-install
dir=$(cd "$dir" && pwd)
version=$(sed -n 's/^VERSION[ \t]*?= *//p' "$root/mk/install.mk")

make -s -C "$root" KVER="$kver" DESTDIR="$dir/img" PREFIX=/usr kmod-install \
	>"$dir/log" 2>&1
ok $? "make kmod-install KVER=$kver DESTDIR"
ko=$dir/img/lib/modules/$kver/updates/kmod/hmmk.ko
ok $([ -f "$ko" ]; echo $?) "hmmk.ko in /lib/modules/$kver/updates"
ok $(grep -q '^updates/kmod/hmmk.ko:' "$dir/img/lib/modules/$kver/modules.dep"; echo $?) \
	"depmod: modules.dep names it"
ok $([ "$(grep -v '^#' "$dir/img/usr/lib/modules-load.d/hmmk.conf")" = hmmk ]; echo $?) \
	"modules-load.d/hmmk.conf loads hmmk"
mv=$(modinfo -F version "$ko")
ok $([ -n "$version" ] && [ "$mv" = "$version" ]; echo $?) "MODULE_VERSION $mv = VERSION $version"

make -s -C "$root" DESTDIR="$dir/img" install-dkms >"$dir/log" 2>&1
ok $? "make install-dkms"
src=$dir/img/usr/src/hmmk-$version
ok $(grep -qx "PACKAGE_VERSION=\"$version\"" "$src/dkms.conf" &&
     [ -f "$src/Kbuild" ] && [ -f "$src/include/uapi/hmmk.h" ] && [ -f "$src/kmod/main.c" ] &&
     ! ls "$src"/kmod/*.mod.c "$src"/kmod/*.o >/dev/null 2>&1; echo $?) \
	"/usr/src/hmmk-$version: dkms.conf, Kbuild, kmod/ sources, the uapi header, no build output"
if command -v dkms >/dev/null; then
	mkdir -p "$dir/dkms"
	mok_signing_key=$dir/mok.key mok_certificate=$dir/mok.pub \
		dkms build -m hmmk -v "$version" -k "$kver" --sourcetree "$dir/img/usr/src" \
		--dkmstree "$dir/dkms" >"$dir/log" 2>&1
	r=$?
	built=$dir/dkms/hmmk/$version/$kver/x86_64/module/hmmk.ko
	[ $r = 0 ] || sed 's/^/# /' "$dir/log" | tail -20
	ok $([ $r = 0 ] && [ "$(modinfo -F version "$built")" = "$version" ]; echo $?) \
		"dkms build: hmmk.ko $version for $kver"
else
	skip "no dkms"
fi
t_done
