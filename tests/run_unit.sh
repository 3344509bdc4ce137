#!/bin/sh
# Runs every unit-test binary in $1, sums their TAP results and prints the
# closing line "N passed, N failed, N skipped".  Exit 1 if any failed.
set -u
dir=$1
pass=0 fail=0 skip=0
for t in "$dir"/test_*; do
    [ -x "$t" ] || continue
    out=$("$t" 2>&1)
    rc=$?
    echo "$out" | grep -v '^ok ' || true
    p=$(echo "$out" | grep -c '^ok .*[^P]$' || true)
    s=$(echo "$out" | grep -c '# SKIP$' || true)
    f=$(echo "$out" | grep -c '^not ok ' || true)
    pass=$((pass + p)); skip=$((skip + s)); fail=$((fail + f))
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "not ok - $t exited $rc"; fail=$((fail + 1))
    fi
done
echo "unit: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
