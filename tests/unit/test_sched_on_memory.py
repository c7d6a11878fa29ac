"""The scheduler's intake on the in-memory store (tssd/db/memory.py): locating recalls,
choosing copies as a set cover, failing files with no copy, and feeding the planner,
without SQL. The same store passes the SQL stores' contract suite
(tests/integration/test_store_contract.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from tssd.backends.base import TapeCopy
from tssd.clock import RealClock
from tssd.db.memory import MemoryStore
from tssd.domain import State
from tssd.metrics import Metrics
from tssd.retry import Retrier, RetryPolicy
from tssd.scheduler.intake import Intake
from tssd.scheduler.planner import Planner
from tssd.scheduler.policy import get_policy
from tssd.submit import parse_submit

T0 = datetime(2020, 1, 1, tzinfo=UTC)


class Catalog:
    """The backend's ``locate``: copies by pnfsid (the only call intake makes here)."""

    def __init__(self, copies: dict[str, list[tuple[str, int]]]) -> None:
        self.copies = {
            p: [TapeCopy(p, f"{v}/{n}", v, n, 100, None, None, T0, offset=n * 100) for v, n in cs]
            for p, cs in copies.items()
        }
        self.asked: list[list[str]] = []

    async def locate(self, pnfsids: Sequence[str]) -> dict[str, list[TapeCopy]]:
        self.asked.append(list(pnfsids))
        return {p: self.copies[p] for p in pnfsids if p in self.copies}


def retrier() -> Retrier:
    return Retrier(RetryPolicy(0, 0.0, 0.0, 1), Metrics(), RealClock())


async def submit(store: MemoryStore, *pnfsids: str) -> list[int]:
    specs = [parse_submit({"kind": "recall", "pnfsid": p, "path": f"/pool/{p}"}) for p in pnfsids]
    return [row.id for _, row in await store.submit(specs)]


async def test_intake_locates_covers_copies_and_fails_the_lost(memory_store: MemoryStore) -> None:
    # 00A2 has copies on V1 and V2: V1 is needed anyway (00A1), so the cover takes V1.
    catalog = Catalog({"00A1": [("V1", 1)], "00A2": [("V2", 7), ("V1", 2)], "00A3": [("V3", 4)]})
    planner = Planner()
    intake = Intake(
        memory_store,
        catalog,
        retrier(),
        get_policy("tssd"),
        planner=planner,  # type: ignore[arg-type]
    )
    ids = await submit(memory_store, "00A1", "00A2", "00A3", "00A4")
    assert await intake.locate_recalls(()) == 4
    rows = {i: await memory_store.get(i) for i in ids}
    assert [(rows[i].volume, rows[i].position) for i in ids[:3]] == [
        ("V1", 1), ("V1", 2), ("V3", 4)
    ]  # fmt: skip
    assert rows[ids[3]].state == State.FAILED and rows[ids[3]].error_code == 31
    assert sorted(planner.tapes) == ["V1", "V3"] and len(planner) == 3
    assert await intake.locate_recalls(()) == 0  # nothing left to locate
    assert catalog.asked == [["00A1", "00A2", "00A3", "00A4"]]
