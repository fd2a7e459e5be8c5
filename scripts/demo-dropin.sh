#!/usr/bin/env bash
# Debian's unmodified RDMA tools over iwarpd (docs/DROPIN.md): two iwarpd joined by memif
# (one dataplane core each), then through scripts/iwarp-run: ibv_devices and ibv_devinfo
# on daemon A, and rping (SEND/RECV, RDMA READ and WRITE, every ping validated; default
# and 4 KiB buffers, which overlap in the heap) and perftest (ib_send_bw, ib_write_bw,
# ib_read_bw, ib_send_lat, ib_write_lat, ib_read_lat; -R, 200 iterations; each tool
# again with -a (2 bytes to 8 MiB, 5 iterations each), the bandwidth tools with -q 4),
# rdma_server/rdma_client, ucmatose, and libfabric's fi_pingpong (verbs msg and
# verbs;ofi_rxm rdm) from daemon B to daemon A. Ends with
# "N passed, N failed"; exits non-zero when anything failed.
#
#   scripts/demo-dropin.sh                # builds iwarpd and the libraries (release)
#   DEMO_PROFILE=debug scripts/demo-dropin.sh   # the debug build (faster to build)
#   DEMO_PINGS=1000 scripts/demo-dropin.sh
# Needs root (DPDK) and rdma-core's tools (scripts/setup.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${DEMO_PROFILE:-release}
if [ "$profile" = release ]; then
  cargo build --release -q -p iwarpd -p iwarp-ibverbs -p iwarp-rdmacm
else
  cargo build -q -p iwarpd -p iwarp-ibverbs -p iwarp-rdmacm
fi
IWARPD=target/$profile/iwarpd
pings=${DEMO_PINGS:-100}
PROFILE_DIR=target/$profile TAG=dropin
# shellcheck source=scripts/dropin-pair.sh
. scripts/dropin-pair.sh

passed=0; failed=0
pass() { passed=$((passed + 1)); echo "demo-dropin: ok: $1"; }
fail() { failed=$((failed + 1)); echo "demo-dropin: FAILED: $1"; }

# check NAME CMD...: one program on daemon A, exit 0 and output kept.
check() {
  local name=$1; shift
  echo "== $name (daemon A)"
  if IWARP_VERBS_DIR=$tmp/a timeout 60 scripts/iwarp-run "$@" > "$tmp/$name.log" 2>&1; then
    head -n 12 "$tmp/$name.log"; pass "$name"
  else
    cat "$tmp/$name.log"; fail "$name"
  fi
}

# rping NAME PORT ARGS...: server on daemon A, client on daemon B, every ping validated.
rping_pair() {
  local name=$1 port=$2; shift 2
  echo "== $name: rping -C $pings -V $*, client on daemon B, server on daemon A"
  IWARP_VERBS_DIR=$tmp/a timeout 120 scripts/iwarp-run rping -s -a 198.18.0.1 -p "$port" \
    -C "$pings" -V "$@" > "$tmp/$name-server.log" 2>&1 &
  local srv=$! ok=0 srv_rc got
  for _ in $(seq 20); do
    if IWARP_VERBS_DIR=$tmp/b timeout 120 scripts/iwarp-run rping -c -a 198.18.0.1 -p "$port" \
      -C "$pings" -V -v "$@" > "$tmp/$name-client.log" 2>&1; then ok=1; break; fi
    grep -q "ping data" "$tmp/$name-client.log" && break
    sleep 0.3 # the server was not listening yet
  done
  wait "$srv" && srv_rc=0 || srv_rc=$?
  got=$(grep -c '^ping data: rdma-ping-' "$tmp/$name-client.log" || true)
  tail -n 2 "$tmp/$name-client.log" | cut -c1-120
  if [ "$ok" -eq 1 ] && [ "$srv_rc" -eq 0 ] && [ "$got" -eq "$pings" ]; then
    pass "$name ($got pings validated)"
  else
    cat "$tmp/$name-client.log" "$tmp/$name-server.log"
    fail "$name (client ok=$ok, server rc=$srv_rc, $got/$pings pings)"
  fi
}

# perftest NAME PORT TOOL ARGS...: server on daemon A, client on daemon B (rdma_cm, -R),
# both must exit 0 and the client print its result line.
# perftest_race LOG...: perftest's start-up race on iWARP (its -R hand-shake SENDs before
# the peer posted the receive; iWARP has no receiver-not-ready retry, so the SEND ends the
# connection: docs/DROPIN.md). scripts/interop-siw.sh treats it the same way with siw.
perftest_race() { grep -qE 'Failed to (exchange data|sync) between' "$@"; }

