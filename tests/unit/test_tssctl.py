"""tssctl against a small fake of the tssd HTTP API (docs/api.md) on a Unix socket."""

from __future__ import annotations

import http.server
import io
import json
import re
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tssd.cli import render
from tssd.cli.commands.recall import parse_line
from tssd.cli.tssctl import main

STATUS = {
    "version": "0.1.0",
    "started_at": "2026-11-29T21:00:00+00:00",
    "uptime_s": 3725.0,
    "backend": "sim",
    "database": "sqlite",
    "accepting": True,
    "counts": {
        "recall": {"queued": 3, "active": 1, "done": 10, "failed": 2, "cancelled": 0},
        "migrate": {"queued": 0, "active": 0, "done": 4, "failed": 0, "cancelled": 1},
    },
    "queues": [
        {
            "name": "default",
            "priority": 0,
            "max_drives": None,
            "paused": False,
            "queued": 3,
            "active": 1,
        },
        {"name": "atlas", "priority": 5, "max_drives": 2, "paused": True, "queued": 0, "active": 0},
    ],
    "drives": [
        {"name": "drive0", "enabled": True, "state": "mounted", "volume": "SIM001L9"},
        {"name": "drive1", "enabled": False, "state": "empty", "volume": None},
    ],
    "throughput": {"bytes_last_minute": 600_000_000, "mb_s": 10.0},
}

OPEN = ("queued", "active")


