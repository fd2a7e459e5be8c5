#!/usr/bin/env bash
# Soak (issue 15 item 1): two iwarpd joined through a lossy, reordering, delaying wire, and
# for N minutes a churn of client processes on the shared-memory verbs that connect, move
# verified data, disconnect, and now and then get killed with -9 in the middle.
#
#   sudo scripts/soak.sh [--minutes N] [--workers K] [--seed S] [--flood KIND]
#                        [--flood-generator python|testpmd] [--keep]
#        (defaults: 60 minutes, 3 workers, a random seed; .ci/run runs --minutes 3)
#   --flood syn|junk|guess: after the warm-up, scripts/flood-frames.py floods A's port
#        from the wire namespace for the rest of the run (SYNs to A's listener ports from
#        on-link addresses nobody answers for; random frames; RSTs and FPDUs with guessed
#        sequence numbers, STags and offsets on A's live connections); scripts/flood.sh
#        compares the runs with and without a flood.
#   --flood-generator testpmd (syn, junk): flood-frames.py writes 8,192 frames to a pcap
#        file and DPDK's dpdk-testpmd replays it in a loop (net_pcap with infinite_rx,
#        the frames held in mbufs, forwarded to an af_packet port on the wire's end) at
#        the fastest rate it reaches:
#        a busy-polling generator on the same two CPUs as the daemons.
#
# Topology (addresses only in 198.18.0.0/15; namespaces this script owns and removes):
#
#   [$P-a] iwarpd A 198.18.4.1 on $P-a0 ==veth== $P-wa [$P-w] $P-wb ==veth== $P-b0 iwarpd B 198.18.4.2 [$P-b]
#
# Each daemon drives its veth end with DPDK's af_packet PMD (the veth has no address, so the
# kernel never answers for the daemon). The wire namespace runs scripts/netem-wire.py (this
# kernel has no sch_netem): loss 0.5 %, delay 1 ms +- 1 ms, 5 % sent at once (reordered),
# both directions. The clients run in the root namespace and reach their daemon through
# its verbs socket.
#
# A worker repeats, until the time is up: pick a size (log-uniform, 64 B to 1 MiB) and a
# count; start `iw-rping -s` on A and `iw-rping -c -V` on B (each ping: a SEND of the
# buffer's address, an RDMA READ of SIZE bytes by the server, an RDMA WRITE of them back,
# a SEND; the client checks every byte); one run in five, kill -9 the client or the server
# at a random moment. A run passes when both exit 0 and the client completed every ping
# (verified); a killed run passes when the other side ends by itself (error completion,
# disconnect or its 30 s timeout) within 60 s (of time in which the machine ran the
# worker: a stop of the whole machine is not counted, and is printed in the run's line):
# never a hang. Every run creates and
# destroys its PD, MR, CQs and QP, and its client session.
#
# Figures and checks at the end (one line each, then "soak: N passed, N failed"):
#   runs passed / killed / failed, bytes verified (READ + WRITE payload);
#   no run stuck; both daemons alive, then with 0 clients, 0 QPs and 0 live connections
#   once the clients are gone (within 60 s: closes finish under loss);
#   RSS of each daemon after the warm-up and at the end (growth within 1 %), open fds
#   before the first client and at the end (no growth);
#   counters consistent: frames each daemon's port sent = frames the wire read from that
#   side, and frames the wire delivered to a side = frames its port received + missed;
#   connections established = closed (none live); SIGINT: exit 0.
# Logs in a temporary directory, kept on failure (or with --keep); its path is printed.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
P=${SOAK_PREFIX:-iwsk}
NS_A=$P-a NS_W=$P-w NS_B=$P-b
IF_A=$P-a0 IF_WA=$P-wa IF_WB=$P-wb IF_B=$P-b0
IP_A=198.18.4.1 IP_B=198.18.4.2
NAME_A=$P-A NAME_B=$P-B
MINUTES=60 WORKERS=3 SEED=$RANDOM$RANDOM KEEP=0 FLOOD= FLOOD_GEN=python
WIRE_ARGS="--loss 0.5 --delay-ms 1 --jitter-ms 1 --reorder 5 --reorder-corr 25"

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case $1 in
        --minutes) MINUTES=${2:?}; shift 2 ;;
        --workers) WORKERS=${2:?}; shift 2 ;;
        --seed) SEED=${2:?}; shift 2 ;;
        --flood) case ${2:-} in syn|junk|guess) FLOOD=$2 ;; *) echo "soak: --flood is syn, junk or guess" >&2; exit 2 ;; esac
                 shift 2 ;;
        --flood-generator) case ${2:-} in python|testpmd) FLOOD_GEN=$2 ;; *) echo "soak: --flood-generator is python or testpmd" >&2; exit 2 ;; esac
                 shift 2 ;;
        --keep) KEEP=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "soak: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case $MINUTES in ''|*[!0-9.]*) echo "soak: --minutes is a number" >&2; exit 2 ;; esac
