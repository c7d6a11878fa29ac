"""``GET /v1/top``, ``tssctl top`` into a pipe and ``/status`` after a recall campaign, on
SQLite and PostgreSQL (issue 21); the terminal and browser views are in
test_views_live.py."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
from conftest import Daemon
from test_views_live import campaign, free_port

pytestmark = pytest.mark.slow


@pytest.mark.timeout(180)
def test_top_and_status_after_a_campaign(daemon: Daemon, tmp_path: Path) -> None:
    port = free_port()
    daemon.extra_env.update(
        TSSD_API_METRICS_TCP=f"127.0.0.1:{port}",
        TSSD_SCHEDULER_FILL_WAIT_S="0",
        TSSD_SCHEDULER_KEEP_MOUNTED_S="0.2",
    )
    daemon.start()
    catalog, lists = campaign(tmp_path, volumes=3, per_volume=6)
    assert daemon.ctl("catalog", "import", str(catalog)).returncode == 0
    for queue, path in zip(("atlas", "cms"), lists, strict=True):
        res = daemon.ctl("recall", "--file-list", str(path), "--queue", queue, "--wait")
        assert res.returncode == 0, res.stderr

    def history() -> list[dict[str, object]]:
        out = json.loads(daemon.ctl("mounts", "--json", "--all").stdout)["mounts"]
        return out if out and not any(m["open"] for m in out) else []

    daemon.wait_for(history, 60)
    mounts = history()
    res = daemon.ctl("top", "--json")
    assert res.returncode == 0, res.stderr
    top = json.loads(res.stdout)
    assert [d["name"] for d in top["drives"]] == ["drive0", "drive1"]
    assert all(d["volume"] is None and d["mb_s"] == 0.0 for d in top["drives"])
    queues = {q["name"]: q for q in top["queues"]}
    assert set(queues) >= {"atlas", "cms", "default"}
    assert queues["atlas"]["done_1h"] + queues["cms"]["done_1h"] == 18
    assert all(queues[q]["p95_1h_s"] is not None for q in ("atlas", "cms"))
    assert queues["atlas"]["latency_target_s"] is None and queues["atlas"]["eta_s"] is None
    # The last mounts, oldest first, agree with the history.
    assert [m["id"] for m in top["mounts"]] == [m["id"] for m in mounts][-8:]
    assert top["totals"]["done_1h"] == 18 and top["totals"]["queued"] == 0

    # Into a pipe: the same tables once, as plain text within 100 columns.
    res = daemon.ctl("top", "--count", "1")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    for name in ("drive0", "drive1", "atlas", "cms", "default"):
        assert any(line.startswith(name + " ") for line in lines), res.stdout
    assert daemon.ctl("top", "--interval", "0").returncode == 2

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=30) as answer:
        assert answer.headers["Content-Type"].startswith("text/html")
        assert "default-src 'none'" in answer.headers["Content-Security-Policy"]
        page = answer.read().decode()
    drawn = sorted(int(i) for i in re.findall(r'data-mount-id="(\d+)"', page))
    assert drawn == sorted(int(str(m["id"])) for m in mounts)
    assert page.count('<rect class="wear"') == 3  # three tapes mounted today
    assert daemon.stop() == 0
