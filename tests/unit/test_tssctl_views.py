"""tssctl's operator views: tables within 100 columns, `why` against a fixture of H4's
route (and a daemon without it), relative times, the report and its plot."""

from __future__ import annotations

import http.server
import json
import socketserver
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tssd.cli import render, views
from tssd.cli.commands.report import plot
from tssd.cli.tssctl import main
from tssd.db.reports import summarize

WHY = {
    "id": 17,
    "state": "queued",
    "rule": "fill_wait",
    "detail": "tape SIM007L9 has 3 files (12 MB) queued; waits up to 10m for more",
    "eta_s": 372.0,
    "eta": "2026-11-30T01:06:12+00:00",
}


class Canned(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    answers: dict[str, tuple[int, dict[str, Any]]]


class Handler(http.server.BaseHTTPRequestHandler):
    server: Canned

    def do_GET(self) -> None:
        status, body = self.server.answers.get(
            self.path, (404, {"error": {"type": "InvalidRequest", "message": "Not Found"}})
        )
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def canned(tmp_path: Path) -> Iterator[tuple[str, dict[str, tuple[int, dict[str, Any]]]]]:
    path = str(tmp_path / "tssd.sock")
    server = Canned(path, Handler)
    server.answers = {}
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield path, server.answers
    server.shutdown()
    server.server_close()
    thread.join()


def test_why_renders_the_rule_and_eta(canned: Any, capsys: pytest.CaptureFixture[str]) -> None:
    sock, answers = canned
    answers["/v1/requests/17/why"] = (200, WHY)
    assert main(["--tssd", sock, "why", "17"]) == 0
    out = capsys.readouterr().out
    assert "fill_wait" in out
    assert "waits for more requests before it is worth a mount" in out
    assert "2026-11-30T01:06:12+00:00 (in 6m 12s)" in out
    assert main(["--tssd", sock, "--json", "why", "17"]) == 0
    assert json.loads(capsys.readouterr().out) == WHY


def test_why_without_the_route_or_the_request(
    canned: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    sock, answers = canned
    assert main(["--tssd", sock, "why", "5"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tssctl: this tssd cannot explain waits")
    answers["/v1/requests/6/why"] = (
        404,
        {"error": {"type": "NotFound", "message": "no request 6"}},
    )
    assert main(["--tssd", sock, "why", "6"]) == 4
    assert capsys.readouterr().err == "tssctl: no request 6 (HTTP 404)\n"


def test_tables_fit_100_columns() -> None:
    long = "x" * 300
    text = render.table(["A", "LONG", "N"], [["a", long, 12345], ["b", "short", 7]], right=(2,))
    lines = text.splitlines()
    assert len(lines) == 3 and all(len(line) <= 100 for line in lines)
    assert lines[1].endswith("12345") and "…" in lines[1]
    drives = [{"name": "drive0", "enabled": True, "state": "busy", "volume": "V1",
               "mounts_24h": 3, "last_mount_at": None, "last_error": long}]  # fmt: skip
    assert all(len(line) <= 100 for line in views.drives_table(drives).splitlines())


def test_parse_since() -> None:
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    assert views.parse_since("2h", now) == now - timedelta(hours=2)
    assert views.parse_since("90m", now) == now - timedelta(minutes=90)
    assert views.parse_since("1w", now) == now - timedelta(days=7)
    assert views.parse_since("2026-11-29T10:00", now) == datetime(2026, 11, 29, 10, tzinfo=UTC)
    with pytest.raises(ValueError, match="not a time"):
        views.parse_since("yesterday", now)
    assert main(["mounts", "--since", "yesterday"]) == 2


def _report() -> dict[str, Any]:
    start = datetime(2026, 11, 30, tzinfo=UTC)
    mounts = [
        {"id": i, "drive": f"drive{i % 2}", "volume": f"VOL{i % 3}", "mount_s": 30.0,
         "session_s": 600.0, "transfer_s": 300.0, "files": 10, "bytes": 10**10}
        for i in range(6)
    ]  # fmt: skip
    report = summarize(mounts, [("atlas", i, 10, 10**10) for i in range(6)], days=1.0)
    report.update(since=start.isoformat(), until=(start + timedelta(days=1)).isoformat(), days=1)
    report["timeline"] = {
        "start": start.isoformat(),
        "bin_s": 600.0,
        "bytes": [0, 5 * 10**10, 10**10, 0],
        "files": [0, 50, 10, 0],
        "mounts": [2, 3, 1, 0],
    }
    return report


def test_report_view_and_plot(tmp_path: Path) -> None:
    report = _report()
    assert report["total"]["remounts"] == 3 and report["total"]["efficiency"] == 0.5
    text = views.report_view(report)
    assert "mount efficiency:  50.0%" in text
    assert all(len(line) <= 100 for line in text.splitlines())
    png = tmp_path / "eff.png"
    plot(report, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_status_lists_the_busiest_queues_and_says_how_many_more() -> None:
    queues = [
        {"name": f"q{i:05d}", "priority": 0, "max_drives": None, "paused": False,
         "queued": 0 if i != 12345 else 7, "active": 0}
        for i in range(20_000)
    ]  # fmt: skip
    text = render.status({"queues": queues})
    lines = text.splitlines()
    assert len(lines) < 60
    assert any(line.startswith("q12345 ") for line in lines)  # the one with work, first
    assert f"... and {20_000 - render.STATUS_QUEUES} more queues" in text
    assert "tssctl queues list" in text


def test_report_without_matplotlib_prints_the_report_and_one_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hint names a command that works from a checkout and from an installed tssd
    (`pip install 'tssd[plot]'` needs tssd on an index): this Python's pip."""
    import sys

    from tssd.wire import Client

    monkeypatch.setattr(Client, "call", lambda *a, **k: _report())
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    png = tmp_path / "eff.png"
    assert main(["report", "efficiency", "--since", "1d", "--plot", str(png)]) == 1
    out, err = capsys.readouterr()
    assert "mount efficiency:  50.0%" in out
    assert err == (
        f"tssctl: {png} not drawn: --plot needs matplotlib:"
        f" {sys.executable} -m pip install matplotlib\n"
    )
    assert not png.exists()