case $WORKERS in ''|*[!0-9]*|0) echo "soak: --workers is a positive number" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "soak: needs root (network namespaces, DPDK)" >&2; exit 1; }
if [ "$FLOOD_GEN" = testpmd ]; then
    case $FLOOD in syn|junk) ;; *) echo "soak: --flood-generator testpmd replays syn or junk floods (guess follows live connections)" >&2; exit 2 ;; esac
    command -v dpdk-testpmd >/dev/null || { echo "soak: dpdk-testpmd missing (scripts/setup.sh installs dpdk-dev)" >&2; exit 1; }
fi

if [ -z "${IWARPD:-}" ] || [ -z "${IWARPCTL:-}" ] || [ -z "${IW_RPING:-}" ]; then
    # Two commands: `--bin` would limit the first to the binaries of that name.
    (cd "$ROOT" && cargo build -q -p iwarpd -p iwarpctl \
        && cargo build -q -p iwarp-interop-siw --bin iw-rping) \
        || { echo "soak: build failed"; exit 1; }
    T=${CARGO_TARGET_DIR:-$ROOT/target}/debug
    IWARPD=$T/iwarpd IWARPCTL=$T/iwarpctl IW_RPING=$T/iw-rping
fi

TMP=$(mktemp -d /tmp/iwarp-soak.XXXXXX)
PASS=0 FAIL=0
PID_A= PID_B= WIRE_PID= FLOOD_PID=
pass() { PASS=$((PASS + 1)); echo "PASS $1"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $1"; }
say() { echo "[soak $(date +%H:%M:%S)] $*"; }

remove_netns() {
    local ns
    for ns in "$NS_A" "$NS_W" "$NS_B"; do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
}
cleanup() {
    local p
    for p in $(jobs -p); do kill -9 "$p" 2>/dev/null; done
    pkill -9 -f "iw-rping .*-d $P-" 2>/dev/null
    for p in "$PID_A" "$PID_B" "$WIRE_PID" "$FLOOD_PID"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null; done
    remove_netns
    rm -f /run/iwarpd/"$NAME_A".* /run/iwarpd/"$NAME_B".*
    if [ "$FAIL" -gt 0 ] || [ "$KEEP" = 1 ]; then echo "soak: logs in $TMP"; else rm -rf "$TMP"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

setup_topology() {
    remove_netns
    local ns i
    for ns in "$NS_A" "$NS_W" "$NS_B"; do
        ip netns add "$ns" || return 1
        ip -n "$ns" link set lo up
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    done
    ip link add name "$IF_A" netns "$NS_A" type veth peer name "$IF_WA" netns "$NS_W" || return 1
    ip link add name "$IF_B" netns "$NS_B" type veth peer name "$IF_WB" netns "$NS_W" || return 1
    for i in "$IF_WA" "$IF_WB"; do
        ip netns exec "$NS_W" ethtool -K "$i" tx off tso off gso off gro off >/dev/null 2>&1
        ip -n "$NS_W" link set "$i" up
    done
    ip -n "$NS_A" link set "$IF_A" up
    ip -n "$NS_B" link set "$IF_B" up
    # shellcheck disable=SC2086
    ip netns exec "$NS_W" python3 "$ROOT/scripts/netem-wire.py" "$IF_WA" "$IF_WB" \
        $WIRE_ARGS --seed "$SEED" > "$TMP/wire.log" 2>&1 3>&- &
    WIRE_PID=$!
    sleep 0.3
    kill -0 "$WIRE_PID" 2>/dev/null || { cat "$TMP/wire.log"; return 1; }
}

# start_daemon NS NAME IFACE IP CPU LOG: the af_packet example config with this run's
# values; sets STARTED to the daemon's pid (a child of this shell, so that it can be waited).
start_daemon() {
    local ns=$1 name=$2 iface=$3 ip=$4 cpu=$5 log=$6
    STARTED=
    "$IWARPD" --config "$ROOT/config/examples/af-packet-veth.toml" \
        --set "daemon.name=$name" \
        --set "daemon.shutdown_grace_ms=2000" \
        --set "port.0.device=net_af_packet0,iface=$iface,framesz=2048,framecnt=4096,qdisc_bypass=0" \
        --set "port.0.ipv4=$ip" --set "port.0.prefix_len=24" --set "port.0.checksum=software" \
        --set "cores.dataplane=[$cpu]" \
        print-config > "$TMP/$name.toml" || return 1
    ip netns exec "$ns" "$IWARPD" --config "$TMP/$name.toml" > "$log" 2>&1 3>&- &
    local pid=$!
    for _ in $(seq 300); do
        "$IWARPCTL" --name "$name" status > /dev/null 2>&1 && { STARTED=$pid; return 0; }
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# status_of NAME: "CLIENTS QPS" from iwarpctl status (objects of every client; the
# clients exclude iwarpctl's own session, which the status counts).
status_of() {
    "$IWARPCTL" --name "$1" --json status 2>/dev/null | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
    print(max(d["clients"] - 1, 0), d["totals"]["qps"])
except Exception:
    print("? ?")'
}

# rss_kb PID / fds PID
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
# rss_kinds PID: "anon file shmem" KiB (RssAnon: the heap and stacks; RssFile: the binary
# and libraries; RssShmem: shared memory the daemon touched, client arenas among it).
rss_kinds() { awk '/^RssAnon:/ {a = $2} /^RssFile:/ {f = $2} /^RssShmem:/ {s = $2} END {print a + 0, f + 0, s + 0}' "/proc/$1/status" 2>/dev/null || echo "0 0 0"; }
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }

# One counter of the daemon, summed over its cores and ports (`total.total` of stats --json).
stat_sum() { # NAME FIELD
    "$IWARPD" --name "$1" stats --json 2>/dev/null | python3 -c '
import json, sys
try:
    print(json.load(sys.stdin)["total"]["total"].get(sys.argv[1], 0))
except Exception:
    print(-1)' "$2"
}

# A worker: runs until DEADLINE (epoch seconds); one line per run in $TMP/w$1.runs.
worker() {
    local w=$1 deadline=$2 n=0
    RANDOM=$(( (SEED + w * 7919) % 32768 ))
    local out=$TMP/w$w.runs
    while [ "$(date +%s)" -lt "$deadline" ]; do
        n=$((n + 1))
        local e=$(( 6 + RANDOM % 15 ))                    # 2^6 .. 2^20
        local size=$(( (1 << e) + RANDOM % (1 << e) ))
        [ "$size" -gt 1048576 ] && size=1048576
        local most=$(( 8388608 / (2 * size) )); [ "$most" -lt 1 ] && most=1; [ "$most" -gt 200 ] && most=200
        local count=$(( 1 + RANDOM % most ))
        local port=$(( 20000 + w * 2000 + n % 2000 ))
        local kill_who=none
        if [ $(( RANDOM % ${SOAK_KILL_ONE_IN:-5} )) = 0 ]; then
            if [ $(( RANDOM % 2 )) = 0 ]; then kill_who=client; else kill_who=server; fi
        fi
        local kill_ms=$(( RANDOM % 1500 ))
        local log=$TMP/w$w.$n
        "$IW_RPING" -s -a "$IP_A" -p "$port" -C "$count" -S "$size" -d "$NAME_A" \
            --timeout-ms 30000 > "$log.server" 2>&1 &
        local spid=$!
        local up=0
        for _ in $(seq 100); do
            grep -q "listening on" "$log.server" 2>/dev/null && { up=1; break; }
            kill -0 "$spid" 2>/dev/null || break
            sleep 0.05
        done
        if [ "$up" = 0 ]; then
            kill -9 "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
            echo "FAIL $n size $size count $count: the server did not listen ($(tail -1 "$log.server"))" >> "$out"
            continue
        fi
        "$IW_RPING" -c -a "$IP_A" -p "$port" -C "$count" -S "$size" -V -d "$NAME_B" \
            --timeout-ms 30000 > "$log.client" 2>&1 &
        local cpid=$!
        local t0; t0=$(date +%s%N)
        local victim= other=
        case $kill_who in
            client) victim=$cpid other=$spid ;;
            server) victim=$spid other=$cpid ;;
        esac
        if [ -n "$victim" ]; then
            sleep "$(printf '0.%03d' "$kill_ms")"
            kill -9 "$victim" 2>/dev/null
        fi
        # Both must end within 60 s (each wait of iw-rping times out after 30 s) of time
        # in which this worker itself ran: a poll of this loop that comes back more than
        # 5 s after the one before means the machine stopped the worker (seen once: the
        # kernel's kdamond held a mapping lock and blocked every fork and exit for 140 s,
        # "blocked for more than 120 seconds" in dmesg), and that gap is not counted.
        local stuck= last=$t0 stalled_ns=0 now
        while kill -0 "$spid" 2>/dev/null || kill -0 "$cpid" 2>/dev/null; do
            now=$(date +%s%N)
            [ $(( now - last )) -gt 5000000000 ] && stalled_ns=$(( stalled_ns + now - last ))
            last=$now
            if [ $(( (now - t0 - stalled_ns) / 1000000000 )) -ge 60 ]; then
                # Where each process that is still there waits, for the log.
                local p
                for p in "$spid" "$cpid"; do
                    kill -0 "$p" 2>/dev/null || continue
                    { echo "== pid $p ($([ "$p" = "$spid" ] && echo server || echo client))"
                      command -v gdb > /dev/null && timeout 20 gdb -p "$p" -batch -ex 'thread apply all bt' 2>&1 | grep -E '^(Thread|#)'
                    } >> "$log.stacks" 2>&1
                done
                stuck=1; kill -9 "$spid" "$cpid" 2>/dev/null; break
            fi
            sleep 0.05
        done
        wait "$spid" 2>/dev/null; local src=$?
        wait "$cpid" 2>/dev/null; local crc=$?
        local secs=$(( ($(date +%s%N) - t0) / 1000000 ))
        local what="size $size count $count ($secs ms)"
        [ "$stalled_ns" -gt 0 ] && what+=" [the machine stopped this worker for $(( stalled_ns / 1000000 )) ms]"
        if [ -n "$stuck" ]; then
            echo "FAIL $n $what: still running 60 s after the start (kill: $kill_who)" >> "$out"
        elif [ "$kill_who" = none ]; then
            if [ "$src" = 0 ] && [ "$crc" = 0 ] && grep -q "client done: $count pings" "$log.client"; then
                echo "OK $n $what bytes $(( 2 * size * count ))" >> "$out"
                rm -f "$log".*
            else
                echo "FAIL $n $what: server exit $src, client exit $crc: $(tail -1 "$log.client" | tr -d '\n')" >> "$out"
            fi
        else
            # The survivor ended by itself; a client that was not killed must not have
            # accepted a wrong byte (iw-rping -V exits 1 and says so).
            if grep -q "data mismatch\|mismatch" "$log.client" 2>/dev/null; then
                echo "FAIL $n $what: a data mismatch after killing the $kill_who" >> "$out"
            else
                local done_pings; done_pings=$(grep -oE 'client done: [0-9]+' "$log.client" | grep -oE '[0-9]+$')
                echo "KILLED $n $what $kill_who after ${kill_ms} ms; other exit $([ "$kill_who" = client ] && echo "$src" || echo "$crc") bytes $(( 2 * size * ${done_pings:-0} ))" >> "$out"
                rm -f "$log".*
            fi
        fi
    done
}

