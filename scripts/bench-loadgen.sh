#!/usr/bin/env bash
# Line-rate benchmark of the appliance: the built-in load generator between two iwarpd
# joined by memif, one dataplane core per daemon, beside kernel TCP (iperf3, 64 KiB
# writes) and UCX over TCP (ucx_perftest ucp_put_bw 64 KiB, UCX_TLS=tcp) over the kernel's
# loopback, measured in the same run by scripts/bench-lib.sh (the ratio is the figure; the
# machine is shared and noisy).
#
#   scripts/bench-loadgen.sh                     # 3 runs of each, 5 s each
#   BENCH_RUNS=5 BENCH_SECONDS=10 BENCH_MTU=1500 scripts/bench-loadgen.sh
#   BENCH_SCALE_QPS=10000 scripts/bench-loadgen.sh   # also the connection set-up / memory run
#   BENCH_MEMIF_SERVER=,rsize=8 BENCH_MEMIF_CLIENT=,rsize=8,zero-copy=yes scripts/bench-loadgen.sh
#                                  # memif arguments appended to the server's / client's device
#
# Every run has a server of its own; crossing between the two CPUs is probed before and
# after it (iwarp-cpu-probe: a cache line's round trip and a memif-like ring's copy rate).
# On a VM whose host moves its CPUs between core complexes the two-daemon figures follow
# that (docs/BENCHMARKS.md); the probes say what the machine did around each run. They do
# not classify runs: the host moves the CPUs within seconds, inside a run too.
#
# Buffers (BENCH_BUFFERS, default 1): each QP's 64 KiB WRITEs read one local buffer and
# write one remote buffer, as the peers do (iperf3 sends its one buffer over and over,
# ucx_perftest puts one buffer, ib_write_bw moves its buffer only for messages of half its
# 4 KiB cycle buffer or less). One more run at 8 QPs gives every outstanding WR a buffer of
# its own (8 x 16 x 64 KiB = 8 MiB to read and 8 MiB to write, beyond the caches): the
# cost of that working set, reported beside the target row.
#
# Prints medians and writes target/bench-loadgen.md (a table for docs/BENCHMARKS.md).
# Targets (issue 13, target 2): 64 KiB WRITE goodput at 1 QP and at 8 QPs >= 2x iperf3
# loopback and >= 4x UCX ucp_put_bw; (target 4) >= 10 M 64-byte WRITEs/s on one core.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${BENCH_RUNS:-3}
secs=${BENCH_SECONDS:-5}
mtu=${BENCH_MTU:-9000}
qps_big=${BENCH_QPS_BIG:-8}; depth_big=${BENCH_DEPTH_BIG:-16}
qps_small=${BENCH_QPS_SMALL:-32}; depth_small=${BENCH_DEPTH_SMALL:-64}
scale_qps=${BENCH_SCALE_QPS:-0}
buffers=${BENCH_BUFFERS:-1}
if [ -z "${IWARPD:-}" ]; then
  cargo build --release -q -p iwarpd
  IWARPD=target/release/iwarpd
fi
source scripts/bench-lib.sh
bench_require_peers
id=$$
tmp=$(mktemp -d /tmp/iwarpd-bench.XXXXXX)
srv_name=bench-a-$id; cli_name=bench-b-$id
sock=/run/iwarpd/bench-$id.memif
dev_args=",bsize=10240"
[ "$mtu" -le 1500 ] && dev_args=""
common=(--set "port.0.mtu=$mtu" --log-level warn)
# BENCH_SET="key=value ..." adds --set overrides to both daemons (e.g. port.0.burst=32).
for kv in ${BENCH_SET:-}; do common+=(--set "$kv"); done
srv_pid=
cleanup() {
  [ -n "$srv_pid" ] && { kill -INT "$srv_pid" 2>/dev/null || true; sleep 2; kill -9 "$srv_pid" 2>/dev/null || true; }
  rm -rf "$tmp"
}
trap cleanup EXIT

# The peers over loopback, before the daemons start.
kern=(); ucx=()
for r in $(seq "$runs"); do
  kern+=("$(peer_iperf3 64K "$secs")"); ucx+=("$(peer_ucx_bw ucp_put_bw 65536 "$secs" "$depth_big")")
  echo "peers run $r: iperf3 loopback ${kern[-1]} Gbit/s, UCX ucp_put_bw ${ucx[-1]} Gbit/s"
done

