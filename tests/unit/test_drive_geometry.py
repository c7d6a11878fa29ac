"""The drive's own geometry (issue 18 point 1(a)): READ END OF WRAP POSITION.

The command and its reply are laid out as CTA reads them (cern-cta/CTA,
tapeserver/castor/tape/tapeserver/SCSI/Structures.hpp: ``readEndOfWrapPositionCDB_t``,
``readEndOfWrapPositionDataLongForm_t``; drive/DriveGeneric.cpp:
``DriveLTO::getEndOfWrapPositions``; rao/RAOHelpers.cpp: the last descriptor is the end
of data, not a wrap's end). A drive that rejects it leaves the nominal geometry: tgt
(usr/spc.c, spc_service_action) answers MAINTENANCE IN service actions other than 0Ch
with ILLEGAL REQUEST, invalid field in CDB.
"""

from __future__ import annotations

import dataclasses
import io
import random
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import async_sessionmaker
from structlog.testing import capture_logs

from tssd.backends.scsi import sgio, wraps
from tssd.backends.scsi.sense import ILLEGAL_REQUEST, CommandUnsupported, Sense
from tssd.backends.scsi.sgio import WrapEnd
from tssd.backends.sim import SimLibrary
from tssd.backends.sim.layout import physical_offsets, wrap_report
from tssd.clock import RealClock
from tssd.config import SimSettings
from tssd.db.sim_catalog import SimCatalogTables
from tssd.tape.geometry import ESTIMATE_SPREAD, LTO9, reported

GB = 10**9
TB = 10**12


# -- the representation ---------------------------------------------------------------


