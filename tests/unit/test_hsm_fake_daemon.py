"""The real ``tss-hsm`` process against a small fake tssd API on a Unix socket."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

PNFSID = "0000A1B2C3D4E5F6"
URI = "osm://osm/?store=atlas&group=tape&bfid=b1"
Finisher = Callable[[dict[str, Any]], None]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Silenced: a Unix socket peer has no address to log."""

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        self.server.fake.calls.append(("POST", self.path, body))
        if self.path.endswith("/reported"):
            request_id = int(self.path.split("/")[3])
            self.server.fake.reported.add(request_id)
            self._answer(200, {"request": self.server.fake.requests[request_id]})
            return
        if self.path == "/v1/requests/obtain":
            if self.server.fake.legacy:  # as aiohttp answers a route it does not have
                self._answer(404, {"error": {"type": "InvalidRequest", "message": "Not Found"}})
                return
            self._answer(*self.server.fake.obtain(body))
            return
        status, payload = self.server.fake.submit(body)
        self._answer(status, payload)

    def do_GET(self) -> None:
        fake = self.server.fake
        fake.calls.append(("GET", self.path, None))
        if self.path.startswith("/v1/requests/latest?"):
            self._answer(*fake.latest())
            return
        if fake.drop_waits:
            fake.wait_seen.set()
            self.close_connection = True
            return
        self._answer(200, fake.wait(urlsplit(self.path).path.split("/")[3]))

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    block_on_close = False
    fake: FakeTssd


class FakeTssd:
    """Answers submit and wait; ``finish`` decides how a waited-on request ends."""

    def __init__(self, socket_path: Path, requests: dict[int, dict[str, Any]] | None = None):
        self.socket_path = socket_path
        self.requests: dict[int, dict[str, Any]] = {} if requests is None else requests
        self.reported: set[int] = set()
        self.calls: list[tuple[str, str, Any]] = []
        self.finish: Finisher | None = done_migration
        self.refuse: tuple[int, dict[str, Any]] | None = None
        self.initial_state = "queued"
        self.drop_waits = False
        self.legacy = False
        self.wait_seen = threading.Event()
        self.stopping = threading.Event()
        self._server: _Server | None = None

    def start(self) -> FakeTssd:
        server = _Server(str(self.socket_path), _Handler)
        server.fake = self
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self.stopping.set()
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self.socket_path.unlink(missing_ok=True)

    def submit(self, body: Any) -> tuple[int, dict[str, Any]]:
        if self.refuse is not None:
            return self.refuse
        request_id = len(self.requests) + 1
        request = {**body, "id": request_id, "state": self.initial_state, "uri": None,
                   "adler32": None, "error_code": None, "error": None}  # fmt: skip
        self.requests[request_id] = request
        if self.initial_state == "done" and self.finish is not None:
            self.finish(request)
        return 201, {"created": True, "request": request}

    def obtain(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """tssd's adopt-or-create (tssd.db.polls.obtain), for one pnfsid."""
        adopt = body["adopt"]
        body = {k: v for k, v in body.items() if k != "adopt"}
        if self.requests and self.refuse is None:
            newest = max(self.requests)
            request, reported = self.requests[newest], newest in self.reported
            finished = request["state"] in ("done", "failed", "cancelled")
            if not finished or (
                adopt == "finished" and not reported and request["path"] == body["path"]
            ):
                return 200, {"created": False, "reported": reported, "request": request}
        return self.submit(body)

    def latest(self) -> tuple[int, dict[str, Any]]:
        if not self.requests:
            return 404, {"error": {"type": "NotFound", "message": "none", "exit_code": 1}}
        newest = max(self.requests)
        return 200, {"request": self.requests[newest], "reported": newest in self.reported}

    def wait(self, request_id: str) -> dict[str, Any]:
        request = self.requests[int(request_id)]
        self.wait_seen.set()
        if self.finish is None:
            self.stopping.wait(0.5)
            return {"request": request, "finished": False}
        self.finish(request)
        return {"request": request, "finished": True}

    def bodies(self) -> list[Any]:
        submits = ("/v1/requests", "/v1/requests/obtain")
        return [
            {k: v for k, v in body.items() if k != "adopt"}
            for method, path, body in self.calls
            if path in submits
        ]


def done_migration(request: dict[str, Any]) -> None:
    request.update(state="done", uri=URI, adler32="0a1b2c3d")


def recall_writing(data: bytes, adler32: str | None = None) -> Finisher:
    """A recall that delivers ``data`` to the request's path, as the daemon would."""

    def finish(request: dict[str, Any]) -> None:
        Path(request["path"]).write_bytes(data)
        checksum = adler32 or f"{zlib.adler32(data):08x}"
        request.update(state="done", size=len(data), adler32=checksum)

    return finish


def failing(code: int, error: str = "boom") -> Finisher:
    def finish(request: dict[str, Any]) -> None:
        request.update(state="failed", error_code=code, error=error)

    return finish


@pytest.fixture
def sock_dir(tmp_path: Path) -> Iterator[Path]:
    # sun_path holds at most 107 bytes, which a deep pytest tmp_path can exceed.
    if len(str(tmp_path)) < 80:
        yield tmp_path
        return
    short = Path(tempfile.mkdtemp(prefix="hsm-"))
    yield short
    shutil.rmtree(short, ignore_errors=True)


@pytest.fixture
def fake(sock_dir: Path) -> Iterator[FakeTssd]:
    server = FakeTssd(sock_dir / "tssd.sock").start()
    yield server
    server.stop()


def hsm_argv(fake: FakeTssd, *args: str) -> list[str]:
    return [sys.executable, "-m", "tssd.hsm", *args, f"-tssd={fake.socket_path}"]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("TSSD_")}


