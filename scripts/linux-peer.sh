#!/usr/bin/env bash
# iwarpd against a real Linux peer: ping, TCP handshakes and MPA Request/Reply exchanges
# from the Linux kernel's own stack, clean and then with loss, delay and reordering.
#
#   sudo scripts/linux-peer.sh [--pmd af_packet|af_xdp|both] [--impair auto|netem|wire]
#                              [--iwarpd PATH] [--keep]
#
# Topology (addresses only in 198.18.0.0/15; all in network namespaces this script owns):
#
#   [$P-linux]  $P-l0 198.18.1.1/24 ==veth== $P-wl [$P-wire] $P-wd ==veth== $P-d0 (no IP) [$P-daemon]
#                                                                                iwarpd 198.18.1.2
#
# Linux owns 198.18.1.1 on its veth. iwarpd runs in the daemon namespace on
# net_af_packet0,iface=$P-d0 (then net_af_xdp0), whose veth end has no address, so the
# kernel there never answers for 198.18.1.2. The wire namespace joins the two veth pairs:
# with a Linux bridge whose two ports get `tc netem` (loss 5%, delay 5ms 2ms, reorder 25% 50%)
# in the impaired phase, or, on kernels without sch_netem (tc: "Specified qdisc kind is
# unknown"), with scripts/netem-wire.py, a userspace wire that applies the same impairments.
# Either way both directions are impaired, whatever path the PMD transmits on (af_xdp
# bypasses the daemon veth's qdisc, so netem there would only cover one direction).
#
# Steps per PMD: start iwarpd (loadgen server on 7000, stats socket) and wait until it
# answers; ping -c 5 (all answered); 20 MPA handshakes (all succeed); 3 with a bad hello (all
# rejected); 10 with the Request sent in 6-byte TCP segments (all succeed); impairments on;
# ping -c 20 (at least 10 answered); 20 + 10 split MPA handshakes (all succeed: TCP
# retransmits and reassembles); impairments off; `iwarpd stats` (printed, and the load generator
# server's accept/reject counts must match); SIGINT, iwarpd must exit 0 within its grace
# period. One line per step, then `linux-peer: N passed, N failed`; exit 1 on any failure.
#
# Environment: IWARPD (binary; default $CARGO_TARGET_DIR/release/iwarpd, built if missing),
# LINUX_PEER_PREFIX (names of namespaces and links, default iwlp; at most 8 characters).
# Run as root. Idempotent: leftovers of an earlier run with the same prefix are removed
# first; everything is removed on exit (trap), also on failure or Ctrl-C.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
P=${LINUX_PEER_PREFIX:-iwlp}
NS_L=$P-linux NS_W=$P-wire NS_D=$P-daemon
IF_L=$P-l0 IF_WL=$P-wl IF_WD=$P-wd IF_D=$P-d0 BR=$P-br
LINUX_IP=198.18.1.1 DAEMON_IP=198.18.1.2 PORT=7000
NAME=$P-peer                   # daemon.name: DPDK file prefix
GRACE_MS=2000                  # daemon.shutdown_grace_ms
NETEM_ARGS="loss 5% delay 5ms 2ms reorder 25% 50%"
WIRE_ARGS="--loss 5 --delay-ms 5 --jitter-ms 2 --reorder 25 --reorder-corr 50 --log-drops"
PMDS="af_packet af_xdp"
IMPAIR=auto
KEEP=0
IWARPD=${IWARPD:-${CARGO_TARGET_DIR:-$ROOT/target}/release/iwarpd}

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case $1 in
        --pmd) case ${2:-} in
                   af_packet|af_xdp) PMDS=$2 ;;
                   both) PMDS="af_packet af_xdp" ;;
                   *) echo "linux-peer: --pmd is af_packet, af_xdp or both" >&2; exit 2 ;;
               esac; shift 2 ;;
        --impair) case ${2:-} in
                      auto|netem|wire) IMPAIR=$2 ;;
                      *) echo "linux-peer: --impair is auto, netem or wire" >&2; exit 2 ;;
                  esac; shift 2 ;;
        --iwarpd) IWARPD=${2:?}; shift 2 ;;
        --keep) KEEP=1; shift ;;   # keep the temp dir (logs) on exit
        -h|--help) usage; exit 0 ;;
        *) echo "linux-peer: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
