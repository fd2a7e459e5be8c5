#!/usr/bin/env bash
# Applications over shared-memory verbs beside their peers, in the same run: iwarp-perf (a
# perftest-like client of the iwarp-verbs library) through iwarpd; kernel TCP over loopback
# (sockperf ping-pong, iperf3 with 64 KiB writes); UCX over TCP (ucx_perftest, UCX_TLS=tcp:
# tag_lat, ucp_put_bw). The peers are measured by scripts/bench-lib.sh.
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
# - The peers run while iwarpd is stopped, pinned the same way: servers on CPU $DP_CPU,
#   clients on CPU $APP_CPU.
# Each run measures all of them; the figures are medians over PERF_RUNS runs.
# Targets (issue 13): send_lat 64 B median half round trip <= 0.5x sockperf's and <= UCX
# tag_lat's (target 5); write_bw 64 KiB >= 1.5x iperf3 (target 3); write_bw 64 B >= 5 M
# WRs per second from the one application thread (target 4). Needs root (DPDK).
# Everything stays on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
record=0
[ "${1:-}" = "--record" ] && record=1
runs=${PERF_RUNS:-3}
secs=${PERF_SECONDS:-5}
lat_iters=${PERF_LAT_ITERS:-100000}
depth=${PERF_DEPTH:-16}; qps=${PERF_QPS:-1}
# The 64 B WRITE rate from one application thread (target 4): more in flight.
rate_depth=${PERF_RATE_DEPTH:-128}; rate_qps=${PERF_RATE_QPS:-4}
ncpu=$(nproc)
# PERF_SET="key=value key=value": more iwarpd settings (e.g. mpa.crc=\"off\").
extra_sets=()
for kv in ${PERF_SET:-}; do extra_sets+=(--set "$kv"); done
if [ -z "${IWARPD:-}" ] || [ -z "${IWARP_PERF:-}" ]; then
  cargo build --release -q -p iwarpd -p iwarp-perf
  IWARPD=target/release/iwarpd; IWARP_PERF=target/release/iwarp-perf
fi
source scripts/bench-lib.sh
bench_require_peers
tmp=$(mktemp -d /tmp/iwarp-perf-bench.XXXXXX)
name=perf-loop-$$
trap 'bench_loopback_stop; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT

peers_run() { # run index
  local r=$1 med p99
  read -r med p99 < <(peer_sockperf 64 "$secs")
  echo "$med" >> "$tmp/sp_med"; echo "$p99" >> "$tmp/sp_p99"
  peer_ucx_lat 64 "$lat_iters" >> "$tmp/ux_lat"
  peer_iperf3 64K "$secs" >> "$tmp/ip_gbps"
  peer_ucx_bw ucp_put_bw 65536 "$secs" "$depth" >> "$tmp/ux_gbps"
}

iwarp_run() { # run index
  local r=$1
  bench_loopback_start "$IWARPD" "$name" "$tmp/iwarpd.$r" "${extra_sets[@]}" || exit 1
  perf send_lat "$tmp/lat.$r" -s 64 -n "$lat_iters"
  perf write_bw "$tmp/bw.$r" -s 64K -D "$secs" --depth "$depth" --qps "$qps"
  perf write_bw "$tmp/rate.$r" -s 64 -D "$secs" --depth "$rate_depth" --qps "$rate_qps"
  bench_json_num median_us "$tmp/lat.$r.json" >> "$tmp/lat_med"
  bench_json_num p99_us "$tmp/lat.$r.json" >> "$tmp/lat_p99"
  bench_json_num gbit_per_s "$tmp/bw.$r.json" >> "$tmp/bw_gbps"
  bench_json_num msgs_per_s "$tmp/rate.$r.json" >> "$tmp/rate"
  bench_loopback_stop
}

perf() { # test out args...
  local t=$1 out=$2; shift 2
  timeout $(( secs * 4 + 120 )) taskset -c "$APP_CPU" "$IWARP_PERF" "$t" --loopback --daemon "$name" --json "$out.json" "$@" \
    > "$out.txt" 2> "$out.err" || { echo "bench-perf: iwarp-perf $t failed:"; tail -20 "$out.err"; cat "$out.txt"; exit 1; }
  sed -n 2p "$out.txt"
}

