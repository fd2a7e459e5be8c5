#!/bin/bash
# Stage 2 (PID 1) of a nic-vm guest: siw-vm's stage 1 (lib/init) mounts the host root over
# 9p with a tmpfs overlay and runs this instead of siw-vm's guest-init.sh. No siw, no
# kernel network: the guest's only NIC is for DPDK. Kernel command line words:
#   nicvm.name=NAME       hostname
#   nicvm.hugepages=N     2 MiB hugepages to reserve (default 512)
#   nicvm.bind=ADDR,...   PCI addresses to bind to a DPDK driver (vfio-pci in no-IOMMU mode,
#                         else uio_pci_generic)
# Prints "NICVM-READY <name> ..." on the console, runs qemu-ga (the control channel of
# siw-vm's run-in-guest.sh) and reaps orphans forever.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=${TERM:-linux}
exec </dev/console >/dev/console 2>&1
cd /
arg() {
    local v
    v=$(tr ' ' '\n' </proc/cmdline | sed -n "s/^nicvm\.$1=//p" | tail -n 1)
    printf '%s' "${v:-$2}"
}
fail() { echo "NICVM-FAILED stage2: $*"; }

mkdir -p /dev/pts /dev/shm /dev/hugepages
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=755 tmpfs /run
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=1777 tmpfs /var/tmp 2>/dev/null
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin; ln -sf /proc/self/fd/1 /dev/stdout; ln -sf /proc/self/fd/2 /dev/stderr
if [ -d /host ]; then
    mount -t 9p -o ro,trans=virtio,version=9p2000.L,cache=none,msize=512000 hostfresh /host \
        || echo "nicvm: could not mount hostfresh at /host"
fi
NAME=$(arg name nicguest)
hostname "$NAME"; echo "$NAME" > /etc/hostname
printf '127.0.0.1 localhost\n' > /etc/hosts
ulimit -l unlimited
ulimit -n 65536
ip link set lo up

# ---------------------------------------------------------------- hugepages
HP=$(arg hugepages 512)
echo "$HP" > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
mount -t hugetlbfs nodev /dev/hugepages || fail "mount hugetlbfs"
echo "nicvm: hugepages $(cat /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages) of $HP"

# ---------------------------------------------------------------- DPDK driver
# vfio-pci needs an IOMMU or the kernel's no-IOMMU mode (CONFIG_VFIO_NOIOMMU: not set in
# Debian's 6.1 kernel, so the guest normally ends up with uio_pci_generic).
DRV=none
modprobe vfio enable_unsafe_noiommu_mode=1 2>/dev/null
if [ -e /sys/module/vfio/parameters/enable_unsafe_noiommu_mode ] && modprobe vfio-pci; then
    echo 1 > /sys/module/vfio/parameters/enable_unsafe_noiommu_mode
    DRV=vfio-pci
elif modprobe uio_pci_generic; then
    DRV=uio_pci_generic
else
    fail "neither vfio-pci (no-IOMMU) nor uio_pci_generic loads"
fi
echo "$DRV" > /run/nicvm-driver
for a in $(arg bind "" | tr ',' ' '); do
    d=/sys/bus/pci/devices/$a
    [ -e "$d" ] || { fail "no PCI device $a"; continue; }
    [ -e "$d/driver" ] && echo "$a" > "$d/driver/unbind"
    echo "$DRV" > "$d/driver_override"
    echo "$a" > /sys/bus/pci/drivers_probe
    echo "nicvm: $a ($(cat "$d/vendor"):$(cat "$d/device")) -> $(basename "$(readlink "$d/driver" 2>/dev/null)")"
done

# ---------------------------------------------------------------- control
port_of() {
    local p
    for p in /sys/class/virtio-ports/*; do
        [ "$(cat "$p/name" 2>/dev/null)" = "$1" ] && { echo "/dev/$(basename "$p")"; return 0; }
    done
    return 1
}
QGA_DEV=$(port_of org.qemu.guest_agent.0) || fail "no qemu-ga port"
[ -n "$QGA_DEV" ] && qemu-ga -m virtio-serial -p "$QGA_DEV" -d -f /run/qemu-ga.pid -l /run/qemu-ga.log \
    || fail "qemu-ga did not start"
echo "NICVM-READY $NAME driver=$DRV uptime=$(cut -d' ' -f1 /proc/uptime)"
trap '' TERM INT
while :; do
    sleep 3600 &
    wait $! 2>/dev/null
done