if [ ${#P} -gt 8 ] || ! [[ $P =~ ^[a-z][a-z0-9]*$ ]]; then
    echo "linux-peer: LINUX_PEER_PREFIX must be 1-8 lower-case letters/digits" >&2; exit 2
fi
[ "$(id -u)" -eq 0 ] || { echo "linux-peer: run as root (network namespaces, AF_PACKET, XDP)" >&2; exit 2; }
for t in ip tc ethtool ping python3; do
    command -v $t >/dev/null || { echo "linux-peer: $t is missing" >&2; exit 2; }
done

PASS=0 FAIL=0
TMP=$(mktemp -d /tmp/linux-peer.XXXXXX)
DAEMON_PID="" WIRE_PID="" MODE=""

# ---------------------------------------------------------------------------------------------
# Set-up and clean-up

remove_netns() {
    local ns
    for ns in "$NS_L" "$NS_W" "$NS_D"; do
        ip netns list | awk '{print $1}' | grep -qx "$ns" || continue
        # Processes left in our own namespaces by an earlier run (iwarpd, the wire).
        local pids; pids=$(ip netns pids "$ns" 2>/dev/null)
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
    rm -rf "/var/run/dpdk/$NAME"
}

stop_wire() {
    if [ -n "$WIRE_PID" ]; then
        kill -TERM "$WIRE_PID" 2>/dev/null
        wait "$WIRE_PID" 2>/dev/null
        WIRE_PID=""
    fi
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
        kill -INT "$DAEMON_PID" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$DAEMON_PID" 2>/dev/null
        wait "$DAEMON_PID" 2>/dev/null
    fi
    stop_wire
    remove_netns
    if [ $KEEP -eq 1 ]; then echo "linux-peer: logs kept in $TMP" >&3; else rm -rf "$TMP"; fi
    exit $rc
}
exec 3>&1   # the terminal/CI log, also while a step's output goes to its log file
trap cleanup EXIT
trap 'echo "linux-peer: interrupted" >&3; exit 130' INT TERM

netem_available() {
    # Probe on the wire namespace's loopback (tc: "Specified qdisc kind is unknown" if not).
    ip netns exec "$NS_W" tc qdisc add dev lo root netem delay 1ms 2>/dev/null || return 1
    ip netns exec "$NS_W" tc qdisc del dev lo root 2>/dev/null
    return 0
}

setup_topology() {
    remove_netns
    local ns
    for ns in "$NS_L" "$NS_W" "$NS_D"; do
        ip netns add "$ns" || return 1
        ip -n "$ns" link set lo up
        # No IPv6 chatter (router solicitations, MLD) on the links.
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    done
    ip link add name "$IF_L" netns "$NS_L" type veth peer name "$IF_WL" netns "$NS_W" || return 1
    ip link add name "$IF_D" netns "$NS_D" type veth peer name "$IF_WD" netns "$NS_W" || return 1
    ip -n "$NS_L" addr add "$LINUX_IP/24" dev "$IF_L"
    # Linux computes its checksums in software: on a veth it would otherwise leave TCP
    # checksums partial (CHECKSUM_PARTIAL), which an AF_PACKET/AF_XDP reader sees as bad
    # checksums, and send TSO super-frames. iwarpd runs with checksum = "software".
    ip netns exec "$NS_L" ethtool -K "$IF_L" tx off tso off gso off >/dev/null 2>&1
    local i
    for i in "$IF_WL" "$IF_WD"; do
        ip netns exec "$NS_W" ethtool -K "$i" tx off tso off gso off gro off >/dev/null 2>&1
    done
    ip -n "$NS_L" link set "$IF_L" up
    ip -n "$NS_D" link set "$IF_D" up
    ip -n "$NS_W" link set "$IF_WL" up
    ip -n "$NS_W" link set "$IF_WD" up
    case $IMPAIR in
        auto) if netem_available; then MODE=netem; else MODE=wire; fi ;;
        netem) netem_available || { echo "linux-peer: this kernel has no sch_netem (use --impair wire)"; return 1; }
               MODE=netem ;;
        wire) MODE=wire ;;
    esac
    if [ $MODE = netem ]; then
        ip -n "$NS_W" link add name "$BR" type bridge || return 1
        ip -n "$NS_W" link set "$IF_WL" master "$BR"
        ip -n "$NS_W" link set "$IF_WD" master "$BR"
        ip -n "$NS_W" link set "$BR" up
    else
        start_wire "" || return 1
    fi
}

