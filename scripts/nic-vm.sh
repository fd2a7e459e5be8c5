#!/usr/bin/env bash
# iwarpd on an emulated PCI NIC: two QEMU guests (TCG), each with a NIC on a bridge inside a
# network namespace, the NIC bound to a DPDK driver in the guest, the host-built iwarpd
# running in both and its load generator moving verified WRITE/READ/SEND traffic between
# them. One line per cell, `PASS name` or `FAIL name (reason)`, then `N passed, N failed`;
# exit status 0 only when every cell passed. Guests, taps, bridge and namespace are removed
# on exit (also on failure or Ctrl-C).
#
#   sudo scripts/nic-vm.sh [--only REGEX] [--list] [--keep-up] [--seconds S]
#
# Cells (groups boot their own pair of guests, about 30-60 s each under TCG):
#   virtio-1q.{write,read,send}  virtio-net-pci, 1 queue pair, 1 dataplane core each
#   virtio-1q.link-flap          QMP set_link off for 2 s on A during a verified WRITE run:
#                                the run completes, A logs and counts the link down/up
#   virtio-1q.ports              iwarpctl ports shows PCI address, driver, queues, offloads
#   virtio-2q-rss.{write,send}   virtio-net-pci mq=on,rss=on, 2 queue pairs, 2 dataplane
#                                cores each: connections on both cores, 0 frames forwarded
#                                between cores in software, TCP checksums by the NIC (counted)
#   e1000e.{write,read,send}     A on e1000e (DPDK net_e1000_em), B on virtio-net-pci
#   e1000e.unplug                QMP device_del of A's NIC during traffic: A reports an
#                                error and stops cleanly (no crash)
#   jumbo.{write,send,frames}    virtio-net-pci with host_mtu=9000, taps and bridge at 9000,
#                                iwarpd at MTU 9000: verified traffic, in frames > 1514 B
#   siw.{write,read,send}        A (iwarpd on virtio-net-pci) against Linux siw in siw-vm's
#                                guest g1 on the same bridge: siw_peer's load generator
#                                client (MPA rev 2, CRC) to A's server, 3 x 64 KiB verified
#   siw.rping-{to,from}-iwarpd   rping on siw against iw-rping on A, both directions
# The guests run siw-vm's Debian kernel (scripts/nic-vm/build.sh adds vfio/uio modules);
# Debian's kernel has no CONFIG_VFIO_NOIOMMU, so without an IOMMU the NIC is bound to
# uio_pci_generic (DPDK then runs with IOVA = PA).
# Environment: IWARPD (default target/release/iwarpd, brought up to date by cargo), SIWVM (the siw-vm
# harness; default ../shared/siw-vm), SIWVM_NETNS (iwnic), SIWVM_BRIDGE (nicbr0),
# SIWVM_NET (198.18.9), NICVM_CAPTURE=1 captures ARP and TCP SYN/FIN/RST frames on the
# bridge per group (target/nic-vm/out/GROUP.pcap).
# NICVM_TRACE=1 writes QEMU's virtio-net RSS trace events per guest (RUNDIR/G/qemu-trace.log);
# NICVM_RX_QUEUE_SIZE sets virtio-net's receive descriptors per queue (default 1024, QEMU's 256).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/scripts/nic-vm/lib.sh"
TGT=${CARGO_TARGET_DIR:-$ROOT/target}
# Without IWARPD, the release daemon is brought up to date by cargo first (a stale binary
# would run against this tree's tests).
BUILD_IWARPD=0
[ -z "${IWARPD:-}" ] && BUILD_IWARPD=1
IWARPD=${IWARPD:-$TGT/release/iwarpd}
IWARPCTL=${IWARPCTL:-$(dirname "$IWARPD")/iwarpctl}
OUT=$ROOT/target/nic-vm/out
ONLY="" LIST=0 KEEP_UP=0 SECS=${NICVM_SECONDS:-3}
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case $1 in
        --only) ONLY=${2:?}; shift 2 ;;
        --list) LIST=1; shift ;;
        --keep-up) KEEP_UP=1; shift ;;
        --seconds) SECS=${2:?}; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "nic-vm: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
