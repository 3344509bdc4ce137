#!/bin/bash
# Tests of the example trainer (examples/gpt, docs/train-gpt.md), run for
# real: build/bin/train_gpt started by `accelrun launch -n N` with the CPU
# configs of examples/.  TAP-like "ok - " / "not ok - " lines, then
# "examples: N passed, N failed, N skipped".
#
#   bash tests/examples/run.sh BUILD_DIR     (e.g. build)
#
# The tolerances, derived in docs/train-gpt.md ("Numerics"):
#   same world size, two runs        bit-identical loss logs (%.9g round-trips fp32)
#   fp32, world 1 vs 2 vs 4, world   every step: |a-b|/a <= FP32_STEP_TOL (1e-4);
#   2 with 2 micro-steps, NO_SHARD   final step and final validation loss:
#                                    <= FP32_FINAL_TOL (1e-5)
#   bf16 vs fp32 (world 2)           mean of the last 20 training losses and the
#                                    validation loss: <= BF16_TOL (1e-2); and the
#                                    bf16 curve must differ from fp32 (bf16 was used)
#   the loss falls                   mean of the last 10 steps < 0.6 x step 1
#   a rank killed (SIGKILL) at       resumed at world 4: bit-identical to the
#   world 4 after the checkpoint     uninterrupted world-4 run from there on (and
#   of step STEPS/2                  its validation loss); resumed at world 2 and
#                                    1: the fp32 tolerances above against it
#   SIGTERM to the launcher          the ranks save the step they agreed on and
#                                    stop; resumed at world 2: every step within
#                                    the fp32 step tolerance
# STEPS (default 200) and TRAIN_GPT (default BUILD/bin/train_gpt) can be set;
# the whole file takes 1 to 2 minutes on 2 cores.
set -u
build=${1:-build}
train=${TRAIN_GPT:-$build/bin/train_gpt}
accelrun=$build/bin/accelrun
steps=${STEPS:-200}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cfg=$root/examples/gpt-cpu.yaml
cfg_bf16=$root/examples/gpt-cpu-bf16.yaml
FP32_STEP_TOL=1e-4
FP32_FINAL_TOL=1e-5
BF16_TOL=1e-2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
TAP_NAME=examples
# shellcheck source=tests/lib/tap.sh
. "$here/../lib/tap.sh"

# run NAME N CONFIG [ARGS...]: trains, loss log in $tmp/NAME.log, output in $tmp/NAME.out
run() {
    local name=$1 n=$2 config=$3
    shift 3
    if timeout 300 "$accelrun" launch -n "$n" --config "$config" -- "$train" --steps "$steps" \
        --loss-log "$tmp/$name.log" "$@" >"$tmp/$name.out" 2>&1; then
        return 0
    fi
    bad "$name: train_gpt at world $n failed" "$(cat "$tmp/$name.out")"
    return 1
}

# compare A B: prints "max_rel max_step final_rel val_rel" of two loss logs
compare() {
    paste "$1" "$2" | awk '
        function rel(a, b) { d = (a - b) / a; return d < 0 ? -d : d }
        $1 == "#" && $2 == "val" { val = rel($3, $6); next }
        { r = rel($2, $4); if (r > max) { max = r; at = $1 }; final = r }
        END { printf "%.3g %d %.3g %.3g\n", max, at, final, val }'
}

# within NAME VALUE TOL: passes when VALUE <= TOL

for f in "$train" "$accelrun" "$cfg" "$cfg_bf16"; do
    if [ ! -e "$f" ]; then
        echo "examples: SKIP: $f not found (make all)"
        echo "examples: 0 passed, 0 failed, 1 skipped"
        exit 0
    fi
done
cd "$root" || exit 1

# ---------------------------------------------------------------- model alone
if cc -std=gnu11 -O2 -Wall -Wextra -Wno-missing-field-initializers -Icore/include -Ickpt/include \
    -Iexamples/gpt -o "$tmp/gradcheck" tests/examples/gradcheck.c examples/gpt/kernels.c \
    examples/gpt/model.c examples/gpt/rng.c -lm 2>"$tmp/cc.err"; then
    if out=$("$tmp/gradcheck"); then
        ok "gradcheck: kernels and units against finite differences ($(echo "$out" | tail -n 1))"
    else
        bad "gradcheck" "$out"
    fi
