# Sourced by the benchmark scripts (bench-perf.sh, bench-sweep.sh, bench-loadgen.sh): the
# peers every figure is a ratio against, measured the same way by every script, and the
# helpers they share. Not a program of its own.
#
# Peers, each over the kernel's loopback, in two arrangements: "split" (server pinned to CPU
# $DP_CPU, client to $APP_CPU: the two CPUs iwarpd's dataplane core and the benchmark
# program use) and "shared" (both on $APP_CPU: on a VM a wake-up across CPUs costs tens of
# microseconds, so the kernel's ping-pong and even its bulk transfer can be faster on one
# CPU). Each kernel figure is the peer's better arrangement (BENCH_PEER_ARRANGEMENTS="split
# shared" by default; one of them to measure only that). UCX busy-polls at both ends, as
# iwarpd and iwarp-perf do, so it runs split only (two pollers on one CPU take turns by
# time slices):
#   peer_iperf3 SIZE SECS            kernel TCP, one stream of SIZE-byte writes: Gbit/s
#   peer_sockperf SIZE SECS [LOG]    kernel TCP ping-pong: "median p99" half round trip, us
#                                    (LOG: sockperf's per-message log, for a CDF)
#   peer_ucx_bw TEST SIZE SECS DEPTH UCX over TCP (UCX_TLS=tcp): ucp_put_bw, ucp_get or
#                                    tag_bw with DEPTH outstanding: Gbit/s
#   peer_ucx_lat SIZE ITERS [RANK]   UCX over TCP tag_lat: half round trip at RANK % (50), us
#   bench_cpu_probe                  crossing between the two CPUs: "RTT:RING" (ns, Gbit/s)
# Every function prints its figure on stdout (0 when the peer failed, with the reason on
# stderr) and leaves no process behind.
#
# Also sourced by restart-loop.sh, isolation.sh and bench-sendlat.sh for
# bench_loopback_sets: every script that runs the perf-loopback daemon gives its memif
# ports the file's arguments and only a socket of its own.

: "${DP_CPU:=$(( $(nproc) > 1 ? 1 : 0 ))}"
: "${APP_CPU:=0}"
bench_port=${BENCH_PORT_BASE:-$(( 20000 + $$ % 20000 ))}
bench_arrangements=${BENCH_PEER_ARRANGEMENTS:-split shared}
# The server's CPU in an arrangement (the client always runs on $APP_CPU).
_bench_server_cpu() { [ "$1" = shared ] && echo "$APP_CPU" || echo "$DP_CPU"; }
# The better of "VALUE REST..." lines on stdin: max (bandwidth) or min (latency) of field 1.
_bench_best() { sort -g -k1,1 | { if [ "$1" = max ]; then tail -1; else head -1; fi; }; }

bench_median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) print 0; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
bench_json_num() { grep -oE "\"$1\": *[0-9.e+-]+" "$2" | head -1 | grep -oE '[0-9.e+-]+$'; }
bench_ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0) ? a / b : 0}'; }

# What crossing between CPUs $APP_CPU and $DP_CPU costs now (iwarp-cpu-probe, medians of 5
# rounds of 100 ms): "RTT:RING", a cache line's round trip in ns and jumbo frames copied
# through a memif-like ring (1,024 x 10 KiB) in Gbit/s; "?" for what it could not measure.
# Run it while neither CPU busy-polls. On a VM both move when the host moves its CPUs
# between core complexes (about 55-70 ns and 200 Gbit/s when they share one, about 350 ns
# and 40 Gbit/s when not), and whatever crosses between the CPUs moves with them.
bench_cpu_probe() {
  [ -x "${IWARP_CPU_PROBE:-}" ] || {
    cargo build --release -q -p iwarp-benches --bin iwarp-cpu-probe >&2
    IWARP_CPU_PROBE=target/release/iwarp-cpu-probe
  }
  local rtt ring
  rtt=$("$IWARP_CPU_PROBE" --cpus "$APP_CPU,$DP_CPU" --rounds 5 --round-ms 100 2>/dev/null | grep -oE 'median [0-9.]+' | awk '{printf "%.0f", $2}')
  ring=$("$IWARP_CPU_PROBE" --ring --cpus "$APP_CPU,$DP_CPU" --rounds 5 --round-ms 100 2>/dev/null | grep -oE 'median [0-9.]+' | awk '{printf "%.0f", $2}')
  echo "${rtt:-?}:${ring:-?}"
}