CELLS=(virtio-1q.write virtio-1q.read virtio-1q.send virtio-1q.ports virtio-1q.link-flap
       virtio-2q-rss.write virtio-2q-rss.send virtio-2q-rss.spread
       e1000e.write e1000e.read e1000e.send e1000e.unplug
       jumbo.write jumbo.send jumbo.frames
       siw.write siw.read siw.send siw.rping-to-iwarpd siw.rping-from-iwarpd)
if [ $LIST = 1 ]; then printf '%s\n' "${CELLS[@]}"; exit 0; fi
want() { [ -z "$ONLY" ] || [[ $1 =~ $ONLY ]]; }
group_wanted() { local c; for c in "${CELLS[@]}"; do [[ $c == "$1".* ]] && want "$c" && return 0; done; return 1; }

PASS=0 FAIL=0 T0=$(date +%s)
pass() { PASS=$((PASS + 1)); echo "PASS $1${2:+ ($2)}"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1 ($2)"; }
# fail_group GROUP REASON: every wanted cell of GROUP fails for REASON
fail_group() { local c; for c in "${CELLS[@]}"; do [[ $c == "$1".* ]] && want "$c" && fail "$c" "$2"; done; }
# json_first FILE KEY: the first value of "KEY":N in FILE (iwarpd stats --json: the total)
json_first() { grep -oE "\"$2\":[0-9]+" "$1" | head -1 | cut -d: -f2; }

CAPTURE_PID=""
stop_capture() {
    if [ -n "$CAPTURE_PID" ]; then kill -INT "$CAPTURE_PID" 2>/dev/null; wait "$CAPTURE_PID" 2>/dev/null; CAPTURE_PID=""; fi
    return 0
}

cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_capture
    if [ $KEEP_UP = 0 ]; then
        for g in a b; do guest_stop "$g"; done
        "$SIWVM/down.sh" --keep-netns g1 >/dev/null 2>&1
        net_down
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ "$(id -u)" -eq 0 ] || { echo "nic-vm: run as root (QEMU, namespaces)" >&2; exit 2; }
[ -n "$SIWVM" ] && [ -f "$SIWVM/lib/qga.py" ] || { echo "nic-vm: siw-vm harness not found (set SIWVM)" >&2; exit 2; }
if [ $BUILD_IWARPD = 1 ] || [ ! -x "$IWARPD" ] || [ ! -x "$IWARPCTL" ]; then
    nlog "building iwarpd and iwarpctl (release)"
    (cd "$ROOT" && cargo build --release -q -p iwarpd -p iwarpctl) || { echo "nic-vm: build failed" >&2; exit 1; }
fi
# The siw cells' tools: iw-rping (the rping of the verbs client library) and siw_peer (the
# load generator's protocol over librdmacm, run in the siw guest).
IW_RPING=${IW_RPING:-$TGT/debug/iw-rping}
PEER_BIN=$ROOT/target/siw-vm/bin/siw_peer
if group_wanted siw; then
    (cd "$ROOT" && cargo build -q -p iwarp-interop-siw --bin iw-rping) || { echo "nic-vm: iw-rping build failed" >&2; exit 1; }
    if [ ! -f /usr/include/rdma/rdma_cma.h ]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends librdmacm-dev >/dev/null \
            || { echo "nic-vm: cannot install librdmacm-dev" >&2; exit 1; }
    fi
    src=$ROOT/tests/interop-siw/siw_peer.c
    if [ ! -x "$PEER_BIN" ] || [ "$src" -nt "$PEER_BIN" ]; then
        mkdir -p "$(dirname "$PEER_BIN")"
        gcc -O1 -g -Wall -Wextra -Werror -o "$PEER_BIN" "$src" -lrdmacm -libverbs \
            || { echo "nic-vm: siw_peer build failed" >&2; exit 1; }
    fi
fi
"$ROOT/scripts/nic-vm/build.sh" || { echo "nic-vm: guest image build failed" >&2; exit 1; }
rm -rf "$OUT"; mkdir -p "$OUT"
# The guests see the host's root twice: cached and (/host) uncached, for files that change.
GI=/host$IWARPD GCTL=/host$IWARPCTL GCFG=/host$OUT

