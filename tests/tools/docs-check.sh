#!/bin/sh
# docs-check.sh: checks documents and source comments for paths outside the repository,
# references to repository files that do not exist, and narrative of the development.
# SPDX-License-Identifier: MIT
#
# Usage: docs-check.sh [-r ROOT] FILE...
#   ROOT     the source tree the references are resolved against (default .)
#   FILE     documents are read whole; in C, CUDA, shell and make files only the comments
#
# Prints one line per problem, FILE:LINE: TOKEN: what is wrong, and exits 1 if there is any,
# 0 if none, 2 on bad usage. What it looks for:
#   - absolute paths, but for the system paths the software itself uses (its socket and
#     configuration locations, device files, /proc, /usr, /tmp/paged...), and relative
#     paths that climb out of the tree (two dots and a slash)
#   - tokens that name repository files (a top folder such as daemon/ or tests/ followed by
#     a path, or a top-level .md file) that match nothing in ROOT and nothing the makefiles
#     build; globs, braces, "..." and capitalized placeholders (NAME, PID) match any name
#   - markers of a narrative of the development: the word for a numbered period of work,
#     numbered issues, times and dates of runs, commit hashes
set -u
root=.
while getopts r: opt; do
    case $opt in
    r) root=$OPTARG ;;
    *) echo "usage: docs-check.sh [-r ROOT] FILE..." >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -eq 0 ]; then
    echo "usage: docs-check.sh [-r ROOT] FILE..." >&2
    exit 2
fi
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT

# Every path of the tree, relative to it, build outputs left out.
(cd "$root" && find . \( -name .git -o -name .libs -o -name .deps -o -name autom4te.cache \) -prune \
    -o -print) | sed -e 's|^\./||' -e '/^\.$/d' >"$tmp/paths" || exit 2
# Every word of the makefiles and configure.ac: what the build makes lives among them.
(cd "$root" && cat Makefile.am configure.ac $(find . -name '*.mk' -path './*/*' ! -path './.git/*' \
    ! -path './autom4te.cache/*' 2>/dev/null)) 2>/dev/null | tr ' \t=' '\n\n\n' >"$tmp/mkwords"

prog='
# Escapes what a regular expression would read as an operator.
function quote(s,   out, i, c) {
    out = ""
    for (i = 1; i <= length(s); i++) {
        c = substr(s, i, 1)
        if (index("\\^$.[]|()*+?{}", c)) out = out "\\" c; else out = out c
    }
    return out
}

# Returns t with each capitalized placeholder (NAME, PID; not README or NEWS) made one \001.
function placeholders(t,   out, w, pre, post) {
    out = ""
    while (match(t, /[A-Z][A-Z0-9_]*[A-Z0-9]/)) {
        w = substr(t, RSTART, RLENGTH)
        pre = RSTART > 1 ? substr(t, RSTART - 1, 1) : ""
        post = substr(t, RSTART + RLENGTH, 1)
        if (!(w in realname) && pre !~ /[a-z]/ && post !~ /[a-z]/) out = out substr(t, 1, RSTART - 1) "\001"
        else out = out substr(t, 1, RSTART + RLENGTH - 1)
        t = substr(t, RSTART + RLENGTH)
    }
    return out t
}

# Returns the anchored regular expression a path pattern stands for: globs, braces, a
# trailing ellipsis and capitalized placeholders match any name.
function pattern_re(t,   out, i, c, j, k, alts, n, a, tail) {
    out = ""
    t = placeholders(t)
    if (substr(t, length(t) - 2) == "...") { t = substr(t, 1, length(t) - 3); tail = ".*" } else tail = ""
    i = 1
    while (i <= length(t)) {
        c = substr(t, i, 1)
        if (c == "*" || c == "\001") { out = out "[^/]*"; i++ }
        else if (c == "?") { out = out "[^/]"; i++ }
        else if (c == "[" && (j = index(substr(t, i), "]")) > 2) { out = out substr(t, i, j); i += j }
        else if (c == "{" && (j = index(substr(t, i), "}")) > 2) {
            n = split(substr(t, i + 1, j - 2), alts, ",")
            a = ""
            for (k = 1; k <= n; k++) a = a (k > 1 ? "|" : "") quote(alts[k])
            out = out "(" a ")"
            i += j
        } else { out = out quote(c); i++ }
    }
    return "^" out tail "$"
}

