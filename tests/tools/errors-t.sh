#!/bin/sh
# errors-t.sh: each error code of paged.h is used by the sources, or marked reserved in every text of it.
# SPDX-License-Identifier: MIT
#
# A code counts as used when a C or CUDA source of lib/, daemon/, kernels/ or tools/ names it,
# lib/core/strerror.c (the text of every code) aside; each used code has a paged_strerror text
# and a paged_strerror(3) entry. A reserved code keeps its value for the ABI: paged.h's comment,
# its paged_strerror text and its paged_strerror(3) entry say it is reserved, and none of those
# sources may name it.
top_srcdir=${top_srcdir:-.}
header="$top_srcdir/include/paged.h"
texts="$top_srcdir/lib/core/strerror.c"
page="$top_srcdir/man/paged_strerror.3"
for f in "$header" "$texts" "$page"; do
    if [ ! -f "$f" ]; then
        echo "1..0 # SKIP $f is missing"
        exit 0
    fi
done
codes=$(sed -n 's/^ *\(PAGED_E_[A-Z]*\) = -[0-9]*, *\/\*.*/\1/p' "$header")
if [ -z "$codes" ]; then
    echo "not ok 1 - paged.h lists error codes"
    echo "1..1"
    exit 0
fi
sources=$(cd "$top_srcdir" && find lib daemon kernels tools \( -name '*.c' -o -name '*.h' -o -name '*.cu' \
    -o -name '*.cuh' \) ! -path lib/core/strerror.c -print)
n=0
for code in $codes; do
    n=$((n + 1))
    comment=$(sed -n "s/^ *$code = -[0-9]*, *\/\* *\(.*\) \*\/.*/\1/p" "$header")
    text=$(sed -n "s/^ *\[-$code\] = \"\(.*\)\",.*/\1/p" "$texts")
    entry=$(sed -n "/^\.It Dv $code\$/{n;p;}" "$page")
    users=$(cd "$top_srcdir" && grep -lw "$code" $sources 2>/dev/null | head -3 | tr '\n' ' ')
    case $comment in
    *reserved*)
        case "$text|$entry" in
        *reserved*\|*reserved*) why= ;;
        *) why="reserved in paged.h, but not in paged_strerror's text ($text) and paged_strerror(3) ($entry)" ;;
        esac
        [ -n "$users" ] && why="reserved in paged.h, yet named by ${users% }"
        ;;
    *)
        if [ -z "$users" ]; then
            why="documented as \"$comment\", yet no source uses it: mark it reserved"
        elif [ -z "$text" ] || [ -z "$entry" ]; then
            why="no paged_strerror text or paged_strerror(3) entry"
        else
            why=
        fi
        ;;
    esac
    if [ -z "$why" ]; then
        echo "ok $n - $code: ${users:+used (${users% }), }documented in paged.h, paged_strerror and paged_strerror(3)"
    else
        echo "not ok $n - $code: $why"
    fi
done
echo "1..$n"
