#!/bin/sh
# cuda-nodriver-t.sh: pagedd -b cuda on a machine without a CUDA driver says there is none and names -b cpu.
# SPDX-License-Identifier: MIT
top_builddir=${top_builddir:-.}
. "${top_srcdir:-.}/tests/tap/tap.sh"
pagedd=$top_builddir/daemon/pagedd
# A driver's device node: the cuda backend may start here, and this test has nothing to check.
if [ -e /dev/nvidiactl ]; then
    tap_skip_all "a CUDA driver is installed here (/dev/nvidiactl)"
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cuda-nodriver.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# The socket's directory is a regular file, so no pagedd can be left running whatever happens.
: > "$tmp/file"
out=$("$pagedd" --foreground --config /dev/null --backend cuda --socket "$tmp/file/pagedd.sock" 2>&1)
rc=$?
if printf '%s\n' "$out" | grep -qF "built without CUDA"; then
    tap_skip_all "pagedd is built without CUDA"
fi
echo 1..3
[ $rc -eq 1 ]
tap_result $? "pagedd -b cuda without a driver exits 1 (exit $rc)" "$out"
printf '%s\n' "$out" | grep -qE "backend cuda: no CUDA (driver|device) on this machine"
tap_result $? "it says there is no CUDA driver or device on this machine" "$out"
printf '%s\n' "$out" | grep -qF -- "-b cpu" && ! printf '%s\n' "$out" | grep -qi "insufficient"
tap_result $? "it names -b cpu and does not suggest a driver upgrade" "$out"
