#!/bin/sh
# Runs inside the guest, chrooted into the host's root (read-only), as the last step of
# tests/vm/init. Builds a tape library with tgt (README.vtl of Debian's tgt package: file
# backed SSC drives and an SMC changer), logs open-iscsi in over the guest's loopback so the
# kernel's st and sg drivers see it as hardware, then runs the host's jobs until told to
# stop. $1 is the exchange directory shared with the host (read-write virtio-9p):
#   vm.env          library shape (DRIVES, TAPES, TAPE_MB)
#   ready / failed  written once the library is up (or could not be set up)
#   jobs/NAME.sh    a job: run as `sh NAME.sh`, output to NAME.out, exit code to NAME.rc
#   jobs/STOP       log out, stop tgtd, power off
share=$1
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp
DRIVES=2 TAPES=8 TAPE_MB=64 CLEANING=1
[ -f "$share/vm.env" ] && . "$share/vm.env"
VTL=/tmp/vtl IQN=iqn.2026-01.org.tssd:vtl CHANGER_LUN=$((DRIVES + 1))
DRIVE_ADDR=256 SLOT_ADDR=1024 MAP_ADDR=768
log() { echo "tssdvm: $*" >&2; }
fail() { log "setup failed: $*"; echo "$*" >"$share/failed"; exit 1; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }
adm() { tgtadm --lld iscsi "$@" || fail "tgtadm $*"; }

shutdown() {
    iscsiadm -m node --logoutall=all >/dev/null 2>&1
    [ -n "$tgtd_pid" ] && kill "$tgtd_pid" 2>/dev/null
    sync
}
trap shutdown EXIT

ip link set lo up || fail "loopback"
# crc32c before iscsi_tcp logs in (the login's digest negotiation needs it).
for m in crc32c_generic st sg iscsi_tcp; do modprobe "$m" || fail "modprobe $m"; done
mkdir -p /run/lock/iscsi "$VTL"

i=1
while [ $i -le "$TAPES" ]; do
    tgtimg --op new --device-type tape --barcode "$(printf 'TSS%03dL8' $i)" \
        --size "$TAPE_MB" --type data --file "$VTL/$(printf 'TSS%03dL8' $i)" >/dev/null \
        || fail "tgtimg $i"
    i=$((i + 1))
done
[ "$CLEANING" -gt 0 ] && tgtimg --op new --device-type tape --barcode CLN001L1 --size 1 \
    --type clean --file "$VTL/CLN001L1" >/dev/null
: >"$VTL/smc"

tgtd -f --iscsi portal=127.0.0.1:3260 >/tmp/tgtd.log 2>&1 &
tgtd_pid=$!
for _ in $(seq 50); do tgtadm --lld iscsi --op show --mode sys >/dev/null 2>&1 && break; sleep 0.1; done
adm --op new --mode target --tid 1 -T "$IQN"
i=1
while [ $i -le "$DRIVES" ]; do
    # A tape LU needs a backing file to exist; the drive starts empty (online=0).
    tgtimg --op new --device-type tape --barcode "" --size 1 --type clean \
        --file "$VTL/notape$i" >/dev/null || fail "tgtimg notape$i"
    adm --mode logicalunit --op new --tid 1 --lun $i -b "$VTL/notape$i" --device-type=tape
    adm --mode logicalunit --op update --tid 1 --lun $i \
        --params "vendor_id=IBM,product_id=ULT3580-TD8,scsi_sn=$(printf 'TSSD%06d' $i),removable=1,online=0"
    i=$((i + 1))
done
L=$CHANGER_LUN
adm --mode logicalunit --op new --tid 1 --lun $L -b "$VTL/smc" --device-type=changer
adm --mode logicalunit --op update --tid 1 --lun $L \
    --params "vendor_id=STK,product_id=L700,scsi_sn=TSSDLIB001,removable=1,media_home=$VTL"
adm --mode logicalunit --op update --tid 1 --lun $L --params element_type=1,start_address=1,quantity=1
adm --mode logicalunit --op update --tid 1 --lun $L \
    --params "element_type=4,start_address=$DRIVE_ADDR,quantity=$DRIVES"
i=1
while [ $i -le "$DRIVES" ]; do
    adm --mode logicalunit --op update --tid 1 --lun $L \
        --params "element_type=4,address=$((DRIVE_ADDR + i - 1)),tid=1,lun=$i"
    i=$((i + 1))
done
SLOTS=$((TAPES + CLEANING + 4))
adm --mode logicalunit --op update --tid 1 --lun $L \
    --params "element_type=2,start_address=$SLOT_ADDR,quantity=$SLOTS"
adm --mode logicalunit --op update --tid 1 --lun $L \
    --params "element_type=3,start_address=$MAP_ADDR,quantity=2"
i=1
while [ $i -le "$TAPES" ]; do
    adm --mode logicalunit --op update --tid 1 --lun $L \
        --params "element_type=2,address=$((SLOT_ADDR + i - 1)),barcode=$(printf 'TSS%03dL8' $i),sides=1"
    i=$((i + 1))
done
[ "$CLEANING" -gt 0 ] && adm --mode logicalunit --op update --tid 1 --lun $L \
    --params "element_type=2,address=$((SLOT_ADDR + SLOTS - 1)),barcode=CLN001L1,sides=1"
adm --op bind --mode target --tid 1 -I ALL

iscsid || fail "iscsid"
iscsiadm -m discovery -t st -p 127.0.0.1 >/dev/null || fail "iscsi discovery"
iscsiadm -m node -T "$IQN" -p 127.0.0.1 --login >/dev/null || fail "iscsi login"
for _ in $(seq 100); do
    n=$(ls /sys/class/scsi_tape 2>/dev/null | grep -c '^nst[0-9]*$')
    changer=$(grep -l '^8$' /sys/class/scsi_generic/sg*/device/type 2>/dev/null | head -1)
    [ "$n" -ge "$DRIVES" ] && [ -n "$changer" ] && break
    sleep 0.1
done
[ "$n" -ge "$DRIVES" ] || fail "only $n of $DRIVES st devices appeared"
[ -n "$changer" ] || fail "no changer sg device"
changer=/dev/$(basename "$(dirname "$(dirname "$changer")")")
{
    echo "uptime=$(uptime_s)"
    echo "changer=$changer"
    for d in /sys/class/scsi_tape/nst*; do
        case ${d##*/} in nst[0-9] | nst[0-9][0-9]) ;; *) continue ;; esac
        sn=$(cut -c5- "$d/device/vpd_pg80" 2>/dev/null | tr -d '\0 ')
        sg=$(ls "$d/device/scsi_generic" 2>/dev/null)
        echo "drive=/dev/${d##*/} $sn /dev/$sg"
    done
} >"$share/ready.tmp"
mv "$share/ready.tmp" "$share/ready"
log "library ready at $(uptime_s)s"

jobs=$share/jobs
mkdir -p "$jobs"
while [ ! -e "$jobs/STOP" ]; do
    for job in "$jobs"/*.sh; do
        [ -e "$job" ] || continue
        name=${job%.sh}
        [ -e "$name.started" ] && continue
        : >"$name.started"
        (
            cd /tmp && sh "$job" >"$name.out" 2>&1
            echo $? >"$name.rc.tmp"
            mv "$name.rc.tmp" "$name.rc"
        ) &
    done
    sleep 0.1
done
log "stop requested at $(uptime_s)s"
