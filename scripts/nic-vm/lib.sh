# shellcheck shell=bash
# nic-vm: guests with an emulated PCI NIC bound to vfio-pci, for iwarpd on a real PMD.
# Sourced by scripts/nic-vm.sh. Guests reuse siw-vm's kernel, stage 1 and guest agent
# (lib/qga.py, run-in-guest.sh); stage 2 is scripts/nic-vm/guest-init.sh.
NICVM_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=${ROOT:-$(cd "$NICVM_LIB/../.." && pwd)}
SIWVM=${SIWVM:-$(cd "$ROOT/../shared/siw-vm" 2>/dev/null && pwd)}
export SIWVM_WORK=${SIWVM_WORK:-$ROOT/target/siw-vm/work}
export SIWVM_RUN=${SIWVM_RUN:-$ROOT/target/nic-vm/run}
export SIWVM_NETNS=${SIWVM_NETNS:-iwnic}
export SIWVM_BRIDGE=${SIWVM_BRIDGE:-nicbr0}
export SIWVM_NET=${SIWVM_NET:-198.18.9}
NICVM_WORK=${NICVM_WORK:-$ROOT/target/nic-vm/work}
NS=$SIWVM_NETNS BR=$SIWVM_BRIDGE NET=$SIWVM_NET RUNDIR=$SIWVM_RUN
NIC_ADDR=0000:00:05.0       # the DPDK NIC's slot in every guest (addr=0x5)

nlog() { printf '[nic-vm %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

net_up() {
    ip netns list | awk -v n="$NS" '$1 == n {f = 1} END {exit !f}' || ip netns add "$NS"
    ip -n "$NS" link set lo up
    if ! ip -n "$NS" link show "$BR" >/dev/null 2>&1; then
        ip -n "$NS" link add "$BR" type bridge forward_delay 0 stp_state 0
        ip -n "$NS" addr add "$NET.1/24" dev "$BR"
    fi
    ip -n "$NS" link set "$BR" up
    ip netns exec "$NS" sh -c 'for f in /proc/sys/net/bridge/bridge-nf-call-*; do [ -w "$f" ] && echo 0 > "$f"; done' 2>/dev/null || true
}

net_down() {
    ip netns list | awk -v n="$NS" '$1 == n {f = 1} END {exit !f}' && ip netns del "$NS"
    return 0
}

# guest_pid G: QEMU's pid if it runs
guest_pid() {
    local f=$RUNDIR/$1/qemu.pid pid cmdline
    [ -f "$f" ] || return 1
    pid=$(tr -dc 0-9 <"$f")
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
    # captured, then searched: piping into `grep -q` can SIGPIPE the writer (pipefail)
    cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline") || return 1
    grep -q -- "-name nicvm-$1 " <<< "$cmdline" || return 1
    echo "$pid"
}

# guest_boot G INDEX CPUS MODEL QUEUES: starts QEMU for guest G (no wait). MODEL is
# virtio (virtio-net-pci, QUEUES pairs, RSS) or e1000e. The NIC is at $NIC_ADDR on tap
# nictapINDEX on the bridge; MAC 52:54:00:9e:00:INDEX.
guest_boot() {
    local g=$1 k=$2 cpus=$3 model=$4 queues=$5
    local gd=$RUNDIR/$g tap=nictap$k mac dev netdev
    mac=$(printf '52:54:00:9e:00:%02x' "$k")
    rm -rf "$gd"; mkdir -p "$gd"
    ip -n "$NS" link del "$tap" 2>/dev/null || true
    if [ "$queues" -gt 1 ]; then
        ip -n "$NS" tuntap add dev "$tap" mode tap multi_queue
    else
        ip -n "$NS" tuntap add dev "$tap" mode tap
    fi
    # MTU: the tap, the bridge and (virtio) the NIC's advertised maximum carry ${MTU:-1500}.
    ip -n "$NS" link set "$tap" mtu "${MTU:-1500}" master "$BR" up
    ip -n "$NS" link set "$BR" mtu "${MTU:-1500}" 2>/dev/null || true
    netdev="tap,id=d0,ifname=$tap,script=no,downscript=no,vhost=off"
    case $model in
        virtio)
            if [ "$queues" -gt 1 ]; then
                netdev="$netdev,queues=$queues"
                dev="virtio-net-pci,netdev=d0,mac=$mac,addr=0x5,mq=on,vectors=$((2 * queues + 2))"
                [ "${NICVM_RSS:-1}" = 1 ] && dev="$dev,rss=on"
            else
                dev="virtio-net-pci,netdev=d0,mac=$mac,addr=0x5"
            fi
            # 1,024 receive descriptors per queue (QEMU's default is 256). QEMU 7.2's
            # software RSS (its eBPF RSS does not load with Debian's libbpf 1.x) hands a
            # frame read on tap queue i that hashes to queue j to queue j; when queue j has
            # no free descriptor, the frame waits on queue i's list, and tap queue i stops
            # being read until the guest kicks queue i, which it only does once queue i
            # ran dry: a busy-polling guest never does, so everything the tap puts on
            # queue i is lost for a while. A guest vCPU descheduled on a loaded host fills
            # 256 descriptors in milliseconds (docs/NIC.md, "The 2-queue failure").
            dev="$dev,rx_queue_size=${NICVM_RX_QUEUE_SIZE:-1024}"
            [ "${MTU:-1500}" -gt 1500 ] && dev="$dev,host_mtu=$MTU" ;;
        e1000e) dev="e1000e,netdev=d0,mac=$mac,addr=0x5" ;;
        *) nlog "unknown NIC model $model"; return 1 ;;
    esac
    echo "$model $queues" > "$gd/nic"
    local append="console=ttyS0 loglevel=4 panic=-1 tsc=reliable mitigations=off"
    append="$append nicvm.name=$g nicvm.hugepages=${NICVM_HUGEPAGES:-384} nicvm.bind=$NIC_ADDR"
    date +%s.%N > "$gd/boot-start"
    ip netns exec "$NS" qemu-system-x86_64 \
        -name "nicvm-$g" -machine pc -accel tcg,thread=multi -cpu max -smp "$cpus" -m "${NICVM_MEM:-1536}" \
        -nodefaults -no-user-config -display none -vga none -no-reboot \
        -kernel "$NICVM_WORK/vmlinuz" -initrd "$NICVM_WORK/initrd.img" -append "$append" \
        -chardev "file,id=con,path=$gd/console.log" -serial chardev:con \
        -device virtio-serial-pci,id=vser0,addr=0x3 \
        -chardev "socket,id=qga,path=$gd/qga.sock,server=on,wait=off" \
        -device virtserialport,chardev=qga,name=org.qemu.guest_agent.0 \
        -qmp "unix:$gd/qmp.sock,server=on,wait=off" \
        -fsdev "local,id=fsroot,path=/,security_model=none,readonly=on,multidevs=remap" \
        -device "virtio-9p-pci,fsdev=fsroot,mount_tag=hostroot,addr=0x4" \
        -fsdev "local,id=fsfresh,path=/,security_model=none,readonly=on,multidevs=remap" \
        -device "virtio-9p-pci,fsdev=fsfresh,mount_tag=hostfresh,addr=0x6" \
        -netdev "$netdev" -device "$dev,id=nic0" \
        ${NICVM_TRACE:+-D "$gd/qemu-trace.log" -trace "virtio_net_rss*" -trace ebpf_error} \
        -daemonize -pidfile "$gd/qemu.pid" 2>"$gd/qemu.err" \
        || { cat "$gd/qemu.err" >&2; return 1; }
}