def run_hsm(fake: FakeTssd, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        hsm_argv(fake, *args), check=False, capture_output=True, text=True, timeout=60, env=_env()
    )


def start_hsm(fake: FakeTssd, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        hsm_argv(fake, *args),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )


def one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("tss-hsm: ")
    return lines[0]


def source_file(tmp_path: Path, data: bytes = b"hello tape") -> tuple[Path, str]:
    path = tmp_path / PNFSID
    path.write_bytes(data)
    si = (
        f"-si=size={len(data)};new=true;stored=false;sClass=atlas:tape;cClass=-;hsm=osm;"
        f"flag-c=1:{zlib.adler32(data):08X};uid=1;gid=2;store=atlas;group=tape;"
    )
    return path, si


def test_put_prints_exactly_the_uri(fake: FakeTssd, tmp_path: Path) -> None:
    path, si = source_file(tmp_path)
    result = run_hsm(fake, "put", PNFSID, str(path), si, "-queue=atlas", "-priority=3", "-x=y")
    assert (result.returncode, result.stdout, result.stderr) == (0, URI + "\n", "")
    [body] = fake.bodies()
    assert body == {
        "kind": "migrate", "pnfsid": PNFSID, "path": str(path), "size": 10,
        "storage_class": "atlas:tape", "checksum": f"{zlib.adler32(b'hello tape'):08x}",
        "hsm_type": "osm", "hsm_instance": "osm", "store": "atlas", "group": "tape",
        "queue": "atlas", "priority": 3,
    }  # fmt: skip


def test_get_writes_crcval(fake: FakeTssd, tmp_path: Path) -> None:
    data = b"recalled bytes"
    fake.finish = recall_writing(data)
    dest = tmp_path / "pool" / PNFSID
    dest.parent.mkdir()
    si = f"-si=size={len(data)};sClass=atlas:tape;flag-c=1:{zlib.adler32(data):08x};{URI};"
    result = run_hsm(fake, "get", PNFSID, str(dest), si, f"-uri={URI}")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert dest.with_name(PNFSID + ".crcval").read_text() == f"{zlib.adler32(data):08x}\n"
    assert sorted(p.name for p in dest.parent.iterdir()) == [PNFSID, PNFSID + ".crcval"]
    [body] = fake.bodies()
    assert (body["kind"], body["uris"], body["path"]) == ("recall", [URI], str(dest))


def test_get_checksum_mismatch_exits_31(fake: FakeTssd, tmp_path: Path) -> None:
    fake.finish = recall_writing(b"1234")
    dest = tmp_path / PNFSID
    result = run_hsm(fake, "get", PNFSID, str(dest), "-si=size=4;flag-c=1:deadbeef;", f"-uri={URI}")
    assert result.returncode == 31
    assert "deadbeef" in one_line(result.stderr)
    assert not dest.with_name(PNFSID + ".crcval").exists()


@pytest.mark.parametrize(("error_code", "exit_code"), [(31, 31), (41, 41), (43, 43), (99, 1)])
def test_failed_request_maps_error_code(
    fake: FakeTssd, tmp_path: Path, error_code: int, exit_code: int
) -> None:
    fake.finish = failing(error_code, "tape\nunreadable")
    result = run_hsm(fake, "get", PNFSID, str(tmp_path / PNFSID), "-si=size=4;", f"-uri={URI}")
    assert result.returncode == exit_code
    assert "tape unreadable" in one_line(result.stderr)


