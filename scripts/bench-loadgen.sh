#!/usr/bin/env bash
# Line-rate benchmark of the appliance: the built-in load generator between two iwarpd
# joined by memif, one dataplane core per daemon, beside iperf3 over the kernel's loopback
# measured in the same run (the ratio is the figure; the machine is shared and noisy).
#
#   scripts/bench-loadgen.sh                     # 3 runs of each, 5 s each
#   BENCH_RUNS=5 BENCH_SECONDS=10 BENCH_MTU=1500 scripts/bench-loadgen.sh
#   BENCH_SCALE_QPS=10000 scripts/bench-loadgen.sh   # also the connection set-up / memory run
#
# Prints medians and writes target/bench-loadgen.md (a table for docs/BENCHMARKS.md).
# Targets (issue 3): 64 KiB WRITE goodput >= 2x iperf3 loopback; >= 5 M 64-byte WRITEs/s.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${BENCH_RUNS:-3}
secs=${BENCH_SECONDS:-5}
mtu=${BENCH_MTU:-9000}
qps_big=${BENCH_QPS_BIG:-8}; depth_big=${BENCH_DEPTH_BIG:-16}
qps_small=${BENCH_QPS_SMALL:-32}; depth_small=${BENCH_DEPTH_SMALL:-64}
scale_qps=${BENCH_SCALE_QPS:-0}
if [ -z "${IWARPD:-}" ]; then
  cargo build --release -q -p iwarpd
  IWARPD=target/release/iwarpd
