#!/bin/sh
# layers-t.sh: daemon/'s layers: its include graph has no cycle and no layer includes one above it; its call graph has no cycle through the front and a backend.
# SPDX-License-Identifier: MIT
#
# The include checks read every #include "daemon/..." line of the sources under
# $top_srcdir/daemon. The front is server, control, list, events and main (daemon/ top);
# daemon/util, daemon/alloc, daemon/engine, daemon/cpu and daemon/cuda lie below it, and
# util lies below everything. The call-graph checks run nm over the objects of
# daemon/libpagedengine.la and daemon/libpageddaemon.la (PD_LAYER_OBJECTS, their .lo files
# under $top_builddir, which make check passes) and draw an edge from each object to every
# object defining a symbol it uses; they are skipped when those objects are not there.

top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
tmp=${TMPDIR:-/tmp}/paged-layers.$$
mkdir "$tmp" || exit 1
trap 'rm -rf "$tmp"' EXIT

echo "1..7"
n=0
# ok TEST-PASSED DESCRIPTION
ok() {
    n=$((n + 1))
    if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
}
# skip DESCRIPTION REASON
skip() {
    n=$((n + 1))
    echo "ok $n - $1 # SKIP $2"
}

# The include graph, one "FILE INCLUDED" line per edge, both relative to the top of the tree.
(cd "$top_srcdir" && find daemon -name '*.[ch]' | LC_ALL=C sort) > "$tmp/files"
: > "$tmp/includes"
while read -r f; do
    sed -n "s|^[[:space:]]*#[[:space:]]*include[[:space:]]*\"\\(daemon/[^\"]*\\)\".*|$f \\1|p" \
        "$top_srcdir/$f" >> "$tmp/includes"
done < "$tmp/files"
test -s "$tmp/files" && test -s "$tmp/includes"
ok $? "daemon/ has sources that include each other ($(wc -l < "$tmp/files") files, $(wc -l < "$tmp/includes") includes)"

# Prints one cycle of the graph of "FROM TO" lines on stdin as "a -> b -> a", or nothing.
find_cycle() {
    awk '
    { out[$1] = out[$1] " " $2; node[$1] = 1; node[$2] = 1 }
    # Depth-first search from v; returns 1 once a cycle is found (in cycle).
    function visit(v,    k, m, i, w, succ) {
        state[v] = 1
        path[++depth] = v
        m = split(out[v], succ, " ")
        for (i = 1; i <= m; i++) {
            w = succ[i]
            if (state[w] == 1) {
                cycle = w
                for (k = depth; k >= 1 && path[k] != w; k--)
                    cycle = path[k] " -> " cycle
                cycle = w " -> " cycle
                return 1
            }
            if (state[w] == 0 && visit(w))
                return 1
        }
        state[v] = 2
        depth--
        return 0
    }
    END {
        for (v in node)
            if (state[v] == 0 && visit(v))
                break
        if (cycle != "")
            print cycle
    }'
}

cycle=$(find_cycle < "$tmp/includes")
test -z "$cycle"
ok $? "no include cycle among daemon/'s files${cycle:+ (found: $cycle)}"

front='^daemon/(server\.h|control\.h|list\.h|events\.h|main\.[ch])$'
bad=$(awk -v front="$front" '$1 ~ /^daemon\/(util|alloc|engine|cpu|cuda)\// && $2 ~ front { printf "%s%s includes %s", sep, $1, $2; sep = "; " }' "$tmp/includes")
test -z "$bad"
ok $? "no file under daemon/util, alloc, engine, cpu or cuda includes a front header${bad:+ ($bad)}"

bad=$(awk '$1 ~ /^daemon\/util\// && $2 !~ /^daemon\/util\// { printf "%s%s includes %s", sep, $1, $2; sep = "; " }' "$tmp/includes")
test -z "$bad"
ok $? "daemon/util includes nothing of daemon/ above it${bad:+ ($bad)}"

bad=$(awk '$1 ~ /^daemon\/alloc\// && $2 !~ /^daemon\/(util|alloc)\// { printf "%s%s includes %s", sep, $1, $2; sep = "; " }' "$tmp/includes")
test -z "$bad"
ok $? "daemon/alloc includes only daemon/util and itself${bad:+ ($bad)}"

