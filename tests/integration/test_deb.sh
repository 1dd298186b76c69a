#!/usr/bin/env bash
# test_deb — the Debian packages: `make deb` (dpkg-buildpackage -b -us -uc
# on a copy of the tree, in a scratch build folder) builds libhmm0,
# libhmm-dev, hmmd, hmm-tools, hmm-dkms and python3-hmm; each holds the
# files it should (dpkg-deb -c) and its maintainer scripts make the hmm
# user (hmmd) and run DKMS (hmm-dkms); lintian reports no error.  The
# packages are not installed on this machine: libhmm0 + libhmm-dev +
# python3-hmm are unpacked into a scratch root, examples/ is built there
# with pkg-config and run, and the Python package imported from it.
set -u
. "$(dirname "$0")/../t.sh"
for p in dpkg-buildpackage dh dh_dkms dh_python3; do
	command -v $p >/dev/null || skip_all "$p not installed (scripts/deps.sh)"
done
scratch deb
dir=$(cd "$dir" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
version=$(sed -n 's/^VERSION[ \t]*?= *//p' "$root/mk/install.mk")
arch=$(dpkg --print-architecture)
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH)

make -s -C "$root" B="$dir/b" deb >"$dir/log" 2>&1
r=$?
[ $r = 0 ] || tail -20 "$dir/log" | sed 's/^/# /'
ok $r "make deb (dpkg-buildpackage -b -us -uc)"
deb() { echo "$dir/b/deb/$1_${version}_$2.deb"; }
for p in libhmm0:$arch libhmm-dev:$arch hmmd:$arch hmm-tools:$arch hmm-dkms:all python3-hmm:all; do
	f=$(deb ${p%:*} ${p#*:})
	[ -f "$f" ] || { echo "# no $f"; miss=1; continue; }
	echo "# ${p%:*}: $(stat -c %s "$f") bytes"
done
ok ${miss:-0} "six packages built"

# has PKG PATH...: every PATH is in PKG's file list
has() {
	local p=$1 f
	shift
	local a=$arch
	case $p in hmm-dkms|python3-hmm) a=all ;; esac
	dpkg-deb -c "$(deb $p $a)" 2>/dev/null | awk '{print $6}' >"$dir/list"
	for f; do grep -qx "\./$f" "$dir/list" || { echo "# $p lacks $f"; return 1; }; done
}
L=usr/lib/$triplet
ok $(has libhmm0 $L/libhmm.so.0 $L/libhk.so.0 && ! grep -q 'include\|\.a$' "$dir/list"; echo $?) \
	"libhmm0: libhmm.so.0 and libhk.so.0 only"
ok $(has libhmm-dev usr/include/hmm/hmm.h usr/include/hmm/hk_offload.h usr/include/hmm/hmmk.h \
	$L/libhmm.a $L/libhk.a $L/libhmm.so $L/libhk.so $L/pkgconfig/hmm.pc $L/pkgconfig/hk.pc \
	usr/share/man/man3/libhmm.3.gz; echo $?) "libhmm-dev: headers, archives, links, hmm.pc hk.pc, man3"
ok $(has hmmd usr/bin/hmmd usr/lib/systemd/system/hmmd.service usr/lib/sysusers.d/hmm.conf \
	etc/hmm/hmmd.conf usr/share/man/man8/hmmd.8.gz; echo $?) "hmmd: daemon, unit, sysusers, config, man8"
ok $(has hmm-tools usr/bin/hmm-train usr/bin/hmm-bench usr/bin/hmmctl; echo $?) "hmm-tools: the three tools"
ok $(has hmm-dkms usr/src/hmmk-$version/dkms.conf usr/src/hmmk-$version/Kbuild \
	usr/src/hmmk-$version/kmod/main.c usr/src/hmmk-$version/include/uapi/hmmk.h \
	usr/lib/modules-load.d/hmmk.conf usr/lib/udev/rules.d/60-hmmk.rules; echo $?) \
	"hmm-dkms: module source + dkms.conf, modules-load.d, udev rule"
ok $(has python3-hmm usr/lib/python3/dist-packages/hmm/__init__.py \
	usr/lib/python3/dist-packages/hmm/torch/adamw.py; echo $?) "python3-hmm: the hmm package"

dpkg-deb -e "$(deb hmmd $arch)" "$dir/ctl-hmmd"
ok $(grep -q 'systemd-sysusers.*hmm.conf' "$dir/ctl-hmmd/postinst" &&
     grep -qx '/etc/hmm/hmmd.conf' "$dir/ctl-hmmd/conffiles"; echo $?) \
	"hmmd: postinst makes the hmm user, hmmd.conf is a conffile"
dpkg-deb -e "$(deb hmm-dkms all)" "$dir/ctl-dkms"
ok $(grep -q 'common.postinst' "$dir/ctl-dkms/postinst" &&
     dpkg-deb -f "$(deb hmm-dkms all)" Depends | grep -q dkms; echo $?) \
	"hmm-dkms: depends on dkms, postinst builds through DKMS"

if command -v lintian >/dev/null; then
	lintian "$dir"/b/deb/*.changes >"$dir/lintian" 2>&1
	grep '^[EW]: ' "$dir/lintian" | sed 's/^/# /'
	ok $(! grep -q '^E: ' "$dir/lintian"; echo $?) "lintian: no errors"
else
	skip "no lintian"
fi

# unpacked into a scratch root: a trainer built against it, Python from it
for p in libhmm0:$arch libhmm-dev:$arch python3-hmm:all; do
	dpkg-deb -x "$(deb ${p%:*} ${p#*:})" "$dir/root"
done
cp "$root"/examples/Makefile "$root"/examples/train_mlp.c "$dir/"
PKG_CONFIG_SYSROOT_DIR=$dir/root PKG_CONFIG_PATH=$dir/root/$L/pkgconfig \
	make -s -C "$dir" LDFLAGS="-Wl,-rpath-link,$dir/root/$L" >"$dir/log" 2>&1
ok $? "examples/ builds against the unpacked libhmm-dev"
LD_LIBRARY_PATH=$dir/root/$L "$dir/train_mlp" --store "$dir/store" --steps 30 >"$dir/out" 2>&1
ok $? "train_mlp runs on the packaged libraries: $(tail -1 "$dir/out")"
PYTHONPATH=$dir/root/usr/lib/python3/dist-packages HMM_LIB_DIR=$dir/root/$L \
	/usr/bin/python3 -c '
import hmm
ctx = hmm.Context(host_budget="16M")
t = ctx.tensor("x", (1024,), "float32")
print(ctx.stats()["tensors"])' >"$dir/out" 2>&1
ok $([ "$(tail -1 "$dir/out")" = 1 ]; echo $?) "python3-hmm imports and makes a tensor on the packaged libhmm0"
t_done
