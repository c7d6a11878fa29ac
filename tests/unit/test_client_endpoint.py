"""Both clients, ``tss-hsm``'s fastclient and ``tssctl``'s wire, find tssd and judge its
answers through one module (tssd/shim/endpoint.py) and raise the same errors."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tssd import wire
from tssd.errors import ApiError, TssdError, WireError
from tssd.shim import endpoint, fastclient


def test_the_client_errors_are_in_the_one_tree() -> None:
    assert issubclass(WireError, TssdError) and issubclass(ApiError, TssdError)
    assert fastclient.ApiError is wire.ApiError is ApiError
    assert fastclient.WireError is wire.WireError is WireError


@pytest.mark.parametrize(
    ("explicit", "env", "expected"),
    [
        ("/run/x.sock", {"TSSD_URL": "http://127.0.0.1:1"}, "/run/x.sock"),
        (None, {"TSSD_URL": "http://127.0.0.1:1", "TSSD_HOME": "/h"}, "http://127.0.0.1:1"),
        (None, {"TSSD_HOME": "/h"}, "/h/tssd.sock"),
        (None, {"HOME": "/home/u"}, "/home/u/.local/state/tssd/tssd.sock"),
    ],
)
def test_the_target_first_match_wins(
    explicit: str | None, env: dict[str, str], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("TSSD_URL", "TSSD_HOME", "TSSD_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert endpoint.resolve_target(explicit) == expected
    assert wire.Client(explicit).target == fastclient.Client(explicit).target == expected


def test_an_unreadable_token_file_is_a_wire_error_for_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TSSD_TOKEN_FILE", str(tmp_path / "absent"))
    for client in (wire.Client, fastclient.Client):
        with pytest.raises(WireError, match="cannot read token file"):
            client("/run/x.sock")
    (tmp_path / "token").write_text("  secret\n")
    assert endpoint.read_token({"TSSD_TOKEN_FILE": str(tmp_path / "token")}) == "secret"
    (tmp_path / "empty").write_text("\n")
    assert endpoint.read_token({"TSSD_TOKEN_FILE": str(tmp_path / "empty")}) is None


def test_an_answer_is_an_object_and_an_error_status_is_raised() -> None:
    assert endpoint.answer("t", 200, {"ok": True}) == {"ok": True}
    with pytest.raises(WireError, match="unexpected answer"):
        endpoint.answer("t", 200, [1])
    error = {"type": "NotFound", "message": "no request 7", "exit_code": 31}
    with pytest.raises(ApiError) as raised:
        endpoint.answer("t", 404, {"error": error})
    assert (raised.value.status, raised.value.type, raised.value.exit_code) == (
        404,
        "NotFound",
        31,
    )
    assert raised.value.message == "no request 7"


@pytest.mark.parametrize(
    ("error", "exit_code", "retry_after_s"),
    [
        ({"message": "busy", "retry_after_s": 2.5}, 1, 2.5),
        ({"message": "x", "exit_code": "31"}, 1, 1.0),  # a code that is no integer: 1
        ({"message": "x", "exit_code": True}, 1, 1.0),  # nor is a boolean
        ("not an object", 1, 1.0),
    ],
)
def test_an_error_body_tssd_did_not_shape_still_gives_an_exit_code(
    error: object, exit_code: int, retry_after_s: float
) -> None:
    exc = ApiError(503, {"error": error})
    assert (exc.exit_code, exc.retry_after_s) == (exit_code, retry_after_s)
    assert str(exc)


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[Path]:
    """A Unix-socket server answering every request with one fixed 409 error body."""
    path = tmp_path / "s.sock"
    body = b'{"error": {"type": "Conflict", "message": "already done", "exit_code": 1}}'
    reply = (
        b"HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)
    )
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn, conn.makefile("rb") as request:
                conn.settimeout(5)
                while request.readline() not in (b"\r\n", b""):  # the head; no body is sent
                    pass
                conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        stop.set()
        thread.join(5)
        server.close()
        os.unlink(path)


def test_both_clients_raise_the_same_error_for_one_answer(
    http_server: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TSSD_TOKEN_FILE", raising=False)
    seen = []
    for client in (wire.Client(str(http_server)), fastclient.Client(str(http_server))):
        with pytest.raises(ApiError) as raised:
            client.call("POST", "/v1/requests/1/cancel")
        seen.append((raised.value.status, raised.value.type, raised.value.message))
    assert seen == [(409, "Conflict", "already done")] * 2


@pytest.fixture
def dripping_server(tmp_path: Path) -> Iterator[Path]:
    """A Unix-socket server that answers every request with a valid 200, one byte every
    0.2 s: two minutes for the whole answer, while no single read waits a second. This
    is the slowloris attack on a client, the peer being a hostile or wedged tssd."""
    path = tmp_path / "drip.sock"
    body = b'{"request": {"id": 1, "state": "done", "uri": "osm://osm/?bfid=b1"}}'
    body += b" " * (600 - len(body))  # JSON allows the padding
    reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(4)
    stop = threading.Event()

    def drip(conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as request:
            conn.settimeout(5)
            while request.readline() not in (b"\r\n", b""):
                pass
            for byte in reply:
                if stop.wait(0.2):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:  # the client gave up and closed: what the test wants
                    return

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=drip, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield path
    finally:
        stop.set()
        thread.join(5)
        server.close()
        os.unlink(path)


@pytest.mark.parametrize("make", [wire.Client, fastclient.Client], ids=["wire", "fastclient"])
def test_a_dripping_server_meets_one_deadline_for_the_whole_exchange(
    make: type[wire.Client] | type[fastclient.Client],
    dripping_server: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each byte comes well within the socket timeout, so only a deadline for connect,
    request and the whole answer ends the call (about 1 s here, not a minute)."""
    monkeypatch.delenv("TSSD_TOKEN_FILE", raising=False)
    client = make(str(dripping_server), timeout=1.0)
    with pytest.raises(WireError, match=r"gave no complete answer within 1 s"):
        client.call("GET", "/v1/requests/1")


