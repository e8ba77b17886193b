#!/bin/sh
# python-t.sh: the paged Python package's tests (tests/python/test_*.py) against a real pagedd, as TAP.
# SPDX-License-Identifier: MIT
#
# Runs them with the interpreter configure built the module for ($PAGED_PYTHON, from the
# makefile), the staged package python/staged/paged on PYTHONPATH and the built libpaged on
# LD_LIBRARY_PATH; skips, saying why, when the module was not built or numpy is missing.
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
. "$top_srcdir/tests/tap/tap.sh"

[ -n "${PAGED_PYTHON:-}" ] ||
    tap_skip_all "the Python module is not built (configure found no Python 3.11+ with its headers)"
[ -f "$top_builddir/python/staged/paged/_paged.abi3.so" ] ||
    tap_skip_all "python/staged/paged/_paged.abi3.so is missing (run make first)"
"$PAGED_PYTHON" -c 'import numpy' >/dev/null 2>&1 ||
    tap_skip_all "numpy is missing for $PAGED_PYTHON (install python3-numpy)"

# A module built with --enable-sanitizers needs the ASan runtime loaded first, which an
# interpreter built without it does not do; the interpreter's own allocations, kept until
# exit by design, are no leaks of ours. PAGED_TEST_ASAN tells the tests that cannot run so.
asan=$(ldd "$top_builddir/python/staged/paged/_paged.abi3.so" 2>/dev/null |
    sed -n 's/.*=> \(\/[^ ]*libasan[^ ]*\).*/\1/p')
if [ -n "$asan" ]; then
    LD_PRELOAD="$asan${LD_PRELOAD:+:$LD_PRELOAD}"
    ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    PAGED_TEST_ASAN=1
    export LD_PRELOAD ASAN_OPTIONS PAGED_TEST_ASAN
fi
PYTHONPATH="$top_builddir/python/staged${PYTHONPATH:+:$PYTHONPATH}"
LD_LIBRARY_PATH="$top_builddir/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH LD_LIBRARY_PATH PYTHONDONTWRITEBYTECODE top_builddir
exec "$PAGED_PYTHON" "$top_srcdir/tests/python/tap.py" "$top_srcdir"/tests/python/test_*.py