say "seed $SEED, $MINUTES minutes, $WORKERS workers, wire: $WIRE_ARGS; logs in $TMP"
setup_topology || { fail "topology: $(tail -3 "$TMP/wire.log" 2>/dev/null)"; exit 1; }
ncpu=$(nproc)
CPU_A=0 CPU_B=$(( ncpu > 1 ? 1 : 0 ))
start_daemon "$NS_A" "$NAME_A" "$IF_A" "$IP_A" "$CPU_A" "$TMP/A.log" \
    || { fail "iwarpd A did not start: $(tail -3 "$TMP/A.log")"; exit 1; }
PID_A=$STARTED
start_daemon "$NS_B" "$NAME_B" "$IF_B" "$IP_B" "$CPU_B" "$TMP/B.log" \
    || { fail "iwarpd B did not start: $(tail -3 "$TMP/B.log")"; exit 1; }
PID_B=$STARTED
FDS_A0=$(fds "$PID_A") FDS_B0=$(fds "$PID_B")
say "daemons up: A pid $PID_A ($FDS_A0 fds), B pid $PID_B ($FDS_B0 fds)"

start=$(date +%s)
secs=$(awk -v m="$MINUTES" 'BEGIN {printf "%d", m * 60}')
deadline=$(( start + secs ))
for w in $(seq "$WORKERS"); do worker "$w" "$deadline" 2>> "$TMP/w$w.stderr" & done
# RSS after the warm-up: a tenth of the run, at least 20 s (pools and rings touched).
warm=$(( secs / 10 )); [ "$warm" -lt 20 ] && warm=20
sleep "$warm"
RSS_A0=$(rss_kb "$PID_A") RSS_B0=$(rss_kb "$PID_B")
say "after the warm-up: RSS A $RSS_A0 KiB, B $RSS_B0 KiB"
# RSS every 30 s from here (seconds since the start, A, B): a leak grows with the
# sessions, a high-water mark flattens; the report compares the two halves.
echo "$(( $(date +%s) - start )) $RSS_A0 $RSS_B0 $(rss_kinds "$PID_A") $(rss_kinds "$PID_B")" > "$TMP/rss"
# Bytes verified so far: the flood's figure is the rate after this point.
bytes_at() { cat "$TMP"/w*.runs 2>/dev/null | awk '/^(OK|KILLED)/ {for (i = 1; i < NF; i++) if ($i == "bytes") s += $(i + 1)} END {printf "%.0f", s}'; }
WARM_BYTES=$(bytes_at) WARM_AT=$(date +%s)
FLOOD_AT=$(date +%s)
if [ -n "$FLOOD" ] && [ "$FLOOD_GEN" = python ]; then
    ip netns exec "$NS_W" python3 "$ROOT/scripts/flood-frames.py" "$IF_WA" "$FLOOD" \
        --seed "$SEED" > "$TMP/flood.log" 2>&1 3>&- &
    FLOOD_PID=$!
    say "flooding A with $FLOOD frames"