@pytest.mark.slow
def test_tss_hsm_in_poll_mode_gives_a_dripping_server_72_after_its_deadline(
    dripping_server: Path, tmp_path: Path
) -> None:
    """The real ``tss-hsm`` (its 30 s deadline per exchange) against the dripping server:
    "tssd is not answering" is "not yet" in poll mode, exit 72 with one stderr line, and
    dCache calls again after ``p:delay`` (modules/dcache/src/main/java/diskCacheV111/util/
    HsmRunSystem.java: 72 is InProgressCacheException, no alarm)."""
    from test_hsm_fake_daemon import PNFSID, URI, FakeTssd, one_line, run_hsm

    dest = tmp_path / "data" / PNFSID
    dest.parent.mkdir()
    args = ("get", PNFSID, str(dest), "-si=size=10;", f"-uri={URI}", "-mode=poll")
    result = run_hsm(FakeTssd(dripping_server), *args)
    assert (result.returncode, result.stdout) == (72, "")
    assert "gave no complete answer within 30 s" in one_line(result.stderr)


def test_without_flags_both_clients_find_the_shipped_units_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """deploy/tssd.service keeps its state in /var/lib/tssd and its socket in /run/tssd:
    an operator's shell has no TSSD_HOME, and finds that socket with no flag."""
    from tssd.cli.tssctl import main

    for name in ("TSSD_URL", "TSSD_HOME", "TSSD_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "operator"))
    unit = tmp_path / "run" / "tssd.sock"
    monkeypatch.setattr(endpoint, "SYSTEM_SOCKET", str(unit))
    own = str(tmp_path / "operator/.local/state/tssd/tssd.sock")
    assert endpoint.resolve_target() == own  # neither exists: the error names one's own
    unit.parent.mkdir()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(unit))
    server.listen()
    answered = threading.Thread(target=_answer_status, args=(server,), daemon=True)
    answered.start()
    assert wire.Client().target == fastclient.Client().target == str(unit)
    assert main(["--json", "status"]) == 0
    assert '"version": "t"' in capsys.readouterr().out
    answered.join(10)
    server.close()
    # One's own daemon, when it runs, comes first.
    Path(own).parent.mkdir(parents=True)
    Path(own).touch()
    assert endpoint.resolve_target() == own


def _answer_status(server: socket.socket) -> None:
    conn, _ = server.accept()
    with conn, conn.makefile("rb") as reader:
        while reader.readline() not in (b"\r\n", b""):
            pass
        body = b'{"version": "t"}'
        head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
        conn.sendall(head.encode() + b"\r\nConnection: close\r\n\r\n" + body)
