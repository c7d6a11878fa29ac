"""The simulated library's catalog: tables ``sim_tapes`` and ``sim_objects``.

It plays the part of the IBM SP server database. Database errors are translated into
:class:`~tssd.errors.TransientBackendError` here, as a real backend would report a server
it cannot reach.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select

from tssd.backends.base import CopyPlacement, TapeCopy
from tssd.backends.records import ObjectCatalog, as_utc, chunks, to_copy
from tssd.db.models import SimObject, SimTape
from tssd.errors import PermanentBackendError, TooLargeForTape, TransientBackendError

#: Bound parameters per IN list: far below SQLite's and PostgreSQL's limits.

#: IBM SP mediaClass of every simulated copy: the library has no disk storage pool.

#: IBM SP "communication failure": the catalog database did not answer.
RC_COMM_FAILURE = -50


def volume_name(index: int, suffix: str) -> str:
    """Six-character volume serial plus the media suffix (``SIM000L9``)."""
    serial = f"SIM{index:03d}" if index < 1000 else f"S{index:05d}"
    return serial + suffix


class Catalog(ObjectCatalog):
    model = SimObject
    unavailable = "simulated catalog unavailable"
    error_code = RC_COMM_FAILURE

    async def ensure_tapes(self, count: int, capacity: int, suffix: str) -> int:
        """Create *count* scratch cartridges unless the library has some; return how many."""
        async with self._session() as session, session.begin():
            existing = await session.scalar(select(func.count()).select_from(SimTape))
            if existing:
                return int(existing)
            session.add_all(
                SimTape(volume=volume_name(i, suffix), capacity=capacity) for i in range(count)
            )
        return count

    async def tape(self, volume: str) -> SimTape | None:
        async with self._session() as session:
            return await session.get(SimTape, volume)

    async def layout(self, volume: str) -> list[tuple[int, int, int]]:
        """(seq, offset, size) of every object on *volume*, in sequence order."""
        stmt = (
            select(SimObject.seq, SimObject.offset, SimObject.size)
            .where(SimObject.volume == volume)
            .order_by(SimObject.seq)
        )
        async with self._session() as session:
            return [(seq, offset, size) for seq, offset, size in await session.execute(stmt)]

    async def placements(self) -> list[CopyPlacement]:
        columns = (
            SimObject.pnfsid,
            SimObject.volume,
            SimObject.seq,
            SimObject.size,
            SimObject.written_at,
        )
        async with self._session() as session:
            result = await session.execute(select(*columns))
            return [
                CopyPlacement(pnfsid, volume, seq, size, as_utc(written_at))
                for pnfsid, volume, seq, size, written_at in result
            ]

    async def known_bfids(self, bfids: list[str]) -> set[str]:
        """The bfids among *bfids* that the catalog records."""
        found: set[str] = set()
        async with self._session() as session:
            for chunk in chunks(bfids):
                rows = await session.scalars(
                    select(SimObject.bfid).where(SimObject.bfid.in_(chunk))
                )
                found.update(rows)
        return found

    async def max_capacity(self) -> int:
        async with self._session() as session:
            return int(await session.scalar(select(func.max(SimTape.capacity))) or 0)

    async def allocate(self, storage_class: str, size: int) -> str:
        """A filling tape of *storage_class* with room, else a scratch tape assigned to it.

        The simulated library writes a batch to one tape: a batch larger than the largest
        tape can never be placed (TooLargeForTape), unlike one that waits for room.
        """
        largest = await self.max_capacity()
        if size > largest:
            raise TooLargeForTape(f"{size} bytes: no tape of the library holds more than {largest}")
        async with self._session() as session, session.begin():
            filling = await session.scalar(
                select(SimTape)
                .where(
                    SimTape.storage_class == storage_class,
                    SimTape.full.is_(False),
                    SimTape.capacity - SimTape.used >= size,
                )
                .order_by(SimTape.used.desc(), SimTape.volume)
                .limit(1)
            )
            if filling is not None:
                return filling.volume
            scratch = await session.scalar(
                select(SimTape)
                .where(
                    SimTape.storage_class.is_(None),
                    SimTape.used == 0,
                    SimTape.capacity >= size,
                )
                .order_by(SimTape.volume)
                .limit(1)
            )
            if scratch is None:
                raise PermanentBackendError(
                    f"library full: no tape has {size} bytes free for {storage_class}"
                )
            scratch.storage_class = storage_class
            return scratch.volume

    async def record(
        self,
        volume: str,
        *,
        bfid: str,
        pnfsid: str,
        storage_class: str,
        size: int,
        adler32: str,
        written_at: datetime,
    ) -> TapeCopy:
        """Append one object to *volume* and advance the tape, in one transaction."""
        async with self._session() as session, session.begin():
            tape = await session.get(SimTape, volume, with_for_update=True)
            if tape is None:
                raise PermanentBackendError(f"volume {volume} does not exist")
            check_room(tape, storage_class, size)
            obj = SimObject(
                bfid=bfid,
                pnfsid=pnfsid,
                volume=volume,
                seq=tape.next_seq,
                offset=tape.used,
                size=size,
                adler32=adler32,
                storage_class=storage_class,
                written_at=written_at,
                has_data=True,
            )
            session.add(obj)
            tape.storage_class = storage_class
            tape.next_seq += 1
            tape.used += size
            tape.full = tape.used >= tape.capacity
            return to_copy(obj)


def check_room(tape: SimTape, storage_class: str, size: int) -> None:
    """Refuse an append the tape cannot take; another volume may, so it is transient."""
    if tape.storage_class not in (None, storage_class):
        raise TransientBackendError(
            f"volume {tape.volume} holds storage class {tape.storage_class}, not {storage_class}"
        )
    if tape.full or tape.used + size > tape.capacity:
        raise TransientBackendError(f"volume {tape.volume} has no room for {size} bytes")
