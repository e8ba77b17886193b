#!/bin/sh
# install-t.sh: a packager's install: a private build with --program-prefix=x- put in a DESTDIR
# by make install-strip: transformed programs, pages and embedded paths; the rest where it goes.
# SPDX-License-Identifier: MIT
#
# The build is a copy of the distribution (make distdir) configured --without-cuda with
# --prefix=/usr --sysconfdir=/etc, as a distribution configures it, so that systemd's own
# directories (pkg-config systemd) are the ones chosen. It leaves the tree under test alone.
top_builddir=${top_builddir:-.}
. "${top_srcdir:-.}/tests/tap/tap.sh"
command -v make >/dev/null 2>&1 || tap_skip_all "no make on the PATH"
[ -f "$top_builddir/Makefile" ] || tap_skip_all "$top_builddir is not a configured build tree"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/install-t.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
# The harness's make passes its jobs and variables down the environment: the private build
# takes none of them.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
d=$tmp/dest

# Runs a step of the build, its output into $tmp/STEP.log; on failure shows the log's end and
# bails out. Returns only on success.
step() {
    name=$1
    shift
    if ! "$@" >"$tmp/$name.log" 2>&1; then
        echo "Bail out! $name failed: $*"
        tail -n 30 "$tmp/$name.log" | sed 's/^/# /'
        exit 1
    fi
}

# Reports whether the file FILE exists under the DESTDIR (a regular file, or for -x, a program).
has() {
    if [ "$1" = -x ]; then
        [ -f "$d$2" ] && [ -x "$d$2" ]
        tap_result $? "installed program $2"
    else
        [ -f "$d$1" ]
        tap_result $? "installed $1"
    fi
}

# Reports whether FILE is absent from the DESTDIR.
hasnt() {
    [ ! -e "$d$1" ] && [ ! -L "$d$1" ]
    tap_result $? "nothing installed as $1"
}

echo 1..35
step distdir make -C "$top_builddir" distdir distdir="$tmp/src"
cd "$tmp/src" || exit 1
# The tree under test's own compiler and search paths (CC, CPPFLAGS, LDFLAGS, LIBS, as given to
# its configure), so that a build whose headers live outside the system's finds them again.
eval "set -- $("$top_builddir/config.status" --config)"
for arg; do
    shift
    case $arg in CC=* | CPPFLAGS=* | LDFLAGS=* | LIBS=*) set -- "$@" "$arg" ;; esac
done
step configure ./configure --without-cuda --prefix=/usr --sysconfdir=/etc --program-prefix=x- "$@"
step build make -j2
step install-strip make install-strip DESTDIR="$d"

# The programs, renamed; paged-bench in the package's libexec directory, off the PATH.
has -x /usr/bin/x-pactl
has -x /usr/bin/x-paged-demo
has -x /usr/sbin/x-pagedd
has -x /usr/libexec/paged/x-paged-bench
has /usr/libexec/paged/x-peers.py
hasnt /usr/bin/pactl
hasnt /usr/sbin/pagedd
hasnt /usr/bin/x-paged-bench

# Their pages renamed with them; the library's, paged.conf(5) and paged(7) keep their names.
has /usr/share/man/man1/x-pactl.1
has /usr/share/man/man1/x-paged-demo.1
has /usr/share/man/man1/x-paged-bench.1
has /usr/share/man/man8/x-pagedd.8
hasnt /usr/share/man/man1/pactl.1
hasnt /usr/share/man/man8/pagedd.8
has /usr/share/man/man3/libpaged.3
has /usr/share/man/man3/paged_decode.3
has /usr/share/man/man3/paged_append.3
has /usr/share/man/man5/paged.conf.5
has /usr/share/man/man7/paged.7
hasnt /usr/share/man/man3/x-paged_decode.3
grep -qx '\.so man3/paged_decode\.3' "$d/usr/share/man/man3/paged_append.3"
tap_result $? "paged_append.3 still names man3/paged_decode.3"

