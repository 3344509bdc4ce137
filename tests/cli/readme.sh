# Sourced by tests/cli/run.sh: every `accelrun [COMMAND] --help` block of
# the README is what the binary prints, byte for byte, so the README's usage
# never drifts from the program.
readme=$(dirname "$0")/../../README.md
mkdir -p "$tmp/readme"
# Each block: a line "`accelrun CMD --help`:" (or "`build/bin/accelrun --help`:"),
# then a fenced block; written to $tmp/readme/CMD (main for the bare command).
awk -v dir="$tmp/readme" '
    /^`(build\/bin\/)?accelrun( [a-z]+)? --help`:$/ {
        n = split($0, w, " "); cmd = (n == 3) ? w[2] : "main"; want = 1; next
    }
    want == 1 && /^```$/ { want = 2; f = dir "/" cmd; printf "" > f; next }
    want == 2 && /^```$/ { want = 0; close(f); next }
    want == 2 { print > f }
' "$readme"
nblocks=$(find "$tmp/readme" -type f | wc -l)
if [ "$nblocks" -ge 1 ]; then ok "README: $nblocks --help blocks found"; else bad "README: no \`accelrun --help\` block found in $readme"; fi
for f in "$tmp/readme"/*; do
    [ -f "$f" ] || continue
    cmd=$(basename "$f")
    if [ "$cmd" = main ]; then "$bin" --help >"$f.bin" 2>&1; else "$bin" "$cmd" --help >"$f.bin" 2>&1; fi
    shown="accelrun $cmd --help"
    [ "$cmd" = main ] && shown="accelrun --help"
    if cmp -s "$f" "$f.bin"; then
        ok "README: \`$shown\` is what the binary prints"
    else
        bad "README: \`$shown\` differs from the binary's (update README.md)" "$(diff "$f" "$f.bin")"
    fi
done
