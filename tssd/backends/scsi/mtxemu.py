"""An ``mtx``-compatible changer over an emulated library directory (:mod:`.emulated`).

Usage is mtx's: ``python3 -m tssd.backends.scsi.mtxemu -f DIR [nobarcode] COMMAND ...``
with the commands ``status``, ``inquiry``, ``load SLOT [DRIVE]``, ``unload [SLOT] [DRIVE]``
and ``transfer SLOT SLOT``. Output and messages follow mtx 1.3: the table of ``status``,
``Loading media from Storage Element 3 into drive 0...done``, errors on stderr with exit
status 1. Point ``scsi.mtx`` at it and ``scsi.changer`` at the directory.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, NoReturn

from tssd.backends.scsi.emulated import (
    EmulationError,
    load_faults,
    load_state,
    locked,
    save_faults,
    save_state,
)

USAGE = "Usage: mtx [-f <device>] [nobarcode] <command> [<args>]"


class MtxError(Exception):
    """What mtx prints on stderr before exiting with status 1."""


def status(state: dict[str, Any], barcodes: bool = True) -> str:
    slots, drives = state["slots"], state["drives"]
    ie = sum(1 for s in slots if s["ie"])
    counts = f"{len(drives)} Drives, {len(slots)} Slots ( {ie} Import/Export )"
    lines = [f"  Storage Changer {state['root']}:{counts}"]
    for i, d in enumerate(drives):
        if d["volume"] is None:
            lines.append(f"Data Transfer Element {i}:Empty")
            continue
        source = f"Storage Element {d['source']}" if d["source"] else "Unknown Storage Element"
        tag = f":VolumeTag = {d['volume']}" if barcodes else ""
        lines.append(f"Data Transfer Element {i}:Full ({source} Loaded){tag}")
    for s in slots:
        kind = " IMPORT/EXPORT" if s["ie"] else ""
        if s["volume"] is None:
            lines.append(f"      Storage Element {s['number']}{kind}:Empty")
        else:
            tag = f":VolumeTag={s['volume']}" if barcodes else ""
            lines.append(f"      Storage Element {s['number']}{kind}:Full {tag}")
    return "\n".join(lines) + "\n"


def inquiry(state: dict[str, Any]) -> str:
    return (
        "Product Type: Medium Changer\n"
        f"Vendor ID: '{state['vendor']:<8}'\n"
        f"Product ID: '{state['product']:<16}'\n"
        "Revision: '0100'\n"
        "Attached Changer API: No\n"
    )


def _slot(state: dict[str, Any], number: int) -> dict[str, Any]:
    for s in state["slots"]:
        if s["number"] == number:
            return s  # type: ignore[no-any-return]
    raise MtxError(f"Invalid Storage Element number {number}")


def _drive(state: dict[str, Any], index: int) -> dict[str, Any]:
    if not 0 <= index < len(state["drives"]):
        raise MtxError(f"Invalid Data Transfer Element number {index}")
    return state["drives"][index]  # type: ignore[no-any-return]


def load(root: Path, state: dict[str, Any], slot_no: int, drive_no: int) -> str:
    faults = load_faults(root)
    hang = faults.pop("hang_load_s", 0)
    if hang:
        save_faults(root, faults)
        time.sleep(hang)
    slot, drive = _slot(state, slot_no), _drive(state, drive_no)
    if drive["volume"] is not None:
        raise MtxError(f"Drive {drive_no} Full (Storage Element {drive['source']} loaded)")
    if slot["volume"] is None:
        raise MtxError(f"Storage Element {slot_no} is Empty")
    drive["volume"], drive["source"], slot["volume"] = slot["volume"], slot_no, None
    return f"Loading media from Storage Element {slot_no} into drive {drive_no}...done\n"


def unload(state: dict[str, Any], slot_no: int | None, drive_no: int) -> str:
    drive = _drive(state, drive_no)
    if drive["volume"] is None:
        raise MtxError(f"Data Transfer Element {drive_no} is Empty")
    slot_no = slot_no or drive["source"]
    if slot_no is None:
        raise MtxError(f"No source element for Data Transfer Element {drive_no}: name a slot")
    slot = _slot(state, slot_no)
    if slot["volume"] is not None:
        raise MtxError(f"Storage Element {slot_no} is Full")
    slot["volume"], drive["volume"], drive["source"] = drive["volume"], None, None
    return f"Unloading drive {drive_no} into Storage Element {slot_no}...done\n"


def transfer(state: dict[str, Any], source_no: int, target_no: int) -> str:
    source, target = _slot(state, source_no), _slot(state, target_no)
    if source["volume"] is None:
        raise MtxError(f"Storage Element {source_no} is Empty")
    if target["volume"] is not None:
        raise MtxError(f"Storage Element {target_no} is Full")
    target["volume"], source["volume"] = source["volume"], None
    return ""


def _ints(args: list[str]) -> list[int]:
    try:
        return [int(a) for a in args]
    except ValueError:
        raise MtxError(f"Invalid argument '{' '.join(args)}'") from None


def run(root: Path, words: list[str]) -> str:
    barcodes = True
    if words and words[0] == "nobarcode":
        barcodes, words = False, words[1:]
    if not words:
        raise MtxError(USAGE)
    command, args = words[0], _ints(words[1:])
    with locked(root):
        state = load_state(root)
        state["root"] = str(root)
        if command == "status":
            return status(state, barcodes)
        if command == "inquiry":
            return inquiry(state)
        if command == "load" and 1 <= len(args) <= 2:
            out = load(root, state, args[0], args[1] if len(args) > 1 else 0)
        elif command == "unload" and len(args) <= 2:
            slot = args[0] if args else None
            out = unload(state, slot or None, args[1] if len(args) > 1 else 0)
        elif command == "transfer" and len(args) == 2:
            out = transfer(state, args[0], args[1])
        else:
            raise MtxError(f"Invalid command or arguments: {' '.join(words)}")
        state.pop("root")
        save_state(root, state)
        return out


def _fail(message: str) -> NoReturn:
    sys.stderr.write(message.rstrip() + "\n")
    sys.exit(1)


def main(argv: list[str] | None = None) -> None:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["--version"]:
        sys.stdout.write("mtx version 1.3.12 (tssd emulator)\n")
        return
    if len(words) < 2 or words[0] != "-f":
        _fail(USAGE)
    try:
        sys.stdout.write(run(Path(words[1]), words[2:]))
    except MtxError as exc:
        _fail(f"mtx: {exc}")
    except EmulationError as exc:
        _fail(f"mtx: cannot open SCSI device '{words[1]}': {exc}")


if __name__ == "__main__":
    main()