# perftest_pair NAME PORT TOOL ARGS...: server on daemon A, client on daemon B, -R -n ITERS
# (PERFTEST_ITERS, default 200);
# up to 3 tries (a fresh port each) when a try lost perftest's start-up race.
perftest_pair() {
  local name=$1 port=$2; shift 2
  local try crc src result iters=${PERFTEST_ITERS:-200}
  for try in 1 2 3; do
    echo "== $name: $* -R -n $iters, client on daemon B, server on daemon A (try $try)"
    IWARP_VERBS_DIR=$tmp/a timeout 120 scripts/iwarp-run "$@" -R -n "$iters" -p "$port" \
      > "$tmp/$name-server.log" 2>&1 &
    local srv=$!
    crc=0 src=0
    for _ in $(seq 20); do
      sleep 0.5 # the server listens
      crc=0
      IWARP_VERBS_DIR=$tmp/b timeout 120 scripts/iwarp-run "$@" -R -n "$iters" -p "$port" 198.18.0.1 \
        > "$tmp/$name-client.log" 2>&1 || crc=$?
      # Refused: the server was not listening yet (perftest says REJECTED, or "Unexpected
      # CM event ... 8": RDMA_CM_EVENT_REJECTED by number).
      [ "$crc" -ne 0 ] && grep -qE 'REJECTED|Unexpected CM event .* 8$' "$tmp/$name-client.log" || break
    done
    wait "$srv" || src=$?
    if [ "$crc" -ne 0 ] && [ "$try" -lt 3 ] \
      && perftest_race "$tmp/$name-client.log" "$tmp/$name-server.log"; then
      echo "note: $name lost perftest's start-up race (try $try); again on a fresh port"
      port=$((port + 100))
      continue
    fi
    break
  done
  result=$(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]' "$tmp/$name-client.log" | tail -n 1 || true)
  echo "$result"
  if [ "$crc" -eq 0 ] && [ "$src" -eq 0 ] && [ -n "$result" ]; then
    pass "$name"
  else
    grep -v register_driver "$tmp/$name-client.log" "$tmp/$name-server.log" | tail -n 40
    fail "$name (client rc=$crc, server rc=$src)"
  fi
}

# cm_pair NAME EXPECT SERVER_CMD... -- CLIENT_CMD...: the server on daemon A, the
# client on daemon B (retried while the server is not listening yet: refused); both
# exit 0 and the client's and the server's output each has EXPECT.
cm_pair() {
  local name=$1 expect=$2; shift 2
  local srv_cmd=() cli_cmd=() crc=0 src=0
  while [ "$1" != -- ]; do srv_cmd+=("$1"); shift; done
  shift
  cli_cmd=("$@")
  echo "== $name: ${srv_cmd[*]} on daemon A, ${cli_cmd[*]} on daemon B"
  IWARP_VERBS_DIR=$tmp/a timeout "${CM_TIMEOUT:-60}" scripts/iwarp-run "${srv_cmd[@]}" \
    > "$tmp/$name-server.log" 2>&1 &
  local srv=$!
  for _ in $(seq 20); do
    sleep 0.5 # the server listens
    crc=0
    IWARP_VERBS_DIR=$tmp/b timeout "${CM_TIMEOUT:-60}" scripts/iwarp-run "${cli_cmd[@]}" \
      > "$tmp/$name-client.log" 2>&1 || crc=$?
    [ "$crc" -ne 0 ] && grep -qE 'REJECTED|refused' "$tmp/$name-client.log" || break
  done
  wait "$srv" || src=$?
  tail -n 3 "$tmp/$name-client.log"
  if [ "$crc" -eq 0 ] && [ "$src" -eq 0 ] && grep -q "$expect" "$tmp/$name-client.log" \
    && grep -q "$expect" "$tmp/$name-server.log"; then
    pass "$name"
  else
    tail -n 30 "$tmp/$name-client.log" "$tmp/$name-server.log"
    # A tool's error lines go to stderr unbuffered, ahead of its buffered stdout in the
    # log: shown apart, wherever they are.
    grep -HiE 'error|fail|timeout|cq_readerr|fi_' "$tmp/$name-client.log" "$tmp/$name-server.log" \
      | grep -v register_driver | head -n 20 || true
    fail "$name (client rc=$crc, server rc=$src)"
  fi
}

