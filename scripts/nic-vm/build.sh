#!/bin/bash
# Builds the nic-vm guest image: siw-vm's kernel and initramfs (its build.sh, with the
# build products under $SIWVM_WORK) plus the modules a DPDK guest needs (vfio-pci in no-IOMMU
# mode, uio_pci_generic) and scripts/nic-vm/guest-init.sh as stage 2.
# Output: $NICVM_WORK/{vmlinuz,initrd.img,kernel-release}. Idempotent; cheap when nothing changed.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SIWVM=${SIWVM:-$(cd "$ROOT/../shared/siw-vm" 2>/dev/null && pwd)}
# The same kernel build as the siw matrix (scripts/interop-siw.sh): built once, shared.
export SIWVM_WORK=${SIWVM_WORK:-$ROOT/target/siw-vm/work}
NICVM_WORK=${NICVM_WORK:-$ROOT/target/nic-vm/work}
log() { printf '[nic-vm build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
mkdir -p "$ROOT/target/nic-vm"

"$SIWVM/build.sh" >"$ROOT/target/nic-vm/siw-build.log" 2>&1 \
    || { tail -20 "$ROOT/target/nic-vm/siw-build.log" >&2; log "siw-vm build.sh failed"; exit 1; }
W=$SIWVM_WORK
KREL=$(sed -n 's/^kernel_release=//p' "$W/out/BUILD-INFO")
[ -d "$W/initramfs" ] && [ -d "$W/k-$KREL/lib/modules/$KREL" ] || { log "siw-vm work tree incomplete"; exit 1; }

SUM=$( { cat "$W/out/BUILD-INFO" "$HERE/guest-init.sh" "$0"; } | sha256sum | cut -c1-16)
if [ -f "$NICVM_WORK/inputs" ] && [ "$(cat "$NICVM_WORK/inputs")" = "$SUM" ] && [ -f "$NICVM_WORK/initrd.img" ]; then
    log "up to date ($NICVM_WORK)"; exit 0
fi
log "assembling the initramfs (kernel $KREL)"
rm -rf "$NICVM_WORK"; mkdir -p "$NICVM_WORK"
MT=$NICVM_WORK/modtree IR=$NICVM_WORK/initramfs
mkdir -p "$MT/lib/modules"
cp -al "$W/k-$KREL/lib/modules/$KREL" "$MT/lib/modules/"
depmod -b "$MT" "$KREL"
cp -a "$W/initramfs" "$IR"
for m in vfio vfio_pci vfio_iommu_type1 uio uio_pci_generic; do
    modprobe -d "$MT" -S "$KREL" --show-depends "$m" | awk '$1=="insmod"{print $2}'
done | awk '!seen[$0]++' | while read -r f; do
    rel=${f#"$MT"}
    mkdir -p "$IR/$(dirname "$rel")"
    case "$f" in
        *.ko.xz)  xz -dc "$f" > "$IR/${rel%.xz}" ;;
        *.ko.zst) zstd -qdc "$f" > "$IR/${rel%.zst}" ;;
        *)        cp "$f" "$IR/$rel" ;;
    esac
done
depmod -b "$IR" "$KREL"
cp "$HERE/guest-init.sh" "$IR/siwvm/guest-init.sh"
chmod 755 "$IR/siwvm/guest-init.sh"
(cd "$IR" && find . -print0 | sort -z | "$W/busybox/bin/busybox" cpio -o -H newc -0 2>/dev/null | gzip -1 > "$NICVM_WORK/initrd.img")
cp "$W/out/vmlinuz" "$NICVM_WORK/vmlinuz"
echo "$KREL" > "$NICVM_WORK/kernel-release"
rm -rf "$MT" "$IR"
echo "$SUM" > "$NICVM_WORK/inputs"
log "done: $NICVM_WORK/initrd.img ($(du -h "$NICVM_WORK/initrd.img" | cut -f1))"
