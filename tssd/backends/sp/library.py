"""``backend.type = "sp"``: IBM Spectrum Protect through its client API, as TSS-client.

A *drive* of this backend is an SP session slot: ``sp.max_mount_points`` of them (the
node's MAXNUMMP), each with its own session and thread. Mounting a volume in a slot
claims the volume for that session (never two sessions on one volume: the restore-order
key names it) and signs the session on; the server mounts the tape itself when the
retrieve begins. Writes go where the server's policy sends them: the volume a storage
class is filling, or before tssd knows one, the pseudo-volume ``SPW-<management class>``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import structlog

from tssd.backends.base import (
    CopyPlacement,
    DriveInfo,
    ReadItem,
    ReadResult,
    TapeBackend,
    TapeCopy,
    WriteItem,
    WriteResult,
)
from tssd.backends.sp import abi_consts as c
from tssd.backends.sp.catalog import SpCatalog
from tssd.backends.sp.client import Library
from tssd.backends.sp.naming import management_classes, object_id_of
from tssd.backends.sp.retrieve import Retrieval
from tssd.backends.sp.sessions import SpSession, library_env, sign_on_of
from tssd.backends.sp.store import Archiving
from tssd.backends.sp.volumes import VolumeNames
from tssd.config import SpSettings
from tssd.errors import (
    ConfigError,
    InvalidRequest,
    ObjectNotFound,
    PermanentBackendError,
    TooLargeForTape,
    TransientBackendError,
)

log = structlog.get_logger()
WRITE_PREFIX = "SPW-"


class SpLibrary(TapeBackend):
    name = "sp"

    def __init__(self, settings: SpSettings) -> None:
        if settings.max_mount_points < 1:
            raise ConfigError("sp.max_mount_points must be at least 1")
        if not settings.filespace.startswith("/") or len(settings.filespace) < 2:
            raise ConfigError(f"sp.filespace {settings.filespace!r} must be /NAME")
        self._settings = settings
        self._classes = management_classes(settings.management_classes)
        self._library = Library(settings.api_library, library_env(settings))
        who = sign_on_of(settings)
        self._slots = {
            f"sp{i}": SpSession(f"sp{i}", self._library, settings, who)
            for i in range(settings.max_mount_points)
        }
        self._mounted: dict[str, str | None] = dict.fromkeys(self._slots)
        # Volume -> slot, set before the first await of a mount.
        self._claims: dict[str, str] = {}
        self._query_session = SpSession("catalog", self._library, settings, who)
        names = VolumeNames(
            settings.admin_command, settings.node, settings.filespace, settings.admin_timeout_s
        )
        self._catalog = SpCatalog(self._query_session, settings.filespace, names)
        self._filling: dict[str, str] = {}

    # -- lifecycle ---------------------------------------------------------------------

    async def open(self) -> None:
        await self._query_session.session()
        log.info(
            "sp.library.open",
            library=self._settings.api_library,
            filespace=self._settings.filespace,
            sessions=len(self._slots),
        )

    async def close(self) -> None:
        for session in (*self._slots.values(), self._query_session):
            await session.shutdown()
        self._library.close()

    async def drives(self) -> list[DriveInfo]:
        return [DriveInfo(name=name, volume=volume) for name, volume in self._mounted.items()]

    async def locate(self, pnfsids: Sequence[str]) -> dict[str, list[TapeCopy]]:
        return await self._catalog.locate(pnfsids)

    async def placements(self) -> list[CopyPlacement]:
        return await self._catalog.placements()

    # -- mounts ------------------------------------------------------------------------

    def _slot(self, drive: str) -> SpSession:
        try:
            return self._slots[drive]
        except KeyError:
            raise PermanentBackendError(f"no SP session slot {drive}") from None

    async def _exists(self, volume: str) -> bool:
        if volume.startswith(WRITE_PREFIX) or self._catalog.names.known(volume):
            return True
        await self._catalog.everything()
        return self._catalog.names.known(volume)

    async def mount(self, drive: str, volume: str) -> None:
        session = self._slot(drive)
        if self._mounted[drive] == volume:
            return
        holder = self._claims.get(volume)
        if holder is not None and holder != drive:
            raise TransientBackendError(
                f"volume {volume} is in use by session {holder}",
                code=c.DSM_RC_ABORT_MOUNT_NOT_POSSIBLE,
            )
        self._claims[volume] = drive
        try:
            if not await self._exists(volume):
                raise PermanentBackendError(f"volume {volume} holds no object of tssd's")
            await self.dismount(drive)
            await session.session()
        except BaseException:
            self._claims.pop(volume, None)
            raise
        self._mounted[drive] = volume
        log.info("sp.mount.ready", drive=drive, volume=volume)

    async def dismount(self, drive: str) -> None:
        session = self._slot(drive)
        volume, self._mounted[drive] = self._mounted[drive], None
        if volume is None:
            return
        self._claims.pop(volume, None)
        await session.close()
        log.info("sp.dismount.done", drive=drive, volume=volume)

    def _loaded(self, drive: str, volumes: set[str]) -> SpSession:
        session = self._slot(drive)
        volume = self._mounted[drive]
        if volume is None:
            raise TransientBackendError(
                f"no volume claimed by {drive}", code=c.DSM_RC_ABORT_DATA_UNAVAILABLE
            )
        wrong = volumes - {volume}
        if wrong:
            raise TransientBackendError(
                f"{drive} holds {volume}, not {', '.join(sorted(wrong))}",
                code=c.DSM_RC_ABORT_DATA_UNAVAILABLE,
            )
        return session

    # -- read, write, remove -----------------------------------------------------------

    async def read(self, drive: str, items: Sequence[ReadItem]) -> AsyncIterator[ReadResult]:
        session = self._loaded(drive, {item.copy.volume for item in items})
        retrieval = Retrieval(session, drive, self._settings.mount_wait, self._catalog)
        async for result in retrieval.run(items):
            yield result

    async def max_object_size(self) -> int | None:
        return self._settings.volume_capacity

    async def writable_volume(self, storage_class: str, size: int) -> str:
        if size > self._settings.volume_capacity:
            raise TooLargeForTape(
                f"{size} bytes of {storage_class} are more than a cartridge holds "
                f"(sp.volume_capacity {self._settings.volume_capacity})"
            )
        mc = self._classes.get(storage_class, self._settings.default_management_class)
        return self._filling.get(storage_class) or f"{WRITE_PREFIX}{mc or 'DEFAULT'}"[:32]

    async def write(self, drive: str, items: Sequence[WriteItem]) -> AsyncIterator[WriteResult]:
        session = self._loaded(drive, set())
        archiving = Archiving(
            session,
            self._catalog,
            drive,
            self._settings.filespace,
            self._classes,
            self._settings.default_management_class,
        )
        for item in items:
            result = await archiving.one(item)
            if result.copy is not None:
                self._filling[item.storage_class] = result.copy.volume
                self._follow(drive, result.copy.volume)
            yield result

    def _follow(self, drive: str, volume: str) -> None:
        """The server wrote to *volume*: the session holds it now (unless another does)."""
        held = self._mounted[drive]
        if held == volume or self._claims.get(volume, drive) != drive:
            return
        if held is not None:
            self._claims.pop(held, None)
        self._claims[volume] = drive
        self._mounted[drive] = volume

    async def remove(self, bfid: str) -> None:
        try:
            object_id = object_id_of(bfid)
        except InvalidRequest as exc:
            raise ObjectNotFound(str(exc)) from exc
        await self._query_session.run(f"delete of {bfid}", lambda s: s.delete(object_id))
        log.info("sp.remove.done", bfid=bfid)

    def describe(self) -> dict[str, Any]:
        return {"filespace": self._settings.filespace, "sessions": len(self._slots)}
