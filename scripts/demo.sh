#!/usr/bin/env bash
# scripts/demo.sh BUILD — the main job: hmm-train's default preset, with
# its HTML report in BUILD/report.html.
set -eu
B=${1:-build}
exec "$B/bin/hmm-train" --report "$B/report.html"
