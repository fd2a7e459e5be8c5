#!/usr/bin/env bash
# Floods (issue 15 item 2): the soak of scripts/soak.sh without a flood, then with each
# flood of scripts/flood-frames.py into daemon A's port (syn, junk, guess), same seed and
# length; per flood: the frames per second the flood sent, the verified goodput kept
# against the run without (target >= 0.5), and the soak's own checks (no run failed or
# stuck, 0 bytes wrong, nothing left, counters consistent, A's drops by reason).
#
#   sudo scripts/flood.sh [--minutes M] [--workers K] [--generator testpmd|python]
#                         [--kinds none,syn,junk,guess]
#        (defaults: 2 minutes, 2 workers, testpmd: dpdk-testpmd replays the syn and junk
#        floods at the fastest rate it reaches; guess is always flood-frames.py, whose
#        frames follow the live connections; every kind, `none` first: the goodput of
#        the others is set against it)
#
# Ends with "flood: N passed, N failed" (a soak run that failed its checks is a failure;
# the goodput ratios are figures). Logs of each run are kept (paths printed).
set -uo pipefail
cd "$(dirname "$0")/.."
minutes=2 workers=2 generator=testpmd kinds=none,syn,junk,guess
while [ $# -gt 0 ]; do
    case $1 in
        --minutes) minutes=${2:?}; shift 2 ;;
        --workers) workers=${2:?}; shift 2 ;;
        --generator) generator=${2:?}; shift 2 ;;
        --kinds) kinds=${2:?}; shift 2 ;;
        *) echo "flood: unknown argument $1" >&2; exit 2 ;;
    esac
done
seed=$RANDOM$RANDOM
tmp=$(mktemp -d /tmp/iwarp-flood.XXXXXX)
passed=0 failed=0
for kind in ${kinds//,/ }; do
    case $kind in none|syn|junk|guess) ;; *) echo "flood: unknown kind $kind (none, syn, junk, guess)" >&2; exit 2 ;; esac
done
for kind in ${kinds//,/ }; do
    args=(--minutes "$minutes" --workers "$workers" --seed "$seed" --keep)
    [ "$kind" = none ] || args+=(--flood "$kind")
    case $kind in syn|junk) args+=(--flood-generator "$generator") ;; esac
    echo "== flood: $kind"
    if bash scripts/soak.sh "${args[@]}" > "$tmp/$kind.txt" 2>&1; then
        passed=$((passed + 1)); res=ok
    else
        failed=$((failed + 1)); res=FAILED
        grep -E '^FAIL' "$tmp/$kind.txt" | sed 's/^/    /'
    fi
    rate=$(grep -oE 'after the warm-up.*: [0-9.]+ MiB/s verified' "$tmp/$kind.txt" | grep -oE '[0-9.]+ MiB/s' | grep -oE '[0-9.]+')
    echo "${rate:-0}" > "$tmp/$kind.rate"
    sent=$(grep -oE 'flood-frames: .*per second\)' "$tmp/$kind.txt" | tail -1)
    drops=$(grep -oE "A's drops by reason: .*" "$tmp/$kind.txt")
    echo "flood: $kind: soak $res; ${rate:-0} MiB/s verified after the warm-up${sent:+; $sent}${drops:+; $drops}; $(grep -oE 'logs in .*' "$tmp/$kind.txt" | tail -1)"
done
base=$(cat "$tmp/none.rate" 2>/dev/null || echo 0)
for kind in ${kinds//,/ }; do
    [ "$kind" = none ] && continue
    [ "$base" = 0 ] && { echo "flood: no goodput kept under $kind: no run without a flood (--kinds none,...)"; continue; }
    awk -v k="$kind" -v a="$base" -v b="$(cat "$tmp/$kind.rate")" \
        'BEGIN {printf "flood: goodput kept under the %s flood: %.2f (%s of %s MiB/s; target >= 0.5)\n", k, (a > 0 ? b / a : 0), b, a}'
done
echo "flood: outputs in $tmp"
echo "flood: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