elif [ -n "$FLOOD" ]; then
    # The pool first (learnt from A's frames), then testpmd replays it until stopped:
    # port 0 reads the pcap in a loop, port 1 (af_packet on the wire's end facing A) sends
    # it; what port 1 reads (copies of the wire's traffic) goes to /dev/null.
    ip netns exec "$NS_W" python3 "$ROOT/scripts/flood-frames.py" "$IF_WA" "$FLOOD" \
        --seed "$SEED" --pcap "$TMP/flood.pcap" --pool 8192 > "$TMP/flood-pool.log" 2>&1 3>&- \
        || { fail "flood pool: $(tail -1 "$TMP/flood-pool.log")"; exit 1; }
    # Two lcores: the main one only waits for the stop (and prints the statistics),
    # the other forwards.
    ip netns exec "$NS_W" dpdk-testpmd -l 0,1 --main-lcore 0 --no-huge -m 512 --no-pci --file-prefix "$P-flood" \
        --log-level 'lib.eal:error' \
        --vdev "net_pcap0,rx_pcap=$TMP/flood.pcap,tx_pcap=/dev/null,infinite_rx=1" \
        --vdev "net_af_packet0,iface=$IF_WA,qpairs=1" \
        -- --forward-mode=io --port-topology=paired --auto-start --stats-period 3600 --nb-cores 1 \
        --total-num-mbufs 32768 --burst 32 > "$TMP/flood.log" 2>&1 < /dev/null 3>&- &
    FLOOD_PID=$!
    FLOOD_AT=$(date +%s)
    sleep 2
    kill -0 "$FLOOD_PID" 2>/dev/null || { fail "dpdk-testpmd did not start: $(grep -m2 -E 'Cause|Error' "$TMP/flood.log")"; FLOOD_PID=; }
    say "flooding A with $FLOOD frames from dpdk-testpmd"
