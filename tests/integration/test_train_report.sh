#!/usr/bin/env bash
# test_train_report — hmm-train --report writes one self-contained HTML
# page (no script, no external reference) that headless Chromium renders
# to a PNG; the rendered DOM holds the summary table and the four charts
# (loss, bytes per tier, store bandwidth, stall breakdown) with data in
# them; the rendering is skipped when chromium is not installed
# (scripts/deps.sh has it).  A failed write or a signal leaves an
# earlier report at PATH as it was, and nothing beside it.
set -u
. "$(dirname "$0")/../t.sh"
bin=$B/bin/hmm-train
need "$bin"
scratch train-report
dir=$(realpath "$dir")	# chromium wants file:///absolute

# a failed write leaves PATH as it was: the page goes to a file beside
# it, renamed over it only when whole.  The write fails at 4 KiB here
# (ulimit -f, SIGXFSZ ignored: EFBIG, as a full disk's ENOSPC); it once
# cut an earlier report to 4096 bytes, or left a 4096-byte fragment
"$bin" --preset tiny --steps 2 --host-budget 64G --report "$dir/old.html" >/dev/null 2>&1
cp "$dir/old.html" "$dir/old.copy"
mkdir "$dir/lim"
for what in old new; do
	[ $what = old ] && cp "$dir/old.copy" "$dir/lim/r.html"
	(trap '' XFSZ; ulimit -f 4; exec "$bin" --preset tiny --steps 2 --host-budget 64G --report "$dir/lim/r.html") >/dev/null 2>"$dir/err"
	rc=$?
	if [ $what = old ]; then
		ok $([ $rc = 1 ] && cmp -s "$dir/lim/r.html" "$dir/old.copy"; echo $?) "a report write that fails (file size limit): exit 1, the earlier report intact ($(stat -c %s "$dir/lim/r.html") bytes, was $(stat -c %s "$dir/old.copy")): $(cat "$dir/err")"
	else
		ok $([ $rc = 1 ] && [ ! -e "$dir/lim/r.html" ]; echo $?) "a new report whose write fails: exit 1, no file at PATH"
	fi
	ok $([ "$(ls -A "$dir/lim" | grep -v '^r\.html$')" = "" ]; echo $?) "and no temporary left beside it ($(ls -A "$dir/lim" | tr '\n' ' '))"
	ok $(grep -q "write failed: File too large" "$dir/err"; echo $?) "the error names the report and the cause"
	rm -f "$dir/lim/r.html"
done
# a signal mid-run: the earlier report stays, nothing else is made
cp "$dir/old.copy" "$dir/lim/r.html"
"$bin" --preset tiny --steps 100000 --report "$dir/lim/r.html" >"$dir/out" 2>&1 &
tp=$!
for _ in $(seq 200); do grep -q '^step' "$dir/out" 2>/dev/null && break; sleep 0.05; done
kill -TERM $tp; wait $tp
rc=$?
ok $([ $rc = 143 ] && cmp -s "$dir/lim/r.html" "$dir/old.copy" && [ "$(ls -A "$dir/lim")" = r.html ]; echo $?) "SIGTERM mid-run: exit 143, the earlier report intact, nothing else made (rc $rc: $(ls -A "$dir/lim" | tr '\n' ' '))"

chrome=$(command -v chromium || command -v chromium-browser)
if [ -z "$chrome" ]; then
	skip "chromium not installed (scripts/deps.sh): the rendering checks"
	t_done
fi
flags=(--headless --no-sandbox --disable-gpu --disable-background-networking
       --user-data-dir="$dir/profile" --window-size=800,1500)

HMM_TRACE="$dir/trace.json" "$bin" --preset tiny --steps 12 --report "$dir/r.html" >"$dir/out" 2>&1
ok $? "hmm-train --report runs (with HMM_TRACE)"
ok $(grep -q '"ph":"X"' "$dir/trace.json" && grep -q '"store I/O"' "$dir/trace.json"; echo $?) "HMM_TRACE wrote a trace-event file with store I/O"
ok $(grep -q "trace.json (open in ui.perfetto.dev)" "$dir/r.html"; echo $?) "the report names the trace"
ok $(grep -q "report written to $dir/r.html" "$dir/out"; echo $?) "it says where the report is"
ok $([ -s "$dir/r.html" ]; echo $?) "report written"
ok $(! grep -qiE '<script|https?://|src=|<link' "$dir/r.html"; echo $?) "self-contained: no script, link or URL"

timeout 120 "$chrome" "${flags[@]}" --screenshot="$dir/r.png" "file://$dir/r.html" >"$dir/chrome.log" 2>&1
ok $([ -s "$dir/r.png" ] && [ "$(head -c 8 "$dir/r.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; echo $?) "rendered to a PNG ($(stat -c %s "$dir/r.png" 2>/dev/null) bytes)"
timeout 120 "$chrome" "${flags[@]}" --dump-dom "file://$dir/r.html" >"$dir/dom.html" 2>>"$dir/chrome.log"
ok $([ -s "$dir/dom.html" ]; echo $?) "chromium parsed the page (DOM dumped)"
for id in "table id=\"summary\"" "svg id=\"loss\"" "svg id=\"tiers\"" "svg id=\"bandwidth\"" "svg id=\"stalls\""; do
	ok $(grep -q "<$id" "$dir/dom.html"; echo $?) "element <$id> in the rendered page"
done
pts=$(awk '/<svg id="loss"/,/<\/svg>/' "$dir/dom.html" | grep -o 'points="[^"]*"' | head -1 | wc -w)
ok $([ "$pts" -ge 12 ]; echo $?) "loss curve has a point per step ($pts)"
ok $([ "$(grep -c 'class="series"' "$dir/dom.html")" -ge 5 ]; echo $?) "five data series drawn"
ok $([ "$(grep -c 'class="bar"' "$dir/dom.html")" -ge 5 ]; echo $?) "stall breakdown bars drawn"
"$bin" --preset tiny --steps 2 --report "$dir/no/such/dir/r.html" >"$dir/out" 2>"$dir/err"
ok $([ $? -eq 2 ] && grep -q "cannot write" "$dir/err" && ! grep -q '^step' "$dir/out"; echo $?) "--report into a missing folder: refused before training"
t_done
