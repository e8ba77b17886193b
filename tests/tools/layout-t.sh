#!/bin/sh
# layout-t.sh: the configured tree's install layout: paths.h says what the Makefile says, the
# objects that embed it depend on it, and the systemd directories follow pkg-config's systemd.
# SPDX-License-Identifier: MIT
top_builddir=${top_builddir:-.}
# Skips the whole test, saying why.
skip_all() {
    echo "1..0 # SKIP $1"
    exit 0
}
command -v make >/dev/null 2>&1 || skip_all "no make on the PATH"
[ -f "$top_builddir/Makefile" ] && [ -f "$top_builddir/paths.h" ] || skip_all "$top_builddir is not a built tree"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/layout-t.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
n=0

# Prints the TAP line for a check: "ok" when the status STATUS is 0; WHAT says what.
report() {
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
}

# Prints the Makefile's variable NAME as make expands it.
mkvar() {
    printf 'layout-t-print:\n\t@echo $(%s)\n' "$1" >"$tmp/print.mk"
    make -s -C "$top_builddir" -f Makefile -f "$tmp/print.mk" layout-t-print 2>/dev/null
}

# Prints the value paths.h defines for NAME, without its quotes.
pathsh() {
    sed -n "s/^#define $1 \"\\(.*\\)\"\$/\\1/p" "$top_builddir/paths.h"
}

echo 1..8
transform=$(mkvar transform)
pagedd=$(echo pagedd | sed "$transform")
pactl=$(echo pactl | sed "$transform")
[ "$(pathsh PAGED_SYSCONFDIR)" = "$(mkvar sysconfdir)" ]
report $? "paths.h: PAGED_SYSCONFDIR is the Makefile's sysconfdir ($(pathsh PAGED_SYSCONFDIR))"
[ "$(pathsh PAGED_PAGEDD_PATH)" = "$(mkvar sbindir)/$pagedd" ]
report $? "paths.h: PAGED_PAGEDD_PATH is sbindir and pagedd's installed name ($(pathsh PAGED_PAGEDD_PATH))"
[ "$(pathsh PAGED_PACTL_PATH)" = "$(mkvar bindir)/$pactl" ]
report $? "paths.h: PAGED_PACTL_PATH is bindir and pactl's installed name ($(pathsh PAGED_PACTL_PATH))"

# The objects that embed the paths have paths.h among their dependencies, so that a new
# configuration rebuilds them (dependency tracking's files; absent when it is off).
deps=$(mkvar DEPDIR)
for po in daemon/$deps/main.Po tools/$deps/paged_demo-paged-demo.Po tools/bench/$deps/paged_bench-main.Po; do
    if grep -q '^# dummy' "$top_builddir/$po" 2>/dev/null || [ ! -f "$top_builddir/$po" ]; then
        n=$((n + 1))
        echo "ok $n # SKIP no dependency information in $po"
        continue
    fi
    grep -q '\(^\|[ /]\)paths\.h\( \|$\)' "$top_builddir/$po"
    report $? "$po: the object depends on paths.h"
done

# The unit directory: systemd's for systemd's prefix, else under the prefix; unless the
# configure command named one.
prefix=$(mkvar prefix)
unitdir=$(mkvar systemdsystemunitdir)
sd_prefix=$(pkg-config --variable=prefix systemd 2>/dev/null)
sd_unitdir=$(pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null)
if "$top_builddir/config.status" --config | grep -q 'with-systemdsystemunitdir'; then
    n=$((n + 1))
    echo "ok $n # SKIP configured with --with-systemdsystemunitdir"
elif [ -z "$sd_unitdir" ]; then
    n=$((n + 1))
    echo "ok $n # SKIP pkg-config systemd is missing"
elif [ "$prefix" = "$sd_prefix" ]; then
    [ "$unitdir" = "$sd_unitdir" ]
    report $? "prefix $prefix is systemd's: the unit goes to pkg-config's $sd_unitdir (configured: $unitdir)"
else
    [ "$unitdir" = "$prefix/lib/systemd/system" ]
    report $? "prefix $prefix is not systemd's ($sd_prefix): the unit goes under it (configured: $unitdir)"
fi
# The unit itself: the installed pagedd, in the group paged.
unit=$top_builddir/daemon/pagedd.service
grep -q "^ExecStart=$(pathsh PAGED_PAGEDD_PATH) " "$unit" && grep -qx 'Group=paged' "$unit"
report $? "daemon/pagedd.service runs $(pathsh PAGED_PAGEDD_PATH) in the group paged"
