"""A shared node on the memory book: the cluster's logic without a database.

The same node runs on PostgreSQL in tests/integration/test_cluster.py; the book's
contract, on every implementation, is tests/integration/test_cluster_contract.py.
"""

from __future__ import annotations

from datetime import timedelta

from tssd.cluster.node import SharedNode
from tssd.config import ClusterSettings
from tssd.db.memory import MemoryStore
from tssd.db.memory_cluster import MemoryCluster
from tssd.domain import State
from tssd.submit import parse_submit


def settings(instance: str) -> ClusterSettings:
    return ClusterSettings(instance=instance, heartbeat_s=10.0, lease_s=30.0)


async def test_a_node_reaps_a_silent_peer_and_is_fenced_when_reaped() -> None:
    store = MemoryStore()
    book = MemoryCluster(store)
    lost: list[str] = []
    changes: list[bool] = []
    mine = settings("me")
    me = SharedNode(mine, book, store, lost.append, on_changes=lambda: changes.append(True))
    peer = SharedNode(settings("peer"), book, store, lost.append)
    await me.start(["me-d0"])
    await peer.start(["peer-d0"])
    [(_, row)] = await store.submit(
        [parse_submit({"kind": "recall", "pnfsid": "00AA", "path": "/pool/00AA"})]
    )
    store.instance = "peer"
    await store.scheduling.claim_ids([row.id], "peer-d0")
    store.instance = "me"
    # The peer falls silent for longer than a lease; this node has renewed for a lease.
    book.instances["peer"].heartbeat_at -= timedelta(seconds=31)
    me._streak -= 30.0
    await me.tick()
    assert lost == [] and changes == [True]
    assert book.instances["peer"].state == "reaped"
    assert (await store.get(row.id)).state is State.QUEUED
    await peer.tick()  # the peer comes back: its lease is gone, it stops
    assert lost == ["peer"]
    view = {i["id"]: (i["state"], i["self"]) for i in await me.status()}
    assert view == {"me": ("live", True), "peer": ("reaped", False)}
    await me.close()
    assert book.instances["me"].state == "stopped"
