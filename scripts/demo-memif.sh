#!/usr/bin/env bash
# The appliance's main job on a machine without a NIC: two iwarpd joined by memif (one
# dataplane core each) connect QPs and move data with RDMA WRITE, READ and SEND, every byte
# verified by the load generator's pattern check; prints a summary and exits 0 on success.
#
#   scripts/demo-memif.sh                 # builds iwarpd and iwarpctl (release) if needed
#   IWARPD=/path/to/iwarpd scripts/demo-memif.sh
#   DEMO_SECONDS=3 DEMO_QPS=4 scripts/demo-memif.sh
#   DEMO_CONFIG=/etc/iwarpd/%s.toml.example scripts/demo-memif.sh   # installed examples
# Needs root (DPDK). Uses hugepages if reserved (scripts/setup.sh reserves 512), else
# --no-huge with a warning.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${IWARPD:-}" ]; then
  cargo build --release -q -p iwarpd -p iwarpctl
  IWARPD=target/release/iwarpd
fi
secs=${DEMO_SECONDS:-1}
conf=${DEMO_CONFIG:-config/examples/%s.toml}
qps=${DEMO_QPS:-2}
id=$$
tmp=$(mktemp -d /tmp/iwarpd-demo.XXXXXX)
srv_name=demo-a-$id; cli_name=demo-b-$id
sock=/run/iwarpd/demo-$id.memif
common=(--set "tcp.delayed_ack_us=0")
srv_pid=
cleanup() {
  if [ -n "$srv_pid" ] && kill -0 "$srv_pid" 2>/dev/null; then kill -INT "$srv_pid" 2>/dev/null || true; sleep 2; kill -9 "$srv_pid" 2>/dev/null || true; fi
  [ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
ncpu=$(nproc)
srv_cpu=$(( ncpu > 1 ? 1 : 0 )); cli_cpu=0

"$IWARPD" --config "$(printf "$conf" memif-server)" --name "$srv_name" --core "$srv_cpu" \
  --device "net_memif0,role=server,socket=$sock" "${common[@]}" --log-level warn \
  --capture "$tmp/server.pcap" --set capture.snaplen=256 \
  > "$tmp/server.out" 2> "$tmp/server.err" &
srv_pid=$!
for _ in $(seq 100); do
  "$IWARPD" --name "$srv_name" stats >/dev/null 2>&1 && break
  kill -0 "$srv_pid" 2>/dev/null || { cat "$tmp/server.err"; echo "demo: the server daemon exited"; exit 1; }
  sleep 0.1
done

pass=0; fail=0
printf '%-6s %10s %12s %12s %14s  %s\n' op size messages Gbit/s "verified (B)" result
for op in write read send; do
  for size in 64 65536; do
    out=$tmp/$op-$size
    set +e
    timeout 120 "$IWARPD" --config "$(printf "$conf" memif-client)" --name "$cli_name" --core "$cli_cpu" \
      --device "net_memif0,role=client,socket=$sock" "${common[@]}" --log-level warn \
      loadgen --peer 198.18.0.1:7000 --op "$op" --size "$size" --qps "$qps" --depth 8 \
      --seconds "$secs" --warmup-seconds 0 --verify --json "$out.json" > "$out.txt" 2> "$out.err"
    rc=$?
    set -e
    msgs=$( (grep -oE '"messages":[0-9]+' "$out.json" 2>/dev/null || true) | head -1 | cut -d: -f2)
    # The final report's goodput (the interval lines print Gbit/s too).
    gbps=$( (grep -oE '"goodput_gbps":[0-9.]+' "$out.json" 2>/dev/null || true) | head -1 | cut -d: -f2)
    mism=$( (grep -oE 'verify mismatches [0-9]+' "$out.txt" || true) | grep -oE '[0-9]+$' || true)
    if [ "$rc" -eq 0 ] && [ "${msgs:-0}" -gt 0 ] && [ "${mism:-1}" -eq 0 ]; then
      res=ok; pass=$((pass + 1))
    else
      res="FAILED (exit $rc)"; fail=$((fail + 1))
      sed 's/^/    /' "$out.err" | tail -20; sed 's/^/    /' "$out.txt"
    fi
    printf '%-6s %10s %12s %12s %14s  %s\n' "$op" "$size" "${msgs:-0}" "${gbps:-0}" \
      "$(( ${msgs:-0} * size ))" "$res"
  done
done

# What the server verified on its side (SEND payloads, WRITE slots), then an orderly stop.
"$IWARPD" --name "$srv_name" stats > "$tmp/server-stats.txt" 2>&1 || true
grep -E "loadgen server|verified" "$tmp/server-stats.txt" | head -4 | sed 's/^/server: /'
kill -INT "$srv_pid"
set +e
for _ in $(seq 100); do kill -0 "$srv_pid" 2>/dev/null || break; sleep 0.1; done
wait "$srv_pid"; src=$?
set -e
srv_pid=
if [ "$src" -eq 0 ]; then pass=$((pass + 1)); echo "server: orderly shutdown, exit 0"
else fail=$((fail + 1)); echo "server: exit $src"; tail -20 "$tmp/server.err"; fi
mism=$( (grep -oE '[0-9]+ mismatches' "$tmp/server.err" || true) | awk '{s+=$1} END {print s+0}')
[ "$mism" -eq 0 ] || { fail=$((fail + 1)); echo "server: $mism verify mismatches"; }
# The server's capture, decoded by Wireshark's iWARP dissectors: one MPA Request and Reply
# per connection, and RDMA traffic.
if command -v tshark >/dev/null 2>&1; then
  opts=(--disable-heuristic rpcrdma_iwarp --disable-heuristic smb_direct_iwarp
        -o tcp.try_heuristic_first:TRUE -o tcp.desegment_tcp_streams:TRUE)
  tshark -r "$tmp/server.pcap" "${opts[@]}" > "$tmp/server.txt" 2>/dev/null || true
  req=$(grep -c 'MPA Request Frame' "$tmp/server.txt" || true)
  rep=$(grep -c 'MPA Reply Frame' "$tmp/server.txt" || true)
  ddp=$(grep -c 'DDP/RDMA' "$tmp/server.txt" || true)
  conns=$(( 6 * qps ))
  if [ "$req" -eq "$conns" ] && [ "$rep" -eq "$conns" ] && [ "$ddp" -gt 0 ]; then
    pass=$((pass + 1)); echo "capture: $(wc -l < "$tmp/server.txt") frames; tshark: $req MPA Requests, $rep Replies, $ddp DDP/RDMA frames"
  else
    fail=$((fail + 1)); echo "capture: tshark found $req MPA Requests, $rep Replies (expected $conns each), $ddp DDP/RDMA frames"
  fi
fi
echo "demo-memif: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