# The peers' programs, installed from Debian when missing (scripts/setup.sh installs them
# on a fresh machine).
bench_require_peers() {
  local need=()
  command -v iperf3 >/dev/null || need+=(iperf3)
  command -v sockperf >/dev/null || need+=(sockperf)
  command -v ucx_perftest >/dev/null || need+=(ucx-utils)
  [ ${#need[@]} -eq 0 ] && return 0
  echo "bench: installing ${need[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
    || { echo "bench: ${need[*]} missing and not installable" >&2; return 1; }
}

# Starts "$@" (after the port) in the background as a peer's server, waits until it
# listens on that TCP port, and sets bench_server_pid.
_bench_server() { # port cmd...
  local port=$1; shift
  "$@" > /dev/null 2>&1 &
  bench_server_pid=$!
  local _i
  for _i in $(seq 100); do
    ss -Htln "sport = :$port" 2>/dev/null | grep -q . && return 0
    kill -0 "$bench_server_pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
_bench_server_stop() {
  [ -n "${bench_server_pid:-}" ] || return 0
  kill "$bench_server_pid" 2>/dev/null || true
  wait "$bench_server_pid" 2>/dev/null || true
  bench_server_pid=
}

peer_iperf3() { # size secs
  local a
  for a in $bench_arrangements; do _iperf3_once "$(_bench_server_cpu "$a")" "$@"; done | _bench_best max
}
_iperf3_once() { # server-cpu size secs
  local port=$(( bench_port + 1 )) out bps
  _bench_server "$port" taskset -c "$1" iperf3 -s -1 -p "$port" || { echo "bench: iperf3 server did not start" >&2; echo 0; return; }
  out=$(taskset -c "$APP_CPU" iperf3 -c 127.0.0.1 -p "$port" -t "$3" -l "$2" -J 2>&1)
  _bench_server_stop
  bps=$(grep -oE '"bits_per_second":[[:space:]]*[0-9.e+]+' <<< "$out" | tail -1 | grep -oE '[0-9.e+]+$')
  [ -n "$bps" ] || { echo "bench: iperf3 -l $2 failed: $(tail -3 <<< "$out")" >&2; echo 0; return; }
  awk -v b="$bps" 'BEGIN {printf "%.3f\n", b / 1e9}'
}

peer_sockperf() { # size secs [full log]
  local a best
  best=$(for a in $bench_arrangements; do
    echo "$(_sockperf_once "$(_bench_server_cpu "$a")" "$1" "$2" "${3:+$3.$a}") $a"
  done | grep -v '^0 ' | _bench_best min)
  [ -n "$best" ] || { echo "0 0"; return; }
  # The better arrangement's per-message log is the one kept.
  [ -n "${3:-}" ] && mv "$3.${best##* }" "$3" && rm -f "$3".split "$3".shared
  echo "${best% *}"
}
_sockperf_once() { # server-cpu size secs [full log]
  local port=$(( bench_port + 2 )) out med p99 log=()
  [ -n "${4:-}" ] && log=(--full-log "$4")
  _bench_server "$port" taskset -c "$1" sockperf server --tcp -i 127.0.0.1 -p "$port" \
    || { echo "bench: sockperf server did not start" >&2; echo "0 0"; return; }
  out=$(taskset -c "$APP_CPU" sockperf ping-pong --tcp -i 127.0.0.1 -p "$port" -m "$2" -t "$3" "${log[@]}" 2>&1)
  _bench_server_stop
  # "---> percentile 50.000 =   12.345" (half round trips, us)
  med=$(grep -E 'percentile 50\.000' <<< "$out" | grep -oE '[0-9.]+$' | tail -1)
  p99=$(grep -E 'percentile 99\.000' <<< "$out" | grep -oE '[0-9.]+$' | tail -1)
  [ -n "$med" ] || { echo "bench: sockperf -m $2 failed: $(tail -3 <<< "$out")" >&2; echo "0 0"; return; }
  echo "$med ${p99:-0}"
}

# One ucx_perftest client run against a fresh server; prints its final line
# ("iters p50 avg overall MB/s-avg MB/s-overall msg/s-avg msg/s-overall").
_ucx_run() { # server-cpu port test size iters extra...
  local cpu=$1 port=$2 t=$3 size=$4 iters=$5; shift 5
  _bench_server "$port" env UCX_TLS=tcp UCX_NET_DEVICES=lo taskset -c "$cpu" ucx_perftest -p "$port" \
    || { echo "bench: ucx_perftest server did not start" >&2; return 1; }
  local out
  out=$(UCX_TLS=tcp UCX_NET_DEVICES=lo timeout 120 taskset -c "$APP_CPU" \
    ucx_perftest 127.0.0.1 -p "$port" -t "$t" -s "$size" -n "$iters" -w $(( iters / 10 + 1 )) -f "$@" 2>&1)
  _bench_server_stop
  local last
  last=$(grep -E '^[[:space:]]+[0-9]+[[:space:]]+[0-9.]+' <<< "$out" | tail -1)
  [ -n "$last" ] || { echo "bench: ucx_perftest -t $t -s $size failed: $(tail -3 <<< "$out")" >&2; return 1; }
  echo "$last"
}

# UCX bandwidth: a short run measures the message rate, a second one lasts about SECS.
peer_ucx_bw() { # test size secs depth
  _ucx_bw_once "$DP_CPU" "$@"
}
_ucx_bw_once() { # server-cpu test size secs depth
  local cpu=$1 port=$(( bench_port + 3 )) t=$2 size=$3 secs=$4 depth=$5 line rate iters
  line=$(_ucx_run "$cpu" "$port" "$t" "$size" 200 -O "$depth") || { echo 0; return; }
  rate=$(awk '{print $8}' <<< "$line")
  iters=$(awk -v r="$rate" -v s="$secs" 'BEGIN {n = int(r * s); if (n < 200) n = 200; if (n > 20000000) n = 20000000; print n}')
  line=$(_ucx_run "$cpu" "$port" "$t" "$size" "$iters" -O "$depth") || { echo 0; return; }
  # Gbit/s from the overall message rate (ucx_perftest's "MB/s" are MiB/s).
  awk -v s="$size" '{printf "%.3f\n", $8 * s * 8 / 1e9}' <<< "$line"
}

peer_ucx_lat() { # size iters [rank]
  _ucx_lat_once "$DP_CPU" "$@"
}
_ucx_lat_once() { # server-cpu size iters [rank]
  local port=$(( bench_port + 4 )) line
  line=$(_ucx_run "$1" "$port" tag_lat "$2" "$3" -R "${4:-50}") || { echo 0; return; }
  awk '{print $2}' <<< "$line"
}

bench_loopback_config=$(realpath "$(dirname "${BASH_SOURCE[0]}")/../config/examples/perf-loopback.toml")

# The --set arguments (one per line, for mapfile) that give the two memif ports of
# config/examples/perf-loopback.toml the socket SOCK and keep every other argument the
# file gives them (ring size, buffer size, zero-copy): loopback daemons started at the
# same time then never share a socket, and every script runs the file's memif settings.
bench_loopback_sets() { # sock
  local i dev
  for i in 0 1; do
    dev=$(sed -n "s|^device = \"\(net_memif$i,[^\"]*\)\".*|\1|p" "$bench_loopback_config")
    [ -n "$dev" ] || { echo "bench: no net_memif$i device in $bench_loopback_config" >&2; return 1; }
    printf '%s\n' --set "port.$i.device=$(sed "s|socket=[^,]*|socket=$1|" <<< "$dev")"
  done
}

# iwarpd with two memif ports wired to each other inside the process, one dataplane core
# on $DP_CPU (config/examples/perf-loopback.toml): what iwarp-perf --loopback runs on.
# Sets bench_iwarpd_pid; the daemon's verbs socket is /run/iwarpd/NAME.verbs.
bench_loopback_start() { # iwarpd name log-prefix [--set k=v ...]
  local bin=$1 name=$2 log=$3 sets; shift 3
  mapfile -t sets < <(bench_loopback_sets "/run/iwarpd/$name.memif") && [ ${#sets[@]} -eq 4 ] || return 1
  "$bin" --config "$bench_loopback_config" --name "$name" --core "$DP_CPU" "${sets[@]}" \
    "$@" > "$log.out" 2> "$log.err" &
  bench_iwarpd_pid=$!
  local _i
  for _i in $(seq 100); do
    [ -S "/run/iwarpd/$name.verbs" ] && { sleep 1; return 0; } # and the memif link up
    kill -0 "$bench_iwarpd_pid" 2>/dev/null || break
    sleep 0.1
  done
  tail -20 "$log.err" >&2
  echo "bench: iwarpd gave no verbs socket" >&2
  return 1
}
bench_loopback_stop() {
  [ -n "${bench_iwarpd_pid:-}" ] || return 0
  kill -INT "$bench_iwarpd_pid" 2>/dev/null || true
  local _i
  for _i in $(seq 50); do kill -0 "$bench_iwarpd_pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$bench_iwarpd_pid" 2>/dev/null || true
  wait "$bench_iwarpd_pid" 2>/dev/null || true
  bench_iwarpd_pid=
}
