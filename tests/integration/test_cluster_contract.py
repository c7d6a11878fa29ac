"""The cluster book's contract (tssd/ports/cluster.py), one suite on every implementation.

Each test runs on PostgreSQL (skipped without a server, a failure under ``CI=true``), on
SQLite and on the memory book. SQLite's ``now()`` is a string of whole seconds that the
leases cannot be compared with, and a daemon on SQLite is never shared
(:func:`tssd.cluster.node.is_shared`): there the tests of leases and heartbeats skip, and
what a local node may call (the volume claims, registration, the roster) is held to the
contract. The node on a real database: test_cluster.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select, update
from store_contract import STORES, activate, open_store, recall, submit

from tssd.db.cluster import SqlCluster
from tssd.db.interface import RequestStoreInterface
from tssd.db.memory import MemoryStore
from tssd.db.memory_cluster import MemoryCluster
from tssd.db.memory_mounts import MemoryMounts
from tssd.db.models import Instance, Mount
from tssd.db.mounts import MountStore
from tssd.db.store import RequestStore
from tssd.domain import Kind, State
from tssd.errors import ConfigError
from tssd.ports.cluster import LIVE, REAPED, STOPPED, ClusterBook, Orphan

LEASE = timedelta(seconds=30)


def dead(pid: int) -> bool:
    return False


def running(pid: int) -> bool:
    return True


@dataclass
class Bench:
    """A book, the request store and the mount bookkeeping of one database."""

    kind: str
    book: ClusterBook
    store: RequestStoreInterface
    mounts: MountStore | MemoryMounts

    def needs_server_time(self) -> None:
        if self.kind == "sqlite":
            pytest.skip("leases need the server's clock: a daemon on SQLite is never shared")

    async def expire(self, instance: str) -> None:
        """Make *instance*'s heartbeat older than the lease, as a silent crash would."""
        if isinstance(self.book, MemoryCluster):
            self.book.instances[instance].heartbeat_at -= LEASE + timedelta(seconds=1)
            return
        assert isinstance(self.store, RequestStore)
        async with self.store.sessions.begin() as session:
            await session.execute(
                update(Instance)
                .where(Instance.id == instance)
                .values(heartbeat_at=func.now() - LEASE - timedelta(seconds=1))
            )

    async def load(self, drive: str, volume: str) -> int:
        """A mount of *volume* in *drive*, ready and open; its id."""
        mount_id = await self.mounts.open_mount(drive, volume, Kind.RECALL)
        await self.mounts.mounted(drive, volume, mount_id)
        return mount_id

    async def open_mounts(self) -> list[tuple[str, str]]:
        if isinstance(self.mounts, MemoryMounts):
            rows = [(m.drive, m.volume) for m in self.mounts.mounts if m.dismounted_at is None]
            return sorted(rows)
        assert isinstance(self.store, RequestStore)
        stmt = select(Mount.drive, Mount.volume).where(Mount.dismounted_at.is_(None))
        async with self.store.sessions() as session:
            return sorted((d, v) for d, v in (await session.execute(stmt)).all())


@pytest.fixture(params=STORES)
async def bench(request: pytest.FixtureRequest) -> AsyncIterator[Bench]:
    async with open_store(request) as store:
        if isinstance(store, MemoryStore):
            mounts = MemoryMounts()
            yield Bench("memory", MemoryCluster(store, mounts), store, mounts)
            return
        assert isinstance(store, RequestStore)
        yield Bench(request.param, SqlCluster(store.sessions), store, MountStore(store.sessions))


async def volumes(book: ClusterBook) -> dict[str, str | None]:
    return {d.name: d.volume for d in (await book.roster()).drives}


# -- registration ---------------------------------------------------------------------------


async def test_the_book_has_every_member_of_the_port(bench: Bench) -> None:
    assert isinstance(bench.book, ClusterBook)


async def test_a_registered_instance_is_live_with_its_drives(bench: Bench) -> None:
    await bench.book.register("a", "host-a", 11, LEASE, ["a-d0", "a-d1"], alive=running)
    roster = await bench.book.roster()
    [member] = roster.members
    inst = member.instance
    assert (inst.id, inst.host, inst.pid, inst.state) == ("a", "host-a", 11, LIVE)
    assert inst.heartbeat_at >= inst.started_at
    drives = [(d.name, d.instance, d.enabled, d.state, d.volume) for d in roster.drives]
    assert drives == [("a-d0", "a", True, "empty", None), ("a-d1", "a", True, "empty", None)]


