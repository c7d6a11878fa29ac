"""The drive's own geometry: READ END OF WRAP POSITION, asked once a tape is mounted.

IBM LTO-7 and later drives report the logical object at the end of each wrap (CTA's LTO
RAO plans on it: tapeserver/castor/tape/tapeserver/drive/DriveGeneric.cpp,
``DriveLTO::getEndOfWrapPositions``). With the wraps' ends known, an object's wrap is
exact and its place along the wrap is interpolated between the wrap's ends
(:func:`tssd.tape.geometry.reported`), where the media type's nominal geometry is off by
the tape's compression, a wrap or more a few TB into the tape.

Logical objects are counted as tssd writes them (:mod:`.objects`): the label block and
its filemark, then per object a header block, the data blocks and a filemark, each one
logical object of ``block_size`` bytes in the catalog's offsets (``scsi_tapes.used``
grows by ``blocks x block_size`` per object). The first object's header is logical
object ``next_block - used / block_size``, at offset 0.

A drive that rejects the command (ILLEGAL REQUEST: tgt, mhVTL, drives before LTO-7, any
T10000 or 3592 here) is not asked again; the scheduler plans on the nominal geometry. A
mount never fails for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import structlog

from tssd.backends.scsi.sense import CommandUnsupported
from tssd.backends.scsi.sgio import WrapEnd
from tssd.backends.scsi.tapedev import Tape
from tssd.tape.geometry import Profile, reported

log = structlog.get_logger()


@dataclass(slots=True)
class WrapReports:
    """What a drive showed of READ END OF WRAP POSITION, kept across its mounts."""

    #: None until asked: then whether the drive implements it.
    supported: bool | None = None
    #: Whether the drive's refusal or failure has been logged (once per drive).
    logged: bool = False


def wrap_offsets(ends: Sequence[WrapEnd], first_block: int, block_size: int) -> list[int]:
    """The catalog offsets where the wraps of partition 0 end (the object after each
    wrap's last one), in wrap order; the last is the end of data."""
    ordered = sorted((e for e in ends if e.partition == 0), key=lambda e: e.wrap)
    return [max(0, (e.object_id + 1 - first_block) * block_size) for e in ordered]


async def drive_geometry(
    tape: Tape,
    drive: str,
    reports: WrapReports,
    profile: Profile,
    first_block: int,
    block_size: int,
) -> Profile | None:
    """*profile* with the wrap ends the drive reports for the mounted tape, or None (the
    drive rejects the command or failed it, or the tape's data is all in one wrap)."""
    if reports.supported is False:
        return None
    try:
        ends = await tape.wrap_ends()
    except OSError as exc:
        unsupported = isinstance(exc, CommandUnsupported)
        if unsupported:
            reports.supported = False
        if not reports.logged:
            reports.logged = True
            # A refusal is what tgt, mhVTL and most drives answer: info; a failure: warning.
            (log.info if unsupported else log.warning)(
                "scsi.drive.wrap_ends_unavailable",
                drive=drive,
                device=tape.path,
                error=str(exc),
                unsupported=unsupported,
                fallback="nominal geometry",
            )
        return None
    reports.supported = True
    return reported(profile, wrap_offsets(ends, first_block, block_size))