# What the programs embed names the renamed programs and the configured directories.
libs=$d/usr/lib
help=$(LD_LIBRARY_PATH=$libs "$d/usr/bin/x-paged-demo" --help 2>&1)
printf '%s\n' "$help" | grep -q -- '--pagedd PATH .*(default /usr/sbin/x-pagedd)$'
tap_result $? "x-paged-demo runs /usr/sbin/x-pagedd by default"
printf '%s\n' "$help" | grep -q -- '--pactl PATH .*(default /usr/bin/x-pactl)$'
tap_result $? "x-paged-demo runs /usr/bin/x-pactl by default"
conf=$(LD_LIBRARY_PATH=$libs "$d/usr/sbin/x-pagedd" --check-config 2>&1 | sed -n 1p)
case $conf in *" /etc/paged.conf"*) rc=0 ;; *) rc=1 ;; esac
tap_result $rc "x-pagedd reads /etc/paged.conf (\"$conf\")"
help=$(LD_LIBRARY_PATH=$libs "$d/usr/libexec/paged/x-paged-bench" --help 2>&1)
printf '%s\n' "$help" | grep -q 'else /usr/sbin/x-pagedd)'
tap_result $? "x-paged-bench starts /usr/sbin/x-pagedd when not run from a build tree"
out=$(PAGED_BENCH_PYTHON=$tmp/no-such-python LD_LIBRARY_PATH=$libs "$d/usr/libexec/paged/x-paged-bench" \
    --quick --backend=cpu peers 2>&1)
printf '%s\n' "$out" | grep -q "^peers: no $tmp/no-such-python to run $d/usr/libexec/paged/x-peers.py: "
tap_result $? "x-paged-bench peers runs the x-peers.py installed beside it"

# The unit, the sysusers.d and tmpfiles.d entries where systemd looks for them.
sd() { pkg-config --variable="$1" systemd 2>/dev/null; }
unitdir=$(sd systemdsystemunitdir); unitdir=${unitdir:-/usr/lib/systemd/system}
sysusersdir=$(sd sysusersdir); sysusersdir=${sysusersdir:-/usr/lib/sysusers.d}
tmpfilesdir=$(sd tmpfilesdir); tmpfilesdir=${tmpfilesdir:-/usr/lib/tmpfiles.d}
unit=$d$unitdir/pagedd.service
has "$unitdir/pagedd.service"
grep -q '^ExecStart=/usr/sbin/x-pagedd ' "$unit"
tap_result $? "the unit runs /usr/sbin/x-pagedd"
grep -q '^Documentation=man:x-pagedd(8) ' "$unit"
tap_result $? "the unit's documentation is x-pagedd(8)"
grep -qx 'Group=paged' "$unit"
tap_result $? "the unit runs pagedd in the group paged"
grep -qx 'g paged -' "$d$sysusersdir/paged.conf"
tap_result $? "$sysusersdir/paged.conf makes the group paged"
grep -qx 'd /run/paged 0750 root paged -' "$d$tmpfilesdir/paged.conf"
tap_result $? "$tmpfilesdir/paged.conf makes /run/paged, mode 0750, group paged"
has /usr/share/doc/paged/examples/paged.conf.example

# install-strip stripped the programs (where readelf can tell).
if command -v readelf >/dev/null 2>&1; then
    debug=$(for p in /usr/bin/x-pactl /usr/sbin/x-pagedd /usr/libexec/paged/x-paged-bench; do
        readelf -S "$d$p" | grep -q '\.debug_info' && echo "$p"; done)
    [ -z "$debug" ]
    tap_result $? "install-strip leaves no debug information in the programs ${debug:+(in $debug)}"
else
    tap_skip "readelf is not installed"
fi

# make uninstall takes back everything, renamed files included.
step uninstall make uninstall DESTDIR="$d"
left=$(find "$d" ! -type d | sed "s|^$d||")
[ -z "$left" ]
tap_result $? "make uninstall removes every installed file"
printf '%s\n' "$left" | sed '/^$/d; s/^/# left: /'