async def test_the_roster_tells_each_heartbeats_age(bench: Bench) -> None:
    bench.needs_server_time()
    await bench.book.register("a", "host-a", 11, LEASE, ["a-d0"], alive=running)
    await bench.book.register("b", "host-b", 12, LEASE, ["b-d0"], alive=running)
    await bench.expire("b")
    ages = {m.instance.id: m.heartbeat_age_s for m in (await bench.book.roster()).members}
    assert 0 <= ages["a"] < 5
    assert LEASE.total_seconds() < ages["b"] < LEASE.total_seconds() + 5


async def test_a_live_id_or_drive_of_another_instance_is_refused(bench: Bench) -> None:
    bench.needs_server_time()
    await bench.book.register("a", "host-a", 11, LEASE, ["d0"], alive=running)
    with pytest.raises(ConfigError, match="belongs to live instance a"):
        await bench.book.register("b", "host-b", 12, LEASE, ["d0"], alive=running)
    with pytest.raises(ConfigError, match="is live on host-a"):
        await bench.book.register("a", "host-b", 12, LEASE, ["x0"], alive=running)
    with pytest.raises(ConfigError, match=r"is live on host-a \(pid 11\)"):
        await bench.book.register("a", "host-a", 12, LEASE, ["x0"], alive=running)
    # Nothing of the refused registrations was written.
    assert [m.instance.id for m in (await bench.book.roster()).members] == ["a"]
    assert [(d.name, d.instance) for d in (await bench.book.roster()).drives] == [("d0", "a")]


async def test_a_restart_after_a_crash_registers_again(bench: Bench) -> None:
    await bench.book.register("a", "host-a", 11, LEASE, ["d0"], alive=running)
    await bench.book.register("a", "host-a", 12, LEASE, ["d0", "d1"], alive=dead)
    [member] = (await bench.book.roster()).members
    assert (member.instance.pid, member.instance.state) == (12, LIVE)
    assert {d.name: d.instance for d in (await bench.book.roster()).drives} == {
        "d0": "a",
        "d1": "a",
    }


async def test_the_drives_of_an_expired_instance_may_be_taken(bench: Bench) -> None:
    bench.needs_server_time()
    await bench.book.register("a", "host-a", 11, LEASE, ["d0"], alive=running)
    await bench.expire("a")
    await bench.book.register("b", "host-b", 12, LEASE, ["d0"], alive=running)
    assert [(d.name, d.instance) for d in (await bench.book.roster()).drives] == [("d0", "b")]


# -- heartbeats -----------------------------------------------------------------------------


async def test_renewing_keeps_a_live_instance_and_fails_for_others(bench: Bench) -> None:
    assert not await bench.book.renew("nobody")
    await bench.book.register("a", "host-a", 11, LEASE, ["d0"], alive=running)
    assert await bench.book.renew("a")
    await bench.book.mark_stopped("a")
    assert not await bench.book.renew("a")
    [member] = (await bench.book.roster()).members
    assert member.instance.state == STOPPED


async def test_others_live_counts_only_other_renewing_instances(bench: Bench) -> None:
    bench.needs_server_time()
    await bench.book.register("a", "host-a", 11, LEASE, ["a-d0"], alive=running)
    assert not await bench.book.others_live("a", LEASE)
    await bench.book.register("b", "host-b", 12, LEASE, ["b-d0"], alive=running)
    assert await bench.book.others_live("a", LEASE)
    assert await bench.book.others_live("b", LEASE)
    await bench.expire("b")
    assert not await bench.book.others_live("a", LEASE)
    await bench.book.register("c", "host-c", 13, LEASE, ["c-d0"], alive=running)
    await bench.book.mark_stopped("c")
    assert not await bench.book.others_live("a", LEASE)


# -- volume claims --------------------------------------------------------------------------


async def test_a_volume_is_taken_by_one_drive_at_a_time(bench: Bench) -> None:
    await bench.book.register("a", "host-a", 11, LEASE, ["a-d0"], alive=running)
    await bench.book.register("b", "host-b", 12, LEASE, ["b-d0"], alive=running)
    assert await bench.book.take_volume("a-d0", "V1", "a")
    assert await bench.book.take_volume("a-d0", "V1", "a")  # again: still its own
    assert not await bench.book.take_volume("b-d0", "V1", "b")
    drives = {d.name: (d.state, d.volume, d.instance) for d in (await bench.book.roster()).drives}
    assert drives == {"a-d0": ("busy", "V1", "a"), "b-d0": ("empty", None, "b")}
    # The dismount empties the drive: the cartridge is free for everyone again.
    await bench.mounts.close_mount("a-d0", None, bench_now(), files=0, nbytes=0, transfer_s=0)
    assert await bench.book.take_volume("b-d0", "V1", "b")
    assert (await volumes(bench.book))["b-d0"] == "V1"