fi
while [ "$(date +%s)" -lt "$deadline" ]; do
    sleep 30
    for d in A B; do
        pid=PID_$d
        kill -0 "${!pid}" 2>/dev/null || { say "iwarpd $d is gone"; break 2; }
    done
    echo "$(( $(date +%s) - start )) $(rss_kb "$PID_A") $(rss_kb "$PID_B") $(rss_kinds "$PID_A") $(rss_kinds "$PID_B")" >> "$TMP/rss"
    say "$(cat "$TMP"/w*.runs 2>/dev/null | grep -c '^OK') passed, $(cat "$TMP"/w*.runs 2>/dev/null | grep -c '^KILLED') killed, $(cat "$TMP"/w*.runs 2>/dev/null | grep -c '^FAIL') failed so far"
done
if [ -n "$FLOOD_PID" ]; then
    kill -TERM "$FLOOD_PID"; wait "$FLOOD_PID" 2>/dev/null; FLOOD_PID=
    if [ "$FLOOD_GEN" = testpmd ]; then
        # testpmd's final statistics: port 1's TX-packets are the frames sent toward A.
        sent=$(awk '/Forward statistics for port 1/ {p = 1} p && /TX-packets:/ {print $2; exit}' "$TMP/flood.log")
        secs_flood=$(( $(date +%s) - FLOOD_AT )); [ "$secs_flood" -gt 0 ] || secs_flood=1
        echo "flood-frames: $FLOOD sent ${sent:-0} frames in $secs_flood s ($(( ${sent:-0} / secs_flood )) per second) by dpdk-testpmd" >> "$TMP/flood.log"
    fi
    say "$(tail -1 "$TMP/flood.log")"
