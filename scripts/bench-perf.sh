#!/usr/bin/env bash
# Applications over shared-memory verbs beside kernel TCP, in the same run: iwarp-perf (a
# perftest-like client of the iwarp-verbs library) through iwarpd, and sockperf (TCP
# ping-pong) and iperf3 (64 KiB writes) over loopback.
#
#   scripts/bench-perf.sh              # builds release (fat LTO: several minutes), prints ratios
#   scripts/bench-perf.sh --record     # also appends a dated block to docs/BENCHMARKS.md
#   PERF_RUNS=5 PERF_SECONDS=10 PERF_LAT_ITERS=100000 scripts/bench-perf.sh
#   PERF_QPS=4 PERF_DEPTH=32 PERF_SET='mpa.crc="off"' scripts/bench-perf.sh
#
# Arrangement (at most two busy pollers, one per CPU; see docs/BENCHMARKS.md):
# - ONE iwarpd (config/examples/perf-loopback.toml) with two memif ports wired to each
#   other inside the process, served by one dataplane core pinned to CPU $DP_CPU.
# - iwarp-perf --loopback pinned to CPU $APP_CPU drives both ends from one thread: the
#   server end listens on the daemon and is reached at port 1's address, the client's QPs
#   leave through port 0. A send_lat round trip is client -> port 0 -> memif -> port 1 ->
#   server end (stepped by the same thread) -> back.
# - The kernel peers run while iwarpd is stopped, pinned the same way: sockperf server and
#   iperf3 server on CPU $DP_CPU, their clients on CPU $APP_CPU.
# Each run measures all four; the figures are medians over PERF_RUNS runs.
# Targets: send_lat 64 B median half round trip not slower than sockperf's; write_bw 64 KiB
# at least 2x iperf3. Needs root (DPDK, sockperf install). Everything stays on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
record=0
[ "${1:-}" = "--record" ] && record=1
runs=${PERF_RUNS:-3}
secs=${PERF_SECONDS:-5}
lat_iters=${PERF_LAT_ITERS:-100000}
depth=${PERF_DEPTH:-16}; qps=${PERF_QPS:-1}
ncpu=$(nproc)
DP_CPU=${DP_CPU:-$(( ncpu > 1 ? 1 : 0 ))}; APP_CPU=${APP_CPU:-0}
config=config/examples/perf-loopback.toml
# PERF_SET="key=value key=value": more iwarpd settings (e.g. mpa.crc=\"off\").
extra_sets=()
for kv in ${PERF_SET:-}; do extra_sets+=(--set "$kv"); done
if [ -z "${IWARPD:-}" ] || [ -z "${IWARP_PERF:-}" ]; then
  cargo build --release -q -p iwarpd -p iwarp-perf
  IWARPD=target/release/iwarpd; IWARP_PERF=target/release/iwarp-perf
fi
command -v iperf3 >/dev/null || { echo "bench-perf: iperf3 missing (scripts/setup.sh installs it)"; exit 1; }
if ! command -v sockperf >/dev/null; then
  echo "bench-perf: installing sockperf"
  apt-get install -y -q sockperf >/dev/null || { echo "bench-perf: sockperf missing and not installable"; exit 1; }
fi
id=$$
tmp=$(mktemp -d /tmp/iwarp-perf-bench.XXXXXX)
name=perf-loop-$id
sock=/run/iwarpd/perf-loop-$id.memif
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  done
  pids=()
}
trap 'cleanup; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
json_num() { grep -oE "\"$1\": *[0-9.e+-]+" "$2" | head -1 | grep -oE '[0-9.e+-]+$'; }
median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

kernel_run() { # run index
  local r=$1
  taskset -c "$DP_CPU" sockperf server --tcp -i 127.0.0.1 -p 11211 > "$tmp/sockperf-server.$r.txt" 2>&1 & pids+=($!)
  sleep 0.5
  taskset -c "$APP_CPU" sockperf ping-pong --tcp -i 127.0.0.1 -p 11211 -m 64 -t "$secs" > "$tmp/sockperf.$r.txt" 2>&1
  # sockperf reports half round trips in usec: "---> percentile 50.000 =   12.345".
  grep -E 'percentile 50\.000' "$tmp/sockperf.$r.txt" | grep -oE '[0-9.]+$' | tail -1 >> "$tmp/sp_med"
  grep -E 'percentile 99\.000' "$tmp/sockperf.$r.txt" | grep -oE '[0-9.]+$' | tail -1 >> "$tmp/sp_p99"
  taskset -c "$DP_CPU" iperf3 -s -p 5298 > /dev/null 2>&1 & pids+=($!)
  sleep 0.5
  taskset -c "$APP_CPU" iperf3 -c 127.0.0.1 -p 5298 -t "$secs" -l 64K -J > "$tmp/iperf3.$r.json"
  grep -oE '"bits_per_second":[[:space:]]*[0-9.e+]+' "$tmp/iperf3.$r.json" | tail -1 | grep -oE '[0-9.e+]+$' \
    | awk '{printf "%.3f\n", $1 / 1e9}' >> "$tmp/ip_gbps"
  cleanup
}

