# tap.sh: TAP for the shell tests, sourced: numbered results, skips, and a whole test skipped.
# SPDX-License-Identifier: MIT
tap_n=0

# Prints the next result: "ok N - WHAT" when STATUS is 0, else "not ok N - WHAT" followed by
# DIAG (if given) as comment lines.
tap_result() {
    tap_n=$((tap_n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $tap_n - $2"
    else
        echo "not ok $tap_n - $2"
        [ $# -lt 3 ] || printf '%s\n' "$3" | sed 's/^/# /'
    fi
}

# Prints the next result as skipped, saying why (REASON).
tap_skip() {
    tap_n=$((tap_n + 1))
    echo "ok $tap_n # SKIP $1"
}

# Skips the whole test, saying why (REASON), and exits.
tap_skip_all() {
    echo "1..0 # SKIP $1"
    exit 0
}