# write_config FILE NAME IP CORES [loadgen]: a daemon configuration for a guest
write_config() {
    local f=$1 name=$2 ip=$3 cores=$4
    local dp control
    if [ "$cores" = 1 ]; then dp="[1]"; else dp="[1, 2]"; fi
    control="[0]"
    cat > "$f" <<CFG
# generated by scripts/nic-vm.sh
[daemon]
name = "$name"
log_level = "info"
stats_interval_ms = 0

[eal]
hugepages = "required"      # a PCI NIC needs physically contiguous, pinned memory

[cores]
dataplane = $dp
control = $control

[[port]]
device = "$NIC_ADDR"
ipv4 = "$ip"
prefix_len = 24
mtu = ${MTU:-1500}
checksum = "auto"
steering = "auto"
mbufs = 4096

[mpa]
revision = 2
crc = "request"
p2p = true
rtr = ["write", "read"]
CFG
    if [ "${5:-}" = loadgen ]; then
        cat >> "$f" <<CFG

[loadgen]
listen_port = 7000
verify = true
buffer_bytes = 1048576
recv_depth = 64
CFG
    fi
}

# boot_pair GROUP CPUS MODEL_A MODEL_B QUEUES: fresh guests a and b; false if they do not come up
boot_pair() {
    local group=$1 cpus=$2 ma=$3 mb=$4 q=$5 t
    stop_capture
    for g in a b; do guest_stop "$g"; done
    net_up
    t=$(date +%s)
    guest_boot a 1 "$cpus" "$ma" "$q" && guest_boot b 2 "$cpus" "$mb" "$q" || return 1
    guest_wait a && guest_wait b || return 1
    if [ "${NICVM_CAPTURE:-0}" = 1 ]; then
        ip netns exec "$NS" tcpdump -Z root -i "$BR" -U -s 128 -w "$OUT/$group.pcap" \
            'arp or (tcp[tcpflags] & (tcp-syn|tcp-fin|tcp-rst) != 0)' >/dev/null 2>"$OUT/$group.tcpdump.err" &
        CAPTURE_PID=$!
    fi
    nlog "$group: guests up in $(( $(date +%s) - t )) s (A $ma, B $mb, $q queue pair(s), $cpus vCPUs; driver $(rig a 'cat /run/nicvm-driver'))"
    for g in a b; do
        local drv
        drv=$(rig "$g" "basename \$(readlink /sys/bus/pci/devices/$NIC_ADDR/driver)" 2>/dev/null)
        [ -n "$drv" ] || { nlog "$g: $NIC_ADDR is bound to no driver"; return 1; }
    done
}

# start_server CORES [IP]: iwarpd with the load generator server in guest a (at IP, default
# $NET.11); waits until it serves
start_server() {
    write_config "$OUT/a.toml" nica "${2:-$NET.11}" "$1" loadgen
    write_config "$OUT/b.toml" nicb "$NET.12" "$1"
    rig_bg a /tmp/nica.log "exec $GI --config $GCFG/a.toml" >/dev/null || return 1
    for _ in $(seq 120); do
        rig -t 20 a "$GI --name nica stats >/dev/null 2>&1" && return 0
        rig a "pgrep -x iwarpd >/dev/null" || break
        sleep 1
    done
    nlog "server did not come up:"; rig a 'tail -20 /tmp/nica.log' >&2
    return 1
}

stop_server() {
    rig a 'p=$(pgrep -x iwarpd) && { kill -INT $p; for i in $(seq 50); do kill -0 $p 2>/dev/null || break; sleep 0.1; done; kill -9 $p 2>/dev/null; }; true' >/dev/null 2>&1
}