else
    bad "gradcheck compiles" "$(cat "$tmp/cc.err")"
fi

# ---------------------------------------------------------------- errors
if out=$("$accelrun" launch -n 1 --config "$cfg" -- "$train" --data "$tmp/no-such-dir" 2>&1); then
    bad "a missing data folder is an error naming it (it exited 0)" "$out"
elif printf '%s' "$out" | grep -q "data folder $tmp/no-such-dir"; then
    ok "a missing data folder is an error naming it"
else
    bad "a missing data folder is an error naming it" "$out"
fi
if out=$("$accelrun" launch -n 4 --config "$cfg" -- "$train" --batch 6 2>&1); then
    bad "a global batch that does not split over the ranks is an error (it exited 0)" "$out"
elif printf '%s' "$out" | grep -q "not a multiple of world size 4"; then
    ok "a global batch that does not split over the ranks is an error"
else
    bad "a global batch that does not split over the ranks is an error" "$out"
fi

# ---------------------------------------------------------------- training
have2=0 haveb=0
run w1 1 "$cfg"
run w2 2 "$cfg" && have2=1
run w2again 2 "$cfg" && have2=$((have2 + 1))
run w4 4 "$cfg"
run bf16 2 "$cfg_bf16" && haveb=1
ACCELERATE_GRADIENT_ACCUMULATION_STEPS=2 run accum2 2 "$cfg"
sed 's/FULL_SHARD/NO_SHARD/' "$cfg" >"$tmp/noshard.yaml"
run noshard 2 "$tmp/noshard.yaml"

if [ "$have2" -eq 2 ]; then
    if cmp -s "$tmp/w2.log" "$tmp/w2again.log"; then
        ok "world 2, two runs: bit-identical loss logs ($steps steps)"
    else
        bad "world 2, two runs: bit-identical loss logs" \
            "$(diff "$tmp/w2.log" "$tmp/w2again.log" | head)"
    fi
else
    skipped "bit-identical runs" "a run failed"
fi

# "log log what" with + for spaces
for pair in "w1 w2 world+1+vs+2" "w1 w4 world+1+vs+4" "w2 w4 world+2+vs+4" \
    "w1 accum2 world+1+vs+world+2+with+2+micro-steps" \
    "w2 noshard FULL_SHARD+vs+NO_SHARD+at+world+2"; do
    # shellcheck disable=SC2086 # split on purpose
    set -- $pair
    a=$1 b=$2 what=${3//+/ }
    if [ -s "$tmp/$a.log" ] && [ -s "$tmp/$b.log" ]; then
        read -r max at final val <<<"$(compare "$tmp/$a.log" "$tmp/$b.log")"
        echo "# fp32 $what: max relative difference $max (step $at)," \
            "final step $final, validation $val"
        within "fp32 $what: every step within $FP32_STEP_TOL (max $max at step $at)" "$max" \
            $FP32_STEP_TOL
        within "fp32 $what: final step and validation within $FP32_FINAL_TOL ($final, $val)" \
            "$(awk -v a="$final" -v b="$val" 'BEGIN { print (a > b ? a : b) }')" $FP32_FINAL_TOL
    else
        skipped "fp32 $what" "a run failed"
    fi
done

if [ "$haveb" -eq 1 ] && [ -s "$tmp/w2.log" ]; then
    read -r tail_rel val_rel <<<"$(paste "$tmp/w2.log" "$tmp/bf16.log" | awk -v n="$steps" '
        function rel(a, b) { d = (a - b) / a; return d < 0 ? -d : d }
        $1 == "#" { val = rel($3, $6); next }
        $1 > n - 20 { s32 += $2; s16 += $4 }
        END { printf "%.3g %.3g\n", rel(s32, s16), val }')"
    echo "# bf16 vs fp32 (world 2): mean of the last 20 steps $tail_rel, validation $val_rel"
    within "bf16 vs fp32: last-20-step mean within $BF16_TOL ($tail_rel)" "$tail_rel" $BF16_TOL
    within "bf16 vs fp32: validation loss within $BF16_TOL ($val_rel)" "$val_rel" $BF16_TOL
    if cmp -s "$tmp/w2.log" "$tmp/bf16.log"; then
        bad "bf16 run differs from fp32 (ACCELERATE_MIXED_PRECISION=bf16 was used)"
    else
        ok "bf16 run differs from fp32 (ACCELERATE_MIXED_PRECISION=bf16 was used)"
    fi
else
    skipped "bf16 vs fp32" "a run failed"
fi

if [ -s "$tmp/w4.log" ]; then
    read -r first last <<<"$(awk -v n="$steps" '
        $1 == 1 { f = $2 }
        $1 != "#" && $1 > n - 10 { s += $2; k++ }
        END { printf "%s %.4f\n", f, s / k }' "$tmp/w4.log")"
    if awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < 0.6 * f) }'; then
        ok "the loss falls: step 1 $first, mean of the last 10 steps $last"
    else
        bad "the loss falls: step 1 $first, mean of the last 10 steps $last (want < 0.6 x step 1)"
    fi
    line="^\[0\] step $steps/$steps | loss .* | lr .* | .* ms/step | .*k tok/s"
    if grep -q "$line" "$tmp/w4.out"; then
        ok "rank 0 prints the progress line"
    else
        bad "rank 0 prints the progress line" "$(cat "$tmp/w4.out")"
    fi