def test_cancelled_request_exits_1(fake: FakeTssd, tmp_path: Path) -> None:
    fake.finish = lambda request: request.update(state="cancelled")
    result = run_hsm(fake, "get", PNFSID, str(tmp_path / PNFSID), "-si=size=4;", f"-uri={URI}")
    assert result.returncode == 1
    assert "cancelled" in one_line(result.stderr)


def test_api_error_400_exits_32(fake: FakeTssd, tmp_path: Path) -> None:
    fake.refuse = (400, {"error": {"type": "InvalidRequest", "message": "bad queue"}})
    path, si = source_file(tmp_path)
    result = run_hsm(fake, "put", PNFSID, str(path), si, "-queue=no spaces")
    assert (result.returncode, result.stdout) == (32, "")
    assert "bad queue" in one_line(result.stderr)


def test_tssd_not_running_exits_1_with_one_line(sock_dir: Path, tmp_path: Path) -> None:
    # Block mode rides out an absent tssd for -reconnect-timeout seconds, then gives up.
    absent = FakeTssd(sock_dir / "absent.sock")
    path, si = source_file(tmp_path)
    result = run_hsm(absent, "put", PNFSID, str(path), si, "-reconnect-timeout=0")
    assert (result.returncode, result.stdout) == (1, "")
    assert "unreachable" in one_line(result.stderr)


def test_unreadable_source_exits_42_without_a_call(fake: FakeTssd, tmp_path: Path) -> None:
    result = run_hsm(fake, "put", PNFSID, str(tmp_path / "missing"), "-si=size=3;sClass=a:b;")
    assert result.returncode == 42
    one_line(result.stderr)
    assert fake.calls == []


def test_source_size_mismatch_exits_42_without_a_call(fake: FakeTssd, tmp_path: Path) -> None:
    path, _ = source_file(tmp_path, b"12345")
    result = run_hsm(fake, "put", PNFSID, str(path), "-si=size=6;sClass=a:b;")
    assert result.returncode == 42
    assert "5 bytes" in one_line(result.stderr)
    assert fake.calls == []


def test_missing_destination_directory_exits_43_without_a_call(
    fake: FakeTssd, tmp_path: Path
) -> None:
    dest = tmp_path / "no-such-dir" / PNFSID
    result = run_hsm(fake, "get", PNFSID, str(dest), "-si=size=3;", f"-uri={URI}")
    assert result.returncode == 43
    one_line(result.stderr)
    assert fake.calls == []


def test_invalid_arguments_exit_32_without_a_call(fake: FakeTssd) -> None:
    result = run_hsm(fake, "remove", "-uri=osm://osm/?store=a")
    assert result.returncode == 32
    assert "bfid" in one_line(result.stderr)
    assert fake.calls == []


def test_remove_submits_one_request_per_uri(fake: FakeTssd) -> None:
    fake.finish = lambda request: request.update(state="done")
    uri2 = URI.replace("b1", "b2")
    result = run_hsm(fake, "remove", f"-uri={URI}", f"-uri={uri2}")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert fake.bodies() == [
        {"kind": "remove", "uris": [URI], "bfid": "b1"},
        {"kind": "remove", "uris": [uri2], "bfid": "b2"},
    ]


def test_poll_mode_exits_72_while_open(fake: FakeTssd, tmp_path: Path) -> None:
    path, si = source_file(tmp_path)
    result = run_hsm(fake, "put", PNFSID, str(path), si, "-mode=poll")
    assert (result.returncode, result.stdout, result.stderr) == (72, "", "")
    # One round trip per call, the first one included.
    assert [(m, p) for m, p, _ in fake.calls] == [("POST", "/v1/requests/obtain")]
    again = run_hsm(fake, "put", PNFSID, str(path), si, "-mode=poll")
    assert (again.returncode, again.stdout, again.stderr) == (72, "", "")
    assert [p for _, p, _ in fake.calls] == ["/v1/requests/obtain"] * 2
    assert len(fake.requests) == 1


