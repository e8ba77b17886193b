#!/bin/sh
# cuda-nodriver-t.sh: pagedd -b cuda on a machine without a CUDA driver says there is none and names -b cpu.
# SPDX-License-Identifier: MIT
top_builddir=${top_builddir:-.}
pagedd=$top_builddir/daemon/pagedd
# A driver's device node: the cuda backend may start here, and this test has nothing to check.
if [ -e /dev/nvidiactl ]; then
    echo "1..0 # SKIP a CUDA driver is installed here (/dev/nvidiactl)"
    exit 0
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cuda-nodriver.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# The socket's directory is a regular file, so no pagedd can be left running whatever happens.
: > "$tmp/file"
out=$("$pagedd" --foreground --config /dev/null --backend cuda --socket "$tmp/file/pagedd.sock" 2>&1)
rc=$?
if printf '%s\n' "$out" | grep -qF "built without CUDA"; then
    echo "1..0 # SKIP pagedd is built without CUDA"
    exit 0
fi
echo 1..3
# Reports one check: number, whether it held, description.
check() {
    if [ "$2" -eq 0 ]; then
        echo "ok $1 - $3"
    else
        echo "not ok $1 - $3"
        printf '%s\n' "$out" | sed 's/^/# /'
    fi
}
[ $rc -eq 1 ]
check 1 $? "pagedd -b cuda without a driver exits 1 (exit $rc)"
printf '%s\n' "$out" | grep -qE "backend cuda: no CUDA (driver|device) on this machine"
check 2 $? "it says there is no CUDA driver or device on this machine"
printf '%s\n' "$out" | grep -qF -- "-b cpu" && ! printf '%s\n' "$out" | grep -qi "insufficient"
check 3 $? "it names -b cpu and does not suggest a driver upgrade"
