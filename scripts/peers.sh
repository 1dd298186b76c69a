#!/usr/bin/env bash
# scripts/peers.sh — an optional virtual environment with the peers hmm is
# compared with (DeepSpeed, for `python3 -m hmm.bench`'s third way), over
# Debian's python3-torch (--system-site-packages).  Not run by CI or make
# check: it downloads from PyPI.
# Usage: scripts/peers.sh [DIR]   (default build/peers), then
#   HMM_LIB_DIR=build/lib PYTHONPATH=python DIR/bin/python -m hmm.bench
set -eu
dir=${1:-build/peers}
/usr/bin/python3 -m venv --system-site-packages "$dir"
# DeepSpeed builds its CPU Adam and async I/O ops on first use: libaio-dev
# (Debian) is what its NVMe swap needs.
DS_BUILD_OPS=0 "$dir/bin/pip" install deepspeed
"$dir/bin/python" -c 'import deepspeed; print("deepspeed", deepspeed.__version__)'
echo "peers.sh: $dir ready"
