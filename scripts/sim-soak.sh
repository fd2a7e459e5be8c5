#!/usr/bin/env bash
# A long randomized-simulation campaign: RUNS fresh seeds (default 100000) of
# tests/sim/tests/random.rs, release build, in batches so that progress shows as it goes.
# Failed runs do not stop the campaign: each prints its seed (replay one with
# `IWARP_SEED=0x... cargo test -p iwarp-sim --test random --release`).
#
#   scripts/sim-soak.sh            # 100,000 runs
#   scripts/sim-soak.sh 20000      # 20,000 runs
#
# Environment:
#   SIM_SOAK_BATCH   runs per batch (default 10000)
#
# Ends with the line `N passed, N failed`; exits 1 if any run failed.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${1:-100000}
BATCH=${SIM_SOAK_BATCH:-10000}
case "$RUNS$BATCH" in
*[!0-9]*) echo "usage: $0 [RUNS] (a number; SIM_SOAK_BATCH a number too)" >&2; exit 2 ;;
esac
if [ "$BATCH" -eq 0 ]; then
    echo "SIM_SOAK_BATCH must be above 0" >&2
    exit 2
fi

echo "sim-soak: building (release)"
cargo test -p iwarp-sim --test random --release --no-run >/dev/null 2>&1 ||
    cargo test -p iwarp-sim --test random --release --no-run

log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
done_runs=0
passed=0
failed=0
while [ "$done_runs" -lt "$RUNS" ]; do
    n=$((RUNS - done_runs))
    [ "$n" -gt "$BATCH" ] && n=$BATCH
    # The test's shards fail when a run failed; the counts come from their summaries.
    IWARP_SIM_RUNS=$n IWARP_SIM_KEEP_GOING=1 \
        cargo test -p iwarp-sim --test random --release -- --nocapture >"$log" 2>&1 || true
    grep -E '^run [0-9]+ failed|^replay with IWARP_SEED' "$log" || true
    shards=$(grep -cE '^shard [0-9]+: [0-9]+ runs, [0-9]+ failed$' "$log" || true)
    if [ "$shards" -ne 4 ]; then
        echo "sim-soak: the test did not finish its shards; its output:" >&2
        tail -n 40 "$log" >&2
        exit 1
    fi
    b_runs=$(awk '/^shard [0-9]+: [0-9]+ runs, [0-9]+ failed$/ {s += $3} END {print s + 0}' "$log")
    b_failed=$(awk '/^shard [0-9]+: [0-9]+ runs, [0-9]+ failed$/ {s += $5} END {print s + 0}' "$log")
    if [ "$b_runs" -ne "$n" ]; then
        echo "sim-soak: a batch of $n ran $b_runs runs" >&2
        exit 1
    fi
    done_runs=$((done_runs + n))
    failed=$((failed + b_failed))
    passed=$((passed + b_runs - b_failed))
    now=$(date +%s)
    echo "sim-soak: $done_runs/$RUNS runs, $failed failed, $((now - start)) s"
done
end=$(date +%s)
echo "sim-soak: $RUNS runs in $((end - start)) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
