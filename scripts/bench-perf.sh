#!/usr/bin/env bash
# Applications over shared-memory verbs beside kernel TCP: iwarp-perf (a perftest-like client
# of the iwarp-verbs library) between two iwarpd joined by memif, one dataplane core each,
# and in the same run sockperf (TCP ping-pong) and iperf3 (64 KiB writes) over loopback.
#
#   scripts/bench-perf.sh              # builds release (fat LTO: several minutes), prints ratios
#   scripts/bench-perf.sh --record     # also appends a dated block to docs/BENCHMARKS.md
#   PERF_SECONDS=10 PERF_LAT_ITERS=100000 scripts/bench-perf.sh
#
# iwarp-perf runs in --loopback mode: both ends in one thread of one process (the server
# end is stepped while the client waits), the server end on daemon A, the client end on
# daemon B (the engine does not connect to its own address). On 2 CPUs that is three busy
# pollers (two daemon cores and the client); the kernel tools get both CPUs.
# Targets: send_lat 64 B median half round trip not slower than sockperf's; write_bw 64 KiB
# at least 2x iperf3. Needs root (DPDK, sockperf install). Everything stays on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
record=0
[ "${1:-}" = "--record" ] && record=1
secs=${PERF_SECONDS:-5}
lat_iters=${PERF_LAT_ITERS:-20000}
mtu=${PERF_MTU:-9000}
depth=${PERF_DEPTH:-16}; qps=${PERF_QPS:-4}
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
a=perf-a-$id; b=perf-b-$id
sock=/run/iwarpd/perf-$id.memif
dev_args=",bsize=10240"; [ "$mtu" -le 1500 ] && dev_args=""
common=(--set "port.0.mtu=$mtu" --set "tcp.delayed_ack_us=0" --log-level warn)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  sleep 2
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  [ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
json_num() { grep -oE "\"$1\": *[0-9.e+-]+" "$2" | head -1 | grep -oE '[0-9.e+-]+$'; }
wait_socket() { # name pid
  for _ in $(seq 100); do
    [ -S "/run/iwarpd/$1.verbs" ] && return 0
    kill -0 "$2" 2>/dev/null || { tail -20 "$tmp/$1.err"; echo "bench-perf: iwarpd $1 exited"; exit 1; }
    sleep 0.1
  done
  echo "bench-perf: no verbs socket /run/iwarpd/$1.verbs after 10 s (does this iwarpd serve verbs clients?)"; exit 1
}

# Kernel peers first (they get both CPUs).
sockperf server --tcp -i 127.0.0.1 -p 11211 > "$tmp/sockperf-server.txt" 2>&1 & pids+=($!)
sleep 0.5
sockperf ping-pong --tcp -i 127.0.0.1 -p 11211 -m 64 -t "$secs" > "$tmp/sockperf.txt" 2>&1
# sockperf reports half round trips in usec: "---> percentile 50.000 =   12.345".
sp_med=$(grep -E 'percentile 50\.000' "$tmp/sockperf.txt" | grep -oE '[0-9.]+$' | tail -1)
sp_avg=$(grep -oE 'avg-latency=[0-9.]+' "$tmp/sockperf.txt" | grep -oE '[0-9.]+$' | tail -1)
echo "sockperf ping-pong --tcp -m 64 (loopback): median ${sp_med} us, avg ${sp_avg} us (half round trip)"
iperf3 -s -p 5298 > /dev/null 2>&1 & pids+=($!)
sleep 0.5
ip_bps=$(iperf3 -c 127.0.0.1 -p 5298 -t "$secs" -l 64K -J | grep -oE '"bits_per_second":[[:space:]]*[0-9.e+]+' | tail -1 | grep -oE '[0-9.e+]+$')
ip_gbps=$(awk -v b="$ip_bps" 'BEGIN {printf "%.2f", b / 1e9}')
echo "iperf3 -l 64K (loopback): $ip_gbps Gbit/s"

ncpu=$(nproc)
"$IWARPD" --config config/examples/memif-server.toml --name "$a" --core $(( ncpu > 1 ? 1 : 0 )) \
  --device "net_memif0,role=server,socket=$sock$dev_args" "${common[@]}" > "$tmp/$a.out" 2> "$tmp/$a.err" & pids+=($!)
wait_socket "$a" "${pids[-1]}"
"$IWARPD" --config config/examples/memif-client.toml --name "$b" --core 0 \
  --device "net_memif0,role=client,socket=$sock$dev_args" "${common[@]}" > "$tmp/$b.out" 2> "$tmp/$b.err" & pids+=($!)
wait_socket "$b" "${pids[-1]}"
sleep 1 # memif link up

perf() { # test out args...
  local t=$1 out=$2; shift 2
  timeout $(( secs * 4 + 120 )) "$IWARP_PERF" "$t" --loopback --daemon "$a" --peer-daemon "$b" --json "$out.json" "$@" \
    > "$out.txt" 2> "$out.err" || { echo "bench-perf: iwarp-perf $t failed:"; tail -20 "$out.err"; cat "$out.txt"; exit 1; }
  cat "$out.txt"
}
perf send_lat "$tmp/lat" -s 64 -n "$lat_iters"
perf write_bw "$tmp/bw" -s 64K -D "$secs" --depth "$depth" --qps "$qps"
lat_med=$(json_num median_us "$tmp/lat.json"); lat_p99=$(json_num p99_us "$tmp/lat.json")
bw_gbps=$(json_num gbit_per_s "$tmp/bw.json")
lat_ratio=$(awk -v i="$lat_med" -v k="$sp_med" 'BEGIN {printf "%.2f", (k > 0) ? i / k : 0}')
bw_ratio=$(awk -v i="$bw_gbps" -v k="$ip_gbps" 'BEGIN {printf "%.2f", (k > 0) ? i / k : 0}')
met_lat=$(awk -v r="$lat_ratio" 'BEGIN {print (r > 0 && r <= 1) ? "met" : "missed"}')
met_bw=$(awk -v r="$bw_ratio" 'BEGIN {print (r >= 2) ? "met" : "missed"}')
cmd="PERF_SECONDS=$secs PERF_LAT_ITERS=$lat_iters PERF_MTU=$mtu PERF_DEPTH=$depth PERF_QPS=$qps scripts/bench-perf.sh --record"
block=$(cat <<EOB

Run of $(date -u +%Y-%m-%d) ($(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg), commit $(git rev-parse --short HEAD)): \`$cmd\`

| benchmark | iwarp-perf over iwarpd (memif, MTU $mtu) | kernel, loopback, same run | ratio / target |
|---|---|---|---|
| send_lat 64 B, median half round trip | $(printf '%.2f' "$lat_med") us (p99 $(printf '%.2f' "$lat_p99") us) | sockperf ping-pong --tcp -m 64: $sp_med us | $lat_ratio x (target <= 1: $met_lat) |
| write_bw 64 KiB, $qps QPs x depth $depth | $(printf '%.2f' "$bw_gbps") Gbit/s | iperf3 -l 64K: $ip_gbps Gbit/s | $bw_ratio x (target >= 2: $met_bw) |
EOB
)
echo "$block"
if [ "$record" -eq 1 ]; then
  grep -q '^## Shared-memory verbs' docs/BENCHMARKS.md || printf '\n## Shared-memory verbs\n' >> docs/BENCHMARKS.md
  echo "$block" >> docs/BENCHMARKS.md
  echo "bench-perf: appended to docs/BENCHMARKS.md"
fi