# loadgen CELL OP [extra args]: runs the client in guest b; PASS when it exits 0 with
# messages moved and no verify mismatch. Output in $OUT/CELL.txt.
loadgen() {
    local cell=$1 op=$2; shift 2
    local f=$OUT/$cell.txt rc msgs mism
    rig -t 300 b "$GI --config $GCFG/b.toml loadgen --peer $NET.11:7000 --op $op --size 64K --qps ${QPS:-2} --depth 8 --seconds $SECS --warmup-seconds 0 --verify $* 2>&1; echo exit=\$?" > "$f" 2>&1
    rig a "$GI --name nica stats" > "$OUT/$cell.server-stats.txt" 2>&1
    rc=$(sed -n 's/^exit=//p' "$f" | tail -1)
    msgs=$(sed -n 's/^ *\([0-9][0-9]*\) messages, .*/\1/p' "$f" | tail -1)
    mism=$(grep -oE 'verify mismatches [0-9]+' "$f" | grep -oE '[0-9]+$' | tail -1)
    if [ "${rc:-x}" = 0 ] && [ "${msgs:-0}" -gt 0 ] && [ "${mism:-1}" = 0 ]; then
        pass "$cell" "$msgs x 64 KiB verified, $(sed -n 's/.*bytes: \([0-9.]* Gbit\/s\).*/\1/p' "$f" | tail -1)"
    else
        fail "$cell" "loadgen exit ${rc:-?}, ${msgs:-0} messages, mismatches ${mism:-?}; see $f"
    fi
}

# server_check CELL: the server's own verification (SEND payloads, WRITE slots)
server_mismatches() { rig a "$GI --name nica stats" 2>/dev/null | grep -oE '[0-9]+ mismatches' | awk '{s+=$1} END {print s+0}'; }

# ------------------------------------------------------------------------- group virtio-1q
if group_wanted virtio-1q; then
    if boot_pair virtio-1q 2 virtio virtio 1 && start_server 1; then
        for op in write read send; do want "virtio-1q.$op" && loadgen "virtio-1q.$op" "$op"; done
        if want virtio-1q.ports; then
            rig a "$GCTL --name nica ports" > "$OUT/virtio-1q.ports.txt" 2>&1
            if grep -q "$NIC_ADDR" "$OUT/virtio-1q.ports.txt" && grep -q net_virtio "$OUT/virtio-1q.ports.txt" \
               && grep -qi "rss" "$OUT/virtio-1q.ports.txt"; then
                pass virtio-1q.ports "$(grep -c . "$OUT/virtio-1q.ports.txt") lines"
            else
                fail virtio-1q.ports "iwarpctl ports: $(head -3 "$OUT/virtio-1q.ports.txt" | tr '\n' ' ')"
            fi
        fi
        if want virtio-1q.link-flap; then
            f=$OUT/virtio-1q.link-flap.txt
            downs0=$(rig a "$GI --name nica stats" | sed -n 's/.*link_downs \([0-9]*\).*/\1/p' | head -1)
            ( sleep 12; qmp a '{"execute":"set_link","arguments":{"name":"d0","up":false}}'; sleep 2
              qmp a '{"execute":"set_link","arguments":{"name":"d0","up":true}}' ) > "$OUT/qmp-link.txt" 2>&1 &
            qpid=$!
            SECS_SAVED=$SECS; SECS=$((SECS + 12))
            ( loadgen virtio-1q.link-flap.traffic write ) > "$f.cell" 2>&1   # judged below, not counted
            SECS=$SECS_SAVED; wait $qpid
            downs1=$(rig a "$GI --name nica stats" | sed -n 's/.*link_downs \([0-9]*\).*/\1/p' | head -1)
            logged=$(rig a "grep -c 'link down' /tmp/nica.log")
            if grep -q '^PASS' "$f.cell" && [ "${downs1:-0}" -gt "${downs0:-0}" ] && [ "${logged:-0}" -gt 0 ]; then
                pass virtio-1q.link-flap "transfer verified across a 2 s link down; link_downs ${downs0:-?} -> $downs1, logged"
            else
                fail virtio-1q.link-flap "$(cat "$f.cell"); link_downs ${downs0:-?} -> ${downs1:-?}, log lines ${logged:-0}"
            fi
        fi
        m=$(server_mismatches)
        [ "${m:-0}" = 0 ] || fail virtio-1q.server-verify "the server counted $m mismatches"
        rig a 'cat /tmp/nica.log' > "$OUT/virtio-1q.server.log" 2>&1
        stop_server
    else
        fail_group virtio-1q "guests or server did not come up"
    fi
fi

