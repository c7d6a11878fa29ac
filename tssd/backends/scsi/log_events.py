"""The log events of the SCSI library backend (declared as tssd/log_events.py says)."""

from __future__ import annotations

from tssd.log_events import LogEvent

EVENTS: tuple[LogEvent, ...] = (
    LogEvent(
        ("scsi.library.open",),
        "info",
        "SCSI library opened (changer, drives, tapes)",
    ),
    LogEvent(
        ("scsi.changer.done", "scsi.changer.failed", "scsi.changer.timeout"),
        "debug / warning / error",
        "a changer command",
        "failures: check the changer",
    ),
    LogEvent(
        ("scsi.mount.loaded", "scsi.dismount.done"),
        "info",
        "a cartridge moved",
    ),
    LogEvent(
        ("scsi.mount.wrong_label",),
        "error",
        "the loaded tape's label is not the expected volume",
        "check the inventory",
    ),
    LogEvent(
        ("scsi.drive.unexpected_tape", "scsi.dismount.eject_failed"),
        "warning",
        "a drive held an unknown tape / would not eject",
        "check the drive",
    ),
    LogEvent(
        ("scsi.drive.locate_unsupported",),
        "info",
        (
            "the drive refused LOCATE (ILLEGAL REQUEST, as tgt and some older drives do); it "
            "positions by rewind plus space filemarks from now on (`tssctl drives`: POSITIONING)"
        ),
        "none; slower positioning on that drive",
    ),
    LogEvent(
        ("scsi.drive.wrap_ends_unavailable",),
        "info (refused) / warning (failed)",
        (
            "the drive did not give READ END OF WRAP POSITION after a mount (`unsupported`: it "
            "rejected the command with ILLEGAL REQUEST, as tgt, mhVTL, T10000 and drives before "
            "IBM LTO-7 do; it is not asked again; else the command failed and is asked again at "
            "the next mount). Logged once per drive"
        ),
        (
            "none: RAO plans on the media type's nominal geometry and calibrates it from locate "
            "times"
        ),
    ),
    LogEvent(
        ("scsi.drive.unloaded_at_start",),
        "warning",
        (
            "at start a drive held a cartridge it had unloaded (a stop's unload cut short by "
            "`scheduler.shutdown_unload_s` before the robot's move): it goes back to its slot"
        ),
        "none",
    ),
    LogEvent(
        ("scsi.drive.not_ready",),
        "warning",
        (
            "a drive answered TEST UNIT READY with NOT READY (taken offline); the error is "
            "transient and the tape is not disabled"
        ),
        "check the drive; tssd reopens it",
    ),
    LogEvent(
        ("scsi.tape.labelled", "scsi.tape.full"),
        "info",
        "a new tape got its label / a tape is full",
    ),
    LogEvent(
        ("scsi.tape.write_failed",),
        "error",
        "writing a tape failed; it is closed for writing",
        "[a tape is stuck](#a-tape-is-stuck)",
    ),
    LogEvent(
        ("scsi.read.file", "scsi.write.file", "scsi.write.exists", "scsi.remove.done"),
        "debug / info",
        "SCSI data path",
    ),
    LogEvent(
        ("scsi.read.failed", "scsi.write.failed"),
        "warning",
        "a read or write failed on a SCSI drive",
        "[a drive fails](#a-drive-fails)",
    ),
)
