"""Three ``tssd serve`` instances on one PostgreSQL; one is SIGKILLed mid-campaign.

Invariants (issue 9): every recall completes exactly once with the right bytes, no
cartridge is ever in two drives at once (mount intervals of one volume never overlap),
the survivors release the dead instance's work within its lease and finish it, and
``tssctl status`` shows every instance with its drives and heartbeat.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from cluster_harness import (
    Instance,
    check_campaign,
    finished,
    import_catalog,
    query,
    start_cluster,
    status,
    submit_recalls,
    takeover,
    wait_until,
)

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(240)]

TAPES, PER_TAPE, SIZE = 8, 30, 64 * 1024
FILES = TAPES * PER_TAPE
HEARTBEAT_S, LEASE_S = 0.3, 3.0


@pytest.fixture
def cluster(tmp_path: Path, pg_url: str) -> Iterator[list[Instance]]:
    instances = start_cluster(
        tmp_path, pg_url, [2, 2, 2], time_scale=0.005, heartbeat_s=HEARTBEAT_S, lease_s=LEASE_S
    )
    try:
        yield instances
    finally:
        for inst in instances:
            if inst.alive():
                inst.stop(signal.SIGKILL)


def active_of(db_url: str, name: str) -> int:
    rows = query(
        db_url, "SELECT count(*) FROM requests WHERE state = 'active' AND instance = $1", name
    )
    return int(rows[0][0])


def test_sigkill_of_one_instance_loses_nothing_and_mounts_nothing_twice(
    cluster: list[Instance], tmp_path: Path, pg_url: str
) -> None:
    i1, i2, i3 = cluster
    view = status(i1)
    assert {i["id"] for i in view["instances"]} == {"i1", "i2", "i3"}
    assert {d["name"] for d in next(i for i in view["instances"] if i["id"] == "i2")["drives"]} == {
        "i2-d0",
        "i2-d1",
    }

    import_catalog(i1, tmp_path, TAPES, PER_TAPE, SIZE)
    out = tmp_path / "out"
    # Recalls arrive at every instance; any instance serves them.
    submit_recalls(cluster, out, FILES)
    wait_until(lambda: active_of(pg_url, "i2") > 0, 60, "i2 reading a tape")
    assert finished(pg_url) < FILES, "the campaign ended before the kill"
    assert i2.stop(signal.SIGKILL) == -signal.SIGKILL

    wait_until(lambda: finished(pg_url) == FILES, 120, "every request finished")
    figures = check_campaign(pg_url, out, FILES, SIZE)
    assert figures["states"] == {"done": FILES}
    assert figures["done_once"] == FILES and figures["done_twice"] == 0
    assert figures["overlapping_mounts"] == []
    assert figures["bad_files"] == 0 and figures["temporary_files"] == 0

    # The survivors reaped i2 after its lease and read what it had claimed.
    taken = takeover(pg_url, "i2")
    assert taken["state"] == "reaped" and taken["requeued"] > 0
    assert set(taken["served_by"]) <= {"i1", "i3"}
    delay = taken["after_last_heartbeat_s"]
    # Reaped once the lease ran out, and not long after (the reapers beat every 0.3 s).
    assert LEASE_S <= delay < LEASE_S + 10 * HEARTBEAT_S + 3, taken

    view = status(i3)
    by_id = {i["id"]: i for i in view["instances"]}
    assert by_id["i2"]["state"] == "reaped" and by_id["i3"]["self"]
    assert all(d["volume"] is None for d in by_id["i2"]["drives"])
    assert by_id["i1"]["state"] == "live" and by_id["i1"]["heartbeat_age_s"] < LEASE_S
    table = i3.ctl("status").stdout
    assert "INSTANCE" in table and "reaped" in table and "i2-d1" in table

    # A clean stop leaves the instance "stopped", not something to reap.
    assert i1.stop() == 0
    assert query(pg_url, "SELECT state FROM instances WHERE id = 'i1'")[0][0] == "stopped"
