"""The in-memory request store beside the components that need only the store's interface.

Its contract (shared with the SQL store) is tests/integration/test_store_contract.py;
here: what only it has (queue set-up, history), and two users of the notifier on it.
"""

from __future__ import annotations

from tssd.db.memory import MemoryStore
from tssd.delivery import watching
from tssd.endit.context import Watches
from tssd.submit import SubmitSpec, parse_submit


def recall(pnfsid: str) -> SubmitSpec:
    return parse_submit({"kind": "recall", "pnfsid": pnfsid, "path": f"/pool/{pnfsid}"})


async def test_set_queue_changes_only_the_values_given(memory_store: MemoryStore) -> None:
    memory_store.set_queue("atlas", priority=3)
    memory_store.set_queue("atlas", paused=True)
    assert await memory_store.queues() == [
        {"name": "atlas", "priority": 3, "max_drives": None, "paused": True,
         "latency_target_s": None}
    ]  # fmt: skip


async def test_events_are_the_history_of_one_request(memory_store: MemoryStore) -> None:
    results = await memory_store.submit([recall("0001"), recall("0002")])
    first, second = (row.id for _, row in results)
    await memory_store.scheduling.claim_ids([first], "d1")
    assert [(e.from_state, e.to_state, e.reason) for e in memory_store.events(first)] == [
        (None, "queued", "submitted"), ("queued", "active", "d1")
    ]  # fmt: skip
    assert len(memory_store.events(second)) == 1


async def test_endit_watches_and_delivery_hear_finishes(memory_store: MemoryStore) -> None:
    results = await memory_store.submit([recall("0001"), recall("0002")])
    first, second = (row.id for _, row in results)
    watches = Watches(memory_store)  # typed RequestStore: any store of the interface works
    watches.add(first)
    watches.add(second)
    with watching(memory_store, second) as event:
        await memory_store.cancel_request(second)
        assert event.is_set()
    await memory_store.scheduling.claim_ids([first])
    assert watches.finished() == [second]
    assert await memory_store.finish(first)
    assert sorted(watches.finished()) == [first, second]
    watches.close()
