#!/bin/sh
# bench-t.sh: paged-bench --quick all (and tiers) runs (CPU backend, or the GPU where there is one) and prints and writes finite positive figures.
# SPDX-License-Identifier: MIT
top_builddir=${top_builddir:-.}
bench=$top_builddir/tools/paged-bench
check=$top_builddir/tools/bench/bench-json-check
pagedd=$top_builddir/daemon/pagedd
for p in "$bench" "$check" "$pagedd"; do
    if [ ! -x "$p" ]; then
        echo "1..0 # SKIP $p is not built"
        exit 0
    fi
done
echo 1..10
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-t.XXXXXX") || { echo "Bail out! mktemp failed"; exit 1; }
trap 'rm -rf "$tmp"' EXIT

# ok N DESCRIPTION: reports the exit status of the command before it.
ok() {
    if [ "$1" -eq 0 ]; then echo "ok $2 - $3"; else echo "not ok $2 - $3"; fi
}

"$bench" --quick --json "$tmp/bench.json" --pagedd "$pagedd" all >"$tmp/out" 2>"$tmp/err"
rc=$?
sed 's/^/# /' "$tmp/out" "$tmp/err"
ok $rc 1 "paged-bench --quick all exits 0 (got $rc)"

grep -Eq '^stream read +[0-9]+\.[0-9] GB/s$' "$tmp/out" && grep -Eq '^copy \(read \+ write\) +[0-9]+\.[0-9] GB/s$' "$tmp/out"
ok $? 2 "paged-bench: the header gives the measured read and copy bandwidth"

# On the GPU the service section also measures the floor under an awaited layer.
tables="decode prefill append nop service"
titles="^decode: |^prefill: |^append: |^NOP round trips|^service: "
if grep -q 'daemon backend cuda' "$tmp/out"; then
    tables="$tables dispatch"
    titles="$titles|^dispatch: "
fi
missing=
IFS='|'
for title in $titles; do
    grep -Eq "$title" "$tmp/out" || missing="$missing $title"
done
unset IFS
[ -z "$missing" ]
ok $? 3 "paged-bench: prints the tables ($tables)${missing:+ (missing:$missing)}"

! grep -Eiq '(^|[^a-z/])-?(nan|inf)([^a-z]|$)' "$tmp/out"
ok $? 4 "paged-bench: no NaN or infinite figure in the output"

"$check" "$tmp/bench.json" $tables | sed 's/^/# /'
[ -s "$tmp/bench.json" ] && "$check" "$tmp/bench.json" $tables >/dev/null
ok $? 5 "paged-bench --json: strict JSON, every table present, every figure finite and positive"

"$bench" bogus >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ]
ok $? 6 "paged-bench: an unknown benchmark is a usage error (exit 2, got $rc)"

# Rounds: every client count runs once per round, numbered, and the summary gives the median
# ratio with the least and the most (which must bracket it).
"$bench" --quick --rounds=3 --clients=1,2 --nops=10 --json "$tmp/rounds.json" --pagedd "$pagedd" service \
    >"$tmp/rounds" 2>&1
rc=$?
sed 's/^/# /' "$tmp/rounds"
rows=$(awk '$1 ~ /^[1-3]$/ && NF >= 10 { print $1 "x" $2 "x" $3 }' "$tmp/rounds" | tr '\n' ' ')
[ $rc -eq 0 ] && [ "$rows" = "1x1x1 1x2x1 1x1x2 2x1x1 2x2x1 2x1x2 3x1x1 3x2x1 3x1x2 " ]
ok $? 7 "paged-bench --rounds=3: three rounds of 1 x 1, 2 x 1 and 1 x 2, in that order (got: $rows)"
line=$(grep 'median of 3 rounds' "$tmp/rounds")
lo=$(echo "$line" | sed -n 's/.*(\([0-9.]*\)-\([0-9.]*\)): \([0-9.]*\) x$/\1/p')
hi=$(echo "$line" | sed -n 's/.*(\([0-9.]*\)-\([0-9.]*\)): \([0-9.]*\) x$/\2/p')
med=$(echo "$line" | sed -n 's/.*(\([0-9.]*\)-\([0-9.]*\)): \([0-9.]*\) x$/\3/p')
[ -n "$med" ] && awk -v l="$lo" -v m="$med" -v h="$hi" 'BEGIN { exit !(l > 0 && l <= m && m <= h) }' \
    && "$check" "$tmp/rounds.json" service >/dev/null
ok $? 8 "paged-bench --rounds=3: the median merge ratio $med lies in its range $lo-$hi, and the JSON checks"

# Sealed pools: every row of the service table says the daemon sealed the pool it ran on.
"$bench" --quick --sealed --clients=1 --nops=10 --json "$tmp/sealed.json" --pagedd "$pagedd" service \
    >"$tmp/sealed" 2>&1
rc=$?
sed 's/^/# /' "$tmp/sealed"
rows=$(awk '$1 == "clients" { on = 1; next } on && NF >= 10 { print $3 } NF == 0 { on = 0 }' "$tmp/sealed" \
    | sort -u | tr '\n' ' ')
[ $rc -eq 0 ] && grep -q '^service: .*; pools sealed ' "$tmp/sealed" && [ "$rows" = "sealed " ] \
    && "$check" "$tmp/sealed.json" service >/dev/null
ok $? 9 "paged-bench --sealed: the title and every row's memory say sealed (got: $rows), and the JSON checks"

# Tiers: the cpu backend's host and file tiers, their three tables and summary, the JSON strict
# (the run itself fails on a short reload or a PREFILL over a reloaded prefix that differs).
"$bench" --quick --backend=cpu --json "$tmp/tiers.json" --pagedd "$pagedd" --file-tier="$tmp" tiers \
    >"$tmp/tiers" 2>&1
rc=$?
sed 's/^/# /' "$tmp/tiers"
[ $rc -eq 0 ] && grep -q 'recompute.s mean TTFT over the host tier' "$tmp/tiers" \
    && "$check" "$tmp/tiers.json" tiers_limits tiers_transfer tiers_ttft >/dev/null
ok $? 10 "paged-bench --quick tiers: exits 0 (got $rc), prints the TTFT summary, and the JSON checks"