# guest_wait G [TIMEOUT]: until NICVM-READY and the agent answers
guest_wait() {
    local g=$1 gd=$RUNDIR/$1 deadline=$(( $(date +%s) + ${2:-300} ))
    while ! grep -q NICVM-READY "$gd/console.log" 2>/dev/null; do
        if grep -q -E 'NICVM-FAILED|SIWVM-FAILED' "$gd/console.log" 2>/dev/null || ! guest_pid "$g" >/dev/null \
           || [ "$(date +%s)" -ge "$deadline" ]; then
            tail -20 "$gd/console.log" >&2; return 1
        fi
        sleep 0.3
    done
    /usr/bin/python3 "$SIWVM/lib/qga.py" "$gd/qga.sock" ping --wait 60 || return 1
    awk -v a="$(cat "$gd/boot-start")" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f\n", b-a}' > "$gd/boot-seconds"
}

# qmp G JSON...: each argument one QMP command (after the capabilities handshake)
qmp() {
    local g=$1; shift
    /usr/bin/python3 "$NICVM_LIB/qmp.py" "$RUNDIR/$g/qmp.sock" "$@"
}

# guest_stop G: QMP quit, then TERM/KILL of the recorded pid only
guest_stop() {
    local g=$1 pid
    pid=$(guest_pid "$g") || return 0
    qmp "$g" '{"execute":"quit"}' >/dev/null 2>&1 || true
    for _ in $(seq 30); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -TERM "$pid" 2>/dev/null; sleep 1; kill -KILL "$pid" 2>/dev/null
    return 0
}

# rig [-t S] G CMD: runs CMD in guest G through its agent (siw-vm's lib/qga.py), relays
# output and exit status. rig_bg G LOG CMD: detached, output to LOG in the guest.
rig() {
    local t=300
    [ "$1" = -t ] && { t=$2; shift 2; }
    local g=$1; shift
    /usr/bin/python3 "$SIWVM/lib/qga.py" "$RUNDIR/$g/qga.sock" exec --timeout "$t" -- "$@" </dev/null
}
rig_bg() {
    local g=$1 logf=$2; shift 2
    /usr/bin/python3 "$SIWVM/lib/qga.py" "$RUNDIR/$g/qga.sock" bg --log "$logf" -- "$@"
}
