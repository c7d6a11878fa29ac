"""SIGTERM while every drive reads, with slow simulated unloads (issue 22).

A real ``tssd serve`` on the simulated library: four drives read sparse tapes (files
between large ones nobody asked for, so the head travels and each unload starts with a
long rewind), then SIGTERM. One after another the unloads of four drives took about two
minutes at this time scale; the daemon must stop within the grace period plus
``scheduler.shutdown_unload_s``, leave the tapes it had no time for in their drives, and
after a restart serve every request it had.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from conftest import Daemon

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

HEADER = "pnfsid,volume,seq,size,storage_class,written_at\n"
TAPES, WANTED = 4, 25
BIG = 200 * 10**9  # the files between the recalled ones: the head travels far


def pnfsid(i: int) -> str:
    return f"0000{i:032X}"


def sparse_catalog() -> tuple[str, list[str]]:
    """The catalog CSV and the pnfsids to recall: small files with a large one between."""
    rows, wanted = [], []
    n = 0
    for t in range(TAPES):
        for k in range(2 * WANTED):
            small = k % 2 == 0
            n += 1
            rows.append(
                f"{pnfsid(n)},SD{t:04d},{k + 1},{4096 if small else BIG},atlas:tape,"
                "2020-01-01T00:00:00+00:00"
            )
            if small:
                wanted.append(pnfsid(n))
    return HEADER + "\n".join(rows) + "\n", wanted


@pytest.mark.persistent
def test_sigterm_while_reading_exits_within_grace_and_unload_bound(
    daemon: Daemon, tmp_path: Path
) -> None:
    grace_s, unload_s = 1.0, 3.0
    daemon.extra_env.update(
        TSSD_SIM_DRIVES=str(TAPES),
        TSSD_SIM_ROBOT_ARMS=str(TAPES),
        TSSD_SIM_TIME_SCALE="0.3",
        TSSD_SCHEDULER_SHUTDOWN_GRACE_S=str(grace_s),
        TSSD_SCHEDULER_SHUTDOWN_UNLOAD_S=str(unload_s),
    )
    daemon.start()
    catalog, wanted = sparse_catalog()
    (tmp_path / "catalog.csv").write_text(catalog)
    assert daemon.ctl("catalog", "import", str(tmp_path / "catalog.csv")).returncode == 0
    out = tmp_path / "restored"
    out.mkdir()
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{p} {out / p}\n" for p in wanted))
    res = daemon.ctl("recall", "--file-list", str(listing))
    assert res.returncode == 0, res.stderr

    def reading() -> bool:
        drives = daemon.client().call("GET", "/v1/drives")["drives"]
        done = daemon.requests(state="done")
        return len(done) >= 1 and sum(d["state"] == "busy" for d in drives) == TAPES

    daemon.wait_for(reading, timeout=300)
    assert daemon.proc is not None
    daemon.proc.send_signal(signal.SIGTERM)
    # A guard against a hang only (no timing is asserted): the bound shows in the log.
    assert daemon.proc.wait(timeout=120) == 0
    logged = daemon.events()
    events = [e["event"] for e in logged]
    assert "scheduler.cancelled_sessions" in events
    # The unloads were cut short by scheduler.shutdown_unload_s rather than waited for
    # one after another: the tapes not out by then are named as left in their drives.
    left = next(e for e in logged if e["event"] == "scheduler.left_mounted")
    assert left["drives"], daemon.log()[-5000:]
    daemon.proc = None

    # The next start finds what was left and serves every request, quickly now.
    daemon.extra_env["TSSD_SIM_TIME_SCALE"] = "0.0005"
    daemon.start()
    recalls = daemon.requests(kind="recall")
    assert sorted(r["pnfsid"] for r in recalls) == sorted(wanted)
    daemon.wait_for(
        lambda: all(r["state"] == "done" for r in daemon.requests(kind="recall")), timeout=300
    )
    assert all((out / p).stat().st_size == 4096 for p in wanted)
    assert daemon.stop(signal.SIGTERM) == 0
