#!/bin/sh
# style-t.sh: the C and CUDA sources follow the written formatting rule (HACKING.md, Conventions).
# SPDX-License-Identifier: MIT
#
# The rule that a tool can check: a file opens with "/* NAME: purpose */" and the SPDX line;
# no tabs, no white space at the end of a line, no line over 120 columns; every function
# definition has a comment in the paragraph above its header. The first cases plant each
# break in a scratch file and expect the checker to name it, so a checker that passes
# everything fails here.
top_srcdir=${top_srcdir:-.}
check="$top_srcdir/tests/tools/style-check.awk"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/style-t.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# Runs the checker over the files named; prints what it reports.
style() { awk -v maxcol=120 -f "$check" "$@"; }

echo "1..6"
n=0
# Writes a well-formed scratch file, then the one break given, and expects a report naming it.
planted() {
    what=$1 pattern=$2 body=$3
    n=$((n + 1))
    f="$tmp/planted.c"
    printf '/* planted.c: a scratch file. */\n/* SPDX-License-Identifier: MIT */\n\n%b\n' "$body" > "$f"
    out=$(style "$f")
    if printf '%s\n' "$out" | grep -q "$pattern"; then
        echo "ok $n - planted $what: reported ($(printf '%s' "$out" | head -n 1))"
    else
        echo "not ok $n - planted $what: not reported"
    fi
}
long=$(printf '%0121d' 0)
planted "tab" "a tab" "/* Returns 1. */\nstatic int one(void)\n{\n\treturn 1;\n}"
planted "long line" "columns, over 120" "/* Returns 1. */\nstatic int one(void)\n{\n    return 1; /* $long */\n}"
planted "trailing blank" "white space at the end" "/* Returns 1. */\nstatic int one(void)\n{\n    return 1;   \n}"
planted "uncommented function" "a function without a comment" "static int one(void)\n{\n    return 1;\n}"

n=$((n + 1))
printf '/* other.c: a scratch file. */\n/* SPDX-License-Identifier: MIT */\n' > "$tmp/misnamed.c"
if style "$tmp/misnamed.c" | grep -q 'first line'; then
    echo "ok $n - planted first line naming another file: reported"
else
    echo "not ok $n - planted first line naming another file: not reported"
fi

n=$((n + 1))
files=$(cd "$top_srcdir" && find include lib daemon kernels tools tests fuzz python \
    \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print | sort)
count=$(printf '%s\n' "$files" | wc -l)
out=$(cd "$top_srcdir" && style $files)
if [ -z "$out" ]; then
    echo "ok $n - the tree's $count C and CUDA sources follow the rule"
else
    echo "not ok $n - the tree's sources break the rule $(printf '%s\n' "$out" | wc -l) times"
    printf '%s\n' "$out" | head -n 50 | sed 's/^/# /'
fi
