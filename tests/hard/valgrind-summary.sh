#!/bin/sh
# valgrind-summary.sh: sums up the memcheck reports of the daemons of make check-valgrind.
# SPDX-License-Identifier: MIT
#
# Usage: valgrind-summary.sh DIR. Every DIR/pagedd.PID.log is one daemon's report. A daemon
# that exited has an ERROR SUMMARY, which must say 0 errors (leaks of the kinds the target
# counts are errors too); one that was killed (SIGKILL) has none, and must show no error
# reported before it died. Exits 0 when every report is clean, 1 otherwise.

dir=${1:?usage: valgrind-summary.sh DIR}
runs=0
exited=0
killed=0
bad=0
for log in "$dir"/pagedd.*.log; do
    [ -e "$log" ] || continue
    runs=$((runs + 1))
    summary=$(grep -E '== ERROR SUMMARY: ' "$log" | tail -n 1)
    if [ -n "$summary" ]; then
        exited=$((exited + 1))
        case $summary in
        *"ERROR SUMMARY: 0 errors"*) ;;
        *)
            bad=$((bad + 1))
            echo "$log: $summary"
            ;;
        esac
    else
        killed=$((killed + 1))
        if grep -Eq '== (Invalid (read|write|free)|Conditional jump|Use of uninitialised|Syscall param|Mismatched free|Source and destination overlap)' "$log"; then
            bad=$((bad + 1))
            echo "$log: errors before the daemon was killed"
        fi
    fi
    leaks=$(grep -E '(definitely|indirectly) lost: [1-9]' "$log")
    if [ -n "$leaks" ]; then
        echo "$log: $leaks"
    fi
done
echo "valgrind memcheck: $runs daemon runs ($exited exited, $killed killed), $bad with errors"
if [ "$runs" -eq 0 ]; then
    echo "no reports in $dir: did the tests run the daemon under valgrind?"
    exit 1
fi
[ "$bad" -eq 0 ]
