"""Copies removed while their recalls are being read, with a real ``tssd serve`` and real
``tss-hsm`` processes: each such recall fails as "no such object", the one drive of the
library stays in service and no failure is counted against it or its tape. The
simulated library's store is ``tssd/backends/sim/library.py`` (``_read_guarded``).
docs/reliability.md lists the attack with its expected and observed result.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import Daemon
from test_dcache_hsm import a_file, dcache_si, options, poll
from test_faults_backend import metrics
from test_pool_confinement import finished

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

FILES = 6


def test_copies_removed_during_their_recalls_do_not_disable_the_drive(
    daemon: Daemon, tmp_path: Path
) -> None:
    daemon.extra_env.update(
        TSSD_SIM_DRIVES="1",
        TSSD_SIM_TIME_SCALE="0.1",  # a read takes about a second
        TSSD_HEALTH_DRIVE_MAX_FAILURES="2",
        TSSD_SCHEDULER_MIGRATE_MAX_AGE_S="0",
    )
    daemon.start()
    files = [a_file(tmp_path / "pool", 60 + i, 20_000 + i) for i in range(FILES)]
    puts = [["put", pid, str(path), f"-si={dcache_si(path.stat().st_size, adler)}",
             *options(daemon, "-mode=poll")] for pid, path, adler in files]  # fmt: skip
    uris = []
    for args in puts:
        res, _ = poll(daemon, args)
        assert res.returncode == 0, res.stderr
        uris.append(res.stdout.strip())
    assert daemon.ctl("queues", "set", "atlas", "--pause").returncode == 0
    client = daemon.client()
    for pid, _, _ in files:
        client.call("POST", "/v1/requests", {"kind": "recall", "pnfsid": pid, "queue": "atlas",
                    "path": str(tmp_path / "restore" / pid)})  # fmt: skip
    (tmp_path / "restore").mkdir()
    assert daemon.ctl("queues", "set", "atlas", "--resume").returncode == 0
    # The session has looked its batch up and read the first file: the rest go now.
    first = files[0][0]
    daemon.wait_for(lambda: finished(daemon, "recall", first)["state"] == "done")
    for uri in uris[1:]:
        bfid = parse_qs(urlsplit(uri).query)["bfid"][0]
        client.call("POST", "/v1/requests", {"kind": "remove", "bfid": bfid})
    outcomes = [finished(daemon, "recall", pid) for pid, _, _ in files]
    failed = [r for r in outcomes if r["state"] == "failed"]
    assert failed, outcomes  # at least one removal came before its read
    for request in failed:
        assert "media error" not in request["error"], request
        assert "removed" in request["error"] or "no object" in request["error"], request
    [drive] = client.call("GET", "/v1/drives")["drives"]
    assert drive["enabled"], drive
    assert not any(k.startswith("tssd_hardware_failures_total") and v for k, v in
                   metrics(daemon).items()), metrics(daemon)  # fmt: skip