async def test_foreign_volumes_are_those_in_other_instances_drives(bench: Bench) -> None:
    await bench.book.register("a", "host-a", 11, LEASE, ["a-d0"], alive=running)
    await bench.book.register("b", "host-b", 12, LEASE, ["b-d0", "b-d1"], alive=running)
    assert await bench.book.take_volume("a-d0", "V1", "a")
    assert await bench.book.take_volume("b-d0", "V2", "b")
    assert await bench.book.take_volume("b-d1", "V3", "b")
    assert await bench.book.foreign_volumes(["a-d0"], "a") == {"V2", "V3"}
    assert await bench.book.foreign_volumes(["b-d0"], "b") == {"V1"}
    assert await bench.book.foreign_volumes([], "c") == {"V1", "V2", "V3"}


# -- reaping --------------------------------------------------------------------------------


async def test_an_expired_instance_is_released_once(bench: Bench) -> None:
    bench.needs_server_time()
    await bench.book.register("dead", "host-d", 11, LEASE, ["x-d0", "x-d1"], alive=running)
    await bench.book.register("alive", "host-a", 12, LEASE, ["a-d0"], alive=running)
    await bench.load("x-d0", "V1")
    await bench.load("a-d0", "V2")
    await bench.expire("dead")
    assert (await bench.book.release_expired("dead", LEASE)).instances == ()  # not itself
    found = await asyncio.gather(
        bench.book.release_expired("alive", LEASE), bench.book.release_expired("other", LEASE)
    )
    released = sorted(found, key=lambda r: len(r.instances))
    assert released[0].instances == () and released[0].mounts == ()
    assert (released[1].instances, released[1].mounts) == (("dead",), (("x-d0", "V1"),))
    assert await bench.open_mounts() == [("a-d0", "V2")]
    states = {m.instance.id: m.instance.state for m in (await bench.book.roster()).members}
    assert states == {"alive": LIVE, "dead": REAPED}
    drives = {d.name: (d.state, d.volume) for d in (await bench.book.roster()).drives}
    assert drives["x-d0"] == drives["x-d1"] == ("empty", None)
    assert drives["a-d0"][1] == "V2"
    assert not await bench.book.renew("dead")  # a reaped instance fences itself
    assert (await bench.book.release_expired("alive", LEASE)).instances == ()


async def test_a_stopped_instance_is_never_reaped(bench: Bench) -> None:
    bench.needs_server_time()
    await bench.book.register("gone", "host-g", 11, LEASE, ["g-d0"], alive=running)
    await bench.book.mark_stopped("gone")
    await bench.expire("gone")
    assert (await bench.book.release_expired("me", LEASE)).instances == ()


async def test_orphans_are_the_active_requests_of_instances_no_longer_live(
    bench: Bench,
) -> None:
    for name in ("me", "live", "stopped", "reaped"):
        await bench.book.register(name, f"host-{name}", 11, LEASE, [f"{name}-d0"], alive=dead)
    await bench.book.mark_stopped("stopped")
    ids = await submit(bench.store, *(recall(f"00A{i}") for i in range(5)))
    await activate(bench.store, ids[:1], instance="me")
    await activate(bench.store, ids[1:2], instance="live")
    await activate(bench.store, ids[2:4], instance="stopped")
    await activate(bench.store, ids[4:], instance=None)
    orphans = await bench.book.orphaned_active("me")
    assert sorted(orphans, key=lambda o: o.request_id) == [
        Orphan(ids[2], "stopped"),
        Orphan(ids[3], "stopped"),
    ]
    assert await bench.book.orphaned_active("stopped") == []  # never one's own
    await bench.store.restart(ids[2:4], "instance stopped lost its lease")
    assert await bench.book.orphaned_active("me") == []
    assert (await bench.store.get(ids[2])).state is State.QUEUED


async def test_signals_start_and_stop(bench: Bench) -> None:
    heard: list[int] = []
    signals = bench.book.signals(heard.append)
    await signals.ensure()
    await signals.ensure()  # listening already
    try:
        assert isinstance(signals.take(), bool)
        assert not signals.take()  # nothing since
    finally:
        await signals.close()
    await signals.close()  # closed already
    assert heard == []


def bench_now() -> datetime:
    return datetime.now(UTC)
