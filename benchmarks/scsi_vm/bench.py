"""Figures of the tests/vm guest: boot to a ready library, mount (mtx load) and unload
time, and MB/s written and read through the kernel's st driver (dd on /dev/nst0, no
Python in the data path) on tgt's emulated drive over iSCSI on the guest's loopback.

    nice -n 10 python3 benchmarks/scsi_vm/bench.py [--mb 64] [--block-kib 256] [--boots 1]

Prints one JSON line per boot; docs/benchmarks.md has the figures.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "vm"))

from scsivm import GuestVM

JOB = r"""
set -e
CH={changer}
now() {{ cut -d' ' -f1 /proc/uptime; }}
t0=$(now); mtx -f $CH load 1 0 >/dev/null; t1=$(now)
echo "load_s=$(echo "$t1 - $t0" | bc)"
mt -f /dev/nst0 rewind
mt -f /dev/nst0 setblk 0
head -c $(({mb} * 1048576)) /dev/urandom > /tmp/src
t0=$(now); dd if=/tmp/src of=/dev/nst0 bs={bs}k 2>/dev/null; mt -f /dev/nst0 weof 1; t1=$(now)
echo "write_s=$(echo "$t1 - $t0" | bc)"
mt -f /dev/nst0 rewind
t0=$(now); dd if=/dev/nst0 of=/tmp/back bs={bs}k 2>/dev/null; t1=$(now)
echo "read_s=$(echo "$t1 - $t0" | bc)"
cmp /tmp/src /tmp/back && echo identical=1
t0=$(now); mtx -f $CH unload 1 0 >/dev/null; t1=$(now)
echo "unload_s=$(echo "$t1 - $t0" | bc)"
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--block-kib", type=int, default=256)
    parser.add_argument("--boots", type=int, default=1)
    args = parser.parse_args()
    for _ in range(args.boots):
        with GuestVM(drives=2, tapes=2, tape_mb=args.mb * 2, memory_mb=1024) as vm:
            assert vm.library is not None
            job = JOB.format(changer=vm.library.changer, mb=args.mb, bs=args.block_kib)
            result = vm.run(job, 900)
            if result.rc != 0:
                print(result.output, file=sys.stderr)
                return 1
            got = dict(re.findall(r"^(\w+)=([\d.]+)$", result.output, re.M))
            w, r = float(got["write_s"]), float(got["read_s"])
            print(
                json.dumps(
                    {
                        "accel": vm.accel,
                        "boot_to_ready_s": round(vm.boot_s, 1),
                        "guest_uptime_at_ready_s": vm.library.uptime_s,
                        "load_s": float(got["load_s"]),
                        "unload_s": float(got["unload_s"]),
                        "mb": args.mb,
                        "block_kib": args.block_kib,
                        "write_mb_s": round(args.mb / w, 1),
                        "read_mb_s": round(args.mb / r, 1),
                        "identical": got.get("identical") == "1",
                    }
                )
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