# ------------------------------------------------------------------------- group virtio-2q-rss
if group_wanted virtio-2q-rss; then
    if boot_pair virtio-2q-rss 3 virtio virtio 2 && start_server 2; then
        QPS=4
        for op in write send; do want "virtio-2q-rss.$op" && loadgen "virtio-2q-rss.$op" "$op"; done
        QPS=2
        if want virtio-2q-rss.spread; then
            rig a "$GI --name nica stats --json" > "$OUT/virtio-2q-rss.stats.json" 2>&1
            rig a "cat /tmp/nica.log" > "$OUT/virtio-2q-rss.server.log" 2>&1
            est=$(grep -oE '"conns_established":[0-9]+' "$OUT/virtio-2q-rss.stats.json" | cut -d: -f2 | tr '\n' ' ')
            fwd=$(grep -oE '"forwarded_out":[0-9]+' "$OUT/virtio-2q-rss.stats.json" | cut -d: -f2 | awk '{s+=$1} END {print s+0}')
            rss=$(grep -oE 'rss [a-z]+' "$OUT/virtio-2q-rss.server.log" | head -1)
            # the first value is the total, then one per core
            read -r _ c0 c1 _ <<< "$est"
            # Checksum offload: virtio-net does TCP checksums (the queue sums IPv4 headers).
            j=$OUT/virtio-2q-rss.stats.json
            txo=$(json_first "$j" tx_checksum_offloaded) rxo=$(json_first "$j" rx_checksum_offloaded) bad=$(json_first "$j" rx_checksum_bad)
            csum=$(grep -oE 'checksum offload tx [a-z]+ rx [a-z]+( \([^)]*\))?' "$OUT/virtio-2q-rss.server.log" | head -1)
            if [ "${c0:-0}" -gt 0 ] && [ "${c1:-0}" -gt 0 ] && [ "$fwd" = 0 ] \
               && [ "${txo:-0}" -gt 0 ] && [ "${rxo:-0}" -gt 0 ]; then
                pass virtio-2q-rss.spread "connections per core $c0 / $c1, 0 frames forwarded between cores; $csum; frames checksummed by the NIC tx $txo rx $rxo, bad ${bad:-?}"
            else
                fail virtio-2q-rss.spread "conns_established (total, per core): $est; forwarded_out total $fwd; $rss; $csum; tx_checksum_offloaded ${txo:-?} rx_checksum_offloaded ${rxo:-?}"
            fi
        fi
        stop_server
    else
        fail_group virtio-2q-rss "guests or server did not come up"
    fi
fi

# ------------------------------------------------------------------------- group e1000e
if group_wanted e1000e; then
    if boot_pair e1000e 2 e1000e virtio 1 && start_server 1; then
        for op in write read send; do want "e1000e.$op" && loadgen "e1000e.$op" "$op"; done
        rig a 'cat /tmp/nica.log' > "$OUT/e1000e.server.log" 2>&1
        if want e1000e.unplug; then
            f=$OUT/e1000e.unplug.txt
            ( sleep 12; qmp a '{"execute":"device_del","arguments":{"id":"nic0"}}' ) > "$OUT/qmp-unplug.txt" 2>&1 &
            qpid=$!
            SECS_SAVED=$SECS; SECS=$((SECS + 12))
            ( loadgen e1000e.unplug.traffic write ) > "$f.cell" 2>&1   # expected to fail: the NIC goes away
            SECS=$SECS_SAVED; wait $qpid
            sleep 3
            alive=$(rig a 'pgrep -x iwarpd >/dev/null && echo alive || echo gone')
            gone=$(rig a "[ -e /sys/bus/pci/devices/$NIC_ADDR ] && echo present || echo removed")
            # then an orderly stop of the daemon whose NIC is gone
            stop_server
            sleep 1
            rig a 'cat /tmp/nica.log; dmesg | grep -iE "segfault|traps:" || true' > "$OUT/e1000e.unplug.server.log" 2>&1
            crash=$(grep -ciE 'segfault|traps:|panicked|SIGSEGV|SIGBUS|core dumped' "$OUT/e1000e.unplug.server.log")
            noticed=$(grep -E 'link down|removed' "$OUT/e1000e.unplug.server.log" | head -1 | sed 's/^[^ ]* *//' | cut -c1-110)
            stopped=$(grep -cE 'stopping on SIG' "$OUT/e1000e.unplug.server.log")
            if [ "$gone" = removed ] && [ "$alive" = alive ] && [ "$crash" = 0 ] && [ -n "$noticed" ] && [ "$stopped" -gt 0 ]; then
                pass e1000e.unplug "NIC removed during traffic; iwarpd kept running, then stopped on SIGINT, no crash; logged: $noticed"
            else
                fail e1000e.unplug "device $gone, iwarpd $alive, crash lines $crash, logged '${noticed:-nothing}', orderly stop $stopped; see $OUT/e1000e.unplug.server.log"
            fi
        fi
        stop_server
    else
        fail_group e1000e "guests or server did not come up"
    fi