# ---- The call graph of the built objects.
why=
if ! command -v nm > /dev/null 2>&1; then
    why="nm not found"
elif [ -z "$PD_LAYER_OBJECTS" ]; then
    why="PD_LAYER_OBJECTS not set (make check sets it)"
fi
: > "$tmp/objects"
for lo in $PD_LAYER_OBJECTS; do
    [ -n "$why" ] && break
    if [ ! -f "$top_builddir/$lo" ]; then
        why="$lo not built"
        break
    fi
    # A libtool object names its real object(s) relative to its own directory.
    obj=$(sed -n "s/^pic_object='\\(.*\\)'\$/\\1/p" "$top_builddir/$lo")
    [ -z "$obj" ] || [ "$obj" = none ] && obj=$(sed -n "s/^non_pic_object='\\(.*\\)'\$/\\1/p" "$top_builddir/$lo")
    dir=$(dirname "$lo")
    if [ -z "$obj" ] || [ ! -f "$top_builddir/$dir/$obj" ]; then
        why="no object behind $lo"
        break
    fi
    base=$(basename "$lo" .lo)
    lib=${base%%_la-*}
    echo "$dir/${base#*_la-} $lib $top_builddir/$dir/$obj" >> "$tmp/objects"
done
if [ -z "$why" ] && [ ! -s "$tmp/objects" ]; then
    why="no objects listed"
fi
if [ -n "$why" ]; then
    skip "no call cycle spans the front (server, control, list, events) and a backend (cpu, cuda, backend.c)" "$why"
    skip "no object of libpagedengine uses a symbol of libpageddaemon" "$why"
    exit 0
fi

# "NODE LIB d SYMBOL" for each defined global symbol, "NODE LIB u SYMBOL" for each used one.
: > "$tmp/symbols"
while read -r node lib obj; do
    nm -g --defined-only "$obj" | awk -v n="$node" -v l="$lib" 'NF == 3 { print n, l, "d", $3 }' >> "$tmp/symbols"
    nm -u "$obj" | awk -v n="$node" -v l="$lib" '{ print n, l, "u", $NF }' >> "$tmp/symbols"
done < "$tmp/objects"
# "USER DEFINER USERLIB DEFINERLIB SYMBOL" per use of a symbol another object defines.
awk '$3 == "d" { def[$4] = $1; deflib[$4] = $2 }
     $3 == "u" { use[++k] = $1 " " $2 " " $4 }
     END {
         for (i = 1; i <= k; i++) {
             split(use[i], u, " ")
             if ((u[3] in def) && def[u[3]] != u[1])
                 print u[1], def[u[3]], u[2], deflib[u[3]], u[3]
         }
     }' "$tmp/symbols" > "$tmp/calls"

# Which objects reach which (the transitive closure), then any pair of a front object and a
# backend object that reach each other.
spans=$(awk '
    { reach[$1, $2] = 1; node[$1] = 1; node[$2] = 1 }
    function front(v) { return v ~ /^daemon\/(server|control|list|events)$/ }
    function backend(v) { return v ~ /^daemon\/(cpu|cuda)\// || v == "daemon/backend" }
    END {
        for (k in node)
            for (i in node)
                if (reach[i, k])
                    for (j in node)
                        if (reach[k, j])
                            reach[i, j] = 1
        for (f in node)
            for (b in node)
                if (front(f) && backend(b) && reach[f, b] && reach[b, f]) {
                    printf "%s%s <-> %s", sep, f, b
                    sep = "; "
                }
    }' "$tmp/calls")
test -z "$spans"
ok $? "no call cycle spans the front (server, control, list, events) and a backend (cpu, cuda, backend.c) ($(wc -l < "$tmp/objects") objects, $(wc -l < "$tmp/calls") uses${spans:+; cycles: $spans})"

up=$(awk '$3 == "libpagedengine" && $4 == "libpageddaemon" { printf "%s%s uses %s (%s)", sep, $1, $5, $2; sep = "; " }' "$tmp/calls")
test -z "$up"
ok $? "no object of libpagedengine uses a symbol of libpageddaemon${up:+ ($up)}"