# The userspace wire (no arguments: a clean wire).
start_wire() {
    stop_wire
    # shellcheck disable=SC2086
    ip netns exec "$NS_W" python3 "$ROOT/scripts/netem-wire.py" "$IF_WL" "$IF_WD" $1 \
        >"$TMP/wire.log" 2>&1 3>&- &
    WIRE_PID=$!
    sleep 0.3
    kill -0 "$WIRE_PID" 2>/dev/null || { cat "$TMP/wire.log"; return 1; }
}

impair_on() {
    if [ $MODE = netem ]; then
        # Egress of both bridge ports: Linux -> daemon and daemon -> Linux.
        # shellcheck disable=SC2086
        ip netns exec "$NS_W" tc qdisc replace dev "$IF_WD" root netem $NETEM_ARGS &&
        ip netns exec "$NS_W" tc qdisc replace dev "$IF_WL" root netem $NETEM_ARGS
    else
        start_wire "$WIRE_ARGS"
    fi
}

impair_off() {
    if [ $MODE = netem ]; then
        ip netns exec "$NS_W" tc -s qdisc show dev "$IF_WD" | sed -n 's/^ *\(Sent.*\)/netem to daemon: \1/p'
        ip netns exec "$NS_W" tc -s qdisc show dev "$IF_WL" | sed -n 's/^ *\(Sent.*\)/netem to linux:  \1/p'
        ip netns exec "$NS_W" tc qdisc del dev "$IF_WD" root &&
        ip netns exec "$NS_W" tc qdisc del dev "$IF_WL" root
    else
        stop_wire
        sed -n 's/^netem-wire: \([^ ]*->[^ ]*: in .*\)/wire \1/p' "$TMP/wire.log"
        # What was dropped, by kind (every dropped frame is in wire-impaired.log).
        awk '/^netem-wire: drop/ {
                 dir = ($3 ~ /-wl->/) ? "to daemon" : "to linux"
                 if ($4 != "TCP") kind = $4
                 else if ($8 ~ /S/) kind = "SYN"
                 else if ($8 ~ /F/) kind = "FIN"
                 else if ($NF > 0) kind = "data"
                 else kind = "ACK"
                 n[dir ": " kind]++ }
             END { for (k in n) printf "%s %d, ", k, n[k]; print "" }' "$TMP/wire.log" |
            sed 's/, $//; s/^/wire dropped: /'
        cat "$TMP/wire.log" >>"$TMP/wire-impaired.log"
        : >"$TMP/wire.log"
        start_wire ""
    fi
}

# ---------------------------------------------------------------------------------------------
# Steps: `step NAME FUNCTION ARGS...` runs the function with its output in a log, prints one
# line (with $DETAIL), and on failure the log.

DETAIL=""
step() {
    local name=$1; shift
    local t0=$SECONDS log="$TMP/step.log"
    DETAIL=""
    "$@" >"$log" 2>&1
    local rc=$?
    local dt=$((SECONDS - t0))
    if [ $rc -eq 0 ]; then
        PASS=$((PASS + 1))
        printf 'linux-peer: PASS %-46s %s (%d s)\n' "$name" "$DETAIL" "$dt"
    else
        FAIL=$((FAIL + 1))
        printf 'linux-peer: FAIL %-46s %s (%d s)\n' "$name" "$DETAIL" "$dt"
        sed 's/^/    | /' "$log" | tail -40
    fi
    return $rc
}

daemon_cmd() {
    "$IWARPD" --config "$TMP/iwarpd.toml" "$@"
}

write_config() {
    local pmd=$1 device base
    case $pmd in
        # qdisc_bypass=0: frames leave through the veth's qdisc like any socket's.
        af_packet) device="net_af_packet0,iface=$IF_D,framesz=2048,framecnt=4096,qdisc_bypass=0"
                   base=af-packet-veth.toml ;;
        af_xdp) device="net_af_xdp0,iface=$IF_D,start_queue=0,queue_count=1"
                base=af-xdp-veth.toml ;;
    esac
    # The example config with this run's port, names and sockets.
    "$IWARPD" --config "$ROOT/config/examples/$base" \
        --set "daemon.name=$NAME" \
        --set "daemon.stats_socket=$TMP/iwarpd.sock" \
        --set "daemon.shutdown_grace_ms=$GRACE_MS" \
        --set "port.0.device=$device" \
        --set "port.0.ipv4=$DAEMON_IP" \
        --set "port.0.prefix_len=24" \
        --set "port.0.checksum=software" \
        --set "loadgen.listen_port=$PORT" \
        --set "capture.path=$TMP/iwarpd-$pmd.pcap" \
        print-config >"$TMP/iwarpd.toml"
}