fi

# ------------------------------------------------------------------------- group jumbo
if group_wanted jumbo; then
    MTU=9000
    if boot_pair jumbo 2 virtio virtio 1 && start_server 1; then
        for op in write send; do want "jumbo.$op" && loadgen "jumbo.$op" "$op"; done
        # jumbo.frames alone still needs traffic to judge (run, not counted)
        want jumbo.write || want jumbo.send || ( loadgen jumbo.traffic write ) > "$OUT/jumbo.traffic.cell" 2>&1
        rig a 'cat /tmp/nica.log' > "$OUT/jumbo.server.log" 2>&1
        rig a "$GI --name nica stats --json" > "$OUT/jumbo.stats.json" 2>&1
        # The frames really were jumbo: the port's frame limit, and bytes per received frame.
        limit=$(grep -oE 'frames up to [0-9]+ B' "$OUT/jumbo.server.log" | head -1 | grep -oE '[0-9]+')
        frames=$(json_first "$OUT/jumbo.stats.json" frames_rx) bytes=$(json_first "$OUT/jumbo.stats.json" bytes_rx)
        per=$(( ${bytes:-0} / ${frames:-1} ))
        if want jumbo.frames; then
            if [ "${limit:-0}" -ge 9014 ] && [ "$per" -gt 1514 ]; then
                pass jumbo.frames "port frames up to $limit B; the server received $per bytes per frame on average"
            else
                fail jumbo.frames "port frame limit ${limit:-?} B, $per bytes per received frame"
            fi
        fi
        stop_server
    else
        fail_group jumbo "guests or server did not come up"
    fi
    MTU=1500
    for g in a b; do guest_stop "$g"; done
    ip -n "$NS" link set "$BR" mtu 1500 2>/dev/null || true
fi

