#!/usr/bin/env bash
# Build the guest's initramfs: busybox, the modules that mount the host's root over
# virtio-9p, and init (tests/vm/init). Usage: initramfs.sh KERNEL_VERSION OUTPUT
set -euo pipefail
kver=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work"/{bin,proc,sys,dev,newroot,modules}
cp /bin/busybox "$work/bin/busybox"
cp "$here/init" "$work/init"
chmod +x "$work/init"
# Modules in load order (modprobe --show-depends), for busybox insmod.
for m in virtio_pci 9pnet_virtio 9p; do
    modprobe -S "$kver" --show-depends "$m" | awk '$1 == "insmod" {print $2}'
done | awk '!seen[$0]++' | while read -r ko; do
    cp "$ko" "$work/modules/"
    basename "$ko" >>"$work/modules/order"
done
(cd "$work" && find . | cpio -o -H newc --quiet | gzip -1) >"$out.tmp"
mv "$out.tmp" "$out"
