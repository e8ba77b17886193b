#!/bin/sh
# build-aux/tap-per-test.sh: automake's TAP driver, showing one line per test on the terminal.
# SPDX-License-Identifier: MIT
#
# A LOG_DRIVER: tap-per-test.sh SHELL DRIVER [driver options] -- TEST-COMMAND ...
# DRIVER (automake's tap-driver.sh, run by SHELL) writes the test's .log and .trs with every
# assertion, as the harness needs them. Its terminal output, a line per assertion, is replaced
# by a line per test, such as
#   PASS: tests/lib/ring-t (120 assertions)
# followed, when the test failed, by its failing assertions' lines (the first 20). The whole
# block goes out in one write(2) (a cat of a small file), so tests run by make -j cannot
# interleave within a line.
set -u
if [ $# -lt 2 ]; then
    echo "tap-per-test.sh: usage: tap-per-test.sh SHELL DRIVER [driver options] -- TEST-COMMAND" >&2
    exit 99
fi
shell=$1 driver=$2
shift 2

name='' log='' trs='' color=no prev=''
for a in "$@"; do
    case $prev in
    --test-name) name=$a ;;
    --log-file) log=$a ;;
    --trs-file) trs=$a ;;
    --color-tests) color=$a ;;
    esac
    [ "$a" = -- ] && break
    prev=$a
done
if [ -z "$trs" ] || [ -z "$name" ]; then
    echo "tap-per-test.sh: no --trs-file or --test-name among the driver options" >&2
    exit 99
fi

out=$trs.out
block=$trs.term
trap 'rm -f "$out" "$block"' EXIT
"$shell" "$driver" "$@" >"$out"
rc=$?
if [ ! -f "$trs" ]; then
    # The driver failed before it wrote its results: show what it said, as it said it.
    cat "$out"
    exit "$rc"
fi

# The .trs first (the counts), then the driver's lines (the skip reason, the failing lines).
${AM_TAP_AWK-awk} -v name="$name" -v logfile="$log" -v color="$color" -v esc="$(printf '\033')" -v max=20 '
FNR == NR {
    if ($1 == ":global-test-result:")
        global = $2
    else if ($1 == ":test-result:") {
        n++
        count[$2]++
    }
    next
}
{
    plain = $0
    gsub(esc "\\[[0-9;]*m", "", plain)
    if (plain ~ /^(FAIL|XPASS|ERROR):/)
        bad[++nbad] = $0
    else if (plain ~ /^SKIP:/ && reason == "")
        reason = substr(plain, length("SKIP: " name) + 1)
}
END {
    failed = count["FAIL"] + count["XPASS"] + count["ERROR"]
    what = n == 1 ? "1 assertion" : n " assertions"
    if (global == "SKIP" && n == 1 && reason != "") {
        sub(/^ *(- *)?/, "", reason)
        detail = reason
    } else if (global == "SKIP")
        detail = what " skipped"
    else if (failed > 0)
        detail = failed " of " n " failed"
    else
        detail = what
    if (global != "SKIP" && count["SKIP"] > 0)
        detail = detail ", " count["SKIP"] " skipped"
    if (count["XFAIL"] > 0)
        detail = detail ", " count["XFAIL"] " failed as expected"
    hue["PASS"] = "0;32"; hue["FAIL"] = "0;31"; hue["XPASS"] = "0;31"; hue["ERROR"] = "0;35"
    hue["XFAIL"] = "1;32"; hue["SKIP"] = "1;34"
    word = global
    if (color == "yes" && (global in hue))
        word = esc "[" hue[global] "m" global esc "[m"
    print word ": " name " (" detail ")"
    for (i = 1; i <= nbad && i <= max; i++)
        print "  " bad[i]
    if (nbad > max)
        print "  ... " (nbad - max) " more in " logfile
}' "$trs" "$out" >"$block" || cp "$out" "$block"
cat "$block"
exit "$rc"