for r in $(seq "$runs"); do
  echo "run $r/$runs"
  peers_run "$r"
  echo "  sockperf ping-pong --tcp -m 64: median $(tail -1 "$tmp/sp_med") us; UCX tag_lat: $(tail -1 "$tmp/ux_lat") us; iperf3 -l 64K: $(tail -1 "$tmp/ip_gbps") Gbit/s; UCX ucp_put_bw 64 KiB: $(tail -1 "$tmp/ux_gbps") Gbit/s"
  iwarp_run "$r"
done

median() { bench_median < "$tmp/$1"; }
sp_med=$(median sp_med); sp_p99=$(median sp_p99); ux_lat=$(median ux_lat)
ip_gbps=$(median ip_gbps); ux_gbps=$(median ux_gbps)
lat_med=$(median lat_med); lat_p99=$(median lat_p99); bw_gbps=$(median bw_gbps)
rate_m=$(awk -v r="$(median rate)" 'BEGIN {printf "%.2f", r / 1e6}')
all() { paste -sd' ' "$tmp/$1"; }
lat_sp=$(bench_ratio "$lat_med" "$sp_med"); lat_ux=$(bench_ratio "$lat_med" "$ux_lat")
bw_ip=$(bench_ratio "$bw_gbps" "$ip_gbps"); bw_ux=$(bench_ratio "$bw_gbps" "$ux_gbps")
met() { awk -v r="$1" -v op="$2" -v t="$3" 'BEGIN {ok = (op == "<=") ? (r > 0 && r <= t) : (r >= t); print ok ? "met" : "missed"}'; }
cmd="PERF_RUNS=$runs PERF_SECONDS=$secs PERF_LAT_ITERS=$lat_iters PERF_DEPTH=$depth PERF_QPS=$qps PERF_RATE_DEPTH=$rate_depth PERF_RATE_QPS=$rate_qps${PERF_SET:+ PERF_SET='$PERF_SET'} scripts/bench-perf.sh --record"
block=$(cat <<EOB

Run of $(date -u +%Y-%m-%d) ($ncpu CPUs, load $(cut -d' ' -f1 /proc/loadavg), commit $(git rev-parse --short HEAD)): \`$cmd\`
(medians of $runs runs; per run: iwarp-perf $(all lat_med) us / $(all bw_gbps) Gbit/s / $(all rate) WR/s, sockperf $(all sp_med) us, UCX tag_lat $(all ux_lat) us, iperf3 $(all ip_gbps) Gbit/s, UCX ucp_put_bw $(all ux_gbps) Gbit/s)

| benchmark | iwarp-perf over one iwarpd (2 memif ports, 1 core, MTU 9000) | kernel TCP, loopback, same run | UCX over TCP, loopback, same run | ratios / targets (issue 13) |
|---|---|---|---|---|
| send_lat 64 B, median half round trip | $(printf '%.2f' "$lat_med") us (p99 $(printf '%.2f' "$lat_p99") us) | sockperf ping-pong --tcp -m 64: $sp_med us (p99 $sp_p99 us) | tag_lat -s 64: $ux_lat us | $lat_sp x sockperf (<= 0.5: $(met "$lat_sp" "<=" 0.5)), $lat_ux x UCX (<= 1: $(met "$lat_ux" "<=" 1)) |
| write_bw 64 KiB, $qps QP(s) x depth $depth | $(printf '%.2f' "$bw_gbps") Gbit/s | iperf3 -l 64K: $ip_gbps Gbit/s | ucp_put_bw -s 65536 -O $depth: $ux_gbps Gbit/s | $bw_ip x iperf3 (>= 1.5: $(met "$bw_ip" ">=" 1.5)), $bw_ux x UCX |
| write_bw 64 B, $rate_qps QPs x depth $rate_depth, one application thread | $rate_m M WR/s | | | target >= 5 M WR/s: $(met "$rate_m" ">=" 5) |
EOB
)
echo "$block"
if [ "$record" -eq 1 ]; then
  grep -q '^## Shared-memory verbs' docs/BENCHMARKS.md || printf '\n## Shared-memory verbs\n' >> docs/BENCHMARKS.md
  echo "$block" >> docs/BENCHMARKS.md
  echo "bench-perf: appended to docs/BENCHMARKS.md"
fi
