"""Tape drive I/O: one small device interface, the Linux st driver behind it, and the
translation of the driver's errors into tssd's.

:class:`TapeDevice` is what the backend needs from a drive: fixed-size block reads and
writes, filemarks, the logical block position (``MTIOCPOS``) and ``MTSEEK`` to it, status
(``MTIOCGET``), rewind and eject. :class:`StTape` implements it with ``ioctl`` calls on the
no-rewind device (``/dev/nstN``); :class:`~tssd.backends.scsi.emulated.FileTape`
implements it on a file, failing with the same ``errno`` values. Both are blocking;
:class:`Tape` runs them in a worker thread and maps ``OSError`` at this boundary:

=========================  =================================================================
errno                      meaning → tssd error
=========================  =================================================================
ENOMEDIUM, EIO at open,    no tape / drive not ready yet → :class:`DriveNotReady` (transient,
EBUSY                      the mount is retried by :mod:`tssd.retry`)
ENOSPC on write            early-warning end of medium → :class:`EndOfMedium` (the tape is
                           closed, the batch continues on the next one)
EROFS, EACCES on write     write protected → :class:`WriteProtected` (permanent for the tape)
EIO, ENOMEM on read/seek   media error → :class:`MediaError` (permanent for that object)
=========================  =================================================================

Positioning (:meth:`Tape.position`) uses LOCATE (``MTSEEK``) where the drive implements
it. Some do not (tgt's SSC emulation, some older drives): st then reports a bare ``EIO``,
so :class:`StTape` repeats the LOCATE through the drive's sg device to read the sense
data, and ILLEGAL REQUEST (invalid operation code) switches that drive to rewinding and
spacing filemarks (``MTFSF``) to the object's tape file, forward from where st says the
head is when it can (drivers/scsi/st.c: ``MTFSF`` sets ``drv_block`` to 0 and advances
``drv_file``; a read that meets a filemark does the same).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

import structlog

from tssd.backends.scsi import sgio
from tssd.backends.scsi.drivestatus import DriveStatus
from tssd.backends.scsi.sense import (
    NOT_READY,
    UNIT_ATTENTION,
    CommandUnsupported,
    LocateUnsupported,
)
from tssd.errors import PermanentBackendError, TransientBackendError

T = TypeVar("T")
log = structlog.get_logger()


class DriveNotReady(TransientBackendError):
    """No cartridge in the drive, or the drive is still becoming ready."""


class EndOfMedium(TransientBackendError):
    """The tape reached its early-warning end: close it and continue on another."""


class MediaError(PermanentBackendError):
    """The drive could not read or position: this object (or tape) is unreadable."""


class WriteProtected(PermanentBackendError):
    """The cartridge's write-protect tab is set."""


class TapeDevice(Protocol):
    """An open tape drive (blocking calls); errors are ``OSError`` with st's ``errno``."""

    path: str

    def close(self) -> None: ...
    def status(self) -> DriveStatus: ...
    def rewind(self) -> None: ...
    def tell(self) -> int: ...
    def seek(self, block: int) -> None: ...
    def space_filemarks(self, count: int) -> None: ...
    def write_block(self, data: bytes) -> None: ...
    def read_block(self, size: int) -> bytes: ...
    def write_filemark(self) -> None: ...
    def offline(self) -> None: ...
    def ready(self) -> bool: ...
    def end_of_wrap_positions(self) -> list[sgio.WrapEnd]: ...


# -- the Linux st driver (linux/mtio.h) -------------------------------------------------


def _ioc(direction: int, number: int, size: int) -> int:
    return (direction << 30) | (size << 16) | (ord("m") << 8) | number


