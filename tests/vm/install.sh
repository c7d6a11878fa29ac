#!/usr/bin/env bash
# Debian packages for the SCSI VM tests (tests/vm/): qemu, a kernel with st/sg/iscsi_tcp/9p
# modules, tgt (the SCSI target emulating changer and drives), open-iscsi, mtx, busybox.
# Idempotent and quick when everything is installed; run as root (CI runs on a fresh machine).
set -euo pipefail
PACKAGES=(qemu-system-x86 linux-image-amd64 tgt open-iscsi mtx mt-st sg3-utils lsscsi busybox-static)
missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    # No initramfs for the host: tests/vm builds its own busybox one for the guest.
    install() { apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
    install || { apt-get update -q >/dev/null && install; }
fi
ls /boot/vmlinuz-* >/dev/null
