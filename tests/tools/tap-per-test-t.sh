#!/bin/sh
# tap-per-test-t.sh: the test harness's driver shows one line per test and keeps every assertion.
# SPDX-License-Identifier: MIT
#
# Runs build-aux/tap-per-test.sh over planted TAP streams (passing, failing, skipped, failing
# many times) and compares its terminal output, .trs and .log with what automake's harness and
# a reader need.
top_srcdir=${top_srcdir:-.}
wrapper="$top_srcdir/build-aux/tap-per-test.sh"
driver="$top_srcdir/build-aux/tap-driver.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tap-per-test-t.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# Writes a test script named $1 that prints the TAP stream $2 (printf's %b escapes) and exits $3.
plant() { printf '#!/bin/sh\nprintf "%%b" "%s"\nexit %s\n' "$2" "${3:-0}" > "$tmp/$1"; }

# Runs the wrapper over planted test $1 with color $2; the terminal output goes to $tmp/$1.term.
drive() {
    sh "$wrapper" sh "$driver" --test-name "t/$1" --log-file "$tmp/$1.log" --trs-file "$tmp/$1.trs" \
        --color-tests "$2" -- sh "$tmp/$1" > "$tmp/$1.term" 2>&1
}

n=0
# Prints ok or not ok for test $1 (a shell condition's status, 0 = ok) with description $2, and
# on failure the terminal output of planted test $3 as diagnostics.
report() {
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        sed 's/^/# /' "$tmp/$3.term"
    fi
}

echo "1..9"
plant pass '1..3\nok 1 - a\nok 2 - b\nok 3 - c # SKIP no device\n'
drive pass no
[ "$(cat "$tmp/pass.term")" = "PASS: t/pass (3 assertions, 1 skipped)" ]
report $? "a passing test: one terminal line with its assertion and skip counts" pass
[ "$(grep -c '^:test-result: ' "$tmp/pass.trs")" = 3 ] && grep -qx ':global-test-result: PASS' "$tmp/pass.trs"
report $? "a passing test: the .trs keeps a result per assertion and the test's result" pass
[ "$(grep -c '^PASS: t/pass [12] - ' "$tmp/pass.log")" = 2 ] && grep -qx 'ok 2 - b' "$tmp/pass.log"
report $? "a passing test: the .log keeps the TAP stream and every assertion's result line" pass

plant fail '1..3\nok 1 - a\nnot ok 2 - b went wrong\nok 3 - c\n'
drive fail no
printf 'FAIL: t/fail (1 of 3 failed)\n  FAIL: t/fail 2 - b went wrong\n' > "$tmp/fail.want"
cmp -s "$tmp/fail.want" "$tmp/fail.term"
report $? "a failing test: its line, then only its failing assertion's line" fail

plant crash '1..3\nok 1 - a\n' 3
drive crash no
head -n 1 "$tmp/crash.term" | grep -qx 'ERROR: t/crash (2 of 3 failed)' \
    && grep -qx '  ERROR: t/crash - exited with status 3' "$tmp/crash.term"
report $? "a test that exits early: ERROR, with the harness's reasons" crash

plant skip '1..0 # SKIP no CUDA device\n'
drive skip no
[ "$(cat "$tmp/skip.term")" = "SKIP: t/skip (no CUDA device)" ]
report $? "a skipped test: one line with the reason" skip

many='1..30\n'
i=0
while [ "$i" -lt 30 ]; do
    i=$((i + 1))
    many="${many}not ok $i - broken $i\n"
done
plant many "$many"
drive many no
[ "$(wc -l < "$tmp/many.term")" -eq 22 ] && tail -n 1 "$tmp/many.term" | grep -qx "  \\.\\.\\. 10 more in $tmp/many.log"
report $? "a test with 30 failures: its line, the first 20, and where the rest are" many

drive pass yes
esc=$(printf '\033')
[ "$(cat "$tmp/pass.term")" = "${esc}[0;32mPASS${esc}[m: t/pass (3 assertions, 1 skipped)" ]
report $? "with --color-tests yes: the result word colored as automake colors it" pass

sh "$wrapper" sh "$driver" --log-file "$tmp/x.log" -- true > "$tmp/usage.term" 2>&1
status=$?
[ "$status" -eq 99 ] && grep -q 'no --trs-file or --test-name' "$tmp/usage.term"
report $? "without --trs-file: a hard error (99) naming what is missing" usage
