#!/bin/sh
# demo-t.sh: paged-demo, small, against the build tree's pagedd and pactl: every output must match.
# SPDX-License-Identifier: MIT
top_builddir=${top_builddir:-.}
demo=$top_builddir/tools/paged-demo
pagedd=$top_builddir/daemon/pagedd
pactl=$top_builddir/tools/pactl
for p in "$demo" "$pagedd" "$pactl"; do
    if [ ! -x "$p" ]; then
        echo "1..0 # SKIP $p is not built"
        exit 0
    fi
done
echo 1..3
out=$("$demo" --workers 4 --seqs 2 --steps 4 --backend cpu --pagedd "$pagedd" --pactl "$pactl" 2>&1)
rc=$?
printf '%s\n' "$out" | sed 's/^/# /'
if [ $rc -eq 0 ]; then echo "ok 1 - paged-demo exits 0"; else echo "not ok 1 - paged-demo exits 0 (got $rc)"; fi
if printf '%s\n' "$out" | grep -q '^all [0-9]* outputs match the CPU reference$'; then
    echo "ok 2 - paged-demo: every output matches the reference"
else
    echo "not ok 2 - paged-demo: every output matches the reference"
fi
if printf '%s\n' "$out" | grep -q '^worker [1-3]: adopted [1-9][0-9]* prefix tokens'; then
    echo "ok 3 - paged-demo: workers adopt the published prefix"
else
    echo "not ok 3 - paged-demo: workers adopt the published prefix"
fi