ncpu=$(nproc)
start_server() {
  "$IWARPD" --config config/examples/memif-server.toml --name "$srv_name" --core $(( ncpu > 1 ? 1 : 0 )) \
    --device "net_memif0,role=server,socket=$sock$dev_args${BENCH_MEMIF_SERVER:-}" "${common[@]}" \
    --set "limits.max_qps=$(( scale_qps > 1024 ? scale_qps + 16 : 1024 ))" \
    --set "limits.max_conns=$(( scale_qps > 1024 ? 2 * scale_qps + 64 : 2048 ))" \
    >> "$tmp/server.out" 2>> "$tmp/server.err" & srv_pid=$!
  for _ in $(seq 100); do "$IWARPD" --name "$srv_name" stats >/dev/null 2>&1 && break; sleep 0.1; done
}
stop_server() { kill -INT "$srv_pid"; wait "$srv_pid" || true; srv_pid=; }

client() { # op size qps depth out [loadgen arguments]
  timeout $(( secs * 4 + 120 )) "$IWARPD" --config config/examples/memif-client.toml --name "$cli_name" --core 0 \
    --device "net_memif0,role=client,socket=$sock$dev_args${BENCH_MEMIF_CLIENT:-}" "${common[@]}" \
    --set "limits.max_qps=$(( $3 > 1024 ? $3 + 16 : 1024 ))" --set "limits.max_conns=$(( $3 > 1024 ? 2 * $3 + 64 : 2048 ))" \
    loadgen --peer 198.18.0.1:7000 --op "$1" --size "$2" --qps "$3" --depth "$4" \
    --seconds "$secs" --warmup-seconds 1 --json "$5.json" "${@:6}" > "$5.txt" 2> "$5.err" || {
      echo "bench-loadgen: client run failed:"; tail -20 "$5.err"; cat "$5.txt"; exit 1; }
}
# Each run gets a server of its own, and crossing between the two daemons' CPUs is probed
# before it starts and after it stops (bench_cpu_probe; the probe needs both CPUs free of
# busy-polling): on a VM the host moves the CPUs between its core complexes, and two
# daemons joined by memif (each byte crosses between the CPUs) follow it. The probe
# samples the moments around a run, not the run itself: a run may still flip inside.
one=(); big=(); big_p50=(); spread=(); small=(); small_p50=(); rtt=()
for r in $(seq "$runs"); do
  before=$(bench_cpu_probe)
  start_server
  client write 65536 1 "$depth_big" "$tmp/one-$r" --buffers "$buffers"
  one+=("$(bench_json_num goodput_gbps "$tmp/one-$r.json")")
  echo "iwarpd 64 KiB WRITE, 1 QP, run $r: ${one[-1]} Gbit/s"
  client write 65536 "$qps_big" "$depth_big" "$tmp/big-$r" --buffers "$buffers"
  big+=("$(bench_json_num goodput_gbps "$tmp/big-$r.json")"); big_p50+=("$(bench_json_num p50 "$tmp/big-$r.json")")
  echo "iwarpd 64 KiB WRITE, $qps_big QPs, run $r: ${big[-1]} Gbit/s (p50 ${big_p50[-1]} us)"
  client write 65536 "$qps_big" "$depth_big" "$tmp/spread-$r" --buffers 0
  spread+=("$(bench_json_num goodput_gbps "$tmp/spread-$r.json")")
  echo "iwarpd 64 KiB WRITE, $qps_big QPs, a buffer per outstanding WR, run $r: ${spread[-1]} Gbit/s"
  client write 64 "$qps_small" "$depth_small" "$tmp/small-$r"
  small+=("$(bench_json_num messages_per_sec "$tmp/small-$r.json")"); small_p50+=("$(bench_json_num p50 "$tmp/small-$r.json")")
  echo "iwarpd 64 B WRITE run $r: ${small[-1]} WR/s (p50 ${small_p50[-1]} us)"
  stop_server
  rtt+=("$before/$(bench_cpu_probe)")
  echo "run $r: crossing the CPUs before/after: ${rtt[-1]} (cache-line round trip ns : ring Gbit/s)"