_MTOP = struct.Struct("@hi")  # struct mtop { short mt_op; int mt_count; }
_MTGET = struct.Struct("@5l2i")  # struct mtget: five longs, mt_fileno, mt_blkno
_MTPOS = struct.Struct("@l")  # struct mtpos { long mt_blkno; }
MTIOCTOP = _ioc(1, 1, _MTOP.size)
MTIOCGET = _ioc(2, 2, _MTGET.size)
MTIOCPOS = _ioc(2, 3, _MTPOS.size)
MTFSF, MTBSF, MTWEOF, MTREW, MTOFFL, MTSETBLK, MTSEEK = 1, 2, 5, 6, 7, 20, 22
GMT_EOF, GMT_BOT, GMT_EOT = 0x80000000, 0x40000000, 0x20000000
GMT_EOD, GMT_WR_PROT, GMT_ONLINE = 0x08000000, 0x04000000, 0x01000000


class StTape:
    """A drive through the Linux st driver, in variable-block mode.

    Variable mode (``MTSETBLK 0``) makes each ``write`` one tape block of exactly the
    size written; tssd always writes ``scsi.block_size`` bytes, so the blocks on tape are
    fixed-size whatever the drive's default.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self._fd = os.open(path, os.O_RDWR)
        except OSError as exc:
            if exc.errno not in (errno.EROFS, errno.EACCES):
                raise
            self._fd = os.open(path, os.O_RDONLY)
        try:
            self._op(MTSETBLK, 0)
        except OSError:
            os.close(self._fd)
            raise

    def _op(self, op: int, count: int = 1) -> None:
        fcntl.ioctl(self._fd, MTIOCTOP, _MTOP.pack(op, count))

    def close(self) -> None:
        os.close(self._fd)

    def status(self) -> DriveStatus:
        buf = bytearray(_MTGET.size)
        fcntl.ioctl(self._fd, MTIOCGET, buf)
        _type, _resid, _dsreg, gstat, _erreg, fileno, blkno = _MTGET.unpack(buf)
        gstat &= 0xFFFFFFFF
        return DriveStatus(
            online=bool(gstat & GMT_ONLINE),
            bot=bool(gstat & GMT_BOT),
            eod=bool(gstat & GMT_EOD),
            eot=bool(gstat & GMT_EOT),
            write_protected=bool(gstat & GMT_WR_PROT),
            file_number=fileno,
            block_number=blkno,
        )

    def rewind(self) -> None:
        self._op(MTREW)

    def tell(self) -> int:
        buf = bytearray(_MTPOS.size)
        fcntl.ioctl(self._fd, MTIOCPOS, buf)
        return int(_MTPOS.unpack(buf)[0])

    def seek(self, block: int) -> None:
        try:
            self._op(MTSEEK, block)
        except OSError as exc:
            if exc.errno != errno.EIO:
                raise
            self._why_locate_failed(block, exc)

    def _why_locate_failed(self, block: int, exc: OSError) -> None:
        """st says only EIO: ask the drive itself (sg) whether LOCATE exists at all."""
        sg = sgio.sg_of(self.path)
        if sg is None:
            raise exc
        try:
            reply = sgio.locate(sg, block)
        except OSError:
            raise exc from None
        if reply.sense is not None and reply.sense.unsupported:
            raise LocateUnsupported(self.path, reply.sense) from exc
        if reply.good:
            return  # the second attempt through sg worked: the head is there
        raise OSError(errno.EIO, f"locate to block {block}: {reply.sense or 'failed'}") from exc

    def ready(self) -> bool:
        """TEST UNIT READY through sg: st's own status says "online" until it next opens
        the drive, even after the drive went offline (drivers/scsi/st.c sets GMT_ONLINE
        from its ``ready`` state, refreshed only at open)."""
        sg = sgio.sg_of(self.path)
        if sg is None:
            return self.status().online
        for _ in range(2):  # a unit attention (after a load) is reported once
            reply = sgio.command(sg, bytes(6))
            if reply.good:
                return True
            if reply.sense is None or reply.sense.key != UNIT_ATTENTION:
                break
        return reply.sense is None or reply.sense.key != NOT_READY

    def end_of_wrap_positions(self) -> list[sgio.WrapEnd]:
        """READ END OF WRAP POSITION through sg (st has no ioctl for it);
        :class:`CommandUnsupported` where the drive rejects it (tgt, older drives)."""
        what = "READ END OF WRAP POSITION"
        sg = sgio.sg_of(self.path)
        if sg is None:
            raise CommandUnsupported(self.path, f"{what} (no sg device)", None)
        for _ in range(2):  # a unit attention (after a load or a reset) is reported once
            reply = sgio.end_of_wrap_positions(sg)
            if reply.sense is None or reply.sense.key != UNIT_ATTENTION:
                break
        if reply.sense is not None and reply.sense.unsupported:
            raise CommandUnsupported(self.path, what, reply.sense)
        if not reply.good:
            raise OSError(errno.EIO, f"{what}: {reply.sense or reply.status}", self.path)
        return sgio.parse_end_of_wrap(reply.data)

    def space_filemarks(self, count: int) -> None:
        if count > 0:
            self._op(MTFSF, count)
        elif count < 0:
            self._op(MTBSF, -count)

    def write_block(self, data: bytes) -> None:
        written = os.write(self._fd, data)
        if written != len(data):  # a short write is the physical end of the tape
            raise OSError(errno.ENOSPC, f"short write ({written} of {len(data)} bytes)")

    def read_block(self, size: int) -> bytes:
        return os.read(self._fd, size)

    def write_filemark(self) -> None:
        self._op(MTWEOF)

    def offline(self) -> None:
        self._op(MTOFFL)


def st_serial(path: str) -> str | None:
    """The unit serial number (VPD page 0x80) of an st device: sysfs, else INQUIRY via sg."""
    name = Path(os.path.realpath(path)).name
    vpd = Path("/sys/class/scsi_tape") / name / "device" / "vpd_pg80"
    try:
        page = vpd.read_bytes()
    except OSError:
        sg = sgio.sg_of(path)
        try:
            return sgio.vpd_serial(sg) if sg else None
        except OSError:
            return None
    return page[4:].decode("ascii", errors="replace").strip(" \0") or None


def find_st_device(serial: str) -> str | None:
    """The no-rewind st device whose drive reports *serial*: /dev numbering never matters."""
    for entry in sorted(Path("/sys/class/scsi_tape").glob("nst*")):
        if entry.name[3:].isdigit() and st_serial(f"/dev/{entry.name}") == serial:
            return f"/dev/{entry.name}"
    return None


# -- the asynchronous, error-translating wrapper ----------------------------------------

Opener = Callable[[str], TapeDevice]


def _not_ready(path: str, exc: OSError) -> DriveNotReady:
    reason = "no cartridge" if exc.errno == errno.ENOMEDIUM else exc.strerror or str(exc)
    return DriveNotReady(f"drive {path} not ready: {reason}", code=exc.errno)


@dataclass(slots=True)
class Positioning:
    """How a drive is positioned, learnt from the drive and kept across mounts."""

    #: None until the first LOCATE: then whether the drive implements it.
    locate: bool | None = None
    detail: str = ""

    def describe(self) -> str:
        if self.locate is False:
            return "rewind+space filemarks (no LOCATE)"
        return "locate" if self.locate else "locate (untried)"


class Tape:
    """An open drive used from the event loop: every call runs in a worker thread."""

    def __init__(self, device: TapeDevice, positioning: Positioning | None = None) -> None:
        self.device = device
        self.path = device.path
        self.positioning = positioning or Positioning()

    @classmethod
    async def open(cls, opener: Opener, path: str, positioning: Positioning | None = None) -> Tape:
        try:
            device = await asyncio.to_thread(opener, path)
        except OSError as exc:
            if exc.errno in (errno.ENOMEDIUM, errno.EIO, errno.EBUSY, errno.EAGAIN):
                raise _not_ready(path, exc) from exc
            raise PermanentBackendError(f"cannot open tape device {path}: {exc}") from exc
        tape = cls(device, positioning)
        status = await tape.status()
        if not status.online:
            await tape.close()
            raise DriveNotReady(f"drive {path} not ready: offline")
        return tape

    async def _call(self, what: str, fn: Callable[[], T], media: bool = True) -> T:
        try:
            return await asyncio.to_thread(fn)
        except OSError as exc:
            message = f"{what} on {self.path}: {exc.strerror or exc}"
            if exc.errno == errno.ENOSPC:
                raise EndOfMedium(message, code=exc.errno) from exc
            if exc.errno in (errno.EROFS, errno.EACCES):
                raise WriteProtected(message, code=exc.errno) from exc
            if exc.errno in (errno.ENOMEDIUM, errno.EBUSY):
                raise _not_ready(self.path, exc) from exc
            if media and exc.errno == errno.EIO and not await self._online():
                # A drive that went offline (or lost its cartridge) under a command says
                # EIO too: that is the drive's state, not the medium's, and must not
                # disable the tape.
                raise DriveNotReady(f"{message}; the drive is not ready", code=exc.errno) from exc
            if media:
                raise MediaError(message, code=exc.errno) from exc
            raise TransientBackendError(message, code=exc.errno) from exc

    async def _online(self) -> bool:
        try:
            return await asyncio.to_thread(self.device.ready)
        except OSError:
            return False

    async def close(self) -> None:
        # Closing is best effort: the device is being given up.
        with contextlib.suppress(OSError):
            await asyncio.to_thread(self.device.close)

    async def status(self) -> DriveStatus:
        return await self._call("status", self.device.status, media=False)

    async def rewind(self) -> None:
        await self._call("rewind", self.device.rewind)

    async def tell(self) -> int:
        return await self._call("read position", self.device.tell)

    async def seek(self, block: int) -> None:
        await self._call(f"locate to block {block}", lambda: self.device.seek(block))

    async def position(self, block: int, fileno: int) -> None:
        """Put the head at logical object *block*, which starts tape file *fileno*."""
        if self.positioning.locate is not False:
            try:
                await self.seek(block)
                self.positioning.locate = True
                return
            except MediaError as exc:
                if not isinstance(exc.__cause__, LocateUnsupported):
                    raise
                self.positioning.locate = False
                self.positioning.detail = str(exc.__cause__.sense or "")
                log.warning(
                    "scsi.drive.locate_unsupported",
                    device=self.path,
                    sense=self.positioning.detail,
                    fallback="rewind+space filemarks",
                )
        await self._call(f"space to file {fileno}", lambda: self._space_to(fileno))

    def _space_to(self, fileno: int) -> None:
        status = self.device.status()
        here = status.file_number
        if here == fileno and status.block_number == 0:
            return
        if 0 <= here < fileno:
            self.device.space_filemarks(fileno - here)
            return
        self.device.rewind()
        self.device.space_filemarks(fileno)

    async def write_block(self, data: bytes) -> None:
        await self._call("write", lambda: self.device.write_block(data))

    async def write_blocks(self, blocks: list[bytes]) -> None:
        """Several blocks in one worker-thread hop: the data path's batching."""

        def run() -> None:
            for block in blocks:
                self.device.write_block(block)

        await self._call("write", run)

    async def read_block(self, size: int) -> bytes:
        return await self._call("read", lambda: self.device.read_block(size))

    async def read_blocks(self, count: int, size: int) -> list[bytes]:
        def run() -> list[bytes]:
            return [self.device.read_block(size) for _ in range(count)]

        return await self._call("read", run)

    async def write_filemark(self) -> None:
        await self._call("write filemark", self.device.write_filemark)

    async def offline(self) -> None:
        await self._call("unload", self.device.offline, media=False)

    async def wrap_ends(self) -> list[sgio.WrapEnd]:
        """The drive's READ END OF WRAP POSITION; ``OSError`` (:class:`CommandUnsupported`
        where the drive rejects it) is the caller's: it never fails a mount."""
        return await asyncio.to_thread(self.device.end_of_wrap_positions)
