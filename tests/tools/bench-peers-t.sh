#!/bin/sh
# bench-peers-t.sh: paged-bench --quick peers on the cpu backend: every shape checked, and the check can fail.
# SPDX-License-Identifier: MIT
#
# No FlashInfer and no GPU here: the run must say so (the FlashInfer columns n/a), check paged's
# DECODE and PREFILL through the daemon against the float32 reference on every bf16 shape that
# --list-shapes gives, and exit 0; with the reference deliberately wrong ($PAGED_PEERS_PERTURB)
# every shape must fail its check and the run exit 1. Without a python3, or where the paged
# package cannot be imported, paged-bench peers says so and exits 0.
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
. "$top_srcdir/tests/tap/tap.sh"
bench=$top_builddir/tools/paged-bench
check=$top_builddir/tools/bench/bench-json-check
for p in "$bench" "$check" "$top_builddir/daemon/pagedd"; do
    [ -x "$p" ] || tap_skip_all "$p is not built"
done
[ -n "${PAGED_PYTHON:-}" ] ||
    tap_skip_all "the Python module is not built (configure found no Python 3.11+ with its headers)"
"$PAGED_PYTHON" -c 'import numpy, torch' >/dev/null 2>&1 || tap_skip_all "$PAGED_PYTHON has no numpy or torch"
# A module built with --enable-sanitizers loads only behind the ASan runtime, preloaded into
# python, under which torch's C++ exceptions abort (tests/python/python-t.sh skips those too).
if ldd "$top_builddir/python/staged/paged/_paged.abi3.so" 2>/dev/null | grep -q libasan; then
    tap_skip_all "the Python module is built with the sanitizers: torch cannot run behind the ASan runtime"
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-peers-t.XXXXXX") || { echo "Bail out! mktemp failed"; exit 1; }
trap 'rm -rf "$tmp"' EXIT
# The script of this source tree (a build tree of another directory has none beside paged-bench).
PAGED_BENCH_PEERS=$top_srcdir/tools/bench/peers.py
PAGED_BENCH_PYTHON=$PAGED_PYTHON
PYTHONDONTWRITEBYTECODE=1
export PAGED_BENCH_PEERS PAGED_BENCH_PYTHON PYTHONDONTWRITEBYTECODE
unset PAGED_PEERS_PERTURB
echo 1..8

"$bench" --quick --backend=cpu --list-shapes >"$tmp/shapes.json"
rc=$?
shapes=$(grep -c '"op": "\(decode\|prefill\)"' "$tmp/shapes.json")
[ $rc -eq 0 ] && [ "$shapes" -ge 3 ] && ! grep -q fp8 "$tmp/shapes.json"
tap_result $? "paged-bench --list-shapes: $shapes bf16 shapes (exit $rc)"

"$bench" --quick --backend=cpu --json "$tmp/peers.json" peers >"$tmp/out" 2>&1
rc=$?
sed 's/^/# /' "$tmp/out"
[ $rc -eq 0 ] && grep -q '^peers: .* every check passed$' "$tmp/out"
tap_result $? "paged-bench --quick peers exits 0 (got $rc) and every check passed"

if "$PAGED_PYTHON" -c 'import flashinfer' >/dev/null 2>&1; then
    grep -q '^peers: no CUDA device (the cpu backend): the FlashInfer columns are n/a$' "$tmp/out"
    tap_result $? "peers: FlashInfer imports, and the run says the cpu backend leaves its columns n/a"
else
    grep -q '^peers: FlashInfer is not installed (.*): the FlashInfer columns are n/a$' "$tmp/out"
    tap_result $? "peers: says FlashInfer is not installed and its columns are n/a"
fi

ok=$(grep -c '^peers: \(decode\|prefill\) .*: paged against the float32 reference: ok ' "$tmp/out")
[ "$ok" -eq "$shapes" ]
tap_result $? "peers: paged matched the float32 reference on every shape ($ok of $shapes)"

rows=$(awk '/^peers (decode|prefill)/ { on = 1; getline; next } on && NF == 0 { on = 0 } on && / ok / { n++ }
    END { print n + 0 }' "$tmp/out")
[ "$rows" -eq "$shapes" ] && "$check" "$tmp/peers.json" decode prefill peers_decode peers_prefill >"$tmp/check" 2>&1
rc=$?
sed 's/^/# /' "$tmp/check"
tap_result $rc "peers: a table row per shape ($rows), and the JSON holds the peers tables, its figures finite"

PAGED_PEERS_PERTURB=1 "$bench" --quick --backend=cpu peers >"$tmp/bad" 2>&1
rc=$?
differs=$(grep -c '^peers: \(decode\|prefill\) .*: paged differs from the float32 reference' "$tmp/bad")
[ $rc -eq 1 ] && [ "$differs" -eq "$shapes" ] && grep -q 'peers: an output differs' "$tmp/bad"
tap_result $? "peers with a wrong reference: every shape fails ($differs of $shapes), the run exits 1 (got $rc)"

PAGED_BENCH_PYTHON=$tmp/no-such-python "$bench" --quick --backend=cpu peers >"$tmp/nopy" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "^peers: no $tmp/no-such-python to run .*: nothing to compare$" "$tmp/nopy"
tap_result $? "peers without a python3: says so and exits 0 (got $rc)"

# -I: isolated, PYTHONPATH ignored, so the staged package is out of reach.
printf '#!/bin/sh\nexec "%s" -I "$@"\n' "$PAGED_PYTHON" >"$tmp/isolated"
chmod +x "$tmp/isolated"
if "$tmp/isolated" -c 'import paged' >/dev/null 2>&1; then
    tap_skip "paged is installed for $PAGED_PYTHON itself: no interpreter here lacks it"
else
    PAGED_BENCH_PYTHON=$tmp/isolated "$bench" --quick --backend=cpu peers >"$tmp/nopkg" 2>&1
    rc=$?
    [ $rc -eq 0 ] && grep -q '^peers: .* cannot import the paged package or torch: nothing to compare$' "$tmp/nopkg"
    tap_result $? "peers without the paged package: says so and exits 0 (got $rc)"
fi
