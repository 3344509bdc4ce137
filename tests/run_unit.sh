#!/bin/sh
# Runs every unit-test binary in $1, sums their TAP results and prints the
# closing line "N passed, N failed, N skipped".  Exit 1 if any failed.
set -u
dir=$1
pass=0 fail=0 skip=0

# A frame the sanitizer left as "(binary+0xOFFSET)" (no symbolizer it could
# use on that machine) gets its function and file:line from addr2line.
symbolize() {
    while IFS= read -r line; do
        case $line in
        *" in "*) echo "$line" ;;
        "    #"*"+0x"*")")
            loc=${line##*\(}; loc=${loc%\)}
            where=$(addr2line -f -i -e "${loc%+0x*}" "0x${loc##*+0x}" 2>/dev/null |
                paste -sd' ' -)
            echo "$line${where:+ $where}" ;;
        *) echo "$line" ;;
        esac
    done
}
reports=""
for t in "$dir"/test_*; do
    [ -x "$t" ] || continue
    out=$("$t" 2>&1)
    rc=$?
    echo "$out" | grep -v '^ok ' || true
    echo "$out" | grep '^ok .* # SKIP' || true # a SKIP is shown, with its reason
    s=$(echo "$out" | grep -c '^ok .* # SKIP' || true)
    p=$(( $(echo "$out" | grep -c '^ok ' || true) - s ))
    f=$(echo "$out" | grep -c '^not ok ' || true)
    pass=$((pass + p)); skip=$((skip + s)); fail=$((fail + f))
    # A sanitizer's report, condensed (its kind, the first frames, the
    # summary) and printed again at the end, where a CI log's tail shows it.
    rep=$(echo "$out" | grep -E '^==[0-9]+==ERROR|^    #[0-7] |runtime error:|^SUMMARY:|^(READ|WRITE) of size|is located|^(freed|previously allocated) by' || true)
    [ -n "$rep" ] && reports="$reports
# sanitizer report of $t:
$(echo "$rep" | symbolize)"
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "not ok - $t exited $rc"; fail=$((fail + 1))
    fi
done
[ -n "$reports" ] && echo "$reports"
echo "unit: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
