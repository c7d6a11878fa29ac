"""tssd.cluster on a real database: registration, claims, the reaper, fencing, notifications.

The three-process failover campaign is tests/acceptance/test_cluster_failover.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from tssd.app import build_services
from tssd.cluster.claims import SharedClaims, VolumeTaken
from tssd.cluster.node import SharedNode
from tssd.cluster.reaper import Reaper
from tssd.cluster.registry import Registry
from tssd.config import ClusterSettings, DatabaseSettings, Settings, SimSettings
from tssd.db import schema
from tssd.db.cluster import SqlCluster
from tssd.db.engine import create_engine, session_factory
from tssd.db.models import Drive, Instance, Mount, Request, RequestEvent, utcnow
from tssd.db.mounts import MountStore
from tssd.db.store import RequestStore
from tssd.domain import Kind
from tssd.errors import ConfigError
from tssd.submit import parse_submit

LEASE_S = 30.0


@pytest.fixture
async def engine(pg_url: str) -> AsyncIterator[AsyncEngine]:
    eng = create_engine(pg_url)
    try:
        await schema.upgrade(eng)
        yield eng
    finally:
        await eng.dispose()


@pytest.fixture
def store(engine: AsyncEngine) -> RequestStore:
    return RequestStore(session_factory(engine), postgres=True)


def settings_for(tmp_path: Path, url: str, **cluster: Any) -> Settings:
    return Settings(
        home=str(tmp_path / "home"),
        database=DatabaseSettings(url=url),
        sim=SimSettings(drives=2, tapes=2, drive_prefix="h1-d", time_scale=0.0),
        cluster=replace(ClusterSettings(), instance="h1", **cluster),
    )


async def add_requests(store: RequestStore, n: int) -> list[int]:
    specs = [
        parse_submit({"kind": "recall", "pnfsid": f"00AA{i:04X}", "path": f"/tmp/f{i}"})
        for i in range(n)
    ]
    return [row.id for _, row in await store.submit(specs)]


async def set_active(store: RequestStore, ids: list[int], instance: str | None) -> None:
    async with store.sessions.begin() as session:
        await session.execute(
            update(Request).where(Request.id.in_(ids)).values(state="active", instance=instance)
        )


async def states(store: RequestStore) -> dict[int, str]:
    async with store.sessions() as session:
        return dict((await session.execute(select(Request.id, Request.state))).all())


async def test_services_join_and_leave_the_cluster_on_postgres_only(
    tmp_path: Path, db_url: str
) -> None:
    async with build_services(settings_for(tmp_path, db_url)) as services:
        assert services.cluster is not None
        view = (await services.status())["instances"]
        assert [(i["id"], i["state"], i["self"]) for i in view] == [("h1", "live", True)]
        assert [d["name"] for d in view[0]["drives"]] == ["h1-d0", "h1-d1"]
        shared = services.cluster.shared
        sessions = services.store.sessions
        if shared:
            async with sessions() as session:
                assert await session.scalar(select(Instance.state)) == "live"
    assert shared == db_url.startswith("postgresql")
    if shared:
        async with sessions() as session:
            assert await session.scalar(select(Instance.state)) == "stopped"
        await sessions.kw["bind"].dispose()  # the daemon's engine, reopened by this read


async def test_a_disabled_cluster_is_local_on_postgres(tmp_path: Path, pg_url: str) -> None:
    async with build_services(settings_for(tmp_path, pg_url, enabled=False)) as services:
        assert services.cluster is not None and not services.cluster.shared
        assert services.store.instance is None


async def test_a_lease_shorter_than_three_heartbeats_is_refused(
    tmp_path: Path, pg_url: str
) -> None:
    settings = settings_for(tmp_path, pg_url, heartbeat_s=5.0, lease_s=10.0)
    with pytest.raises(ConfigError, match="at least 3 heartbeats"):
        async with build_services(settings):
            pass


async def test_requeue_at_start_takes_only_this_instances_requests(
    store: RequestStore,
) -> None:
    ids = await add_requests(store, 3)
    mine, theirs, unowned = [ids[0]], [ids[1]], [ids[2]]
    await set_active(store, mine, "a")
    await set_active(store, theirs, "b")
    await set_active(store, unowned, None)
    store.instance = "a"
    assert await store.requeue_active("daemon restarted") == 2
    now = await states(store)
    assert (now[mine[0]], now[theirs[0]], now[unowned[0]]) == ("queued", "active", "queued")


async def test_a_claim_records_the_claiming_instance(store: RequestStore) -> None:
    ids = await add_requests(store, 2)
    store.instance = "a"
    claimed = await store.scheduling.claim_ids(ids, "a-d0")
    assert len(claimed) == 2
    async with store.sessions() as session:
        owners = (await session.scalars(select(Request.instance))).all()
    assert owners == ["a", "a"]


async def test_one_cartridge_is_claimed_by_one_drive_of_one_instance(
    store: RequestStore,
) -> None:
    book = SqlCluster(store.sessions)
    a = SharedClaims(book, "a")
    b = SharedClaims(book, "b")
    await Registry(book, "a", "host-a", LEASE_S).register(["a-d0"])
    await Registry(book, "b", "host-b", LEASE_S).register(["b-d0"])
    a.own(["a-d0"])
    b.own(["b-d0"])
    await a.claim("a-d0", "V00001")
    with pytest.raises(VolumeTaken):
        await b.claim("b-d0", "V00001")
    assert not b.mountable("V00001")
    await b.refresh()
    assert b.foreign == {"V00001"} and a.mountable("V00001")
    # The dismount empties the drive row: the cartridge is free for everyone again.
    async with store.sessions.begin() as session:
        await session.execute(update(Drive).where(Drive.name == "a-d0").values(volume=None))
    await b.refresh()
    await b.claim("b-d0", "V00001")
    assert b.scope == frozenset({"b-d0"}) and not b.foreign


async def test_drive_names_and_ids_are_unique_among_live_instances(
    store: RequestStore,
) -> None:
    book = SqlCluster(store.sessions)
    await Registry(book, "a", "host-a", LEASE_S).register(["d0"])
    with pytest.raises(ConfigError, match="belongs to live instance a"):
        await Registry(book, "b", "host-b", LEASE_S).register(["d0"])
    with pytest.raises(ConfigError, match="is live on host-a"):
        await Registry(book, "a", "host-b", LEASE_S).register(["x0"])


async def make_dead(store: RequestStore, name: str, drive: str, volume: str) -> None:
    await Registry(SqlCluster(store.sessions), name, "host-dead", LEASE_S).register([drive])
    async with store.sessions.begin() as session:
        await session.execute(
            update(Instance)
            .where(Instance.id == name)
            .values(heartbeat_at=func.now() - timedelta(seconds=LEASE_S + 1))
        )
        await session.execute(update(Drive).where(Drive.name == drive).values(volume=volume))
        session.add(Mount(drive=drive, volume=volume, purpose="recall", requested_at=utcnow()))


async def test_the_reaper_releases_a_dead_instances_requests_drives_and_mounts(
    store: RequestStore,
) -> None:
    ids = await add_requests(store, 3)
    await make_dead(store, "dead", "dead-d0", "V00002")
    await set_active(store, ids[:2], "dead")
    await set_active(store, ids[2:], "alive")
    book = SqlCluster(store.sessions)
    await Registry(book, "alive", "host-b", LEASE_S).register(["alive-d0"])

    reapers = [Reaper(book, store, name, LEASE_S) for name in ("alive", "alive2")]
    found = await asyncio.gather(*(r.reap() for r in reapers))
    assert sorted(found, key=len) == [[], ["dead"]]  # reaped once, whoever got there first

    now = await states(store)
    assert [now[i] for i in ids] == ["queued", "queued", "active"]
    async with store.sessions() as session:
        assert await session.scalar(select(Instance.state).where(Instance.id == "dead")) == (
            "reaped"
        )
        assert await session.scalar(select(Drive.volume).where(Drive.name == "dead-d0")) is None
        open_mounts = select(func.count()).where(Mount.dismounted_at.is_(None))
        assert await session.scalar(open_mounts) == 0
        reasons = (
            await session.scalars(
                select(RequestEvent.reason).where(RequestEvent.to_state == "queued")
            )
        ).all()
    assert reasons.count("instance dead lost its lease") == 2
    assert await reapers[0].reap() == []  # nothing twice
    assert [(await states(store))[i] for i in ids] == ["queued", "queued", "active"]


async def test_an_instance_that_lost_its_lease_fences_itself(
    store: RequestStore,
) -> None:
    lost: list[str] = []
    settings = ClusterSettings(instance="me", heartbeat_s=10.0, lease_s=30.0)
    node = SharedNode(settings, SqlCluster(store.sessions), store, on_lost=lost.append)
    await node.start(["me-d0"])
    try:
        await node.tick()
        assert lost == []
        async with store.sessions.begin() as session:
            await session.execute(update(Instance).values(state="reaped"))
        await node.tick()
        assert lost == ["me"]
    finally:
        await node.close()


async def test_others_announce_queued_and_finished_work(store: RequestStore) -> None:
    done: list[int] = []
    listener = SqlCluster(store.sessions).signals(done.append)  # LISTEN on PostgreSQL
    await listener.ensure()
    try:
        listener.take()
        ids = await add_requests(store, 2)
        await set_active(store, ids[:1], "a")
        await asyncio.sleep(0.2)
        assert listener.take()
        assert await store.finish(ids[0])
        await asyncio.sleep(0.2)
        assert done == [ids[0]]
        assert not listener.take()  # finishing queues nothing
    finally:
        await listener.close()


async def test_a_start_resets_only_its_own_drives_and_mounts(store: RequestStore) -> None:
    book, mounts = SqlCluster(store.sessions), MountStore(store.sessions)
    await Registry(book, "a", "host-a", LEASE_S).register(["a-d0"])
    await Registry(book, "b", "host-b", LEASE_S).register(["b-d0"])
    for drive, volume in (("a-d0", "V1"), ("b-d0", "V2")):
        await mounts.mounted(drive, volume, await mounts.open_mount(drive, volume, Kind.RECALL))
    claims = SharedClaims(book, "a")
    claims.own(["a-d0"])
    await mounts.reset_drives([], claims.scope)
    async with store.sessions() as session:
        held = dict((await session.execute(select(Drive.name, Drive.volume))).all())
        still_open = (
            await session.scalars(select(Mount.drive).where(Mount.dismounted_at.is_(None)))
        ).all()
    assert held == {"a-d0": None, "b-d0": "V2"} and still_open == ["b-d0"]