done
scale_line=""
if [ "$scale_qps" -gt 0 ]; then
  start_server
  client connect 1 "$scale_qps" 1 "$tmp/scale"
  rate=$(bench_json_num rate_per_sec "$tmp/scale.json"); est=$(bench_json_num established "$tmp/scale.json")
  per_qp=$(grep -oE '[0-9]+ bytes per QP' "$tmp/scale.txt" | grep -oE '^[0-9]+' || echo "?")
  scale_line="| connection set-up, $scale_qps QPs on one core | $est established, $rate conn/s, $per_qp bytes of RSS per QP (client daemon) | | |"
  echo "scale: $scale_qps QPs: $est established at $rate conn/s; $per_qp bytes per QP"
  stop_server
fi

k=$(printf '%s\n' "${kern[@]}" | bench_median); u=$(printf '%s\n' "${ucx[@]}" | bench_median)
o=$(printf '%s\n' "${one[@]}" | bench_median)
b=$(printf '%s\n' "${big[@]}" | bench_median); bl=$(printf '%s\n' "${big_p50[@]}" | bench_median)
sp=$(printf '%s\n' "${spread[@]}" | bench_median)
s=$(printf '%s\n' "${small[@]}" | bench_median); sl=$(printf '%s\n' "${small_p50[@]}" | bench_median)
mwr=$(awk -v s="$s" 'BEGIN {printf "%.2f", s / 1e6}')
verdict() { # goodput
  local rk ru
  rk=$(bench_ratio "$1" "$k"); ru=$(bench_ratio "$1" "$u")
  echo "$rk x iperf3 (>= 2: $(awk -v r="$rk" 'BEGIN {print (r >= 2) ? "met" : "missed"}')), $ru x UCX (>= 4: $(awk -v r="$ru" 'BEGIN {print (r >= 4) ? "met" : "missed"}'))"
}
met_s=$(awk -v s="$s" 'BEGIN {print (s >= 10e6) ? "met" : "missed"}')
out=target/bench-loadgen.md
mkdir -p target
{
  echo "Command: \`BENCH_RUNS=$runs BENCH_SECONDS=$secs BENCH_MTU=$mtu BENCH_BUFFERS=$buffers BENCH_QPS_BIG=$qps_big BENCH_DEPTH_BIG=$depth_big BENCH_QPS_SMALL=$qps_small BENCH_DEPTH_SMALL=$depth_small${BENCH_SET:+ BENCH_SET=\"$BENCH_SET\"}${BENCH_MEMIF_SERVER:+ BENCH_MEMIF_SERVER=$BENCH_MEMIF_SERVER}${BENCH_MEMIF_CLIENT:+ BENCH_MEMIF_CLIENT=$BENCH_MEMIF_CLIENT} scripts/bench-loadgen.sh\` ($(date -u +%Y-%m-%d), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg), commit $(git rev-parse --short HEAD)); medians of $runs runs."
  echo "Per run: iperf3 ${kern[*]} Gbit/s; UCX ucp_put_bw ${ucx[*]} Gbit/s; iwarpd 1 QP ${one[*]}, $qps_big QPs ${big[*]} Gbit/s, $qps_big QPs with a buffer per WR ${spread[*]} Gbit/s; 64 B ${small[*]} WR/s; crossing the CPUs before/after each iwarpd run ${rtt[*]} (cache-line round trip ns : memif-like ring Gbit/s, iwarp-cpu-probe)."
  echo
  echo "| benchmark | iwarpd (memif, 1 core each, MTU $mtu) | kernel TCP / UCX over TCP, loopback, same run | ratios / targets |"
  echo "|---|---|---|---|"
  echo "| 64 KiB WRITE goodput, 1 QP x depth $depth_big, $buffers buffer(s) per QP | $o Gbit/s | iperf3 $k Gbit/s; UCX ucp_put_bw -O $depth_big $u Gbit/s | $(verdict "$o") |"
  echo "| 64 KiB WRITE goodput, $qps_big QPs x depth $depth_big, $buffers buffer(s) per QP | $b Gbit/s (p50 latency $bl us) | (same) | $(verdict "$b") |"
  echo "| 64 KiB WRITE goodput, $qps_big QPs x depth $depth_big, a buffer per outstanding WR ($(( qps_big * depth_big / 16 )) MiB each side) | $sp Gbit/s | (same) | $(bench_ratio "$sp" "$k") x iperf3, $(bench_ratio "$sp" "$u") x UCX (context: the working set) |"
  echo "| 64 B WRITE rate, $qps_small QPs x depth $depth_small | $mwr M WR/s (p50 latency $sl us) | | target >= 10 M/s: $met_s |"
  [ -n "$scale_line" ] && echo "$scale_line"
} > "$out"
echo; cat "$out"