else
    skipped "the loss falls" "the world 4 run failed"
fi

# ---------------------------------------------------------------- checkpoints
# kill_after NAME N CKPT STEP [FLAGS...]: trains at world N with checkpoints
# every STEP steps under CKPT (and FLAGS) and, once step STEP's checkpoint is
# committed, kills one rank with SIGKILL (a crash: no rank can save after
# it).  0 when the run failed after that.
kill_after() {
    local name=$1 n=$2 ck=$3 at=$4 pid i
    shift 4
    "$accelrun" launch -n "$n" --config "$cfg" -- "$train" --steps "$steps" \
        --loss-log "$tmp/$name.log" --ckpt-dir "$ck" --save-every "$at" "$@" \
        >"$tmp/$name.out" 2>&1 &
    pid=$!
    for i in $(seq 1 3000); do
        grep -q "checkpoint $ck/step-$(printf %08d "$at") committed" "$tmp/$name.out" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$(pgrep -P "$pid" | head -n 1)" 2>/dev/null
    wait "$pid"
    local rc=$?
    if [ "$rc" -eq 0 ]; then
        bad "$name: a rank was killed after step $at's checkpoint (the run finished: exit 0)" \
            "$(cat "$tmp/$name.out")"
        return 1
    fi
    ok "$name: a rank killed with SIGKILL after step $at's checkpoint; the launcher exits $rc"
}

# stop_at NAME N CKPT: trains at world N with --ckpt-dir CKPT and sends the
# launcher SIGTERM (which it forwards) once step 5 is done: the ranks agree
# on the stop, save where they are and exit 128 + 15.  Prints the step saved.
stop_at() {
    local name=$1 n=$2 ck=$3 pid i
    "$accelrun" launch -n "$n" --config "$cfg" -- "$train" --steps "$steps" --print-every 1 \
        --loss-log "$tmp/$name.log" --ckpt-dir "$ck" >"$tmp/$name.out" 2>&1 &
    pid=$!
    for i in $(seq 1 3000); do
        grep -q "^\[0\] step 5/" "$tmp/$name.out" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    sed -n 's/^\[0\] train_gpt: stopped after step \([0-9]*\)\/.*/\1/p' "$tmp/$name.out"
}

