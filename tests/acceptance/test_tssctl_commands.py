"""Every tssctl command of docs/operations.md against a real ``tssd serve``, run as a new
user would: human output that fits 100 columns, ``--json`` that parses, exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon, Result

pytestmark = pytest.mark.slow

HEADER = "pnfsid,volume,seq,size,storage_class,written_at\n"
VOLUMES, FILES_PER_VOLUME = 3, 6


def campaign(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    rows, lines, ids = [], [], []
    out = tmp_path / "recalled"
    out.mkdir()
    for v in range(VOLUMES):
        for seq in range(1, FILES_PER_VOLUME + 1):
            pnfsid = f"00{v:04X}{seq:06X}"
            ids.append(pnfsid)
            rows.append(f"{pnfsid},AC{v:04d}L9,{seq},{150_000 * seq},cms:tape,2025-03-01T00:00Z")
            lines.append(f"{pnfsid} {out / pnfsid}")
    # One file has a second, newer copy on another tape.
    rows.append(f"{ids[0]},AC0009L9,1,150000,cms:tape,2025-06-01T00:00:00Z")
    catalog, file_list = tmp_path / "catalog.csv", tmp_path / "files.txt"
    catalog.write_text(HEADER + "\n".join(rows) + "\n")
    file_list.write_text("\n".join(lines) + "\n")
    return catalog, file_list, ids


def human(daemon: Daemon, *args: str, code: int = 0) -> str:
    res = daemon.ctl(*args)
    assert res.returncode == code, (args, res.stdout, res.stderr)
    assert all(len(line) <= 100 for line in res.stdout.splitlines()), res.stdout
    return res.stdout


def as_json(daemon: Daemon, *args: str) -> Any:
    res = daemon.ctl(*args, "--json")
    assert res.returncode == 0, (args, res.stderr)
    return json.loads(res.stdout)


def failing(res: Result, code: int, words: str) -> None:
    assert res.returncode == code, (res.args, res.returncode, res.stderr)
    assert res.stderr.startswith("tssctl: ") and words in res.stderr, res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr


# SQLite only: the queries behind these commands run on both databases in
# tests/unit/test_tssctl_store.py; this walk is about the commands (~45 subprocesses).
@pytest.mark.timeout(240)
def test_every_command_against_a_running_tssd(tmp_path: Path, sqlite_url: str) -> None:
    daemon = Daemon(home=tmp_path / "home", db_url=sqlite_url)
    try:
        walk_every_command(daemon, tmp_path)
    finally:
        if daemon.alive():
            daemon.stop()


def walk_every_command(daemon: Daemon, tmp_path: Path) -> None:
    daemon.extra_env.update(
        TSSD_SIM_TIME_SCALE="0.005",
        # Tapes stay mounted after the campaign, so that disabling a drive must dismount.
        TSSD_SCHEDULER_KEEP_MOUNTED_S="600",
        TSSD_SCHEDULER_FILL_WAIT_S="0",
    )
    failing(daemon.ctl("status"), 3, "is `tssd serve` running?")
    daemon.start()
    catalog, file_list, ids = campaign(tmp_path)
    assert "19 rows on 4 volumes" in human(daemon, "catalog", "import", str(catalog))

    # recall --wait: progress lines (into a pipe) with files, bytes, rate and ETA.
    res = daemon.ctl("recall", "--file-list", str(file_list), "--wait", "--interval", "0.2")
    assert res.returncode == 0, res.stderr
    total = VOLUMES * FILES_PER_VOLUME
    assert f"{total} recalls submitted: {total} new" in res.stdout
    assert f"files {total}/{total} (100.0%)" in res.stderr and "rate" in res.stderr
    assert "ETA" in res.stderr and f"done {total}/{total} files" in res.stderr

    # status and requests.
    assert "throughput" in human(daemon, "status")
    assert as_json(daemon, "status")["counts"]["recall"]["done"] == total
    listed = as_json(daemon, "requests", "list", "--tape", "AC0001L9")["requests"]
    assert len(listed) == FILES_PER_VOLUME and {r["state"] for r in listed} == {"done"}
    assert len(human(daemon, "requests", "list", "--all").splitlines()) == total + 1
    first = listed[0]["id"]
    assert "AC0001L9" in human(daemon, "requests", "show", str(first))
    assert as_json(daemon, "requests", "show", str(first))["request"]["id"] == first
    failing(daemon.ctl("requests", "cancel", str(first)), 5, "HTTP 409")
    failing(daemon.ctl("requests", "retry", str(first)), 5, "HTTP 409")
    failing(daemon.ctl("requests", "show", "999999"), 4, "no request 999999")

    # why: H4's route when it is there, else a clear message.
    why = daemon.ctl("why", str(first))
    if why.returncode == 0:
        assert as_json(daemon, "why", str(first))["id"] == first
    else:
        failing(why, 1, "cannot explain waits")

    # queues.
    assert "default" in human(daemon, "queues", "list")
    q = as_json(daemon, "queues", "set", "atlas", "--priority", "5", "--max-drives", "1",
                "--pause")["queue"]  # fmt: skip
    assert (q["priority"], q["max_drives"], q["paused"]) == (5, 1, True)
    assert "atlas" in human(daemon, "queues", "set", "atlas", "--resume", "--max-drives", "any")
    queues = {q["name"]: q for q in as_json(daemon, "queues", "list")["queues"]}
    assert (queues["atlas"]["paused"], queues["atlas"]["max_drives"]) == (False, None)
    failing(daemon.ctl("queues", "set", "atlas"), 2, "nothing to change")

    # A paused queue holds its recalls (the scheduler reads the queues table), and `why`
    # says so when the daemon explains waits; --resume lets it go.
    assert as_json(daemon, "queues", "set", "default", "--pause")["queue"]["paused"] is True
    again = tmp_path / "again.txt"
    again.write_text(f"{ids[1]} {tmp_path / 'again.dat'}\n")
    assert daemon.ctl("recall", "--file-list", str(again)).returncode == 0
    held = as_json(daemon, "requests", "list", "--state", "queued")["requests"]
    assert [r["pnfsid"] for r in held] == [ids[1]]
    held_id = str(held[0]["id"])
    if why.returncode == 0:
        daemon.wait_for(lambda: as_json(daemon, "why", held_id)["rule"] == "queue_paused", 30)
        assert "queue is paused" in human(daemon, "why", held_id)
    assert daemon.ctl("queues", "set", "default", "--resume").returncode == 0
    daemon.wait_for(
        lambda: as_json(daemon, "requests", "show", held_id)["request"]["state"] == "done", 60
    )

    # drives: disabling one that holds a tape dismounts the tape.
    drives = as_json(daemon, "drives", "list")["drives"]
    holder = next(d for d in drives if d["volume"])
    assert "MOUNTS 24H" in human(daemon, "drives", "list")
    assert as_json(daemon, "drives", "disable", holder["name"])["drive"]["state"] == "disabled"

    def emptied() -> bool:
        rows = as_json(daemon, "drives", "list")["drives"]
        return next(d for d in rows if d["name"] == holder["name"])["volume"] is None

    daemon.wait_for(emptied, timeout=30)
    assert as_json(daemon, "drives", "enable", holder["name"])["drive"]["enabled"] is True
    failing(daemon.ctl("drives", "disable", "no-such-drive"), 4, "no drive no-such-drive")

    # tapes, where, duplicates.
    tapes = as_json(daemon, "tapes", "list")["tapes"]
    assert {t["volume"] for t in tapes} >= {f"AC{v:04d}L9" for v in range(VOLUMES)}
    assert "LAST MOUNTED" in human(daemon, "tapes", "list", "--sort", "mounts")
    tape = as_json(daemon, "tapes", "show", "AC0002L9")["tape"]
    assert tape["mounts"] == 1 and tape["requests"]["done"]["count"] == FILES_PER_VOLUME
    assert "REQUESTS" in human(daemon, "tapes", "show", "AC0002L9")
    failing(daemon.ctl("tapes", "show", "NOPE01"), 4, "no tape NOPE01")
    assert len(as_json(daemon, "where", ids[0])["copies"]) == 2
    assert "AC0009L9" in human(daemon, "where", ids[0])
    assert as_json(daemon, "duplicates")["duplicated_files"] == 1
    assert "extra mounts" in human(daemon, "duplicates")

    # mounts and the efficiency report, with its plot.
    mounts = as_json(daemon, "mounts", "--since", "1h")["mounts"]
    assert sum(m["files"] for m in mounts) == total + 1  # the campaign, and the one again
    assert {m["volume"] for m in mounts} == {t["volume"] for t in tapes if t["mounts"]}
    assert "EFFIC." in human(daemon, "mounts")
    last = as_json(daemon, "mounts", "--limit", "1")
    assert last["more"] and [m["id"] for m in last["mounts"]] == [mounts[-1]["id"]]
    report = as_json(daemon, "report", "efficiency", "--since", "1h")
    assert report["total"]["files"] == total + 1
    assert report["total"]["mounts"] == len(mounts)
    assert [q["queue"] for q in report["queues"]] == ["default"]
    png = tmp_path / "efficiency.png"
    text = human(daemon, "report", "efficiency", "--since", "2h", "--plot", str(png))
    assert "mount efficiency" in text and png.read_bytes()[:4] == b"\x89PNG"
    bad = daemon.ctl("report", "efficiency", "--since", "soon")
    assert bad.returncode == 2 and "argument --since: not a time: 'soon'" in bad.stderr

    out = tmp_path / "export.csv"
    assert "wrote 19 rows" in human(daemon, "catalog", "export", str(out))
    assert daemon.stop() == 0
