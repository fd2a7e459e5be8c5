#!/usr/bin/env bash
# The size sweep and the latency distribution (issue 13, target 7 and the plots): RDMA
# WRITE, READ and SEND through the shared-memory verbs (iwarp-perf over one iwarpd, the
# arrangement of scripts/bench-perf.sh) at every size from 64 B to 1 MiB, beside kernel TCP
# (iperf3 with writes of that size) and UCX over TCP (ucx_perftest, UCX_TLS=tcp:
# ucp_put_bw, ucp_get, tag_bw) measured in the same run; then the 64 B half round trip
# distribution of iwarp-perf send_lat, sockperf ping-pong and UCX tag_lat.
#
#   scripts/bench-sweep.sh             # builds release, prints the table, writes the plots
#   scripts/bench-sweep.sh --record    # and appends the table to docs/BENCHMARKS.md and
#                                      # writes the plots to docs/plots/
#   SWEEP_RUNS=3 SWEEP_SECONDS=2 SWEEP_SIZES="64 4096 65536" SWEEP_DEPTH=16 scripts/bench-sweep.sh
#   IWARPD=target/debug/iwarpd IWARP_PERF=target/debug/iwarp-perf ...   # other builds
#
# Fails when any figure is 0 (a peer or iwarp-perf failed): .ci/run runs a one-run smoke
# of it (no figure is judged there; the numbers come from runs of this script).
#
# Figures are medians over SWEEP_RUNS runs; each run measures every peer and iwarpd at
# every size (peers first, while iwarpd is stopped: at most two busy processes, one per
# CPU). Target 7: above 4 KiB iwarpd is never below either peer. Needs root (DPDK).
set -euo pipefail
cd "$(dirname "$0")/.."
record=0
[ "${1:-}" = "--record" ] && record=1
runs=${SWEEP_RUNS:-3}
secs=${SWEEP_SECONDS:-2}
sizes=${SWEEP_SIZES:-64 256 1024 4096 16384 65536 262144 1048576}
depth=${SWEEP_DEPTH:-16}
lat_iters=${SWEEP_LAT_ITERS:-100000}
ucx_ranks=${SWEEP_UCX_RANKS:-1 5 10 25 50 75 90 95 99 99.9}
source scripts/bench-lib.sh
if [ -z "${IWARPD:-}" ] || [ -z "${IWARP_PERF:-}" ]; then
  cargo build --release -q -p iwarpd -p iwarp-perf
  IWARPD=target/release/iwarpd; IWARP_PERF=target/release/iwarp-perf
fi
bench_require_peers
command -v gnuplot >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null \
  || { echo "bench-sweep: gnuplot missing and not installable"; exit 1; }
out=target/bench-sweep
rm -rf "$out"; mkdir -p "$out"
name=sweep-$$
trap 'bench_loopback_stop' EXIT

# iwarp-perf's test and UCX's for each operation.
declare -A perf_test=([write]=write_bw [read]=read_bw [send]=send_bw)
declare -A ucx_test=([write]=ucp_put_bw [read]=ucp_get [send]=tag_bw)

perf() { # test json-out args...
  local t=$1 j=$2; shift 2
  timeout $(( secs * 4 + 120 )) taskset -c "$APP_CPU" "$IWARP_PERF" "$t" --loopback --daemon "$name" \
    --json "$j" "$@" > "$j.txt" 2> "$j.err" \
    || { echo "bench-sweep: iwarp-perf $t $* failed:"; tail -20 "$j.err"; cat "$j.txt"; exit 1; }
}

for r in $(seq "$runs"); do
  # UCX runs its two ends on the two CPUs, so its figures follow where the host put them.
  echo "run $r/$runs: peers (crossing the CPUs: $(bench_cpu_probe) ns : Gbit/s, bench_cpu_probe)"
  for s in $sizes; do
    v=$(peer_iperf3 "$s" "$secs"); echo "tcp $s iperf3 $r $v" >> "$out/results.txt"
    line="  $s B: iperf3 $v"
    for op in write read send; do
      v=$(peer_ucx_bw "${ucx_test[$op]}" "$s" "$secs" "$depth")
      echo "$op $s ucx $r $v" >> "$out/results.txt"
      line+=", ucx ${ucx_test[$op]} $v"
    done
    echo "$line Gbit/s"
  done
  read -r med _ < <(peer_sockperf 64 "$secs" "$out/sockperf.$r.log")
  echo "sockperf 64 $r $med" >> "$out/latency.txt"
  for rank in $ucx_ranks; do
    echo "$rank $(peer_ucx_lat 64 "$lat_iters" "$rank")" >> "$out/ucx-lat.$r.txt"
  done
  echo "  64 B half round trip: sockperf median $med us, UCX tag_lat median $(awk '$1 == 50 {print $2}' "$out/ucx-lat.$r.txt") us"

  echo "run $r/$runs: iwarpd"
  bench_loopback_start "$IWARPD" "$name" "$out/iwarpd.$r"
  for s in $sizes; do
    line="  $s B:"
    for op in write read send; do
      perf "${perf_test[$op]}" "$out/$op.$s.$r.json" -s "$s" -D "$secs" --interval 0 --depth "$depth"
      v=$(bench_json_num gbit_per_s "$out/$op.$s.$r.json")
      echo "$op $s iwarp $r $v" >> "$out/results.txt"
      line+=" ${perf_test[$op]} $v"
    done
    echo "$line Gbit/s"
  done
  perf send_lat "$out/send_lat.$r.json" -s 64 -n "$lat_iters"
  echo "iwarp 64 $r $(bench_json_num median_us "$out/send_lat.$r.json")" >> "$out/latency.txt"
  echo "  64 B half round trip: iwarp-perf send_lat median $(bench_json_num median_us "$out/send_lat.$r.json") us"
  bench_loopback_stop
done

cmd="SWEEP_RUNS=$runs SWEEP_SECONDS=$secs SWEEP_DEPTH=$depth${SWEEP_SIZES:+ SWEEP_SIZES='$sizes'} scripts/bench-sweep.sh"
plots=$out
[ "$record" -eq 1 ] && plots=docs/plots
rc=0
python3 scripts/bench-sweep-report.py "$out" "$plots" "$cmd" "$(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg), commit $(git rev-parse --short HEAD)" > "$out/table.md" || rc=$?
cat "$out/table.md"
[ "$rc" -eq 0 ] || { echo "bench-sweep: the report failed (status $rc)"; exit 1; }
if [ "$record" -eq 1 ]; then
  grep -q '^## Size sweep and latency distribution' docs/BENCHMARKS.md \
    || printf '\n## Size sweep and latency distribution\n\nWritten by `scripts/bench-sweep.sh --record` (plots in `docs/plots/`).\n' >> docs/BENCHMARKS.md
  { echo; cat "$out/table.md"; } >> docs/BENCHMARKS.md
  echo "bench-sweep: appended to docs/BENCHMARKS.md; plots in docs/plots/"
fi
