#!/bin/sh
# conf-example-t.sh: paged.conf.example against pagedd --check-config: uncommented it parses,
# changes no setting (every line is the default) and names every key paged.conf accepts.
# SPDX-License-Identifier: MIT
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
. "$top_srcdir/tests/tap/tap.sh"
pagedd=$top_builddir/daemon/pagedd
example=$top_srcdir/daemon/paged.conf.example
if [ ! -x "$pagedd" ]; then
    tap_skip_all "$pagedd is not built"
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/conf-example.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
echo 1..6

# Runs pagedd --check-config with ARGS, the environment's socket variables unset; sets out
# (standard output, the comment line left out), err and rc.
check() {
    env -u PAGED_SOCKET -u XDG_RUNTIME_DIR "$pagedd" --check-config "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    out=$(grep -v '^#' "$tmp/out")
    err=$(cat "$tmp/err")
}


# Every "# key = value" line of the example uncommented; the prose stays a comment.
sed 's/^# \([a-z][a-z-]* =\)/\1/' "$example" >"$tmp/uncommented"
: >"$tmp/empty"

check --config "$tmp/uncommented"
tap_result $(( rc != 0 || ${#err} != 0 )) "the uncommented example parses: exit 0, nothing on stderr" \
    "exit $rc: $err"
from_example=$out

check --config "$tmp/empty"
defaults=$out
[ "$from_example" = "$defaults" ]
tap_result $? "the uncommented example's settings are the defaults" \
    "$(printf '%s\n' "$defaults" >"$tmp/defaults"; printf '%s\n' "$from_example" | diff "$tmp/defaults" - )"

# The keys the example names against those pagedd accepts in a file (it prints them all).
sed -n 's/^\([a-z][a-z-]*\) =.*/\1/p' "$tmp/uncommented" | sort >"$tmp/example-keys"
printf '%s\n' "$defaults" | sed -n 's/^\([a-z][a-z-]*\) =.*/\1/p' | sort >"$tmp/pagedd-keys"
diff "$tmp/pagedd-keys" "$tmp/example-keys" >"$tmp/keys-diff"
tap_result $? "the example names every key pagedd accepts ($(wc -l <"$tmp/pagedd-keys") keys), and no other" \
    "$(cat "$tmp/keys-diff")"

# A bad value: the file, the line and the key named, exit 1.
cp "$tmp/uncommented" "$tmp/bad"
echo "threads = many" >>"$tmp/bad"
line=$(wc -l <"$tmp/bad")
check --config "$tmp/bad"
want="pagedd: $tmp/bad:$line: threads: 'many' is not a number from 0 to 1024"
[ $rc -eq 1 ] && [ "$err" = "$want" ]
tap_result $? "a bad value: exit 1, \"FILE:$line: threads: ...\"" "exit $rc: $err"

# The command line wins over the file, and the output reads back as a configuration file.
check --config "$tmp/uncommented" --threads 3 --socket-mode 0600
printf '%s\n' "$out" | grep -qx 'threads = 3' && printf '%s\n' "$out" | grep -qx 'socket-mode = 0600'
tap_result $? "options win over the file: threads = 3, socket-mode = 0600" "$out"
printf '%s\n' "$out" >"$tmp/printed"
expect=$out
check --config "$tmp/printed"
[ $rc -eq 0 ] && [ "$out" = "$expect" ]
tap_result $? "--check-config's output read back as paged.conf gives the same settings" "exit $rc: $err"