class FakeTssd:
    """Just enough of the daemon: an id-ordered request table and the documented routes."""

    def __init__(self) -> None:
        self.requests: dict[int, dict[str, Any]] = {}
        self.by_pnfsid: dict[str, dict[str, Any]] = {}
        self.calls: list[tuple[str, str, Any]] = []
        self.page_max = 1000
        self.finish_per_query = 0  # queued requests that finish at each progress query
        self.fail_pnfsids: set[str] = set()
        self.lock = threading.Lock()

    def add(self, **fields: Any) -> dict[str, Any]:
        rid = len(self.requests) + 1
        request: dict[str, Any] = {
            "id": rid,
            "kind": "recall",
            "state": "queued",
            "pnfsid": f"{rid:08X}",
            "path": f"/pool/data/{rid:08X}",
            "size": 1_000_000,
            "queue": "default",
            "priority": 0,
            "volume": "SIM007L9",
            "position": rid,
            "drive": None,
            "attempts": 0,
            "error_code": None,
            "error": None,
            "created_at": "2026-11-29T21:00:00+00:00",
            "started_at": None,
            "finished_at": None,
            "updated_at": "2026-11-29T21:00:00+00:00",
        } | fields
        self.requests[rid] = request
        self.by_pnfsid[request["pnfsid"]] = request
        return request

    def handle(self, method: str, target: str, body: Any) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.calls.append((method, target, body))
            url = urlsplit(target)
            route = f"{method} {url.path}"
            if route == "GET /v1/status":
                return 200, STATUS
            if route == "GET /v1/requests":
                return self.list_requests(parse_qs(url.query))
            if route == "POST /v1/requests/bulk":
                return self.bulk(body["requests"])
            if route == "POST /v1/requests/query":
                return self.query(body["ids"])
            match = re.fullmatch(r"(GET|POST) /v1/requests/(\d+)(/cancel|/retry)?", route)
            if match:
                return self.one(int(match[2]), match[3])
            return 404, error(404, "NotFound", f"no route {route}")

    def list_requests(self, query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        limit = min(int(query.get("limit", ["100"])[0]), self.page_max)
        after = int(query.get("after", ["0"])[0])
        filters = {k: v[0] for k, v in query.items() if k not in ("limit", "after")}
        found = [
            r
            for rid, r in sorted(self.requests.items())
            if rid > after and all(str(r.get(k)) == v for k, v in filters.items())
        ]
        page = found[:limit]
        more = len(found) > limit
        return 200, {"requests": page, "next": page[-1]["id"] if more else None}

    def bulk(self, submits: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
        for index, submit in enumerate(submits):
            if "REJECT" in submit["path"]:
                return 400, error(400, "InvalidRequest", f"requests[{index}]: path rejected")
        results = []
        for submit in submits:
            existing = self.open_request(submit["pnfsid"])
            if existing:
                results.append({"created": False, "request": existing})
            else:
                fields = {
                    k: submit[k] for k in ("pnfsid", "path", "queue", "priority") if k in submit
                }
                results.append({"created": True, "request": self.add(**fields)})
        return 200, {"results": results}

    def open_request(self, pnfsid: str) -> dict[str, Any] | None:
        request = self.by_pnfsid.get(pnfsid)
        return request if request and request["state"] in OPEN else None

    def query(self, ids: list[int]) -> tuple[int, dict[str, Any]]:
        known = [self.requests[i] for i in ids if i in self.requests]
        for r in [r for r in known if r["state"] == "queued"][: self.finish_per_query]:
            failing = r["pnfsid"] in self.fail_pnfsids
            r["state"] = "failed" if failing else "done"
            r["error"] = "volume SIM007L9 unreadable" if failing else None
        counts = dict.fromkeys(("queued", "active", "done", "failed", "cancelled"), 0)
        for r in known:
            counts[r["state"]] += 1
        return 200, {
            "counts": counts,
            "bytes_total": sum(r["size"] for r in known),
            "bytes_done": sum(r["size"] for r in known if r["state"] == "done"),
            "missing": [i for i in ids if i not in self.requests],
            "failed": [r for r in known if r["state"] in ("failed", "cancelled")][:100],
        }

    def one(self, rid: int, action: str | None) -> tuple[int, dict[str, Any]]:
        request = self.requests.get(rid)
        if request is None:
            return 404, error(404, "NotFound", f"no request {rid}")
        if action == "/cancel":
            if request["state"] not in OPEN:
                return 409, error(409, "Conflict", f"request {rid} is already {request['state']}")
            request["state"] = "cancelled"
        elif action == "/retry":
            if request["state"] not in ("failed", "cancelled"):
                return 409, error(409, "Conflict", f"request {rid} is {request['state']}")
            request["state"] = "queued"
        return 200, {"request": request}

    def bulk_sizes(self) -> list[int]:
        return [len(body["requests"]) for m, t, body in self.calls if t == "/v1/requests/bulk"]


def error(status: int, kind: str, message: str) -> dict[str, Any]:
    return {"error": {"type": kind, "message": message, "exit_code": 32 if status == 400 else 1}}


def handler_for(fake: FakeTssd) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.answer()

        def do_POST(self) -> None:
            self.answer()

        def answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            status, payload = fake.handle(self.command, self.path, body)
            raw = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the default logs the client address, which a Unix socket does not have

    return Handler


class UnixHTTPServer(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TSSD_URL", "TSSD_HOME", "TSSD_TOKEN_FILE", "TSSCTL_DEBUG"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake() -> FakeTssd:
    return FakeTssd()


@pytest.fixture
def sock(fake: FakeTssd, tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "tssd.sock")
    server = UnixHTTPServer(path, handler_for(fake))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield path
    server.shutdown()
    server.server_close()
    thread.join()


def run(capsys: pytest.CaptureFixture[str], sock: str, *argv: str) -> tuple[int, str, str]:
    code = main(["--tssd", sock, *argv])
    out, err = capsys.readouterr()
    return code, out, err


# --- status --------------------------------------------------------------------------


def test_status_table(sock: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, sock, "status")
    assert code == 0, err
    assert "tssd 0.1.0  up 1h 2m  backend sim  database sqlite" in out
    assert re.search(r"recall\s+3\s+1\s+10\s+2\s+0", out)
    assert re.search(r"atlas\s+5\s+2\s+yes\s+-\s+0\s+0", out)  # TARGET: none set
    assert re.search(r"default\s+0\s+any\s+no\s+-\s+3\s+1", out)
    assert re.search(r"drive0\s+yes\s+mounted\s+SIM001L9", out)
    assert re.search(r"drive1\s+no\s+empty\s+-", out)
    assert "throughput 10.0 MB/s (600.0 MB in the last minute)" in out


def test_status_json_is_the_api_object(sock: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, sock, "status", "--json")
    assert code == 0
    assert json.loads(out) == STATUS
    # --json is accepted before the subcommand too
    assert main(["--json", "--tssd", sock, "status"]) == 0
    assert json.loads(capsys.readouterr().out) == STATUS


# --- requests ------------------------------------------------------------------------


def test_list_pages_through_everything_with_all(
    fake: FakeTssd, sock: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.page_max = 100
    for _ in range(250):
        fake.add()
    code, out, _ = run(capsys, sock, "requests", "list", "--all")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "ID",
        "KIND",
        "STATE",
        "PNFSID",
        "SIZE",
        "QUEUE",
        "VOLUME:POS",
        "AGE",
        "ERROR",
    ]
    assert len(lines) == 251
    assert lines[1].split()[:8] == [
        "1",
        "recall",
        "queued",
        "00000001",
        "1.0",
        "MB",
        "default",
        "SIM007L9:1",
    ]
    afters = [parse_qs(urlsplit(t).query).get("after") for m, t, _ in fake.calls]
    assert afters == [None, ["100"], ["200"]]


def test_list_limit_warns_about_more(
    fake: FakeTssd, sock: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(8):
        fake.add()
    code, out, err = run(capsys, sock, "requests", "list", "--limit", "5")
    assert code == 0
    assert len(out.splitlines()) == 6
    assert err.startswith("tssctl: more requests match")


def test_list_filters_and_json(
    fake: FakeTssd, sock: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.add()
    bad = fake.add(state="failed", volume="SIM009L9", error="drive fault", error_code=1)
    fake.add(state="failed")
    code, out, _ = run(
        capsys, sock, "requests", "list", "--state", "failed", "--tape", "SIM009L9", "--json"
    )
    assert code == 0
    assert json.loads(out) == {"requests": [bad], "next": None}
    query = parse_qs(urlsplit(fake.calls[-1][1]).query)
    assert query["state"] == ["failed"]
    assert query["volume"] == ["SIM009L9"]
    code, out, _ = run(capsys, sock, "requests", "list", "--state", "failed")
    assert "drive fault" in out
    assert len(out.splitlines()) == 3


def test_show_cancel_retry(fake: FakeTssd, sock: str, capsys: pytest.CaptureFixture[str]) -> None:
    fake.add(started_at="2026-11-29T21:05:00+00:00")
    code, out, _ = run(capsys, sock, "requests", "show", "1")
    assert code == 0
    assert re.search(r"^size:\s+1.0 MB \(1000000 bytes\)$", out, re.M)
    assert re.search(r"^started_at:\s+2026-11-29T21:05:00\+00:00 \(.* ago\)$", out, re.M)
    assert re.search(r"^finished_at:\s+-$", out, re.M)
    code, out, _ = run(capsys, sock, "requests", "show", "1", "--json")
    assert json.loads(out) == {"request": fake.requests[1]}

    assert run(capsys, sock, "requests", "cancel", "1")[:2] == (0, "request 1: cancelled\n")
    code, out, err = run(capsys, sock, "requests", "cancel", "1")
    assert (code, out) == (5, "")
    assert err == "tssctl: request 1 is already cancelled (HTTP 409)\n"
    assert run(capsys, sock, "requests", "retry", "1")[:2] == (0, "request 1: queued\n")


def test_not_found_exits_4(sock: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, sock, "requests", "show", "99")
    assert (code, out) == (4, "")
    assert err == "tssctl: no request 99 (HTTP 404)\n"


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["requests", "show", "abc"]) == 2
    assert "argument ID: not a number: 'abc'" in capsys.readouterr().err
    assert main(["requests"]) == 2
    assert main(["--help"]) == 0
    assert "exit codes:" in capsys.readouterr().out


# --- unreachable ---------------------------------------------------------------------


def test_unreachable_names_the_target_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "nowhere.sock")
    code, out, err = run(capsys, missing, "status")
    assert (code, out) == (3, "")
    assert err.count("\n") == 1
    assert err.startswith(f"tssctl: cannot reach tssd at {missing} (from --tssd: no such socket)")
    assert "tssd serve" in err
    assert "--tssd" in err
    assert "TSSD_URL" in err


def test_unreachable_through_tssd_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TSSD_HOME", str(tmp_path))
    assert main(["status"]) == 3
    err = capsys.readouterr().err
    assert f"{tmp_path / 'tssd.sock'} (from TSSD_HOME" in err


def test_real_subprocess(sock: str, tmp_path: Path) -> None:
    ok = subprocess.run(
        [sys.executable, "-m", "tssd.cli.tssctl", "--tssd", sock, "status"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert "drive0" in ok.stdout
    down = subprocess.run(
        [sys.executable, "-m", "tssd.cli.tssctl", "requests", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"TSSD_URL": f"unix:{tmp_path / 'gone.sock'}", "PATH": "/usr/bin:/bin"},
    )
    assert down.returncode == 3
    assert down.stderr.startswith("tssctl: cannot reach tssd at unix:")
    assert "(from TSSD_URL" in down.stderr
    assert "Traceback" not in down.stderr


# --- recall --------------------------------------------------------------------------


def write_list(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "files.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_recall_bad_lines_submit_nothing(
    fake: FakeTssd, sock: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    listing = write_list(
        tmp_path,
        ["# header", "00AA /data/a", "", "XYZ /data/b", "00BB", "00CC data/c", "00AA /data/z"],
    )
    code, out, err = run(capsys, sock, "recall", "--file-list", listing)
    assert (code, out) == (6, "")
    assert err.splitlines() == [
        f"{listing}:4: pnfsid 'XYZ' is not 1 to 64 hex digits",
        f"{listing}:5: expected 'pnfsid path'",
        f"{listing}:6: path 'data/c' is not absolute",
        f"{listing}:7: pnfsid 00AA already listed on line 2 with another path",
        "tssctl: 4 bad lines; nothing submitted",
    ]
    assert fake.calls == []


def test_parse_line() -> None:
    assert parse_line(b"  00AB  /pool/my file.dat \r\n") == ("00AB", "/pool/my file.dat")
    assert parse_line(b"   # comment\n") is None
    assert parse_line(b"\xff\xfe /x\n") == "not valid UTF-8"
    assert (
        parse_line(("A" * 65 + " /x").encode()) == f"pnfsid {'A' * 65!r} is not 1 to 64 hex digits"
    )


def test_recall_chunks_of_ten_thousand(
    fake: FakeTssd, sock: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    existing = fake.add(pnfsid="00000005")
    lines = [f"{n:08X} /pool/data/file {n}" for n in range(1, 25_001)]
    listing = write_list(tmp_path, ["# generated", *lines, "00000007 /pool/data/file 7"])
    code, out, err = run(capsys, sock, "recall", "--file-list", listing, "--queue", "atlas")
    assert code == 0, err
    assert out == "25000 recalls submitted: 24999 new, 1 attached\n"
    assert fake.bulk_sizes() == [10_000, 10_000, 5_000]
    first = fake.calls[0][2]["requests"][0]
    assert first == {
        "kind": "recall",
        "pnfsid": "00000001",
        "path": "/pool/data/file 1",
        "queue": "atlas",
    }
    assert existing["queue"] == "default"
    assert len(fake.requests) == 25_000


def test_recall_rejected_chunk_says_what_was_submitted(
    fake: FakeTssd, sock: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [f"{n:08X} /p/{n}" for n in range(1, 10_002)] + ["FFFF /p/REJECT"]
    code, _, err = run(capsys, sock, "recall", "--file-list", write_list(tmp_path, lines))
    assert code == 6
    assert err.splitlines() == [
        "tssctl: lines up to 10000 (10000 recalls) were submitted before this error",
        "tssctl: requests[1]: path rejected (HTTP 400)",
    ]


def test_recall_from_stdin_json(
    fake: FakeTssd, sock: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stdin = io.TextIOWrapper(io.BytesIO(b"00A1 /d/1\n00A2 /d/2\n"))
    monkeypatch.setattr(sys, "stdin", stdin)
    code, out, _ = run(capsys, sock, "recall", "--file-list", "-", "--priority", "7", "--json")
    assert code == 0
    assert json.loads(out) == {"submitted": 2, "created": 2, "attached": 0, "ids": [1, 2]}
    assert fake.requests[2]["priority"] == 7


def test_recall_wait_until_done(
    fake: FakeTssd, sock: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.finish_per_query = 2
    listing = write_list(tmp_path, [f"{n:04X} /d/{n}" for n in range(1, 6)])
    code, out, err = run(
        capsys, sock, "recall", "--file-list", listing, "--wait", "--interval", "0.01"
    )
    assert code == 0, err
    assert out == "5 recalls submitted: 5 new, 0 attached\n"
    queries = [c for c in fake.calls if c[1] == "/v1/requests/query"]
    assert len(queries) == 3
    assert queries[0][2] == {"ids": [1, 2, 3, 4, 5]}
    lines = err.splitlines()
    assert lines[0].startswith("files 2/5 (40.0%)  bytes 2.0 MB/5.0 MB")
    assert lines[1].startswith("files 5/5 (100.0%)  bytes 5.0 MB/5.0 MB")
    assert lines[2].startswith("done 5/5 files, 5.0 MB in ")
    assert lines[2].endswith("failed 0, cancelled 0, unknown 0")


def test_recall_wait_exits_1_and_lists_failures(
    fake: FakeTssd, sock: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.finish_per_query = 1
    fake.fail_pnfsids = {"0002"}
    listing = write_list(tmp_path, [f"{n:04X} /d/{n}" for n in range(1, 4)])
    code, out, err = run(
        capsys, sock, "recall", "--file-list", listing, "--wait", "--json", "--interval", "0.01"
    )
    assert code == 1
    result = json.loads(out)["result"]
    assert result["counts"]["failed"] == 1
    assert "failed 1, cancelled 0, unknown 0" in err
    assert re.search(r"^\s*2\s+failed\s+0002\s+volume SIM007L9 unreadable$", err, re.M)


# --- rendering -----------------------------------------------------------------------


def test_human_units() -> None:
    assert render.human_size(999) == "999 B"
    assert render.human_size(1_500_000_000_000) == "1.5 TB"
    assert render.human_size(None) == "-"
    assert render.human_duration(59.6) == "1m 0s"
    assert render.human_duration(3 * 86400 + 7200 + 5) == "3d 2h"
    assert render.human_duration(None) == "-"


def test_progress_rate_and_eta() -> None:
    progress = render.Progress(files_total=10, started=0.0)
    progress.update(0, 0, 10_000, now=0.0)
    assert progress.eta() is None
    progress.update(2, 2_000, 10_000, now=10.0)
    assert progress.rates() == (0.2, 200.0)
    assert progress.eta() == 40.0
    assert "ETA 40s" in progress.line()
    progress.update(10, 10_000, 10_000, now=20.0)  # finished: no ETA at all
    assert progress.eta() is None and "ETA" not in progress.line()


def test_progress_bar_on_a_terminal_line_into_a_pipe() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    line = render.ProgressLine(stream)
    line.show("files 1/4", now=0.0, done=1, total=4)
    line.show("files 4/4 done", now=0.1, final=True, done=4, total=4)
    shown = stream.getvalue()
    assert "files 4/4 done" in shown
    assert "\u2501" in shown  # the bar
    assert "files 4/4 done\n" in shown  # the last state stays on screen
    piped = io.StringIO()
    line = render.ProgressLine(piped, every_s=5.0)
    for now in (0.0, 1.0, 5.5, 6.0):
        line.show(f"t{now}", now=now)
    line.show("end", now=6.5, final=True)
    assert piped.getvalue() == "t0.0\nt5.5\nend\n"


@pytest.mark.timeout(30)
def test_recall_refuses_a_fifo_a_device_and_unbounded_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing is read without bound and nothing waits: each ends in one clear line."""
    import os

    from tssd.cli.commands import recall

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no writer: opening it for reading would block
    sock = str(tmp_path / "none.sock")
    for path, said in (
        (str(fifo), "not a regular file"),
        (str(tmp_path), "not a regular file"),
        ("/dev/zero", "not a regular file"),
    ):
        assert main(["--tssd", sock, "recall", "--file-list", path]) == 6
        err = capsys.readouterr().err
        assert said in err and "nothing submitted" in err and len(err.splitlines()) == 1
    long_line = tmp_path / "long.txt"
    long_line.write_bytes(b"0000AB /pool/" + b"x" * 20_000 + b"\n")
    assert main(["--tssd", sock, "recall", "--file-list", str(long_line)]) == 6
    assert "line 1 is longer than" in capsys.readouterr().err
    monkeypatch.setattr(recall, "MAX_LINES", 3)
    many = tmp_path / "many.txt"
    many.write_text("".join(f"{i:08X} /pool/{i}\n" for i in range(4)))
    assert main(["--tssd", sock, "recall", "--file-list", str(many)]) == 6
    assert "more than 3 lines" in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"\0" * 100_000)))
    assert main(["--tssd", sock, "recall", "--file-list", "-"]) == 6
    assert "line 1 is longer than" in capsys.readouterr().err


def test_list_limit_prints_the_command_of_the_next_page(
    fake: FakeTssd, sock: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import shlex

    for i in range(12):
        fake.add(state="failed" if i % 2 else "queued")
    code, out, err = run(capsys, sock, "requests", "list", "--state", "failed", "--limit", "4")
    assert code == 0 and len(out.splitlines()) == 5
    command = err.partition("the next page: ")[2].partition(" (or --all)")[0]
    assert command == "tssctl requests list --state failed --limit 4 --after 8"
    code, out, err = run(capsys, sock, *shlex.split(command)[1:])
    assert code == 0 and err == ""
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["10", "12"]


def test_tssctl_imports_no_daemon_module() -> None:
    # Every tssctl command pays its imports before it asks anything: the daemon's stack
    # (SQLAlchemy, structlog, aiohttp, the scheduler, the settings) and rich's console
    # cost more than a view's answer at a million pending (docs/benchmarks.md).
    root = Path(__file__).resolve().parents[2]
    code = (
        f"import sys; sys.path.insert(0, {str(root)!r}); import tssd.cli.tssctl; "
        "print(' '.join(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code], check=True, capture_output=True,
                         text=True)  # fmt: skip
    loaded = set(out.stdout.split())
    costly = {"sqlalchemy", "structlog", "aiohttp", "msgspec", "tssd.config", "tssd.db",
              "tssd.scheduler.queues", "tssd.bodies", "rich.console", "rich.live"}  # fmt: skip
    assert not costly & loaded
