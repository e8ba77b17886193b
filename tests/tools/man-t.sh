#!/bin/sh
# man-t.sh: every man page renders without a warning (mandoc -T lint, else groff -ww).
# SPDX-License-Identifier: MIT
top_srcdir=${top_srcdir:-.}
pages=$(ls "$top_srcdir"/man/*.[1-8] 2>/dev/null)
if [ -z "$pages" ]; then
    echo "1..0 # SKIP no man pages in $top_srcdir/man"
    exit 0
fi
if command -v mandoc >/dev/null 2>&1; then
    lint() { mandoc -T lint -W warning "$1" 2>&1; }
    tool=mandoc
elif command -v groff >/dev/null 2>&1; then
    lint() { groff -ww -mandoc -z "$1" 2>&1; }
    tool=groff
else
    echo "1..0 # SKIP neither mandoc nor groff is installed"
    exit 0
fi
set -- $pages
echo "1..$#"
n=0
for page in "$@"; do
    n=$((n + 1))
    name=${page##*/}
    # A link page holds one .so request: check that its target exists instead; in a checkout,
    # by the path the request names, from man/ (man/man1 ... man/man8 link back to man/; the
    # tarball has no links).
    if [ "$(sed -n '$=' "$page")" = 1 ] && grep -q '^\.so man[1-8]/' "$page"; then
        target=$(sed -n 's/^\.so //p' "$page")
        if [ -e "$top_srcdir/.git" ]; then
            where="$top_srcdir/man/$target" how="resolves in man/"
        else
            where="$top_srcdir/man/${target#*/}" how="exists"
        fi
        if [ -f "$where" ]; then
            echo "ok $n - $name: link to $target, which $how"
        else
            echo "not ok $n - $name: link to $target, which is missing (or does not resolve in man/)"
        fi
        continue
    fi
    out=$(lint "$page")
    rc=$?
    if [ $rc -eq 0 ] && [ -z "$out" ]; then
        echo "ok $n - $name: $tool reports nothing"
    else
        echo "not ok $n - $name: $tool reports problems"
        printf '%s\n' "$out" | sed 's/^/# /'
    fi
done
