#!/bin/sh
# knobs-refuse-t.sh: pagedd refuses a malformed or out-of-range environment knob at start: exit 1, naming it and what it takes.
# SPDX-License-Identifier: MIT
top_builddir=${top_builddir:-.}
pagedd=$top_builddir/daemon/pagedd
tmp=$(mktemp -d "${TMPDIR:-/tmp}/knobs-refuse.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# The socket's directory is a regular file: a pagedd that took its knobs would still fail at
# once, when it listens, so no case can leave a daemon running.
: > "$tmp/file"
sock=$tmp/file/pagedd.sock
n=0

# Runs pagedd with name=value in its environment; sets out and rc.
run() {
    out=$(env "$1=$2" "$pagedd" --foreground --backend cpu --socket "$sock" 2>&1)
    rc=$?
}

# Reports whether pagedd refused name=value at start with the message naming what it takes.
refused() {
    n=$((n + 1))
    run "$1" "$2"
    want="pagedd: environment: $1=$2 is refused: it takes $3"
    if [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -qxF "$want"; then
        echo "ok $n - $1=$2: pagedd exits 1 at start: \"$want\""
    else
        echo "not ok $n - $1=$2: pagedd exits 1 at start: \"$want\" (exit $rc)"
        printf '%s\n' "$out" | sed 's/^/# /'
    fi
}

echo 1..6
refused PAGEDD_INFLIGHT 9 "N from 1 to 8"
refused PAGEDD_GATHER 8 "SHARE,MAX_US with SHARE from 1 and MAX_US from 0 to 1000"
refused PAGEDD_DEFER yes "0 or 1"
refused PAGEDD_CUDA_EXPORT fd "auto or ipc"
refused PAGEDD_FAIL_ALLOC_AT -1 "N from 0"

# A value it takes: logged, and pagedd goes on to fail at the socket instead.
n=$((n + 1))
run PAGEDD_INFLIGHT 4
if [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -qF "environment: PAGEDD_INFLIGHT=4 (tuning)" \
    && printf '%s\n' "$out" | grep -qF "cannot listen on $sock"; then
    echo "ok $n - PAGEDD_INFLIGHT=4: taken and logged; pagedd goes on to listen"
else
    echo "not ok $n - PAGEDD_INFLIGHT=4: taken and logged; pagedd goes on to listen (exit $rc)"
    printf '%s\n' "$out" | sed 's/^/# /'
fi
