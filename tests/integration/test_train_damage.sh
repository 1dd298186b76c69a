#!/usr/bin/env bash
# test_train_damage — --resume of a checkpoint whose store has lost its
# superblocks (zeroed, damaged, truncated, emptied) is refused, naming the
# store's path, and the store is left byte for byte as it was: never
# reformatted (issue 18 item 10).  A damaged data extent fails the step
# that reads it with the store's path, the offset and "checksum
# mismatch" (item 11).
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-train
need "$bin"
scratch train-damage
tries=0 losses=0
"$bin" --preset tiny --steps 2 --ckpt "$dir/c" >"$dir/out" 2>&1
ok $? "a checkpoint at step 2"
cp "$dir/c.store" "$dir/good"

resume_refused() {	# what [exit status: 2, a bad checkpoint, or 1|2]
	local rc before after want=${2:-1|2}
	tries=$((tries + 1))
	before=$(md5sum <"$dir/c.store") size=$(stat -c %s "$dir/c.store")
	timeout 60 "$bin" --preset tiny --steps 4 --resume "$dir/c" >"$dir/out" 2>&1
	rc=$?
	after=$(md5sum <"$dir/c.store")
	echo "# rc $rc: $(grep -v '^blas' "$dir/out" | grep hmm-train: | tail -1)"
	ok $([[ $rc =~ ^($want)$ ]]; echo $?) "$1: --resume fails (exit $rc, want $want)"
	ok $(grep -q -- "store $dir/c.store" "$dir/out" && ! grep -q '^step' "$dir/out"; echo $?) "$1: the message names the store, before step 1"
	if [ "$before" = "$after" ] && [ "$size" = "$(stat -c %s "$dir/c.store")" ]; then
		ok 0 "$1: the store is unchanged ($size bytes)"
	else
		ok 1 "$1: the store is unchanged ($size bytes)"
		losses=$((losses + 1))
	fi
	cp "$dir/good" "$dir/c.store"
}

dd if=/dev/zero of="$dir/c.store" bs=4096 count=2 conv=notrunc 2>/dev/null
resume_refused "both superblocks zeroed" 2
printf 'XXXXXXXX' | dd of="$dir/c.store" bs=1 seek=100 conv=notrunc 2>/dev/null
printf 'XXXXXXXX' | dd of="$dir/c.store" bs=1 seek=4196 conv=notrunc 2>/dev/null
resume_refused "both superblocks damaged" 2
truncate -s 4096 "$dir/c.store"
resume_refused "the store truncated to 4 KiB" 2
truncate -s 0 "$dir/c.store"
resume_refused "the store truncated to 0" 2
timeout 60 "$bin" --preset tiny --steps 4 --resume "$dir/c" >"$dir/out" 2>&1
ok $? "the intact store still resumes"

# 64 bytes of a live extent, the middle one of the newest table (the
# format is libhmm/src/store/table.h's): a block that merely holds
# bytes may be an older copy that no table names, whose damage is no loss
off=$(python3 - "$dir/c.store" <<'PY'
import struct, sys
with open(sys.argv[1], 'r+b') as f:
    best = None
    for slot in (0, 1):
        f.seek(slot * 4096)
        sb = f.read(128)
        if sb[:8] == b'HMMSTORE':
            gen, = struct.unpack_from('<Q', sb, 16)
            if best is None or gen > best[0]:
                best = (gen, sb)
    sb = best[1]
    data_off, = struct.unpack_from('<Q', sb, 32)
    toff = struct.unpack_from('<2Q', sb, 48)
    bsize, = struct.unpack_from('<I', sb, 72)
    slot, = struct.unpack_from('<I', sb, 84)
    n, = struct.unpack_from('<Q', sb, 88)
    f.seek(toff[slot])
    tab = f.read(24 * n)
    key, blk, length, crc = struct.unpack_from('<QQII', tab, 24 * (n // 2))
    off = data_off + blk * bsize + min(1000, length - 64)
    f.seek(off)
    f.write(b'\xff' * 64)
    print(off)
PY
)
tries=$((tries + 1))
timeout 60 "$bin" --preset tiny --steps 4 --resume "$dir/c" >"$dir/out" 2>&1
rc=$?
echo "# rc $rc: $(grep 'hmm-train: step' "$dir/out")"
ok $([ $rc -ne 0 ] && grep "hmm-train: step" "$dir/out" | grep -- "store $dir/c.store" | grep "offset" | grep -q "checksum mismatch"; echo $?) "bytes damaged at $off: the error names the store, the offset and \"checksum mismatch\""
echo "# bad inputs tried $tries, data losses $losses"
t_done