# Returns t with its wildcards and placeholders taken out: a name a makefile pattern can match.
function bare(t) {
    sub(/\.\.\.$/, "", t)
    t = placeholders(t)
    gsub(/\*|\?|\[[^]]*\]|\{[^}]*\}|\001/, "", t)
    return t
}

function is_pattern(t) {
    return t ~ /[*?{[]/ || t ~ /\.\.\.$/ || index(placeholders(t), "\001") > 0
}

# Returns 1 if name is, or matches, something the makefiles build.
function built(name,   i) {
    for (i = 1; i <= nmk; i++) if (name ~ mkre[i]) return 1
    return 0
}

function report(t, why) {
    printf "%s:%d: %s: %s\n", FILENAME, FNR, t, why
    problems++
}

# Checks one token that looks like a path inside the repository.
function resolve(t,   re, i) {
    sub(/\/$/, "", t)
    if (t in exists) return
    if (t ~ /\/\.(libs|deps)\//) return     # build folders of libtool and automake
    if (is_pattern(t)) {
        re = pattern_re(t)
        for (i = 1; i <= npaths; i++) if (paths[i] ~ re) return
        if (built(bare(t))) return
        report(t, "matches no file of the repository")
        return
    }
    if ((t ".in") in exists) return
    if (built(t)) return
    report(t, "no such file in the repository")
}

# Checks an absolute path, or a relative one that climbs out of the tree.
function outside(t,   i) {
    sub(/[.:]+$/, "", t)
    for (i = 1; i <= nallow; i++) if (t ~ allow[i]) return
    report(t, "a path outside the repository")
}

# Checks one piece of text (a document line, or the comments of a source line).
function check(s,   rest, t, low, n, w, i, k, hex, dig, let) {
    rest = s
    while (match(rest, re_abs)) {
        t = substr(rest, RSTART, RLENGTH)
        rest = substr(rest, RSTART + RLENGTH)
        if (substr(t, 1, 1) != "/") t = substr(t, 2)
        outside(t)
    }
    rest = s
    while (match(rest, re_up)) {
        t = substr(rest, RSTART, RLENGTH)
        rest = substr(rest, RSTART + RLENGTH)
        sub(/^[^.~]/, "", t)
        outside(t)
    }
    rest = s
    while (match(rest, /(^|[^A-Za-z0-9_.\/$-]|\.\/)(daemon|lib|kernels|tools|tests|man|include|fuzz|m4|build-aux|\.ci)\/[A-Za-z0-9_.*?{}\[\]\/+,-]*/)) {
        t = substr(rest, RSTART, RLENGTH)
        rest = substr(rest, RSTART + RLENGTH)
        sub(/^(\.\/|[^a-z.])/, "", t)
        # A comma ends the path unless it sits inside braces.
        if ((i = index(t, ",")) && !(index(t, "{") && index(t, "{") < i)) t = substr(t, 1, i - 1)
        if (t !~ /\.\.\.$/) sub(/[.:]+$/, "", t)
        resolve(t)
    }
    rest = s
    while (match(rest, /(^|[^A-Za-z0-9_.\/-])[A-Za-z0-9_-]+\.md([^A-Za-z0-9_]|$)/)) {
        t = substr(rest, RSTART, RLENGTH)
        rest = substr(rest, RSTART + RLENGTH - 1)
        sub(/^[^A-Za-z0-9_-]/, "", t)
        sub(/[^A-Za-z0-9_]$/, "", t)
        if (!(t in exists)) report(t, "no such file in the repository")
    }
    low = tolower(s)
    if (match(low, /(^|[^a-z_])sessions?([^a-z_]|$)/)) report("session", "narrative: a work period")
    if (match(low, /(^|[^a-z])issues? #?[0-9]/)) report(substr(s, RSTART, RLENGTH), "narrative: an issue number")
    if (match(low, /[0-9]:[0-9][0-9] utc/)) report(substr(s, RSTART, RLENGTH), "narrative: the time of a run")
    if (match(low, /founding team|work period/)) report(substr(s, RSTART, RLENGTH), "narrative")
    if (kind != "man" && match(low, /(^|[^0-9])20[0-9][0-9]-[01][0-9]-[0-3][0-9]/))
        report(substr(s, RSTART, RLENGTH), "narrative: the date of a run")
    n = split(low, w, /[^0-9a-z]+/)
    for (i = 1; i <= n; i++) {
        if (length(w[i]) < 7 || length(w[i]) > 40 || w[i] !~ /^[0-9a-f]+$/) continue
        if (w[i] ~ /[0-9]/ && w[i] ~ /[a-f]/) report(w[i], "narrative: a commit hash")
    }
}

# Returns the comment text of a C or CUDA line; inblk carries an open block comment over.
function c_comments(line,   out, i, n, j, c, q) {
    if (!inblk && index(line, "/") == 0) return ""
    out = ""; n = length(line); i = 1; q = ""
    while (i <= n) {
        if (inblk) {
            j = index(substr(line, i), "*/")
            if (j == 0) return out " " substr(line, i)
            out = out " " substr(line, i, j - 1)
            i += j + 1
            inblk = 0
            continue
        }
        c = substr(line, i, 1)
        if (q != "") {
            if (c == "\\") i++
            else if (c == q) q = ""
            i++
            continue
        }
        if (c == "\"" || c == sq) { q = c; i++; continue }
        if (c == "/" && substr(line, i + 1, 1) == "*") { inblk = 1; i += 2; continue }
        if (c == "/" && substr(line, i + 1, 1) == "/") return out " " substr(line, i + 2)
        i++
    }
    return out
}

BEGIN {
    split("README NEWS COPYING LICENSE AUTHORS INSTALL TODO HACKING BENCHMARKS", rn, " ")
    for (i in rn) realname[rn[i]] = 1
    re_abs = "(^|[ \t(\"" sq "`=<[])/[A-Za-z0-9_.$~{}-][^ \t\"" sq "`()<>,;]*"
    re_up = "(^|[^A-Za-z0-9_./-])(~|\\.\\.)/[^ \t\"" sq "`()<>,;]*"
    while ((getline p < pathsfile) > 0) { exists[p] = 1; paths[++npaths] = p }
    while ((getline w < mkfile) > 0) {
        sub(/^\$\((top_)?(src|build)dir\)\//, "", w)
        gsub(/\$\(EXEEXT\)/, "", w)
        sub(/[;:\\]+$/, "", w)
        if (w !~ /^(daemon|lib|kernels|tools|tests|man|include|fuzz)\//) continue
        re = quote(w)
        gsub(/\\\$\\\$[a-z_]+|\\\$\\\([A-Za-z_]+\\\)/, "[^/]*", re)
        gsub(/\\\*/, ".*", re)
        mkre[++nmk] = "^" re "$"
    }
    nallow = split("^/run(/|$) ^/var/run/ ^/etc(/|$) ^/usr(/|$) ^/opt/ ^/proc(/|$) ^/sys/ " \
                   "^/dev/(null|shm|fd|stdin|stdout|stderr|nvidiactl|log)(/|$) ^/bin/sh$ ^/tmp$ ^/tmp/paged " \
                   "^\\.\\./configure$", allow, " ")
}

FNR == 1 {
    inblk = 0
    if (FILENAME ~ /\.(c|h|cu|cuh)$/) kind = "c"
    else if (FILENAME ~ /(\.(sh|mk|am|ac|m4|in)|\/run|\/nvcc-libtool|\.example)$/) kind = "hash"
    else if (FILENAME ~ /\.[1-8]$/) kind = "man"
    else kind = "text"
}

{
    line = $0
    if (kind == "c") line = c_comments(line)
    else if (kind == "hash") {
        if (FNR == 1 && line ~ /^#!/) next
        if (match(line, /(^|[ \t])(#|dnl )/)) line = substr(line, RSTART + RLENGTH); else next
    }
    if (line != "") check(line)
}

END {
    exit problems > 0
}
'
awk -v sq="'" -v pathsfile="$tmp/paths" -v mkfile="$tmp/mkwords" "$prog" "$@"
