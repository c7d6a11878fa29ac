"""Queue latency targets end to end: ``[[queues]]`` seeds the queues of a real ``tssd
serve`` at start, ``tssctl queues set --target`` changes them at run time, and after a
restart the keys the configuration gives win while the others keep their run-time value."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon

pytestmark = pytest.mark.slow


def queues(daemon: Daemon) -> dict[str, Any]:
    res = daemon.ctl("queues", "list", "--json")
    assert res.returncode == 0, res.stderr
    return {q["name"]: q for q in json.loads(res.stdout)["queues"]}


@pytest.mark.persistent
@pytest.mark.timeout(180)
def test_config_seeds_queues_and_wins_after_a_restart(tmp_path: Path, db_url: str) -> None:
    config = tmp_path / "tssd.toml"
    config.write_text(
        '[[queues]]\nname = "atlas"\npriority = 3\nlatency_target_s = "1h"\n\n'
        '[[queues]]\nname = "cms"\npaused = true\n'
    )
    daemon = Daemon(home=tmp_path / "home", db_url=db_url, extra_env={"TSSD_CONFIG": str(config)})
    try:
        daemon.start()
        seeded = queues(daemon)
        assert (seeded["atlas"]["priority"], seeded["atlas"]["latency_target_s"]) == (3, 3600.0)
        assert seeded["cms"]["paused"] is True and seeded["cms"]["latency_target_s"] is None
        listing = daemon.ctl("queues", "list").stdout
        assert "TARGET" in listing and "1h" in listing

        changed = daemon.ctl("queues", "set", "atlas", "--target", "2h", "--max-drives", "2")
        assert changed.returncode == 0, changed.stderr
        assert queues(daemon)["atlas"]["latency_target_s"] == 7200.0
        cleared = daemon.ctl("queues", "set", "cms", "--target", "90m", "--json")
        assert json.loads(cleared.stdout)["queue"]["latency_target_s"] == 5400.0
        bad = daemon.ctl("queues", "set", "atlas", "--target", "soon")
        assert bad.returncode == 2 and "not a duration" in bad.stderr

        daemon.stop()
        daemon.start()
        after = queues(daemon)
        # The file gives atlas's target and priority: they win; max_drives is not in it.
        assert (after["atlas"]["latency_target_s"], after["atlas"]["max_drives"]) == (3600.0, 2)
        # cms's table gives only paused: its run-time target stays.
        assert after["cms"]["latency_target_s"] == 5400.0
        none = daemon.ctl("queues", "set", "cms", "--target", "none", "--json")
        assert json.loads(none.stdout)["queue"]["latency_target_s"] is None
    finally:
        if daemon.proc is not None and daemon.proc.poll() is None:
            daemon.stop()


def test_a_bad_queue_table_stops_the_daemon_with_a_clear_error(
    tmp_path: Path, sqlite_url: str
) -> None:
    config = tmp_path / "tssd.toml"
    config.write_text('[[queues]]\nname = "atlas"\nlatency_target_s = "-5m"\n')
    daemon = Daemon(home=tmp_path / "home", db_url=sqlite_url)
    res = daemon.run("tssd", "--config", str(config), "config")
    assert res.returncode != 0
    assert "queues[0].latency_target_s" in res.stderr and "Traceback" not in res.stderr
