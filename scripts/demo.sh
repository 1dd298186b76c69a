#!/usr/bin/env bash
# scripts/demo.sh BUILD — the main job.  Runs hmm-train's default preset
# when it is built; until then the store benchmark against fio.
set -eu
B=${1:-build}
if [ -x "$B/bin/hmm-train" ]; then
	exec "$B/bin/hmm-train" --report "$B/report.html"
fi
f=$B/tmp/demo-store.img
mkdir -p "$B/tmp"
echo "demo: hmm-bench io --vs-fio, 2 GiB file $f, 1 MiB blocks, qd 32"
for rw in read write; do
	"$B/bin/hmm-bench" io --file "$f" --size 2G --bs 1M --qd 32 --rw $rw --vs-fio
done
