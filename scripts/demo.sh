#!/usr/bin/env bash
# scripts/demo.sh BUILD — the main job.  Runs hmm-train's default preset
# when it is built; until then the store benchmark against fio.
set -eu
B=${1:-build}
if [ -x "$B/bin/hmm-train" ]; then
	exec "$B/bin/hmm-train" --report "$B/report.html"
fi
mkdir -p "$B/tmp"
echo "demo: hmm-bench io against fio, a 2 GiB scratch file in $B/tmp, 1 MiB blocks, qd 32"
TMPDIR=$B/tmp exec "$B/bin/hmm-bench" io --size 2G --bs 1M --qd 32