start_daemon() {
    local pmd=$1
    write_config "$pmd" || { DETAIL="bad configuration"; return 1; }
    : >"$TMP/iwarpd.log"
    ip netns exec "$NS_D" "$IWARPD" --config "$TMP/iwarpd.toml" >"$TMP/iwarpd.log" 2>&1 3>&- &
    DAEMON_PID=$!
    local t0; t0=$(date +%s%N)
    for _ in $(seq 300); do
        if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
            wait "$DAEMON_PID"; DETAIL="iwarpd exited with $? at start-up"; DAEMON_PID=""
            cat "$TMP/iwarpd.log"; return 1
        fi
        if daemon_cmd stats >/dev/null 2>&1; then
            DETAIL="up in $(( ($(date +%s%N) - t0) / 1000000 )) ms, pid $DAEMON_PID"
            cat "$TMP/iwarpd.log"
            return 0
        fi
        sleep 0.1
    done
    DETAIL="no answer on the stats socket within 30 s"
    cat "$TMP/iwarpd.log"
    return 1
}

# ping_check COUNT MIN: COUNT echo requests 0.2 s apart, at least MIN answered. When every
# request must be answered (MIN = COUNT), ping runs with a deadline (-w): it waits for late
# replies instead of giving up two RTTs after the last request (a busy 2-CPU machine can
# delay a reply that long), and sends at most one extra request meanwhile.
ping_check() {
    local count=$1 min=$2 out got sent wait=(-W 2)
    [ "$min" -eq "$count" ] && wait=(-w 15)
    out=$(ip netns exec "$NS_L" ping -n -c "$count" -i 0.2 "${wait[@]}" "$DAEMON_IP" 2>&1)
    echo "$out"
    got=$(sed -n 's/.* \([0-9][0-9]*\) received.*/\1/p' <<<"$out")
    sent=$(sed -n 's/^\([0-9][0-9]*\) packets transmitted.*/\1/p' <<<"$out")
    got=${got:-0} sent=${sent:-0}
    DETAIL="$got of $sent answered (need $min of $count)$(sed -n 's|^rtt .* = [0-9.]*/\([0-9.]*\)/.*|, rtt avg \1 ms|p' <<<"$out")"
    [ "$got" -ge "$min" ] && [ "$sent" -le $((count + (min == count ? 1 : 0))) ] && return 0
    diagnose
    return 1
}

# What each hop saw, after a failed step.
diagnose() {
    echo "--- iwarpd counters"
    daemon_cmd stats | sed -n '1,/^core 0/p' | grep -E 'frames|icmp|arp|drop|tcp_segments'
    echo "--- linux: neighbours, ICMP and TCP counters"
    ip -n "$NS_L" neigh show dev "$IF_L"
    ip -n "$NS_L" -s link show dev "$IF_L" | sed -n '3,6p'
    ip netns exec "$NS_L" cat /proc/net/snmp | grep -E '^(Icmp|Tcp):'
    if [ -n "$WIRE_PID" ]; then
        echo "--- wire"
        kill -USR1 "$WIRE_PID"; sleep 0.7
        tail -3 "$TMP/wire.log"
    fi
}

# mpa_check COUNT TIMEOUT MAY_FAIL [client options]: COUNT handshakes, at most MAY_FAIL of
# them may fail (only under impairment; every failure is printed first).
mpa_check() {
    local count=$1 timeout=$2 may_fail=$3; shift 3
    local out rc ok
    out=$(ip netns exec "$NS_L" python3 "$ROOT/scripts/mpa-client.py" "$DAEMON_IP" "$PORT" \
        --count "$count" --timeout "$timeout" "$@" 2>&1)
    rc=$?
    grep 'FAILED' <<<"$out" || true
    echo "$out"
    DETAIL=$(tail -1 <<<"$out" | sed 's/^mpa-client: //')
    ok=$(tail -1 <<<"$out" | grep -oE '^mpa-client: [0-9]+' | grep -oE '[0-9]+$' || echo 0)
    if [ -z "$*" ] || [ "$*" = "--split 6" ]; then HS_OK=$((HS_OK + ok)); fi
    [ $rc -eq 0 ] && return 0
    if [ "$ok" -ge $((count - may_fail)) ]; then
        HS_SLACK=$((HS_SLACK + count - ok))
        DETAIL="$DETAIL (tolerated under impairment: $(grep -m1 FAILED <<<"$out"))"
        return 0
    fi
    diagnose
    return $rc
}