# ------------------------------------------------------------------------- group siw
# iwarpd on a PCI NIC against Linux siw: guest a (virtio-net-pci, iwarpd at $NET.21) and
# siw-vm's guest g1 ($NET.11, siw on its virtio-net) on the same bridge. MPA revision 2
# with CRC both ways (iwarpd requests it, siw requires it).
SIW_IP=$NET.11 A_IP=$NET.21
# sg CMD: runs CMD in the siw guest (siw-vm's run-in-guest.sh, as interop-siw.sh does).
sg() { "$SIWVM/run-in-guest.sh" -t "${GT:-60}" g1 "$@"; }
siwknobs() { printf 'P=/sys/module/siw/parameters; echo %s >$P/mpa_version; echo %s >$P/mpa_crc_required; echo %s >$P/peer_to_peer; ' "$1" "$2" "$3"; }
siw_pair_up() {
    local t
    stop_capture
    for g in a b; do guest_stop "$g"; done
    "$SIWVM/down.sh" --keep-netns g1 >/dev/null 2>&1
    net_up
    t=$(date +%s)
    guest_boot a 1 2 virtio 1 || return 1
    "$SIWVM/up.sh" -n 1 > "$OUT/siw-up.log" 2>&1 || { tail -5 "$OUT/siw-up.log" >&2; return 1; }
    guest_wait a || return 1
    nlog "siw: guests up in $(( $(date +%s) - t )) s (A virtio with iwarpd at $A_IP, g1 siw at $SIW_IP)"
    start_server 1 "$A_IP"
}
if group_wanted siw; then
    if siw_pair_up; then
        # siw active: siw_peer's load generator client to iwarpd's server, verified.
        for op in write read send; do
            want "siw.$op" || continue
            verify=""; [ "$op" != write ] && verify=--verify
            f=$OUT/siw.$op.txt
            GT=120 sg "$(siwknobs 2 1 0) /host$PEER_BIN lgen-client -a $A_IP -p 7000 --op $op --size 65536 --count 3 $verify; echo exit=\$?" > "$f" 2>&1
            rc=$(sed -n 's/^exit=//p' "$f" | tail -1)
            m=$(server_mismatches)
            if [ "${rc:-x}" = 0 ] && [ "${m:-1}" = 0 ]; then
                pass "siw.$op" "siw_peer (Linux siw, MPA rev 2 + CRC) -> iwarpd on virtio-net-pci: 3 x 64 KiB${verify:+ verified by siw}, server mismatches 0"
            else
                fail "siw.$op" "siw_peer exit ${rc:-?}: $(grep -E '^(error|wc|rejected|verify|async)' "$f" | head -1); server mismatches ${m:-?}; see $f"
            fi
        done
        # iwarpd passive: iw-rping -s on A, rping -c on siw.
        if want siw.rping-to-iwarpd; then
            f=$OUT/siw.rping-to-iwarpd.txt
            rig a 'rm -f /tmp/iwr-s.log' >/dev/null 2>&1
            rig_bg a /tmp/iwr-s.log "exec /host$IW_RPING -s -a $A_IP -p 7301 -C 3 -S 64 -v -d nica --timeout-ms 30000" >/dev/null
            for _ in $(seq 60); do rig a 'grep -q listening /tmp/iwr-s.log' && break; sleep 0.5; done
            GT=90 sg "$(siwknobs 2 1 0) rping -c -a $A_IP -p 7301 -C 3 -S 64 -v -V; echo exit=\$?" > "$f" 2>&1
            for _ in $(seq 60); do rig a 'pgrep -f "iw-rping -s" >/dev/null' || break; sleep 0.5; done
            rig a 'cat /tmp/iwr-s.log' > "$f.iwarpd" 2>&1
            rc=$(sed -n 's/^exit=//p' "$f" | tail -1)
            pings=$(grep -c '^ping data: rdma-ping-' "$f")
            if [ "${rc:-x}" = 0 ] && [ "$pings" = 3 ] && ! grep -q '^error' "$f.iwarpd"; then
                pass siw.rping-to-iwarpd "rping -c on siw: 3 pings verified with iw-rping -s on iwarpd (SEND, RDMA READ, RDMA WRITE each)"
            else
                fail siw.rping-to-iwarpd "rping -c exit ${rc:-?}, $pings of 3 pings; iw-rping: $(grep '^error' "$f.iwarpd" | head -1); see $f"
            fi
        fi
        # iwarpd active: rping -s on siw, iw-rping -c on A.
        if want siw.rping-from-iwarpd; then
            f=$OUT/siw.rping-from-iwarpd.txt
            bg=$("$SIWVM/run-in-guest.sh" --bg g1 "$(siwknobs 2 1 0) rping -s -a $SIW_IP -p 7302 -v -C 3 -S 64")
            gl=${bg#* }
            for _ in $(seq 40); do sg "ss -ltn | grep -q ':7302 '" && break; sleep 0.5; done
            rig -t 120 a "timeout 90 /host$IW_RPING -c -a $SIW_IP -p 7302 -C 3 -S 64 -v -V -d nica 2>&1; echo exit=\$?" > "$f" 2>&1
            sleep 0.5
            sg "cat $gl" > "$f.siw" 2>&1
            rc=$(sed -n 's/^exit=//p' "$f" | tail -1)
            pings=$(grep -c '^ping data: rdma-ping-' "$f")
            spings=$(grep -c '^server ping data: rdma-ping-' "$f.siw")
            if [ "${rc:-x}" = 0 ] && [ "$pings" = 3 ] && [ "$spings" = 3 ]; then
                pass siw.rping-from-iwarpd "iw-rping -c on iwarpd: 3 pings verified with rping -s on siw (which read 3)"
            else
                fail siw.rping-from-iwarpd "iw-rping exit ${rc:-?}, $pings of 3 pings, rping -s read $spings; see $f"
            fi
        fi
        rig a 'cat /tmp/nica.log' > "$OUT/siw.server.log" 2>&1
        stop_server
    else
        fail_group siw "guests or server did not come up"
    fi
    guest_stop a
    "$SIWVM/down.sh" --keep-netns g1 >/dev/null 2>&1
fi

nlog "done in $(( $(date +%s) - T0 )) s; logs in $OUT"
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ] && [ "$PASS" -gt 0 ]