fi
END_BYTES=$(bytes_at) END_AT=$(date +%s)
wait_workers_until=$(( $(date +%s) + 120 ))
for p in $(jobs -p); do
    [ "$p" = "$WIRE_PID" ] && continue
    while kill -0 "$p" 2>/dev/null && [ "$(date +%s)" -lt "$wait_workers_until" ]; do sleep 0.5; done
done
cat "$TMP"/w*.runs > "$TMP/runs" 2>/dev/null
ok=$(grep -c '^OK' "$TMP/runs"); killed=$(grep -c '^KILLED' "$TMP/runs"); bad=$(grep -c '^FAIL' "$TMP/runs")
bytes=$(awk '/^(OK|KILLED)/ {for (i = 1; i < NF; i++) if ($i == "bytes") s += $(i + 1)} END {printf "%.0f", s}' "$TMP/runs")
rate=$(awk -v b=$(( END_BYTES - WARM_BYTES )) -v s=$(( END_AT - WARM_AT )) 'BEGIN {printf "%.2f", (s > 0 ? b / s / 1048576 : 0)}')
echo "soak: after the warm-up${FLOOD:+ (flood $FLOOD)}: $rate MiB/s verified"
if [ "$bad" = 0 ] && [ "$ok" -gt 0 ]; then
    pass "runs: $ok verified, $killed killed at random (the other side ended by itself), 0 failed; $(awk -v b="$bytes" 'BEGIN {printf "%.1f MiB", b / 1048576}') verified"
else
    fail "runs: $ok verified, $killed killed, $bad failed:"; grep '^FAIL' "$TMP/runs" | head -10 | sed 's/^/    /'
fi

alive=1
for d in A B; do
    pid=PID_$d
    kill -0 "${!pid}" 2>/dev/null || { alive=0; fail "iwarpd $d died: $(tail -3 "$TMP/$d.log")"; }