stats_check() {
    local accepted=$1 rejected=$2 slack=${3:-0} json
    daemon_cmd stats | sed -n '1,/^core 0/p' | sed '$d'
    json=$(daemon_cmd stats --json) || { DETAIL="stats --json failed"; return 1; }
    DETAIL=$(python3 - "$accepted" "$rejected" "$json" "$slack" <<'EOF'
import json, sys
want_acc, want_rej, doc = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
# A handshake the client gave up on under impairment may still have been accepted (or
# failed) on the daemon's side.
slack = int(sys.argv[4])
srv = doc.get("loadgen_server", [])
acc = sum(s["accepted"] for s in srv)
rej = sum(s["rejected"] for s in srv)
failed = sum(s["failed"] for s in srv)
ok = want_acc <= acc <= want_acc + slack and rej == want_rej and failed <= slack
print(f"loadgen server: {acc} accepted (want {want_acc}), {rej} rejected (want {want_rej}), "
      f"{failed} failed")
sys.exit(0 if ok else 1)
EOF
)
}

stop_daemon() {
    local pid=$DAEMON_PID limit=$(( GRACE_MS / 100 + 20 )) n=0 rc
    kill -INT "$pid" || { DETAIL="no such process"; return 1; }
    while kill -0 "$pid" 2>/dev/null && [ $n -lt $limit ]; do sleep 0.1; n=$((n + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid"; wait "$pid" 2>/dev/null; DAEMON_PID=""
        DETAIL="still running $((limit / 10)) s after SIGINT (killed)"
        tail -30 "$TMP/iwarpd.log"; return 1
    fi
    wait "$pid"; rc=$?
    DAEMON_PID=""
    DETAIL="exit status $rc after $((n * 100)) ms"
    tail -12 "$TMP/iwarpd.log"
    [ $rc -eq 0 ]
}

# ---------------------------------------------------------------------------------------------

if [ ! -x "$IWARPD" ]; then
    echo "linux-peer: building iwarpd ($IWARPD not found)"
    (cd "$ROOT" && cargo build --release -p iwarpd) || exit 1
    [ -x "$IWARPD" ] || { echo "linux-peer: no iwarpd at $IWARPD after the build" >&2; exit 1; }
fi
if [ "$(cat /proc/sys/vm/nr_hugepages 2>/dev/null || echo 0)" -eq 0 ]; then
    echo "linux-peer: no hugepages reserved; iwarpd falls back to --no-huge"
fi

T0=$SECONDS
step "topology (3 netns, 2 veth pairs)" setup_topology || exit 1
echo "linux-peer: impairments through $([ "$MODE" = netem ] && echo "tc netem on a bridge" || echo "scripts/netem-wire.py (no sch_netem in this kernel)")"

for pmd in $PMDS; do
    if ! step "[$pmd] start iwarpd" start_daemon "$pmd"; then
        continue
    fi
    step "[$pmd] ping -c 5" ping_check 5 5
    HS_OK=0; HS_SLACK=0
    step "[$pmd] 20 MPA handshakes" mpa_check 20 10 0
    step "[$pmd] 3 MPA handshakes, bad hello" mpa_check 3 10 0 --bad-hello
    step "[$pmd] 10 MPA handshakes, split Request" mpa_check 10 10 0 --split 6
    if step "[$pmd] impairments on" impair_on; then
        step "[$pmd] ping -c 20, impaired" ping_check 20 10
        step "[$pmd] 20 MPA handshakes, impaired" mpa_check 20 30 1
        step "[$pmd] 10 MPA handshakes, split, impaired" mpa_check 10 30 1 --split 6
        step "[$pmd] impairments off" impair_off
        cat "$TMP/step.log"
    fi
    step "[$pmd] iwarpd stats" stats_check "$HS_OK" 3 "$HS_SLACK"
    cat "$TMP/step.log"
    step "[$pmd] SIGINT, exit 0 within grace" stop_daemon
done

echo "linux-peer: $PASS passed, $FAIL failed ($((SECONDS - T0)) s)"
[ $FAIL -eq 0 ]