half=$((steps / 2))
if [ -s "$tmp/w4.log" ] && kill_after killed 4 "$tmp/ck" "$half"; then
    latest=$(cat "$tmp/ck/latest" 2>/dev/null)
    if [ "$latest" = "step-$(printf %08d "$half")" ]; then
        ok "after the kill, latest names step $half's checkpoint"
    else
        bad "after the kill, latest names step $half's checkpoint (it says '$latest')"
    fi
    cp -r "$tmp/ck" "$tmp/ck2"
    cp -r "$tmp/ck" "$tmp/ck1"
    tail -n +$((half + 1)) "$tmp/w4.log" >"$tmp/w4.tail"
    if run resumed4 4 "$cfg" --ckpt-dir "$tmp/ck"; then
        if grep -q "resumed from $tmp/ck/step-$(printf %08d "$half") (saved by 4 ranks)" \
            "$tmp/resumed4.out" && cmp -s "$tmp/w4.tail" "$tmp/resumed4.log"; then
            ok "resumed at world 4 from step $half: bit-identical to the uninterrupted run (steps $((half + 1))..$steps and validation)"
        else
            bad "resumed at world 4 from step $half: bit-identical to the uninterrupted run" \
                "$(diff "$tmp/w4.tail" "$tmp/resumed4.log" | head; grep resumed "$tmp/resumed4.out")"
        fi
    fi
    for n in 2 1; do
        run "resumed$n" "$n" "$cfg" --ckpt-dir "$tmp/ck$n" || continue
        if ! grep -q "resumed from $tmp/ck$n/step-$(printf %08d "$half") (saved by 4 ranks)" \
            "$tmp/resumed$n.out"; then
            bad "resumed at world $n from world 4's step $half" "$(cat "$tmp/resumed$n.out")"
            continue
        fi
        read -r max at final val <<<"$(compare "$tmp/w4.tail" "$tmp/resumed$n.log")"
        echo "# resumed at world $n vs the world-4 run: max relative difference $max" \
            "(step $at), final step $final, validation $val"
        within "resumed at world $n from world 4's step $half: every step within $FP32_STEP_TOL ($max)" \
            "$max" $FP32_STEP_TOL
        within "resumed at world $n: final step and validation within $FP32_FINAL_TOL ($final, $val)" \
            "$(awk -v a="$final" -v b="$val" 'BEGIN { print (a > b ? a : b) }')" $FP32_FINAL_TOL
    done
    # resumed where it ends (ck2's world-2 run saved its last step): nothing
    # to train, said so, no NaN losses
    cp -r "$tmp/ck2" "$tmp/ckend"
    if out=$("$accelrun" launch -n 2 --config "$cfg" -- "$train" --steps "$steps" \
        --ckpt-dir "$tmp/ckend" 2>&1) &&
        printf '%s' "$out" | grep -q "that is step $steps of $steps, nothing left to train" &&
        printf '%s' "$out" | grep -q "train_gpt: 0 steps: val loss [0-9.]* at step $steps" &&
        ! printf '%s' "$out" | grep -qi "nan\|$((steps + 1))\.\.$steps"; then
        ok "resumed at its final step: nothing left to train, said so (no NaN, no 'steps $((steps + 1))..$steps')"
    else
        bad "resumed at its final step: nothing left to train, said so" "$out"
    fi
    cp -r "$tmp/ck2" "$tmp/ckseed"
    if out=$("$accelrun" launch -n 2 --config "$cfg" -- "$train" --steps "$steps" --seed 7 \
        --ckpt-dir "$tmp/ckseed" 2>&1); then
        bad "resuming with another --seed is refused (it exited 0)" "$out"
    elif printf '%s' "$out" | grep -q "was made with gpt.seed = 1337; this run has 7"; then
        ok "resuming with another --seed is refused, naming the flag"
    else
        bad "resuming with another --seed is refused, naming the flag" "$out"
    fi
else
    skipped "kill and resume" "the world 4 run or the killed run failed"
fi

