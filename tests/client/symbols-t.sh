#!/bin/sh
# symbols-t.sh: libpaged exports exactly the functions of include/paged.h, in node PAGED_0.1.
# SPDX-License-Identifier: MIT

top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
so=$top_builddir/lib/.libs/libpaged.so
if ! command -v nm >/dev/null 2>&1; then
    echo "1..0 # SKIP nm not found"
    exit 0
fi
if [ ! -f "$so" ]; then
    echo "1..0 # SKIP no shared libpaged ($so)"
    exit 0
fi
tmp=${TMPDIR:-/tmp}/paged-symbols.$$
mkdir "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT

echo "1..5"
n=0
# ok TEST-PASSED DESCRIPTION
ok() {
    n=$((n + 1))
    if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
}

grep -o 'paged_[a-z0-9_]*(' "$top_srcdir/include/paged.h" | tr -d '(' | sort -u > "$tmp/header"
sed -n 's/^ *\(paged_[a-z0-9_]*\);.*/\1/p' "$top_srcdir/lib/libpaged.map" | sort -u > "$tmp/map"
nm -D --defined-only "$so" | awk '$2 == "T" { print $3 }' | sort -u > "$tmp/exported"
nm -D --undefined-only "$so" | awk '{ print $2 }' | sort -u > "$tmp/undefined"

test -s "$tmp/header" && diff "$tmp/header" "$tmp/map" >&2
ok $? "lib/libpaged.map lists every function of paged.h and nothing else ($(wc -l < "$tmp/header") of them)"
sed 's/@@PAGED_0\.1$//' "$tmp/exported" | sort -u > "$tmp/exported-names"
diff "$tmp/header" "$tmp/exported-names" >&2
ok $? "libpaged.so exports exactly those functions"
bad=$(grep -v '@@PAGED_0\.1$' "$tmp/exported")
test -z "$bad"
ok $? "every exported function is in version node PAGED_0.1${bad:+ (not: $bad)}"
own=$(grep -E '^(paged_|pcore_sock_|pk_|pa_|pc_)' "$tmp/undefined")
test -z "$own"
ok $? "libpaged.so leaves none of the project's own symbols undefined${own:+ (undefined: $own)}"
cuda=$(grep -E '^cu[A-Z]' "$tmp/undefined")
needed=$(objdump -p "$so" 2>/dev/null | awk '$1 == "NEEDED" { print $2 }' | grep -i cuda)
test -z "$cuda$needed"
ok $? "libpaged.so does not link the CUDA driver (it loads it when needed)"
