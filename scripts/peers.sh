#!/usr/bin/env bash
# scripts/peers.sh — an optional virtual environment with the peers hmm is
# compared with: a PyPI torch 2.x (`hmm-bench train --vs-torch` finds
# DIR/bin/python at build/peers and runs the GPT in it beside Debian's
# torch 1.13) and DeepSpeed (`python3 -m hmm.bench`'s third way), over
# Debian's python3 (--system-site-packages).  Not run by CI or make check:
# it downloads from PyPI, about 5.5 GB installed (PyPI's Linux torch is
# the CUDA build: `import torch` needs its CUDA libraries even on a CPU,
# so `pip install --no-deps torch` is not enough: it fails on
# libcufile.so.0).  DeepSpeed builds its CPU Adam and async I/O ops on
# first use; the async I/O op (its NVMe swap) needs Debian's libaio-dev.
# Usage: scripts/peers.sh [DIR]   (default build/peers), then
#   HMM_LIB_DIR=build/lib PYTHONPATH=python DIR/bin/python -m hmm.bench
set -eu
dir=${1:-build/peers}
avail=$(df -Pk "$(dirname "$dir")" | awk 'NR == 2 { print $4 }')
if [ "$avail" -lt $((8 << 20)) ]; then
	echo "peers.sh: $(dirname "$dir") has $((avail >> 20)) GiB free; torch and its CUDA libraries take about 6" >&2
	exit 1
fi
/usr/bin/python3 -m venv --system-site-packages "$dir"
# ">=2": Debian's torch 1.13, seen through --system-site-packages, would
# satisfy a bare "torch" and nothing would be installed
"$dir/bin/pip" install 'torch>=2'
"$dir/bin/python" -c 'import torch; print("torch", torch.__version__)
assert int(torch.__version__.split(".")[0]) >= 2, "not torch 2.x"'
DS_BUILD_OPS=0 "$dir/bin/pip" install deepspeed
"$dir/bin/python" -c 'import deepspeed; print("deepspeed", deepspeed.__version__)'
dpkg -s libaio-dev >/dev/null 2>&1 ||
	echo "peers.sh: libaio-dev is not installed: DeepSpeed's NVMe swap (its async_io op) will not build; apt-get install libaio-dev" >&2
echo "peers.sh: $dir ready"