done
[ "$alive" = 1 ] || exit 1
pass "both daemons alive after $MINUTES minutes"

# Nothing left once the clients are gone (closes under loss take a few RTOs).
left=
for _ in $(seq 120); do
    left=
    for d in A B; do
        name=NAME_$d
        read -r clients qps < <(status_of "${!name}")
        live=$(stat_sum "${!name}" conns_live)
        [ "${clients:-1}" = 0 ] && [ "${qps:-1}" = 0 ] && [ "$live" = 0 ] \
            || left="$left $d: clients ${clients:-?} qps ${qps:-?} conns_live $live;"
    done
    [ -z "$left" ] && break
    sleep 0.5
done
if [ -z "$left" ]; then pass "0 clients, 0 QPs, 0 live connections on both daemons"
else fail "left behind:$left"; "$IWARPCTL" --name "$NAME_A" qps > "$TMP/A.qps" 2>&1; "$IWARPCTL" --name "$NAME_B" qps > "$TMP/B.qps" 2>&1; fi

for d in A B; do
    pid=PID_$d rss0=RSS_${d}0 fds0=FDS_${d}0
    rss1=$(rss_kb "${!pid}") fds1=$(fds "${!pid}")
    growth=$(awk -v a="${!rss0}" -v b="$rss1" 'BEGIN {printf "%.2f", (a > 0 ? (b - a) * 100 / a : 100)}')
    if awk -v g="$growth" 'BEGIN {exit !(g <= 1.0)}' && [ "$fds1" -le "${!fds0}" ]; then
        pass "iwarpd $d: RSS ${!rss0} KiB after the warm-up, $rss1 KiB at the end ($growth %); fds ${!fds0} before the first client, $fds1 at the end"
    else
        fail "iwarpd $d: RSS ${!rss0} KiB after the warm-up, $rss1 KiB at the end ($growth %, at most 1 %); fds ${!fds0} -> $fds1"
    fi
done
# The RSS trend: growth in the first and the second half of the samples after the warm-up.
for col in 2 3; do
    d=$([ "$col" = 2 ] && echo A || echo B)
    awk -v c="$col" -v d="$d" '{t[NR] = $1; r[NR] = $c} END {
        if (NR < 3) exit; m = int((NR + 1) / 2);
        printf "soak: iwarpd %s RSS trend: %+d KiB over %.0f min, then %+d KiB over %.0f min (%d samples: a leak grows in both halves alike, a high-water mark flattens)\n",
            d, r[m] - r[1], (t[m] - t[1]) / 60, r[NR] - r[m], (t[NR] - t[m]) / 60, NR }' "$TMP/rss"
    # Which kind of memory moved, first sample against the last.
    k=$(( col == 2 ? 4 : 7 ))
    awk -v k="$k" -v d="$d" 'NR == 1 {a = $k; f = $(k + 1); s = $(k + 2)} END {
        printf "soak: iwarpd %s RSS by kind, after the warm-up -> last sample: anon %d -> %d KiB, file %d -> %d, shmem %d -> %d\n",
            d, a, $k, f, $(k + 1), s, $(k + 2) }' "$TMP/rss"
done

# Counters: every established connection closed (closed also counts those that ended
# before they were established: a client killed while connecting); the wire's view of
# each side against the ports'.
for d in A B; do
    name=NAME_$d
    est=$(stat_sum "${!name}" conns_established) closed=$(stat_sum "${!name}" conns_closed)
    retx=$(stat_sum "${!name}" tcp_retransmissions)
    if [ "$est" -gt 0 ] && [ "$est" -le "$closed" ]; then
        pass "iwarpd $d: $est connections established, $closed closed (all, and $(( closed - est )) that never were established); $retx retransmissions"
    else
        fail "iwarpd $d: $est connections established, $closed closed"
    fi
done

for d in A B; do
    name=NAME_$d
    "$IWARPD" --name "${!name}" stats --json > "$TMP/$d.stats.json" 2>&1
done
# Stop the daemons (their exit prints the ports' DPDK counters), then the wire.
for d in A B; do
    pid=PID_$d
    kill -INT "${!pid}"