iwarp_run() { # run index
  local r=$1
  "$IWARPD" --config "$config" --name "$name" --core "$DP_CPU" \
    --set "port.0.device=net_memif0,role=server,socket=$sock,bsize=10240" \
    --set "port.1.device=net_memif1,role=client,socket=$sock,bsize=10240" \
    "${extra_sets[@]}" \
    > "$tmp/iwarpd.$r.out" 2> "$tmp/iwarpd.$r.err" & pids+=($!)
  local ok=0
  for _ in $(seq 100); do
    [ -S "/run/iwarpd/$name.verbs" ] && { ok=1; break; }
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  [ $ok -eq 1 ] || { tail -20 "$tmp/iwarpd.$r.err"; echo "bench-perf: iwarpd gave no verbs socket"; exit 1; }
  sleep 1 # memif link up
  perf send_lat "$tmp/lat.$r" -s 64 -n "$lat_iters"
  perf write_bw "$tmp/bw.$r" -s 64K -D "$secs" --depth "$depth" --qps "$qps"
  json_num median_us "$tmp/lat.$r.json" >> "$tmp/lat_med"
  json_num p99_us "$tmp/lat.$r.json" >> "$tmp/lat_p99"
  json_num gbit_per_s "$tmp/bw.$r.json" >> "$tmp/bw_gbps"
  cleanup
}

perf() { # test out args...
  local t=$1 out=$2; shift 2
  timeout $(( secs * 4 + 120 )) taskset -c "$APP_CPU" "$IWARP_PERF" "$t" --loopback --daemon "$name" --json "$out.json" "$@" \
    > "$out.txt" 2> "$out.err" || { echo "bench-perf: iwarp-perf $t failed:"; tail -20 "$out.err"; cat "$out.txt"; exit 1; }
  sed -n 2p "$out.txt"
}

for r in $(seq "$runs"); do
  echo "run $r/$runs"
  kernel_run "$r"
  echo "  sockperf ping-pong --tcp -m 64: median $(tail -1 "$tmp/sp_med") us; iperf3 -l 64K: $(tail -1 "$tmp/ip_gbps") Gbit/s"
  iwarp_run "$r"
done

sp_med=$(median < "$tmp/sp_med"); sp_p99=$(median < "$tmp/sp_p99"); ip_gbps=$(median < "$tmp/ip_gbps")
lat_med=$(median < "$tmp/lat_med"); lat_p99=$(median < "$tmp/lat_p99"); bw_gbps=$(median < "$tmp/bw_gbps")
all() { paste -sd' ' "$tmp/$1"; }
lat_ratio=$(awk -v i="$lat_med" -v k="$sp_med" 'BEGIN {printf "%.2f", (k > 0) ? i / k : 0}')
bw_ratio=$(awk -v i="$bw_gbps" -v k="$ip_gbps" 'BEGIN {printf "%.2f", (k > 0) ? i / k : 0}')
met_lat=$(awk -v r="$lat_ratio" 'BEGIN {print (r > 0 && r <= 1) ? "met" : "missed"}')
met_bw=$(awk -v r="$bw_ratio" 'BEGIN {print (r >= 2) ? "met" : "missed"}')
cmd="PERF_RUNS=$runs PERF_SECONDS=$secs PERF_LAT_ITERS=$lat_iters PERF_DEPTH=$depth PERF_QPS=$qps${PERF_SET:+ PERF_SET='$PERF_SET'} scripts/bench-perf.sh --record"
block=$(cat <<EOB

Run of $(date -u +%Y-%m-%d) ($ncpu CPUs, load $(cut -d' ' -f1 /proc/loadavg), commit $(git rev-parse --short HEAD)): \`$cmd\`
(medians of $runs runs; per run: iwarp-perf $(all lat_med) us / $(all bw_gbps) Gbit/s, sockperf $(all sp_med) us, iperf3 $(all ip_gbps) Gbit/s)

| benchmark | iwarp-perf over one iwarpd (2 memif ports, 1 core, MTU 9000) | kernel, loopback, same run | ratio / target |
|---|---|---|---|
| send_lat 64 B, median half round trip | $(printf '%.2f' "$lat_med") us (p99 $(printf '%.2f' "$lat_p99") us) | sockperf ping-pong --tcp -m 64: $sp_med us (p99 $sp_p99 us) | $lat_ratio x (target <= 1: $met_lat) |
| write_bw 64 KiB, $qps QP(s) x depth $depth | $(printf '%.2f' "$bw_gbps") Gbit/s | iperf3 -l 64K: $ip_gbps Gbit/s | $bw_ratio x (target >= 2: $met_bw) |
EOB
)
echo "$block"
if [ "$record" -eq 1 ]; then
  grep -q '^## Shared-memory verbs' docs/BENCHMARKS.md || printf '\n## Shared-memory verbs\n' >> docs/BENCHMARKS.md
  echo "$block" >> docs/BENCHMARKS.md
  echo "bench-perf: appended to docs/BENCHMARKS.md"
fi
