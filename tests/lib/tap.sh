# shellcheck shell=bash
# tests/lib/tap.sh: the TAP-like lines and totals of the test scripts that
# source it (tests/examples/run.sh, tests/examples/cuda_emu/run.sh, tests/deb/run.sh,
# tests/gpu/train.sh).  Set before sourcing:
#   TAP_NAME   the summary line's prefix ("examples: 3 passed, 0 failed, 1 skipped")
#   TAP_TAIL   lines of detail bad() shows (default 15)
pass=0 fail=0 skip=0

ok() { pass=$((pass + 1)); echo "ok - $1"; }

# bad NAME [DETAIL]: a failure, with the last TAP_TAIL lines of DETAIL
bad() {
    fail=$((fail + 1))
    echo "not ok - $1"
    if [ -n "${2:-}" ]; then printf '%s\n' "$2" | tail -n "${TAP_TAIL:-15}" | sed 's/^/#   /'; fi
}

# skipped NAME REASON
skipped() { skip=$((skip + 1)); echo "ok - $1 # SKIP $2"; }

# The totals; exits 0 when nothing failed.
finish() {
    echo "$TAP_NAME: $pass passed, $fail failed, $skip skipped"
    [ "$fail" -eq 0 ]
    exit
}

# within NAME VALUE TOL: ok when VALUE is a number <= TOL; an empty or
# malformed VALUE (a comparison that produced nothing) is a failure.
within() {
    if awk -v v="$2" -v t="$3" 'BEGIN { exit !(v ~ /^[0-9.eE+-]+$/ && v + 0 <= t + 0) }'; then
        ok "$1"
    else
        bad "$1" "value '$2', tolerance $3"
    fi
}