def test_reported_ends_at_the_nominal_boundaries_give_the_nominal_model() -> None:
    cap = LTO9.capacity_bytes
    wb = LTO9.wrap_bytes(cap)
    # Ten complete wraps and the end of data in the eleventh.
    geometry = reported(LTO9, [k * wb for k in range(1, 11)] + [10 * wb + wb // 3])
    assert geometry is not None
    assert geometry.wrap_ends == tuple(k * wb for k in range(1, 11))
    assert geometry.position_spread == 0.0
    rng = random.Random(3)
    offsets = [rng.randrange(0, 14 * wb) for _ in range(400)] + [0, wb - 1, wb, 10 * wb]
    for a in offsets:
        assert geometry.wrap_of(a, cap) == LTO9.wrap_of(a, cap)
        assert geometry.longitudinal(a, cap) == pytest.approx(LTO9.longitudinal(a, cap))
    for a, b in zip(offsets, reversed(offsets), strict=True):
        assert geometry.locate_s(a, b, cap) == pytest.approx(LTO9.locate_s(a, b, cap))


def test_the_wrap_and_its_ends_come_from_the_report() -> None:
    cap = LTO9.capacity_bytes
    ends = [50 * GB, 110 * GB, 160 * GB, 999 * GB]  # the last: end of data
    g = reported(LTO9, ends)
    assert g is not None and g.wrap_ends == (50 * GB, 110 * GB, 160 * GB)
    assert [g.wrap_of(o, cap) for o in (0, 50 * GB - 1, 50 * GB, 159 * GB, 160 * GB)] == [
        0, 0, 1, 2, 3,
    ]  # fmt: skip
    assert g.longitudinal(25 * GB, cap) == pytest.approx(0.5)  # half of wrap 0
    assert g.longitudinal(80 * GB, cap) == pytest.approx(0.5)  # half of wrap 1, running back
    assert g.longitudinal(110 * GB, cap) == pytest.approx(0.0)  # wrap 2 starts at BOT
    # Beyond the last complete wrap: wraps of the mean length (160 / 3 GB).
    assert g.wrap_of(160 * GB + 54 * GB, cap) == 4
    # The inlined locate is the composed model.
    for a, b in ((0, 80 * GB), (25 * GB, 80 * GB), (130 * GB, 40 * GB), (170 * GB, 2 * GB)):
        change = g.wrap_of(a, cap) != g.wrap_of(b, cap)
        band = g.band_of(a, cap) != g.band_of(b, cap)
        expected = (
            g.locate_base_s
            + abs(g.longitudinal(a, cap) - g.longitudinal(b, cap)) * g.locate_full_s
            + (g.wrap_change_s if change else 0.0)
            + (g.band_change_s if band else 0.0)
        )
        assert g.locate_s(a, b, cap) == pytest.approx(expected)


def test_a_report_that_tells_nothing_is_none() -> None:
    assert reported(LTO9, [40 * GB]) is None  # all data in wrap 0
    assert reported(LTO9, []) is None
    assert reported(LTO9, [50 * GB, 40 * GB, 90 * GB]) is None  # not increasing


# -- the simulated drive ----------------------------------------------------------------


def test_simulated_report_places_every_object_on_its_true_wrap() -> None:
    rng = random.Random(1)
    objects, offset = [], 0
    for seq in range(1, 1500):
        size = rng.randint(1, 4) * GB
        objects.append((seq, offset, size))
        offset += size
    cap = LTO9.capacity_bytes
    places = physical_offsets("ABC123L9", objects, 0.03, 0.02, 1)
    ends = wrap_report(objects, places, LTO9.wrap_bytes(cap))
    assert ends[-1] == offset  # the last descriptor: end of data
    g = reported(LTO9, ends)
    assert g is not None
    for (_, at, _), (start, _) in zip(objects, places, strict=True):
        assert g.wrap_of(at, cap) == LTO9.wrap_of(start, cap)
        assert abs(g.longitudinal(at, cap) - LTO9.longitudinal(start, cap)) < 0.02
    # Without any spread the report is the nominal boundaries.
    exact = wrap_report(objects, physical_offsets("V", objects, 0, 0, 0), LTO9.wrap_bytes(cap))
    wb = LTO9.wrap_bytes(cap)
    assert exact[:-1] == [k * wb for k in range(1, len(exact))]


async def test_sim_drive_geometry_after_mount_only_when_set(
    sessions: async_sessionmaker[Any], tmp_path: Path
) -> None:
    rows = "pnfsid,volume,seq,size,storage_class,written_at\n" + "".join(
        f"{s:04X},V1,{s},{100 * GB},a:b,2020-01-01T00:00:00\n" for s in range(1, 41)
    )
    for setting in (False, True):
        settings = SimSettings(drives=1, tapes=0, tape_capacity=9 * TB, drive_geometry=setting)
        lib = SimLibrary(
            settings,
            SimCatalogTables(sessions),
            RealClock(),
            tmp_path / f"s{setting}",
            time_scale=0,
        )
        async with lib:
            await lib.import_catalog(io.StringIO(rows), replace=True)
            before = await lib.geometry("V1")
            assert before is not None and before.position_spread == ESTIMATE_SPREAD
            assert not before.wrap_ends
            await lib.mount("drive0", "V1")
            after = await lib.geometry("V1")
            assert after is not None
            if not setting:
                assert after == before  # an IBM SP site: the nominal geometry
                continue
            assert after.position_spread == 0.0 and after.capacity_bytes == 9 * TB
            # 4 TB of data on wraps of 9 TB / 280: about 124 complete wraps.
            assert 115 <= len(after.wrap_ends) <= 135
            assert dataclasses.replace(after, wrap_ends=(), position_spread=0) == (
                dataclasses.replace(LTO9, capacity_bytes=9 * TB)
            )


# -- the SCSI command -------------------------------------------------------------------


def test_read_end_of_wrap_position_cdb() -> None:
    cdb = sgio.end_of_wrap_cdb(12 * 280)
    # MAINTENANCE IN, service action 1Fh, qualifier 45h, byte 3: WNV 0 (bit 0), RA 1
    # (bit 1), byte 5 wrap number 0, bytes 6-9 allocation length, 12 bytes in all.
    assert cdb == bytes([0xA3, 0x1F, 0x45, 0x02, 0, 0, 0, 0, 0x0D, 0x20, 0, 0])
    assert len(sgio.end_of_wrap_cdb()) == 12


def _descriptor(wrap: int, partition: int, object_id: int) -> bytes:
    return (
        wrap.to_bytes(2, "big")
        + partition.to_bytes(2, "big")
        + bytes(2)
        + (object_id.to_bytes(6, "big"))
    )


def test_long_form_reply_is_parsed() -> None:
    body = _descriptor(0, 0, 208_310) + _descriptor(1, 0, 416_271) + _descriptor(2, 0, 2**40 + 5)
    data = (2 + len(body)).to_bytes(2, "big") + bytes(2) + body + bytes(60)  # padding
    assert sgio.parse_end_of_wrap(data) == [
        WrapEnd(0, 0, 208_310), WrapEnd(1, 0, 416_271), WrapEnd(2, 0, 2**40 + 5)
    ]  # fmt: skip
    assert sgio.parse_end_of_wrap(data[:10]) == []  # cut short: no whole descriptor
    assert sgio.parse_end_of_wrap(b"") == []


def test_logical_objects_become_catalog_offsets() -> None:
    # tssd's label (block 0) and its filemark (1): the first object's header is object 2,
    # at offset 0; partition 1 is not tssd's.
    ends = [WrapEnd(1, 0, 11), WrapEnd(0, 0, 6), WrapEnd(0, 1, 3), WrapEnd(2, 0, 13)]
    assert wraps.wrap_offsets(ends, 2, 4096) == [5 * 4096, 10 * 4096, 12 * 4096]


class _Tape:
    path = "/dev/nst7"

    def __init__(self, answer: list[WrapEnd] | OSError) -> None:
        self.answer, self.asked = answer, 0

    async def wrap_ends(self) -> list[WrapEnd]:
        self.asked += 1
        if isinstance(self.answer, OSError):
            raise self.answer
        return self.answer


async def test_a_drive_that_refuses_is_logged_once_and_not_asked_again() -> None:
    refused = CommandUnsupported(
        "/dev/nst7", "READ END OF WRAP POSITION", Sense(ILLEGAL_REQUEST, 0x24)
    )
    tape, reports = _Tape(refused), wraps.WrapReports()
    with capture_logs() as logs:
        for _ in range(3):
            got = await wraps.drive_geometry(tape, "D1", reports, LTO9, 2, 4096)  # type: ignore[arg-type]
            assert got is None
    assert tape.asked == 1 and reports.supported is False
    events = [e for e in logs if e["event"] == "scsi.drive.wrap_ends_unavailable"]
    assert len(events) == 1 and events[0]["unsupported"] is True
    # Another failure (not a refusal): nominal geometry, asked again, logged once.
    failing, again = _Tape(OSError(5, "Input/output error")), wraps.WrapReports()
    with capture_logs() as logs:
        for _ in range(2):
            assert await wraps.drive_geometry(failing, "D2", again, LTO9, 2, 4096) is None  # type: ignore[arg-type]
    assert failing.asked == 2 and again.supported is None
    assert len([e for e in logs if e["event"] == "scsi.drive.wrap_ends_unavailable"]) == 1


async def test_a_drive_that_answers_gives_the_reported_geometry() -> None:
    answer = [WrapEnd(0, 0, 1001), WrapEnd(1, 0, 2001), WrapEnd(2, 0, 2500)]
    reports = wraps.WrapReports()
    got = await wraps.drive_geometry(_Tape(answer), "D1", reports, LTO9, 2, 1 << 20)  # type: ignore[arg-type]
    assert got is not None and reports.supported is True
    assert got.wrap_ends == (1000 << 20, 2000 << 20)


def test_st_drive_asks_through_sg_past_a_unit_attention(monkeypatch: pytest.MonkeyPatch) -> None:
    """What tgt answered in tests/vm: first a unit attention (power on, reset: reported
    once per nexus), then ILLEGAL REQUEST, invalid field in CDB (usr/spc.c)."""
    from tssd.backends.scsi.sense import UNIT_ATTENTION
    from tssd.backends.scsi.tapedev import StTape

    replies = [
        sgio.Reply(2, Sense(UNIT_ATTENTION, 0x29), b""),
        sgio.Reply(2, Sense(ILLEGAL_REQUEST, 0x24), b""),
    ]
    monkeypatch.setattr(sgio, "sg_of", lambda path: "/dev/sg1")
    monkeypatch.setattr(sgio, "end_of_wrap_positions", lambda path: replies.pop(0))
    tape = object.__new__(StTape)
    tape.path = "/dev/nst0"
    with pytest.raises(CommandUnsupported):
        tape.end_of_wrap_positions()
    assert not replies
    body = _descriptor(0, 0, 99) + _descriptor(1, 0, 150)
    good = (2 + len(body)).to_bytes(2, "big") + bytes(2) + body
    monkeypatch.setattr(sgio, "end_of_wrap_positions", lambda path: sgio.Reply(0, None, good))
    assert tape.end_of_wrap_positions() == [WrapEnd(0, 0, 99), WrapEnd(1, 0, 150)]