def test_poll_after_the_request_finished_reports_it_once(fake: FakeTssd, tmp_path: Path) -> None:
    data = b"recalled bytes"
    dest = tmp_path / PNFSID
    si = f"-si=size={len(data)};flag-c=1:{zlib.adler32(data):08x};"
    first = run_hsm(fake, "get", PNFSID, str(dest), si, f"-uri={URI}", "-mode=poll")
    assert first.returncode == 72
    recall_writing(data)(fake.requests[1])  # the daemon finishes it between two polls
    done = run_hsm(fake, "get", PNFSID, str(dest), si, f"-uri={URI}", "-mode=poll")
    assert (done.returncode, done.stderr) == (0, "")
    assert dest.with_name(PNFSID + ".crcval").read_text() == f"{zlib.adler32(data):08x}\n"
    assert fake.reported == {1} and len(fake.requests) == 1
    # A later stage of the same file (evicted from the pool meanwhile) is a new recall.
    dest.unlink()
    later = run_hsm(fake, "get", PNFSID, str(dest), si, f"-uri={URI}", "-mode=poll")
    assert later.returncode == 72
    assert len(fake.requests) == 2


def test_poll_reports_a_failure_once(fake: FakeTssd, tmp_path: Path) -> None:
    dest = tmp_path / PNFSID
    args = ("get", PNFSID, str(dest), "-si=size=4;", f"-uri={URI}", "-mode=poll")
    assert run_hsm(fake, *args).returncode == 72
    failing(31, "no copy on tape")(fake.requests[1])
    failed = run_hsm(fake, *args)
    assert failed.returncode == 31
    assert "no copy on tape" in one_line(failed.stderr)
    assert run_hsm(fake, *args).returncode == 72  # dCache's retry: a new recall
    assert len(fake.requests) == 2


def test_a_failure_reason_reaches_stderr_escaped(fake: FakeTssd, tmp_path: Path) -> None:
    """The reason is the daemon's (it may quote a path): no ESC, OSC, CR or C1 raw in
    the pool's log, which an operator reads with `less` or `tail` on a terminal."""
    args = ("get", PNFSID, str(tmp_path / PNFSID), "-si=size=4;", f"-uri={URI}", "-mode=poll")
    assert run_hsm(fake, *args).returncode == 72
    failing(31, "cannot open /pool/\x1b]0;owned\x07\r\x9b2J")(fake.requests[1])
    failed = run_hsm(fake, *args)
    assert failed.returncode == 31
    assert "cannot open /pool/\\x1b]0;owned\\x07 \\u009b2J" in one_line(failed.stderr)
    assert not {c for c in failed.stderr if c < " " or "\x7f" <= c < "\xa0"} - {"\n"}


def test_shim_imports_nothing_costly() -> None:
    # The cost budget of one call (docs/benchmarks.md) holds only without these modules.
    root = Path(__file__).resolve().parents[2]
    code = (
        f"import sys; sys.path.insert(0, {str(root)!r}); import tssd.shim.main; "
        "print(' '.join(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], check=True, capture_output=True, text=True
    )
    loaded = set(out.stdout.split())
    costly = {"re", "json", "socket", "enum", "typing", "dataclasses", "http.client",
              "email", "urllib.parse", "contextlib", "collections", "tssd.wire"}  # fmt: skip
    assert not costly & loaded
    # tssd.errors and tssd.printable import nothing; the shim's errors are in the tree
    # every other part uses, and its stderr line is escaped like every other renderer's.
    outside = {m for m in loaded if m.startswith("tssd.") and not m.startswith("tssd.shim")}
    assert outside == {"tssd.errors", "tssd.printable"}


def test_poll_mode_finishes_a_done_request(fake: FakeTssd, tmp_path: Path) -> None:
    fake.initial_state = "done"
    path, si = source_file(tmp_path)
    result = run_hsm(fake, "put", PNFSID, str(path), si, "-mode=poll")
    assert (result.returncode, result.stdout) == (0, URI + "\n")
    assert fake.reported == {1}


def test_sigterm_during_wait_exits_143(fake: FakeTssd, tmp_path: Path) -> None:
    fake.finish = None
    path, si = source_file(tmp_path)
    proc = start_hsm(fake, "put", PNFSID, str(path), si)
    try:
        assert fake.wait_seen.wait(30)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 143
    assert time.monotonic() - started < 5
    assert stdout == ""
    assert "SIGTERM" in one_line(stderr)
    assert fake.requests[1]["state"] == "queued"
    assert all("cancel" not in path for _, path, _ in fake.calls)


def test_reconnects_after_the_daemon_restarts_mid_wait(fake: FakeTssd, tmp_path: Path) -> None:
    fake.drop_waits = True
    path, si = source_file(tmp_path)
    proc = start_hsm(fake, "put", PNFSID, str(path), si)
    try:
        assert fake.wait_seen.wait(30)
        fake.stop()
        time.sleep(0.7)
        restarted = FakeTssd(fake.socket_path, fake.requests).start()
        try:
            stdout, stderr = proc.communicate(timeout=30)
        finally:
            restarted.stop()
    finally:
        proc.kill()
    assert (proc.returncode, stdout) == (0, URI + "\n"), stderr
    assert [path for _, path, _ in restarted.calls if "/wait" in path]
    assert restarted.reported == {1}
    assert restarted.bodies() == []
    assert all(line.startswith("tss-hsm: ") for line in stderr.splitlines())


