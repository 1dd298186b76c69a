#!/usr/bin/env bash
# test_train_inputs — hmm-train refuses, before step 1, with exit 2 and a
# message naming the path, what it cannot use (issue 18 item 8):
# --data, --resume and --ckpt on a FIFO (which used to block for ever) or
# a device node (which --ckpt used to replace by a regular file), --ckpt
# on a directory, --ckpt on a full file system, and --ckpt P --store P
# (which replaced the store).  Each target is left as it was.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-train
need "$bin"
scratch train-inputs
mnt=
trap 'if [ -n "$mnt" ]; then umount "$mnt"; fi; rm -rf "$dir"' EXIT
tries=0 hangs=0

refused() {	# pattern what args...
	local pat=$1 what=$2 rc; shift 2
	tries=$((tries + 1))
	timeout 20 "$bin" --preset tiny --steps 2 --store "$dir/s.store" "$@" >"$dir/out" 2>&1
	rc=$?
	[ $rc = 124 ] && hangs=$((hangs + 1))
	echo "# rc $rc: $(grep -v '^blas' "$dir/out" | head -2)"
	ok $([ $rc -eq 2 ] && grep -qi -- "$pat" "$dir/out" && ! grep -q '^step' "$dir/out"; echo $?) "$what: refused before step 1, exit 2"
	rm -f "$dir/s.store"
}

mkfifo "$dir/fifo"
refused "--data $dir/fifo: not a regular file" "--data on a FIFO" --data "$dir/fifo"
refused "--resume $dir/fifo: not a regular file" "--resume on a FIFO" --resume "$dir/fifo"
refused "--ckpt $dir/fifo: not a regular file" "--ckpt on a FIFO" --ckpt "$dir/fifo"
ok $([ -p "$dir/fifo" ]; echo $?) "the FIFO is still a FIFO"

if [ "$(id -u)" = 0 ] && mknod "$dir/null" c 1 3 2>/dev/null; then
	refused "--ckpt $dir/null: not a regular file" "--ckpt on a device node" --ckpt "$dir/null"
	ok $([ -c "$dir/null" ]; echo $?) "the device node is still a device node"
	refused "--data $dir/null: not a regular file" "--data on a device node" --data "$dir/null"
else
	skip "device nodes: not root, or mknod refused"
fi

mkdir "$dir/d"
refused "--ckpt $dir/d: not a regular file (a directory)" "--ckpt on a directory" --ckpt "$dir/d"

tries=$((tries + 1))
timeout 20 "$bin" --preset tiny --steps 2 --ckpt "$dir/p" --store "$dir/p" >"$dir/out" 2>&1
rc=$?
echo "# rc $rc: $(grep -v '^blas' "$dir/out" | head -2)"
ok $([ $rc -eq 2 ] && grep -q -- "--ckpt $dir/p: the same file as --store" "$dir/out" && ! grep -q '^step' "$dir/out" && [ ! -e "$dir/p" ]; echo $?) "--ckpt P --store P: refused, nothing written"
printf 'keep me' >"$dir/q"
ln "$dir/q" "$dir/q2"
refused "the same file as --store" "--ckpt and --store hard links of one file" --ckpt "$dir/q" --store "$dir/q2"
ok $([ "$(cat "$dir/q")" = "keep me" ]; echo $?) "that file is untouched"

if [ "$(id -u)" = 0 ] && mkdir "$dir/full" && mount -t tmpfs -o size=64k tmpfs "$dir/full" 2>/dev/null; then
	mnt=$dir/full
	dd if=/dev/zero of="$mnt/fill" bs=4k count=64 2>/dev/null
	refused "--ckpt $mnt/c: .*No space left" "--ckpt on a full file system" --ckpt "$mnt/c"
	ok $([ ! -e "$mnt/c" ] && [ ! -e "$mnt/c.tmp" ]; echo $?) "nothing left on the full file system"
else
	skip "full file system: not root, or tmpfs mount refused"
fi
echo "# bad inputs tried $tries, hangs $hangs"
t_done
