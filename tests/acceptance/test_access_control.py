"""Access control with the real daemon: socket permissions, TCP bearer token, pool roots."""

from __future__ import annotations

import grp
import http.client
import json
import os
import signal
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon, storage_info

from tssd.testing import DaemonError, adler32_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

PID = "0000ACCE55000000000000000000000{}"
TOKEN = "s3cret-token-for-tests"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tcp_call(
    port: int, method: str, path: str, body: Any = None, token: str | None = None
) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    try:
        data = None if body is None else json.dumps(body).encode()
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


@pytest.fixture
def guarded(tmp_path: Path, sqlite_url: str) -> Iterator[tuple[Daemon, Path, int]]:
    """A daemon with TCP on (token file), a socket group, and one pool root."""
    pool = tmp_path / "pool"
    pool.mkdir()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o640)
    port = free_port()
    group = grp.getgrgid(os.getgid()).gr_name
    d = Daemon(home=tmp_path / "home", db_url=sqlite_url)
    d.extra_env.update(
        TSSD_API_TCP=f"127.0.0.1:{port}",
        TSSD_API_TOKEN_FILE=str(token_file),
        TSSD_API_POOL_ROOTS=str(pool),
        TSSD_API_SOCKET_GROUP=group,
    )
    try:
        yield d, pool, port
    finally:
        if d.alive():
            d.stop(signal.SIGKILL)


def test_socket_mode_group_and_tcp_token(guarded: tuple[Daemon, Path, int]) -> None:
    daemon, pool, port = guarded
    daemon.start()
    info = daemon.socket.stat()
    assert stat.S_IMODE(info.st_mode) == 0o660
    assert info.st_gid == grp.getgrnam(daemon.extra_env["TSSD_API_SOCKET_GROUP"]).gr_gid
    body = {"kind": "recall", "pnfsid": PID.format(1), "path": str(pool / "f1")}
    # Every call needs a token, reads too (docs/reliability.md, threat model).
    assert tcp_call(port, "GET", "/v1/status")[0] == 401
    assert tcp_call(port, "GET", "/v1/status", token=TOKEN)[0] == 200
    for token in (None, "wrong", TOKEN + "x", ""):
        status, answer = tcp_call(port, "POST", "/v1/requests", body, token=token)
        assert status == 401, (token, status, answer)
        assert answer["error"]["type"] == "Unauthorized"
    assert tcp_call(port, "POST", "/v1/requests/1/cancel", {})[0] == 401
    assert tcp_call(port, "POST", "/v1/requests/bulk", {"requests": [body]})[0] == 401
    assert daemon.requests() == []  # nothing refused left a trace
    status, answer = tcp_call(port, "POST", "/v1/requests", body, token=TOKEN)
    assert status == 201, answer
    rid = answer["request"]["id"]
    assert tcp_call(port, "POST", f"/v1/requests/{rid}/cancel", {}, token=TOKEN)[0] == 200
    # tssctl over TCP reads the token file named by TSSD_TOKEN_FILE.
    env = {**daemon.env, "TSSD_URL": f"http://127.0.0.1:{port}"}
    assert daemon.ctl("status", env=env).returncode == 1  # no token: 401
    env["TSSD_TOKEN_FILE"] = daemon.extra_env["TSSD_API_TOKEN_FILE"]
    assert daemon.ctl("status", env=env).returncode == 0
    assert any(e.get("event") == "api.unauthorized" for e in daemon.events())
    assert daemon.stop() == 0


def test_tcp_is_off_by_default_and_never_without_a_token(tmp_path: Path, sqlite_url: str) -> None:
    daemon = Daemon(home=tmp_path / "home", db_url=sqlite_url)
    daemon.start()
    [ready] = [e for e in daemon.events() if e.get("event") == "daemon.ready"]
    assert [a for a in ready["listen"] if not a.startswith("unix:")] == []
    assert daemon.stop() == 0
    # TCP without a token file, or with one everybody may read: refused at start-up.
    daemon.extra_env["TSSD_API_TCP"] = f"127.0.0.1:{free_port()}"
    with pytest.raises(DaemonError, match=r"api\.token_file"):
        daemon.start(timeout=30)
    open_token = tmp_path / "token"
    open_token.write_text(TOKEN)
    open_token.chmod(0o644)
    daemon.extra_env["TSSD_API_TOKEN_FILE"] = str(open_token)
    with pytest.raises(DaemonError, match="readable by everyone"):
        daemon.start(timeout=30)


def test_paths_outside_the_pool_roots_are_refused(
    guarded: tuple[Daemon, Path, int], tmp_path: Path
) -> None:
    daemon, pool, _port = guarded
    daemon.start()
    src = pool / "src"
    src.write_bytes(os.urandom(3000))
    si = f"-si={storage_info(3000, adler32_file(src))}"
    res = daemon.hsm("put", PID.format(1), str(src), si)
    assert res.returncode == 0, res.stderr
    uri = res.stdout.strip()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    outside_src = elsewhere / "src"
    outside_src.write_bytes(os.urandom(3000))
    (pool / "escape").symlink_to(elsewhere)
    (pool / "sub").mkdir()
    refused_gets = {
        "dot-dot": f"{pool}/sub/../../elsewhere/g1",
        "symlink out": str(pool / "escape" / "g2"),
        "absolute elsewhere": str(elsewhere / "g3"),
    }
    for name, dest in refused_gets.items():
        res = daemon.hsm("get", PID.format(1), dest, si, f"-uri={uri}")
        assert res.returncode == 1, (name, res.returncode, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1 and "--pool-root" in res.stderr, name
        assert not Path(dest).exists(), name
    res = daemon.hsm("put", PID.format(2), str(outside_src), si)
    assert res.returncode == 1, res.stderr
    # Nothing of the refused calls was recorded; a destination inside the root works.
    assert [r["pnfsid"] for r in daemon.requests()] == [PID.format(1)]
    res = daemon.hsm("get", PID.format(1), str(pool / "sub" / "back"), si, f"-uri={uri}")
    assert res.returncode == 0, res.stderr
    assert (pool / "sub" / "back").read_bytes() == src.read_bytes()
    assert daemon.alive()