def test_gives_up_after_the_reconnect_timeout(fake: FakeTssd, tmp_path: Path) -> None:
    fake.drop_waits = True
    path, si = source_file(tmp_path)
    proc = start_hsm(fake, "put", PNFSID, str(path), si, "-reconnect-timeout=1")
    try:
        assert fake.wait_seen.wait(30)
        fake.stop()
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert (proc.returncode, stdout) == (1, "")
    assert "unreachable for 1 s" in stderr.splitlines()[-1]


def test_a_done_recall_whose_file_is_gone_is_recalled_again(fake: FakeTssd, tmp_path: Path) -> None:
    dest = tmp_path / PNFSID
    args = ("get", PNFSID, str(dest), "-si=size=5;", f"-uri={URI}", "-mode=poll")
    assert run_hsm(fake, *args).returncode == 72
    recall_writing(b"bytes")(fake.requests[1])
    dest.unlink()  # the pool lost the file before the poll that would have collected it
    assert run_hsm(fake, *args).returncode == 72
    adopts = [body["adopt"] for _, path, body in fake.calls if path == "/v1/requests/obtain"]
    assert adopts == ["finished", "finished", "open"]
    assert [r["state"] for r in fake.requests.values()] == ["done", "queued"]
    assert fake.reported == set()


def test_a_tssd_without_the_obtain_route_gets_two_round_trips(
    fake: FakeTssd, tmp_path: Path
) -> None:
    fake.legacy = True
    path, si = source_file(tmp_path)
    for _ in range(2):
        result = run_hsm(fake, "put", PNFSID, str(path), si, "-mode=poll")
        assert (result.returncode, result.stdout, result.stderr) == (72, "", "")
    assert [(m, p.split("?")[0]) for m, p, _ in fake.calls] == [
        ("POST", "/v1/requests/obtain"), ("GET", "/v1/requests/latest"), ("POST", "/v1/requests"),
        ("POST", "/v1/requests/obtain"), ("GET", "/v1/requests/latest"),
    ]  # fmt: skip
    assert len(fake.requests) == 1


def recall_to_part(data: bytes) -> Finisher:
    """A recall as tssd delivers tss-hsm's: ``.<name>.tssd-part`` beside the path."""

    def finish(request: dict[str, Any]) -> None:
        path = Path(request["path"])
        path.with_name(f".{path.name}.tssd-part").write_bytes(data)
        request.update(state="done", size=len(data), adler32=f"{zlib.adler32(data):08x}")

    return finish


def test_get_claims_the_part_file_and_asks_for_claim_delivery(
    fake: FakeTssd, tmp_path: Path
) -> None:
    data = b"recalled bytes"
    fake.finish = recall_to_part(data)
    dest = tmp_path / "pool" / PNFSID
    dest.parent.mkdir()
    si = f"-si=size={len(data)};sClass=atlas:tape;flag-c=1:{zlib.adler32(data):08x};"
    result = run_hsm(fake, "get", PNFSID, str(dest), si, f"-uri={URI}")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert dest.read_bytes() == data
    assert sorted(p.name for p in dest.parent.iterdir()) == [PNFSID, PNFSID + ".crcval"]
    [body] = fake.bodies()
    assert body["delivery"] == "claim"


def test_get_whose_part_file_was_taken_back_exits_1(fake: FakeTssd, tmp_path: Path) -> None:
    # tssd removed the unclaimed part file (delivery.claim_timeout_s) just before this call.
    fake.finish = lambda request: request.update(state="done", size=4, adler32="01de00c7")
    dest = tmp_path / PNFSID
    result = run_hsm(fake, "get", PNFSID, str(dest), "-si=size=4;", f"-uri={URI}")
    assert result.returncode == 1
    assert "part file is gone" in one_line(result.stderr)
    assert not dest.exists()
    assert not dest.with_name(PNFSID + ".crcval").exists()


def test_fifo_source_exits_42_at_once_without_a_call(fake: FakeTssd, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    result = run_hsm(fake, "put", PNFSID, str(fifo), "-si=size=10;sClass=atlas:tape;")
    assert result.returncode == 42
    assert "not a regular file" in one_line(result.stderr)
    assert time.monotonic() - started < 10
    assert fake.calls == []