# asynchronous saves through a node-local tier: training is not changed by
# them; a crash after one's commit resumes bit-identically; and when the
# root lost that commit (its manifest and copies), the local copies commit
# it again at the restart
if [ -s "$tmp/w4.log" ]; then
    tail -n +$((half + 1)) "$tmp/w4.log" >"$tmp/w4.tailh"
    tier=(--async-save --ckpt-local "$tmp/local")
    if run async4 4 "$cfg" --ckpt-dir "$tmp/cka" --save-every "$half" "${tier[@]}"; then
        n=$(grep -c "checkpoint $tmp/cka/step-[0-9]* committed" "$tmp/async4.out")
        if cmp -s "$tmp/w4.log" "$tmp/async4.log" && [ "$n" -eq 2 ] &&
            grep -q "started: training waited" "$tmp/async4.out"; then
            ok "--async-save --ckpt-local at world 4: 2 checkpoints committed in the background, the loss log bit-identical to the run without"
        else
            bad "--async-save --ckpt-local at world 4: 2 checkpoints committed, the loss log bit-identical" \
                "$n committed; $(diff "$tmp/w4.log" "$tmp/async4.log" | head -5)"
        fi
    fi
    if kill_after killeda 4 "$tmp/ckb" "$half" --async-save --ckpt-local "$tmp/localb"; then
        if run resumeda 4 "$cfg" --ckpt-dir "$tmp/ckb" --async-save --ckpt-local "$tmp/localb" &&
            grep -q "resumed from $tmp/ckb/step-$(printf %08d "$half")" "$tmp/resumeda.out" &&
            cmp -s "$tmp/w4.tailh" "$tmp/resumeda.log"; then
            ok "async: killed after step $half's commit, resumed at world 4: bit-identical"
        else
            bad "async: killed after step $half's commit, resumed at world 4: bit-identical" \
                "$(grep -i "resumed\|error" "$tmp/resumeda.out"; diff "$tmp/w4.tailh" "$tmp/resumeda.log" | head -5)"
        fi
    fi
    if kill_after killedl 4 "$tmp/ckl" "$half" --async-save --ckpt-local "$tmp/locall"; then
        step_dir=$tmp/ckl/step-$(printf %08d "$half")
        rm -f "$step_dir/manifest.json" "$step_dir"/rank-0000[13]-of-00004.safetensors
        if run resumedl 4 "$cfg" --ckpt-dir "$tmp/ckl" --async-save --ckpt-local "$tmp/locall" &&
            grep -q "resumed from $tmp/ckl/step-$(printf %08d "$half")" "$tmp/resumedl.out" &&
            cmp -s "$tmp/w4.tailh" "$tmp/resumedl.log"; then
            ok "async: the root's commit of step $half lost: committed again from the local copies at the restart, resumed bit-identically"
        else
            bad "async: the root's commit of step $half lost: committed again from the local copies" \
                "$(grep -i "resumed\|error\|checkpoint" "$tmp/resumedl.out" | head; diff "$tmp/w4.tailh" "$tmp/resumedl.log" | head -5)"
        fi
    fi
else
    skipped "async saves" "the world 4 run failed"
fi

if [ -s "$tmp/w4.log" ]; then
    at=$(stop_at stopped 4 "$tmp/cks")
    if [ -n "$at" ] && [ "$at" -lt "$steps" ] &&
        [ "$(cat "$tmp/cks/latest" 2>/dev/null)" = "step-$(printf %08d "$at")" ] &&
        [ "$(grep -c "exited 143\|Terminated" "$tmp/stopped.out")" -ge 1 ]; then
        ok "SIGTERM to the launcher: the 4 ranks agreed, saved step $at and stopped"
        tail -n +$((at + 1)) "$tmp/w4.log" >"$tmp/w4.tail2"
        if run resumed_stop 2 "$cfg" --ckpt-dir "$tmp/cks"; then
            read -r max at2 final val <<<"$(compare "$tmp/w4.tail2" "$tmp/resumed_stop.log")"
            within "resumed at world 2 from the stop at step $at: every step within $FP32_STEP_TOL ($max)" \
                "$max" $FP32_STEP_TOL
        fi
    else
        bad "SIGTERM to the launcher: the 4 ranks agreed, saved the step they were at and stopped" \
            "$(tail -n 5 "$tmp/stopped.out"; cat "$tmp/cks/latest" 2>&1)"
    fi
else
    skipped "stop on SIGTERM" "the world 4 run failed"
fi

finish