fi
command -v iperf3 >/dev/null || { echo "bench-loadgen: iperf3 missing (scripts/setup.sh installs it)"; exit 1; }
id=$$
tmp=$(mktemp -d /tmp/iwarpd-bench.XXXXXX)
srv_name=bench-a-$id; cli_name=bench-b-$id
sock=/run/iwarpd/bench-$id.memif
dev_args=",bsize=10240"
[ "$mtu" -le 1500 ] && dev_args=""
common=(--set "port.0.mtu=$mtu" --log-level warn)
# BENCH_SET="key=value ..." adds --set overrides to both daemons (e.g. port.0.burst=32).
for kv in ${BENCH_SET:-}; do common+=(--set "$kv"); done
srv_pid=; iperf_pid=
cleanup() {
  [ -n "$srv_pid" ] && { kill -INT "$srv_pid" 2>/dev/null || true; sleep 2; kill -9 "$srv_pid" 2>/dev/null || true; }
  [ -n "$iperf_pid" ] && kill "$iperf_pid" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print 0; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
json_num() { grep -oE "\"$1\":[0-9.]+" "$2" | head -1 | cut -d: -f2; }

# Kernel TCP over loopback, one stream, 64 KiB writes.
iperf3 -s -p 5299 > /dev/null 2>&1 & iperf_pid=$!
sleep 0.5
kern=()
for r in $(seq "$runs"); do
  bps=$(iperf3 -c 127.0.0.1 -p 5299 -t "$secs" -l 64K -J | grep -oE '"bits_per_second":[[:space:]]*[0-9.e+]+' | tail -1 | grep -oE '[0-9.e+]+$')
  kern+=("$(awk -v b="$bps" 'BEGIN {printf "%.3f", b / 1e9}')")
  echo "iperf3 loopback run $r: ${kern[-1]} Gbit/s"
done
kill "$iperf_pid" 2>/dev/null || true; iperf_pid=

ncpu=$(nproc)
"$IWARPD" --config config/examples/memif-server.toml --name "$srv_name" --core $(( ncpu > 1 ? 1 : 0 )) \
  --device "net_memif0,role=server,socket=$sock$dev_args" "${common[@]}" \
  --set "limits.max_qps=$(( scale_qps > 1024 ? scale_qps + 16 : 1024 ))" \
  --set "limits.max_conns=$(( scale_qps > 1024 ? 2 * scale_qps + 64 : 2048 ))" \
  > "$tmp/server.out" 2> "$tmp/server.err" & srv_pid=$!
for _ in $(seq 100); do "$IWARPD" --name "$srv_name" stats >/dev/null 2>&1 && break; sleep 0.1; done

client() { # op size qps depth out
  timeout $(( secs * 4 + 120 )) "$IWARPD" --config config/examples/memif-client.toml --name "$cli_name" --core 0 \
    --device "net_memif0,role=client,socket=$sock$dev_args" "${common[@]}" \
    --set "limits.max_qps=$(( $3 > 1024 ? $3 + 16 : 1024 ))" --set "limits.max_conns=$(( $3 > 1024 ? 2 * $3 + 64 : 2048 ))" \
    loadgen --peer 198.18.0.1:7000 --op "$1" --size "$2" --qps "$3" --depth "$4" \
    --seconds "$secs" --warmup-seconds 1 --json "$5.json" > "$5.txt" 2> "$5.err" || {
      echo "bench-loadgen: client run failed:"; tail -20 "$5.err"; cat "$5.txt"; exit 1; }
}
big=(); big_p50=(); small=(); small_p50=()
for r in $(seq "$runs"); do
  client write 65536 "$qps_big" "$depth_big" "$tmp/big-$r"
  big+=("$(json_num goodput_gbps "$tmp/big-$r.json")"); big_p50+=("$(json_num p50 "$tmp/big-$r.json")")
  echo "iwarpd 64 KiB WRITE run $r: ${big[-1]} Gbit/s (p50 ${big_p50[-1]} us)"
  client write 64 "$qps_small" "$depth_small" "$tmp/small-$r"
  small+=("$(json_num messages_per_sec "$tmp/small-$r.json")"); small_p50+=("$(json_num p50 "$tmp/small-$r.json")")
  echo "iwarpd 64 B WRITE run $r: ${small[-1]} WR/s (p50 ${small_p50[-1]} us)"
done
scale_line=""
if [ "$scale_qps" -gt 0 ]; then
  client connect 1 "$scale_qps" 1 "$tmp/scale"
  rate=$(json_num rate_per_sec "$tmp/scale.json"); est=$(json_num established "$tmp/scale.json")
  per_qp=$(grep -oE '[0-9]+ bytes per QP' "$tmp/scale.txt" | grep -oE '^[0-9]+' || echo "?")
  scale_line="| connection set-up, $scale_qps QPs on one core | $est established, $rate conn/s, $per_qp bytes of RSS per QP (client daemon) | | |"
  echo "scale: $scale_qps QPs: $est established at $rate conn/s; $per_qp bytes per QP"
fi
kill -INT "$srv_pid"; wait "$srv_pid" || true; srv_pid=

k=$(printf '%s\n' "${kern[@]}" | median)
b=$(printf '%s\n' "${big[@]}" | median); bl=$(printf '%s\n' "${big_p50[@]}" | median)
s=$(printf '%s\n' "${small[@]}" | median); sl=$(printf '%s\n' "${small_p50[@]}" | median)
ratio=$(awk -v a="$b" -v k="$k" 'BEGIN {printf "%.2f", (k > 0) ? a / k : 0}')
mwr=$(awk -v s="$s" 'BEGIN {printf "%.2f", s / 1e6}')
met_b=$(awk -v r="$ratio" 'BEGIN {print (r >= 2) ? "met" : "missed"}')
met_s=$(awk -v s="$s" 'BEGIN {print (s >= 5e6) ? "met" : "missed"}')
out=target/bench-loadgen.md
mkdir -p target
{
  echo "Command: \`BENCH_RUNS=$runs BENCH_SECONDS=$secs BENCH_MTU=$mtu scripts/bench-loadgen.sh\` ($(date -u +%Y-%m-%d), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)); medians of $runs runs."
  echo
  echo "| benchmark | iwarpd (memif, 1 core each, MTU $mtu) | kernel (same run) | ratio / target |"
  echo "|---|---|---|---|"
  echo "| 64 KiB WRITE goodput, $qps_big QPs x depth $depth_big | $b Gbit/s (p50 latency $bl us) | iperf3 loopback $k Gbit/s | $ratio x (target >= 2: $met_b) |"
  echo "| 64 B WRITE rate, $qps_small QPs x depth $depth_small | $mwr M WR/s (p50 latency $sl us) | | target >= 5 M/s: $met_s |"
  [ -n "$scale_line" ] && echo "$scale_line"
} > "$out"
echo; cat "$out"
