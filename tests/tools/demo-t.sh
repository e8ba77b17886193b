#!/bin/sh
# demo-t.sh: paged-demo, small, against the build tree's pagedd and pactl: its story, live view, checks and summary.
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
unset PAGED_DEMO_KILL_WORKER PAGED_DEMO_PROGRESS_MS
echo 1..21
n=0

# Prints "ok" or "not ok" for the next test, described by $1, as the command after it
# succeeds or fails.
check() {
    desc=$1
    shift
    n=$((n + 1))
    if "$@"; then echo "ok $n - $desc"; else echo "not ok $n - $desc"; fi
}

# Succeeds when text $1 has a line matching the extended regular expression $2.
has() {
    printf '%s\n' "$1" | grep -Eq "$2"
}

# Prints how many lines of text $1 match the extended regular expression $2.
count() {
    printf '%s\n' "$1" | grep -Ec "$2"
}

# Prints the value of column $2 in the first row of the pactl table printed after the line
# "$ pactl $3" in text $1, found by the heading's column names.
column() {
    printf '%s\n' "$1" | awk -v col="$2" -v cmd="\$ pactl $3" '
        $0 == cmd { at = 1; next }
        at == 1 { for (i = 1; i <= NF; i++) if ($i == col) k = i; at = 2; next }
        at == 2 { print $k; exit }'
}

# Prints the number of the first line of text $1 that matches the extended regular expression $2.
line_of() {
    printf '%s\n' "$1" | grep -En "$2" | sed -n '1s/:.*//p'
}

args="--seqs 2 --steps 4 --backend cpu --pagedd $pagedd --pactl $pactl"

# Runs a small paged-demo of $1 workers, with the NAME=VALUE settings after it in its
# environment; sets out and rc, and shows the output as TAP comments.
run_demo() {
    workers=$1
    shift
    # shellcheck disable=SC2086
    out=$(env "$@" "$demo" --workers "$workers" $args 2>&1)
    rc=$?
    printf '%s\n' "$out" | sed 's/^/# /'
}

# A run of four workers: every output matches, and the output tells the sharing.
run_demo 4
check "paged-demo exits 0" [ $rc -eq 0 ]
check "paged-demo: every output matches the reference" \
    has "$out" '^all [0-9]+ outputs match the CPU reference$'
check "paged-demo: names the pool, its id and backend" \
    has "$out" "^pool 'demo' \\(id [0-9]+\\) on the cpu backend: [0-9]+ blocks of 16 tokens"
check "paged-demo: one worker created the pool" \
    [ "$(count "$out" "^worker [0-3] \\(pid [0-9]+, client [0-9]+\\): created pool 'demo';")" = 1 ]
check "paged-demo: three workers attached to it" \
    [ "$(count "$out" "^worker [0-3] \\(pid [0-9]+, client [0-9]+\\): attached to pool 'demo';")" = 3 ]
check "paged-demo: workers 1 to 3 adopt the published prefix" \
    [ "$(count "$out" '^worker [1-3] \(pid [0-9]+, client [0-9]+\): .*; [1-9][0-9]* of its [0-9]+ sequences adopted')" = 3 ]
check "paged-demo: says who published how many prefix blocks" \
    has "$out" '^shared prefix: 64 tokens in 4 blocks, computed once by worker [0-3] and adopted by 7 sequences in 4 workers$'
check "paged-demo: the live view's pool has 4 clients" [ "$(column "$out" CLIENTS "list pools")" = 4 ]
check "paged-demo: the live view lists the 4 workers' clients" \
    [ "$(count "$out" '^ +[0-9]+ +[0-9]+ +[0-9]+  demo-worker-[0-3] ')" = 4 ]
check "paged-demo: the live view shows prefix blocks held by 4 clients" \
    has "$out" '^demo +[0-9]+ +8 +referenced +[0-9a-f]+ +uid=[0-9]+ +[0-9]+,[0-9]+,[0-9]+,[0-9]+$'
live=$(line_of "$out" '^\$ pactl list blocks demo$')
first=$(line_of "$out" '^worker 0: [0-9]+ tokens in')
check "paged-demo: the live view comes before the workers' results" \
    [ "${live:-0}" -gt 0 -a "${live:-0}" -lt "${first:-0}" ]
check "paged-demo: a short run prints no progress lines" [ "$(count "$out" 'so far$')" = 0 ]
check "paged-demo: the total counts the 4 workers" has "$out" '^total: .* over 4 workers$'

# --version and -V, as pagedd and pactl take them.
v=$("$demo" --version 2>&1)
check "paged-demo --version prints its version" has "$v" '^paged-demo \(paged\) [0-9]'
v=$("$demo" -V 2>&1)
check "paged-demo -V prints its version" has "$v" '^paged-demo \(paged\) [0-9]'

# Worker 2 killed once the workers hold the pool: it is named and not counted; progress
# lines from the start of each stage.
run_demo 3 PAGED_DEMO_KILL_WORKER=2 PAGED_DEMO_PROGRESS_MS=0
check "paged-demo with a killed worker exits 1" [ $rc -eq 1 ]
check "paged-demo: the killed worker failed by signal 9" \
    has "$out" '^worker 2: FAILED: no result; killed by signal 9$'
check "paged-demo: the total counts only the 2 workers that finished" \
    has "$out" '^total: .* over 2 workers \(1 of 3 failed\)$'
check "paged-demo: says how far each stage is" \
    [ "$(count "$out" '^paged-demo: building prompts: [0-9]+ of 6 sequences')" -ge 1 \
      -a "$(count "$out" '^paged-demo: decoding: [0-9]+ of [0-9]+ steps')" -ge 1 \
      -a "$(count "$out" '^paged-demo: checking outputs against the CPU reference: [0-9]+ of ')" -ge 1 ]

run_demo 3 PAGED_DEMO_KILL_WORKER=3
check "paged-demo: a worker number out of range is refused" [ $rc -eq 2 ]
check "paged-demo: the refusal names the variable and its range" \
    has "$out" "PAGED_DEMO_KILL_WORKER wants a number from 0 to 2, not '3'"