done
for d in A B; do
    pid=PID_$d
    for _ in $(seq 100); do kill -0 "${!pid}" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "${!pid}" 2>/dev/null; then
        fail "iwarpd $d: no exit 10 s after SIGINT"; kill -9 "${!pid}"
    fi
    wait "${!pid}"; rc=$?
    [ "$rc" = 0 ] && pass "iwarpd $d: SIGINT, exit 0" || fail "iwarpd $d: exit $rc after SIGINT"
    eval "PID_$d="
done
kill -TERM "$WIRE_PID"; wait "$WIRE_PID" 2>/dev/null; WIRE_PID=
# DPDK's port counters at exit: "port 0: ipackets N opackets N ... imissed N".
port_stat() { grep -oE "port 0: ipackets .*" "$TMP/$1.log" | tail -1 | grep -oE "$2 [0-9]+" | grep -oE '[0-9]+$'; }
# The wire's counters: "netem-wire: IF_X->IF_Y: in N out N drop N ...".
wire_stat() { grep -E "netem-wire: $1->$2:" "$TMP/wire.log" | tail -1 | grep -oE "$3 [0-9]+" | grep -oE '[0-9]+$'; }
a_out=$(port_stat A opackets) b_in=$(port_stat B ipackets) b_miss=$(port_stat B imissed)
b_out=$(port_stat B opackets) a_in=$(port_stat A ipackets) a_miss=$(port_stat A imissed)
ab_in=$(wire_stat "$IF_WA" "$IF_WB" in) ab_out=$(wire_stat "$IF_WA" "$IF_WB" out) ab_drop=$(wire_stat "$IF_WA" "$IF_WB" dropped)
ba_in=$(wire_stat "$IF_WB" "$IF_WA" in) ba_out=$(wire_stat "$IF_WB" "$IF_WA" out) ba_drop=$(wire_stat "$IF_WB" "$IF_WA" dropped)
summary="A sent $a_out, wire A->B read $ab_in, dropped $ab_drop, delivered $ab_out, B received $b_in + missed $b_miss; B sent $b_out, wire B->A read $ba_in, dropped $ba_drop, delivered $ba_out, A received $a_in + missed $a_miss"
injected=0
if [ -n "$FLOOD" ]; then
    injected=$(grep -oE 'sent [0-9]+ frames' "$TMP/flood.log" | grep -oE '[0-9]+' | tail -1)
    injected=${injected:-0}
    summary="$summary; the flood sent $injected to A"
fi
# A's port gets what the wire delivered, plus the flood's frames (of which the kernel's
# veth may drop some when A's ring is full: counted nowhere A sees).
a_got=$(( a_in + a_miss ))
# Under a flood, A's answers to it (RSTs, challenge ACKs) may come faster than the
# userspace wire reads them: the kernel drops what overflows its socket, so A may have
# sent more than the wire read.
if [ -z "$FLOOD" ]; then
    a_to_wire_ok=$([ "$a_out" = "$ab_in" ] && echo 1)
    a_got_ok=$([ "$ba_out" = "$a_got" ] && echo 1)
else
    a_to_wire_ok=$([ "$a_out" -ge "$ab_in" ] && echo 1)
    a_got_ok=$([ "$a_got" -ge "$ba_out" ] && [ "$a_got" -le $(( ba_out + injected )) ] && echo 1)
fi
if [ -n "$a_out" ] && [ -n "$ab_in" ] && [ -n "$a_to_wire_ok" ] && [ -n "$a_got_ok" ] \
    && [ "$b_out" = "$ba_in" ] && [ "$ab_out" = $(( b_in + b_miss )) ]; then
    pass "frames consistent: $summary"
else
    fail "frames inconsistent: $summary"
fi
if [ -n "$FLOOD" ]; then
    # Every frame A dropped, by reason (nonzero drop counters of its final stats).
    echo "soak: A's drops by reason: $(python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["total"]["total"]
print(", ".join(f"{k[5:]} {v}" for k, v in sorted(t.items()) if k.startswith("drop_") and v) or "none")' "$TMP/A.stats.json" 2>/dev/null)"
fi
echo "soak: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
