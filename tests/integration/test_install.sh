#!/usr/bin/env bash
# test_install — `make install DESTDIR=IMG PREFIX=/usr` as a new user
# would use it: the libraries, headers and pkg-config files are where
# hmm.pc and hk.pc say (written for that PREFIX, not the build's), and
# examples/ (a trainer outside the build system, pkg-config only) builds
# against the image, shared and static, runs and learns, in its own store
# and through an hmmd of default settings (2 MiB chunks).
set -u
. "$(dirname "$0")/../t.sh"
need "$B/lib/libhmm.so.0" "$B/lib/libhk.so.0"
command -v pkg-config >/dev/null || skip_all "no pkg-config"
scratch install
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null && wait $pid; rm -rf "$dir"' EXIT
dir=$(cd "$dir" && pwd)
img=$dir/img
root=$(cd "$(dirname "$0")/../.." && pwd)

make -s -C "$root" B="$(cd "$B" && pwd)" DESTDIR="$img" PREFIX=/usr install \
	>"$dir/log" 2>&1
ok $? "make install DESTDIR PREFIX=/usr"

for f in lib/libhmm.so.0 lib/libhk.so.0 lib/libhmm.a lib/libhk.a \
	 include/hmm/hmm.h include/hmm/hk.h include/hmm/hk_adamw.h \
	 include/hmm/hk_attn.h include/hmm/hk_offload.h include/hmm/hmmk.h \
	 lib/pkgconfig/hmm.pc lib/pkgconfig/hk.pc bin/hmmd bin/hmm-train \
	 share/man/man8/hmmd.8; do
	[ -e "$img/usr/$f" ] || { echo "# missing /usr/$f"; miss=1; }
done
ok ${miss:-0} "installed: libraries, archives, headers under include/hmm, .pc, tools, man"
ok $([ "$(readlink "$img/usr/lib/libhk.so")" = libhk.so.0 ]; echo $?) "libhk.so -> libhk.so.0"
ok $(nm "$img/usr/lib/libhk.a" | grep -q ' T hk_offload_adamw_step$'; echo $?) \
	"libhk.a holds the offloaded step (kernels/bind) as libhk.so.0 does"

pc() { echo $(PKG_CONFIG_SYSROOT_DIR=$img PKG_CONFIG_PATH=$img/usr/lib/pkgconfig pkg-config "$@"); }
ok $(grep -qx 'prefix=/usr' "$img/usr/lib/pkgconfig/hmm.pc"; echo $?) "hmm.pc written for PREFIX=/usr"
ok $([ "$(pc --cflags hk)" = "-I$img/usr/include/hmm" ]; echo $?) "pkg-config --cflags hk: the image's include/hmm"
libs=$(pc --libs hk)
ok $([ "$libs" = "-L$img/usr/lib -lhk -lhmm" ]; echo $?) "pkg-config --libs hk: -lhk -lhmm from the image ($libs)"
slibs=$(pc --static --libs hk)
ok $(for l in -luring -lnuma -lpthread -lm -ldl; do
	case " $slibs " in *" $l "*) ;; *) exit 1;; esac; done; echo $?) \
	"pkg-config --static --libs hk: Libs.private ($slibs)"

# the example, shared: built with pkg-config only, run from the image
cp "$root"/examples/Makefile "$root"/examples/train_mlp.c "$dir/"
PKG_CONFIG_SYSROOT_DIR=$img PKG_CONFIG_PATH=$img/usr/lib/pkgconfig \
	make -s -C "$dir" LDFLAGS="-Wl,-rpath-link,$img/usr/lib" >"$dir/log" 2>&1
ok $? "examples/ builds against the image (pkg-config only)"
LD_LIBRARY_PATH=$img/usr/lib "$dir/train_mlp" --store "$dir/store" --steps 30 \
	>"$dir/out" 2>&1
ok $? "train_mlp runs and its loss falls (exit 0)"
LD_LIBRARY_PATH=$img/usr/lib ldd "$dir/train_mlp" >"$dir/ldd"
ok $(grep -q "libhk.so.0 => $img/usr/lib/" "$dir/ldd" && grep -q "libhmm.so.0 => $img/usr/lib/" "$dir/ldd"; echo $?) \
	"train_mlp runs on the image's libhk.so.0 and libhmm.so.0"
line=$(grep '^train_mlp: loss' "$dir/out")
echo "# ${line:-no summary line}"
set -- $(echo "$line" | sed 's/[^0-9. ]//g') 0 0 0 0 0
ok $(awk -v a="$1" -v b="$2" 'BEGIN { exit !(b < a * 0.9) }'; echo $?) "held-out loss fell by over 10% ($1 -> $2)"
ok $([ "${3:-0}" -gt 0 ] && [ "${4:-1}" -le "${5:-0}" ]; echo $?) \
	"the state went through the store ($3 bytes written) and the host stayed in budget ($4 <= $5)"

# through hmmd, whose chunks (2 MiB) are larger than the example's budget
"$B/bin/hmmd" --socket "$dir/s.sock" --store "$dir/hmmd.store" --module none \
	>"$dir/hmmd.log" 2>&1 &
pid=$!
for _ in $(seq 50); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
LD_LIBRARY_PATH=$img/usr/lib "$dir/train_mlp" --daemon "unix:$dir/s.sock" \
	--steps 30 >"$dir/out" 2>&1
rc=$?
echo "# $(grep -m1 '^train_mlp' "$dir/out")"
ok $rc "train_mlp --daemon through a default hmmd: its loss falls (exit 0)"

# static: the archives and Libs.private, no shared hmm library needed
cc -O2 $(pc --cflags hk) -o "$dir/train_static" "$dir/train_mlp.c" \
	"$img/usr/lib/libhk.a" "$img/usr/lib/libhmm.a" \
	$(pc --static --libs-only-l hk | sed 's/-lhk\b//; s/-lhmm\b//') -lm >"$dir/log" 2>&1
ok $? "static link: libhk.a libhmm.a + pkg-config --static"
"$dir/train_static" --store "$dir/store2" --steps 30 >"$dir/out" 2>&1
ok $([ $? = 0 ] && ! ldd "$dir/train_static" | grep -q 'libh[mk]'; echo $?) "the static trainer runs without libhmm.so/libhk.so"
t_done
