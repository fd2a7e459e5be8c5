#!/usr/bin/env bash
# Runs the cargo-fuzz targets of dataplane/fuzz (bodies in dataplane/fuzz-targets) on the
# stable toolchain, each for FUZZ_SECONDS (default 600), and prints the executions per target.
#
#   scripts/fuzz.sh                       # every target
#   scripts/fuzz.sh wire_parsers rdma_rx  # only these
#
# Environment:
#   FUZZ_SECONDS     seconds per target (default 600)
#   FUZZ_JOBS        parallel libFuzzer workers per target (default 1)
#   FUZZ_MERGE=1     after each run, merge the inputs that add coverage into the checked-in
#                    corpus dataplane/fuzz/corpus/<target>/ (default: keep them in a scratch dir)
#   FUZZ_SANITIZER   none (default) or address/... (then RUSTC_BOOTSTRAP=1 is set, since the
#                    sanitizers need -Z flags; every crate forbids unsafe code, so `none` loses
#                    little: panics, overflow checks and debug assertions still fire)
#   FUZZ_TARGET_DIR  cargo target dir (default target-fuzz)
#
# Crashes are written to dataplane/fuzz/artifacts/<target>/; replay one with
#   cargo fuzz run --fuzz-dir dataplane/fuzz --sanitizer none -O -a <target> <file>
# and, once fixed, copy it into dataplane/fuzz/corpus/<target>/ so `cargo test` replays it.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-600}
FUZZ_JOBS=${FUZZ_JOBS:-1}
FUZZ_SANITIZER=${FUZZ_SANITIZER:-none}
FUZZ_DIR=dataplane/fuzz
export CARGO_TARGET_DIR=${FUZZ_TARGET_DIR:-$PWD/target-fuzz}

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi
if [ "$FUZZ_SANITIZER" != none ]; then
    export RUSTC_BOOTSTRAP=1
fi
flags=(--fuzz-dir "$FUZZ_DIR" --sanitizer "$FUZZ_SANITIZER" -O -a)

if [ $# -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list --fuzz-dir "$FUZZ_DIR")
fi

echo "fuzz: building ${targets[*]}"
for t in "${targets[@]}"; do
    cargo fuzz build "${flags[@]}" "$t"
done

logs=$(mktemp -d)
declare -A runs result
status=0
for t in "${targets[@]}"; do
    corpus="$FUZZ_DIR/corpus/$t"
    scratch="$logs/corpus-$t"
    mkdir -p "$corpus" "$scratch" "$FUZZ_DIR/artifacts/$t"
    echo "fuzz: $t for ${FUZZ_SECONDS}s (corpus $corpus, $(ls "$corpus" | wc -l) files)"
    jobs=()
    if [ "$FUZZ_JOBS" -gt 1 ]; then
        # libFuzzer workers write fuzz-<n>.log in the working directory (removed below).
        jobs=(-jobs="$FUZZ_JOBS" -workers="$FUZZ_JOBS")
    fi
    set +e
    # New inputs go to the scratch dir (first directory); the checked-in corpus seeds the run.
    cargo fuzz run "${flags[@]}" "$t" "$scratch" "$corpus" -- \
        -max_total_time="$FUZZ_SECONDS" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$FUZZ_DIR/artifacts/$t/" "${jobs[@]}" \
        >"$logs/$t.log" 2>&1
    rc=$?
    # Executions: the final stats of every worker (the run's own log with one job).
    n=$(cat "$logs/$t.log" fuzz-*.log 2>/dev/null \
        | grep -o 'stat::number_of_executed_units: *[0-9]*' | awk '{s += $2} END {print s + 0}')
    if [ "$n" = 0 ]; then
        n=$(grep -o 'Done [0-9]* runs' "$logs/$t.log" | awk '{s += $2} END {print s + 0}')
    fi
    cat fuzz-*.log >>"$logs/$t.log" 2>/dev/null || true
    rm -f fuzz-*.log
    set -e
    runs[$t]=$n
    if [ $rc -eq 0 ]; then
        result[$t]=ok
    else
        result[$t]="FAILED (rc $rc)"
        status=1
        tail -40 "$logs/$t.log"
        ls -1 "$FUZZ_DIR/artifacts/$t" || true
    fi
    if [ "${FUZZ_MERGE:-0}" = 1 ] && [ $rc -eq 0 ]; then
        cargo fuzz run "${flags[@]}" "$t" "$corpus" "$scratch" -- -merge=1 \
            -artifact_prefix="$FUZZ_DIR/artifacts/$t/" >"$logs/$t.merge.log" 2>&1 || true
        echo "fuzz: merged into $corpus ($(ls "$corpus" | wc -l) files)"
    fi
    echo "fuzz: $t: ${runs[$t]} executions, ${result[$t]}"
done

echo
printf '%-16s %14s  %s\n' target executions result
for t in "${targets[@]}"; do
    printf '%-16s %14s  %s\n' "$t" "${runs[$t]}" "${result[$t]}"
done
echo "logs: $logs"
exit $status
