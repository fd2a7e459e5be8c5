#!/usr/bin/env bash
# Unmodified perftest through the drop-in libraries beside iwarp-perf, same arrangement,
# same run (issue 12): two iwarpd joined by memif (one dataplane core each, as
# scripts/demo-dropin.sh), the server of each pair on daemon A, the client on daemon B.
#
#   write_bw: `ib_write_bw -R -s 65536` (5000 iterations, tx depth 128) against
#             `iwarp-perf write_bw -s 64K` (5000 iterations, depth 128)
#   send_lat: `ib_send_lat -R -s 64` (1000 iterations; t_typical, half a round trip) against
#             `iwarp-perf send_lat -s 64` (1000 iterations; median, half a round trip)
#
#   scripts/bench-dropin.sh              # builds release, prints the ratios
#   scripts/bench-dropin.sh --record     # also appends a dated block to docs/BENCHMARKS.md
#   BENCH_RUNS=5 scripts/bench-dropin.sh
#
# Target: the drop-in figures within 10% of iwarp-perf's. On a 2-CPU machine both
# daemons' cores and both programs share the CPUs (four busy pollers for the latency
# test): the figures compare the two paths, they are not the machine's best.
# Needs root (DPDK) and perftest (scripts/setup.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
record=0
[ "${1:-}" = "--record" ] && record=1
runs=${BENCH_RUNS:-3}
cargo build --release -q -p iwarpd -p iwarp-ibverbs -p iwarp-rdmacm -p iwarp-perf
IWARPD=target/release/iwarpd
PERF=target/release/iwarp-perf
PROFILE_DIR=target/release TAG=bdropin
# shellcheck source=scripts/dropin-pair.sh
. scripts/dropin-pair.sh
sleep 1 # memif link up
json_num() { grep -oE "\"$1\": *[0-9.e+-]+" "$2" | head -1 | grep -oE '[0-9.e+-]+$'; }
median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
port=19000

# perf TEST OUT SIZE: iwarp-perf server on A, client on B; the client's JSON in OUT.
perf() {
  local t=$1 out=$2 size=$3
  port=$((port + 1))
  timeout 120 "$PERF" "$t" --server --daemon "$a" -p "$port" -s "$size" > "$out.srv" 2>&1 &
  local srv=$!
  local ok=0
  for _ in $(seq 20); do
    sleep 0.5
    if timeout 120 "$PERF" "$t" --connect 198.18.0.1 --daemon "$b" -p "$port" -s "$size" \
      --json "$out.json" > "$out.txt" 2>&1; then ok=1; break; fi
    grep -qiE 'refused|reject' "$out.txt" || break
  done
  wait "$srv" || true
  [ $ok -eq 1 ] || { cat "$out.txt" "$out.srv"; echo "bench-dropin: iwarp-perf $t failed"; exit 1; }
}

# ptest TOOL OUT ARGS...: perftest's TOOL -R, server on A, client on B (drop-in); the
# client's result line in OUT (retried when it lost perftest's start-up race).
ptest() {
  local tool=$1 out=$2; shift 2
  local try
  for try in 1 2 3; do
    port=$((port + 1))
    IWARP_VERBS_DIR=$tmp/a timeout 120 scripts/iwarp-run "$tool" -R "$@" -p "$port" \
      > "$out.srv" 2>&1 &
    local srv=$! crc=0
    for _ in $(seq 20); do
      sleep 0.5
      crc=0
      IWARP_VERBS_DIR=$tmp/b timeout 120 scripts/iwarp-run "$tool" -R "$@" -p "$port" 198.18.0.1 \
        > "$out.txt" 2>&1 || crc=$?
      [ "$crc" -ne 0 ] && grep -q REJECTED "$out.txt" || break
    done
    wait "$srv" || true
    [ "$crc" -eq 0 ] && grep -qE '^ +[0-9]+ +[0-9]+ +[0-9]' "$out.txt" && return 0
  done
  cat "$out.txt" "$out.srv"; echo "bench-dropin: $tool failed 3 times"; exit 1
}

