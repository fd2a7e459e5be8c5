#!/usr/bin/env bash
# send_lat 64 B through the shared-memory verbs, two builds side by side: the arrangement
# of scripts/bench-perf.sh (one iwarpd, config/examples/perf-loopback.toml, two memif
# ports wired inside the process, one dataplane core on CPU $DP_CPU; iwarp-perf
# --loopback on CPU $APP_CPU driving both ends), without the kernel peers. Builds run
# alternately (A B A B ...) so that both see the same load on a shared machine.
#
#   scripts/bench-sendlat.sh DIR_A DIR_B        # DIR_x holds iwarpd and iwarp-perf
#   SENDLAT_RUNS=5 SENDLAT_ITERS=200000 scripts/bench-sendlat.sh /tmp/base target/release
#
# Prints one line per run (median / average / p99 half round trip in us) and the medians
# over the runs of each build. Needs root (DPDK).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 DIR_A [DIR_B ...]"; exit 2; }
runs=${SENDLAT_RUNS:-3}
iters=${SENDLAT_ITERS:-100000}
size=${SENDLAT_SIZE:-64}
ncpu=$(nproc)
DP_CPU=${DP_CPU:-$(( ncpu > 1 ? 1 : 0 ))}; APP_CPU=${APP_CPU:-0}
source scripts/bench-lib.sh
tmp=$(mktemp -d /tmp/iwarp-sendlat.XXXXXX)
pid=
cleanup() {
  if [ -n "$pid" ]; then
    kill -INT "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    pid=
  fi
}
trap 'cleanup; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT

one() { # dir tag run
  local dir=$1 tag=$2 r=$3
  local name=sendlat-$$-$tag-$r sock=/run/iwarpd/sendlat-$$-$tag-$r.memif
  local sets; mapfile -t sets < <(bench_loopback_sets "$sock") && [ ${#sets[@]} -eq 4 ] || exit 1
  # Builds older than f8d9d1d do not add the EAL flag a zero-copy memif port needs.
  "$dir/iwarpd" --config "$bench_loopback_config" --name "$name" --core "$DP_CPU" "${sets[@]}" \
    --set 'eal.extra_args=["--single-file-segments"]' \
    > "$tmp/iwarpd.$tag.$r.out" 2> "$tmp/iwarpd.$tag.$r.err" &
  pid=$!
  local ok=0
  for _ in $(seq 100); do
    [ -S "/run/iwarpd/$name.verbs" ] && { ok=1; break; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [ $ok -eq 1 ] || { tail -20 "$tmp/iwarpd.$tag.$r.err"; echo "bench-sendlat: iwarpd gave no verbs socket"; exit 1; }
  sleep 1 # memif link up
  local out=$tmp/lat.$tag.$r
  timeout 300 taskset -c "$APP_CPU" "$dir/iwarp-perf" send_lat --loopback --daemon "$name" \
    --json "$out.json" -s "$size" -n "$iters" > "$out.txt" 2> "$out.err" \
    || { echo "bench-sendlat: iwarp-perf failed:"; tail -20 "$out.err"; exit 1; }
  cleanup
  local med avg p99
  med=$(bench_json_num median_us "$out.json"); avg=$(bench_json_num avg_us "$out.json"); p99=$(bench_json_num p99_us "$out.json")
  echo "$med" >> "$tmp/med.$tag"; echo "$avg" >> "$tmp/avg.$tag"; echo "$p99" >> "$tmp/p99.$tag"
  printf '%s run %d: median %s us, average %s us, p99 %s us (load %s)\n' "$tag" "$r" "$med" "$avg" "$p99" "$(cut -d' ' -f1 /proc/loadavg)"
}

for r in $(seq "$runs"); do
  i=0
  for dir in "$@"; do
    one "$dir" "$(basename "$(dirname "$dir/x")")$i" "$r"
    i=$((i + 1))
  done
done
i=0
for dir in "$@"; do
  tag="$(basename "$(dirname "$dir/x")")$i"
  printf '%s (%s): send_lat %s B x %s, medians of %s runs: median %s us, average %s us, p99 %s us; per run medians: %s\n' \
    "$tag" "$dir" "$size" "$iters" "$runs" "$(bench_median < "$tmp/med.$tag")" "$(bench_median < "$tmp/avg.$tag")" \
    "$(bench_median < "$tmp/p99.$tag")" "$(paste -sd' ' "$tmp/med.$tag")"
  i=$((i + 1))
done