check ibv_devices ibv_devices
check ibv_devinfo ibv_devinfo -v
rping_pair rping 7174
rping_pair rping-4k 7175 -S 4096
perftest_pair ib_send_bw 18516 ib_send_bw
perftest_pair ib_write_bw 18517 ib_write_bw
perftest_pair ib_write_bw-q4 18518 ib_write_bw -q 4
perftest_pair ib_read_bw 18519 ib_read_bw
perftest_pair ib_send_lat 18520 ib_send_lat
perftest_pair ib_write_lat 18521 ib_write_lat
perftest_pair ib_read_lat 18522 ib_read_lat
# Synchronous endpoints (rdma_create_ep, rdma_get_request, rdma_verbs.h's helpers).
cm_pair rdma_server-client 'end 0' rdma_server -p 7471 -- rdma_client -s 198.18.0.1 -p 7471
# ucmatose: 4 connections, 100 messages of 4 KiB each way on each; then with every id
# moved to a new event channel once connected (rdma_migrate_id, -m).
cm_pair ucmatose 'return status 0' ucmatose -p 7472 -c 4 -C 100 -S 4096 \
  -- ucmatose -s 198.18.0.1 -p 7472 -c 4 -C 100 -S 4096
cm_pair ucmatose-migrate 'return status 0' ucmatose -p 7473 -m -- ucmatose -s 198.18.0.1 -p 7473 -m
# libfabric (Debian's fabtests fi_pingpong), its verbs provider: msg endpoints, and rdm
# endpoints through ofi_rxm; every size, data checked (-c). The provider finds a device by
# the addresses of the host's interfaces (getifaddrs): the daemons' addresses go on a
# veth pair of the host for the test (fi_pingpong's own control connection also takes
# them, through the kernel).
ip link del iwdrop0 2>/dev/null || true
ip link add iwdrop0 type veth peer name iwdrop1
trap 'cleanup; ip link del iwdrop0 2>/dev/null || true' EXIT
ip addr add 198.18.0.1/32 dev iwdrop0; ip addr add 198.18.0.2/32 dev iwdrop1
ip link set iwdrop0 up; ip link set iwdrop1 up
fab=(-I 10 -S all -c)
# Ports below both ephemeral ranges (the kernel's 32768-60999, which the control
# connection's server binds in; the daemons' 49152-65535): a port inside the kernel's
# range can be held by any outgoing connection of the host, and the server's bind then
# fails with EADDRINUSE (seen once with 47602).
CM_TIMEOUT=240 cm_pair fi_pingpong-msg 'bytes' fi_pingpong -p verbs -e msg "${fab[@]}" -B 17601 -d "iwarp_$a" \
  -- fi_pingpong -p verbs -e msg "${fab[@]}" -P 17601 -d "iwarp_$b" 198.18.0.1
CM_TIMEOUT=240 cm_pair fi_pingpong-rdm 'bytes' fi_pingpong -p 'verbs;ofi_rxm' -e rdm "${fab[@]}" -B 17602 \
  -d "iwarp_$a" -- fi_pingpong -p 'verbs;ofi_rxm' -e rdm "${fab[@]}" -P 17602 -d "iwarp_$b" 198.18.0.1
# Every size from 2 bytes to 8 MiB (-a), a few iterations each, every tool; the bandwidth
# tools also on 4 QPs (-q 4).
PERFTEST_ITERS=5 perftest_pair ib_write_bw-all 18523 ib_write_bw -a
PERFTEST_ITERS=5 perftest_pair ib_send_bw-all 18524 ib_send_bw -a
PERFTEST_ITERS=5 perftest_pair ib_read_bw-all 18525 ib_read_bw -a
PERFTEST_ITERS=5 perftest_pair ib_send_lat-all 18526 ib_send_lat -a
PERFTEST_ITERS=5 perftest_pair ib_write_lat-all 18527 ib_write_lat -a
PERFTEST_ITERS=5 perftest_pair ib_read_lat-all 18528 ib_read_lat -a
perftest_pair ib_send_bw-q4 18529 ib_send_bw -q 4
perftest_pair ib_read_bw-q4 18530 ib_read_bw -q 4

echo "demo-dropin: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
