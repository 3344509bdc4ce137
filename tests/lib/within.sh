# tests/lib/within.sh: sourced by the test scripts that compare measured
# differences with tolerances (tests/examples/run.sh, tests/gpu/train.sh,
# tests/examples/cuda_emu/run.sh).  Uses the caller's ok and bad.
#
# within NAME VALUE TOL: ok when VALUE is a number <= TOL; an empty or
# malformed VALUE (a comparison that produced nothing) is a failure.
within() {
    if awk -v v="$2" -v t="$3" 'BEGIN { exit !(v ~ /^[0-9.eE+-]+$/ && v + 0 <= t + 0) }'; then
        ok "$1"
    else
        bad "$1" "value '$2', tolerance $3"
    fi
}
