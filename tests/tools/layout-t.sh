#!/bin/sh
# layout-t.sh: the configured tree's install layout: paths.h says what the Makefile says, the
# objects that embed it depend on it, and the systemd directories follow pkg-config's systemd.
# SPDX-License-Identifier: MIT
top_builddir=${top_builddir:-.}
. "${top_srcdir:-.}/tests/tap/tap.sh"
command -v make >/dev/null 2>&1 || tap_skip_all "no make on the PATH"
[ -f "$top_builddir/Makefile" ] && [ -f "$top_builddir/paths.h" ] || tap_skip_all "$top_builddir is not a built tree"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/layout-t.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES

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
tap_result $? "paths.h: PAGED_SYSCONFDIR is the Makefile's sysconfdir ($(pathsh PAGED_SYSCONFDIR))"
[ "$(pathsh PAGED_PAGEDD_PATH)" = "$(mkvar sbindir)/$pagedd" ]
tap_result $? "paths.h: PAGED_PAGEDD_PATH is sbindir and pagedd's installed name ($(pathsh PAGED_PAGEDD_PATH))"
[ "$(pathsh PAGED_PACTL_PATH)" = "$(mkvar bindir)/$pactl" ]
tap_result $? "paths.h: PAGED_PACTL_PATH is bindir and pactl's installed name ($(pathsh PAGED_PACTL_PATH))"

# The objects that embed the paths have paths.h among their dependencies, so that a new
# configuration rebuilds them (dependency tracking's files; absent when it is off).
deps=$(mkvar DEPDIR)
for po in daemon/$deps/main.Po tools/$deps/paged_demo-paged-demo.Po tools/bench/$deps/paged_bench-main.Po; do
    if grep -q '^# dummy' "$top_builddir/$po" 2>/dev/null || [ ! -f "$top_builddir/$po" ]; then
        tap_skip "no dependency information in $po"
        continue
    fi
    grep -q '\(^\|[ /]\)paths\.h\( \|$\)' "$top_builddir/$po"
    tap_result $? "$po: the object depends on paths.h"
done

# The unit directory: systemd's for systemd's prefix, else under the prefix; unless the
# configure command named one.
prefix=$(mkvar prefix)
unitdir=$(mkvar systemdsystemunitdir)
sd_prefix=$(pkg-config --variable=prefix systemd 2>/dev/null)
sd_unitdir=$(pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null)
if "$top_builddir/config.status" --config | grep -q 'with-systemdsystemunitdir'; then
    tap_skip "configured with --with-systemdsystemunitdir"
elif [ -z "$sd_unitdir" ]; then
    tap_skip "pkg-config systemd is missing"
elif [ "$prefix" = "$sd_prefix" ]; then
    [ "$unitdir" = "$sd_unitdir" ]
    tap_result $? "prefix $prefix is systemd's: the unit goes to pkg-config's $sd_unitdir (configured: $unitdir)"
else
    [ "$unitdir" = "$prefix/lib/systemd/system" ]
    tap_result $? "prefix $prefix is not systemd's ($sd_prefix): the unit goes under it (configured: $unitdir)"
fi
# The unit itself: the installed pagedd, in the group paged.
unit=$top_builddir/daemon/pagedd.service
grep -q "^ExecStart=$(pathsh PAGED_PAGEDD_PATH) " "$unit" && grep -qx 'Group=paged' "$unit"
tap_result $? "daemon/pagedd.service runs $(pathsh PAGED_PAGEDD_PATH) in the group paged"
