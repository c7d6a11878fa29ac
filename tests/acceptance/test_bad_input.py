"""Bad input to tss-hsm: one line on stderr, the contract's exit code, nothing recorded."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import BIN, Daemon, storage_info

pytestmark = pytest.mark.slow

PID = "0000C0FFEE0000000000000000000001"


def bad_calls(tmp: Path) -> list[tuple[str, list[str], int]]:
    src = tmp / "src"
    src.write_bytes(b"x" * 10)
    unreadable = tmp / "unreadable"
    unreadable.write_bytes(b"x" * 10)
    unreadable.chmod(0)
    si = f"-si={storage_info(10)}"
    return [
        ("no arguments", [], 32),
        ("missing path", ["get", PID], 32),
        ("unknown verb", ["fetch", PID, str(tmp / "d"), si], 32),
        ("malformed -si", ["put", PID, str(src), "-si=this is not storage info"], 32),
        ("si without size", ["put", PID, str(src), "-si=sClass=a:b;hsm=osm;"], 32),
        ("negative size", ["put", PID, str(src), "-si=size=-5;sClass=a:b;"], 32),
        ("pnfsid not hex", ["put", "not-a-pnfsid!", str(src), si], 32),
        ("missing -si", ["put", PID, str(src)], 32),
        ("remove without uri", ["remove"], 32),
        ("source missing", ["put", PID, str(tmp / "nope"), si], 42),
        ("source unreadable", ["put", PID, str(unreadable), si], 42),
        (
            "destination directory missing",
            [
                "get",
                PID,
                str(tmp / "no" / "dir" / PID),
                si,
                "-uri=osm://osm/?store=a&group=b&bfid=abc",
            ],
            43,
        ),
    ]


def test_bad_input_leaves_tssd_running_and_records_nothing(daemon: Daemon, tmp_path: Path) -> None:
    daemon.start()
    for name, args, code in bad_calls(tmp_path):
        if name == "source unreadable" and os.geteuid() == 0:
            continue  # root reads mode-0 files; covered by the 'source missing' case
        res = daemon.hsm(*args)
        assert res.returncode == code, (name, res.returncode, res.stderr)
        assert res.stdout == "", name
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tss-hsm: "), (name, res.stderr)
        assert daemon.alive(), name
    assert daemon.requests() == []
    assert daemon.client().call("GET", "/healthz")["status"] == "ok"
    assert daemon.stop(signal.SIGTERM) == 0


def test_tssd_not_running(daemon: Daemon, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.write_bytes(b"y" * 10)
    # Block mode waits -reconnect-timeout for a restarting tssd, then fails (1); poll mode
    # answers "not yet" (72) and dCache calls again (docs/dcache.md, "Restarts").
    args = ("put", PID, str(src), f"-si={storage_info(10)}")
    res = daemon.hsm(*args, "-reconnect-timeout=0")
    assert res.returncode == 1
    assert len(res.stderr.strip().splitlines()) == 1
    res = daemon.hsm(*args, "-mode=poll")
    assert (res.returncode, res.stdout) == (72, "")
    assert len(res.stderr.strip().splitlines()) == 1
    res = daemon.ctl("status")
    assert res.returncode == 3
    assert "tssd" in res.stderr


def test_sigterm_stops_intake_and_finishes_in_flight(daemon: Daemon, tmp_path: Path) -> None:
    daemon.extra_env["TSSD_SIM_TIME_SCALE"] = "0.01"
    daemon.start()
    src = tmp_path / "f"
    src.write_bytes(os.urandom(1000))
    proc_args = ("put", PID, str(src), f"-si={storage_info(1000)}")
    shim = subprocess.Popen(
        [str(BIN / "tss-hsm"), *proc_args],
        env=daemon.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    daemon.wait_for(lambda: any(r["state"] == "active" for r in daemon.requests()))
    assert daemon.stop(signal.SIGTERM) == 0
    events = [e["event"] for e in daemon.events()]
    assert "daemon.stopping" in events and events[-1] == "daemon.stopped"
    # The migration in flight finished before the daemon stopped.
    assert any(e.get("event") == "request.done" for e in daemon.events())
    shim.kill()
    shim.communicate()