for r in $(seq "$runs"); do
  echo "run $r/$runs"
  perf write_bw "$tmp/pbw.$r" 64K
  json_num gbit_per_s "$tmp/pbw.$r.json" >> "$tmp/perf_bw"
  ptest ib_write_bw "$tmp/ibw.$r" -s 65536
  # ib_write_bw: "#bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]"
  # with MB = 2^20 bytes.
  grep -E '^ +65536 +[0-9]+ +[0-9]' "$tmp/ibw.$r.txt" | tail -1 \
    | awk '{printf "%.3f\n", $4 * 1048576 * 8 / 1e9}' >> "$tmp/ib_bw"
  perf send_lat "$tmp/plat.$r" 64
  json_num median_us "$tmp/plat.$r.json" >> "$tmp/perf_lat"
  ptest ib_send_lat "$tmp/ilat.$r" -s 64
  # ib_send_lat: "#bytes #iterations t_min t_max t_typical t_avg ..." (usec).
  grep -E '^ +64 +[0-9]+ +[0-9]' "$tmp/ilat.$r.txt" | tail -1 | awk '{print $5}' >> "$tmp/ib_lat"
  echo "  iwarp-perf $(tail -1 "$tmp/perf_bw") Gbit/s, $(tail -1 "$tmp/perf_lat") us;" \
    "perftest $(tail -1 "$tmp/ib_bw") Gbit/s, $(tail -1 "$tmp/ib_lat") us"
done
pbw=$(median < "$tmp/perf_bw"); ibw=$(median < "$tmp/ib_bw")
plat=$(median < "$tmp/perf_lat"); ilat=$(median < "$tmp/ib_lat")
all() { paste -sd' ' "$tmp/$1"; }
bw_ratio=$(awk -v i="$ibw" -v p="$pbw" 'BEGIN {printf "%.2f", (p > 0) ? i / p : 0}')
lat_ratio=$(awk -v i="$ilat" -v p="$plat" 'BEGIN {printf "%.2f", (p > 0) ? i / p : 0}')
met_bw=$(awk -v r="$bw_ratio" 'BEGIN {print (r >= 0.9) ? "met" : "missed"}')
met_lat=$(awk -v r="$lat_ratio" 'BEGIN {print (r > 0 && r <= 1.1) ? "met" : "missed"}')
block=$(cat <<EOB

Run of $(date -u +%Y-%m-%d) ($ncpu CPUs, load $(cut -d' ' -f1 /proc/loadavg), commit $(git rev-parse --short HEAD)): \`BENCH_RUNS=$runs scripts/bench-dropin.sh --record\`
(medians of $runs runs; per run: iwarp-perf $(all perf_bw) Gbit/s and $(all perf_lat) us, perftest $(all ib_bw) Gbit/s and $(all ib_lat) us)

| benchmark | unmodified perftest through the drop-in libraries | iwarp-perf, same daemons, same run | ratio / target |
|---|---|---|---|
| write 64 KiB, depth 128, 5000 iterations | ib_write_bw -R -s 65536: $ibw Gbit/s | write_bw -s 64K: $(printf '%.3f' "$pbw") Gbit/s | $bw_ratio x (target >= 0.9: $met_bw) |
| send 64 B latency, half round trip | ib_send_lat -R -s 64 (t_typical): $ilat us | send_lat -s 64 (median): $(printf '%.2f' "$plat") us | $lat_ratio x (target <= 1.1: $met_lat) |
EOB
)
echo "$block"
if [ "$record" -eq 1 ]; then
  grep -q '^## Drop-in libraries' docs/BENCHMARKS.md || printf '\n## Drop-in libraries\n\nTwo iwarpd over memif, one dataplane core each; the server of each pair on daemon A, the client on daemon B (`scripts/bench-dropin.sh`).\n' >> docs/BENCHMARKS.md
  echo "$block" >> docs/BENCHMARKS.md
  echo "bench-dropin: appended to docs/BENCHMARKS.md"
fi
