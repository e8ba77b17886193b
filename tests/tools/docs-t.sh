#!/bin/sh
# docs-t.sh: the documents and the comments of the sources name no path outside the
# repository, no repository file that does not exist, and do not narrate the development.
# SPDX-License-Identifier: MIT
#
# The first cases plant each kind of problem in a copy of README.md and expect the checker
# (docs-check.sh) to fail naming the file, the line and the token; then the real tree must
# pass.
top_srcdir=${top_srcdir:-.}
check="$top_srcdir/tests/tools/docs-check.sh"

tmp=$(mktemp -d) || { echo "1..0 # SKIP mktemp -d failed"; exit 0; }
trap 'rm -rf "$tmp"' EXIT
n=0

# Runs the checker with the arguments after $1 and $2; expects it to fail with a report that
# holds $2. $1 says what was planted.
fails() {
    n=$((n + 1))
    what=$1
    expect=$2
    shift 2
    out=$(sh "$check" -r "$top_srcdir" "$@" 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -qF "$expect"; then
        echo "ok $n - $what fails, naming $expect"
    else
        echo "not ok $n - $what fails, naming $expect (exit $rc)"
        printf '%s\n' "$out" | sed 's/^/# /'
    fi
}

# Checks a copy of README.md with the line $2 appended; expects a report naming the copy,
# that line and the token $3. $1 says what was planted.
planted() {
    cp "$top_srcdir/README.md" "$tmp/README.md"
    printf '%s\n' "$2" >>"$tmp/README.md"
    fails "$1" "README.md:$(sed -n '$=' "$tmp/README.md"): $3" "$tmp/README.md"
}

# Runs the checker on the real tree's files; expects no report. $1 says which files.
clean() {
    n=$((n + 1))
    what=$1
    shift
    out=$(sh "$check" -r "$top_srcdir" "$@" 2>&1)
    rc=$?
    if [ $rc -eq 0 ]; then
        echo "ok $n - $what ($# files): no path outside the repository, no missing file, no narrative"
    else
        echo "not ok $n - $what ($# files): the checker reports problems (exit $rc)"
        printf '%s\n' "$out" | sed 's/^/# /'
    fi
}

echo "1..5"
planted "a planted absolute path outside the repository" \
    "The notes of the run are in /home/someone/paged/notes.txt." "/home/someone/paged/notes.txt"
planted "a planted reference to a missing file" \
    "The decode kernel's measurements are in tools/bench/decode-log.md." "tools/bench/decode-log.md"
planted "a planted narrative line" \
    "The fourth session measured this on a new box." "session"

# The documents, then the comments of every source, script and makefile fragment.
set --
for f in README.md HACKING.md BENCHMARKS.md NEWS fuzz/README tests/README python/README.md; do
    [ -f "$top_srcdir/$f" ] && set -- "$@" "$top_srcdir/$f"
done
clean "the documents and the man pages" "$@" "$top_srcdir"/man/*.[1-8]
sources=$(cd "$top_srcdir" && find daemon lib kernels tools tests include fuzz python \
    \( -name corpus -o -name .libs -o -name .deps -o -name __pycache__ -o -path python/staged \
       -o -path python/build \) -prune -o -type f \
    \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.sh' -o -name '*.mk' \
       -o -name '*.in' -o -name '*.example' -o -name '*.py' -o -name '*.toml' \) -print | sort)
set --
for f in $sources Makefile.am configure.ac autogen.sh paged.pc.in m4/paged_cuda.m4 \
        build-aux/nvcc-libtool .ci/run; do
    [ -f "$top_srcdir/$f" ] && set -- "$@" "$top_srcdir/$f"
done
clean "the comments of the sources and makefiles" "$@"
