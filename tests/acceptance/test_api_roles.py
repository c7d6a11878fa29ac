"""Roles with the real daemon (issue 17.4 and 17.7): tokens over TCP, the Unix socket's
owner and its pools, and catalog import as an admin operation that reads only regular
files of bounded size."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Daemon
from test_access_control import free_port, tcp_call

from tssd.testing import DaemonError

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

ADMIN, READER = "admin-token-17", "read-token-17"
HEADER = "pnfsid,volume,seq,size,storage_class,written_at\n"
CATALOG = HEADER + "".join(
    f"00AB{i:04X},VOL00{i % 3},{i},1000,atlas:tape,2020-01-01T00:00:{i:02d}+00:00\n"
    for i in range(1, 21)
)
#: A uid that is not the daemon's: the socket's group makes it a pool.
POOL_UID = 65534


def token_file(path: Path, token: str, mode: int = 0o600) -> Path:
    path.write_text(token + "\n")
    path.chmod(mode)
    return path


@pytest.fixture
def roles(tmp_path: Path, sqlite_url: str) -> Iterator[tuple[Daemon, int, Path]]:
    # The socket in a directory a pool's uid may reach (tmp_path's parents are 0700).
    sockdir = Path(tempfile.mkdtemp(prefix="tssd-roles-"))
    sockdir.chmod(0o755)
    pool = sockdir / "pool"
    pool.mkdir()
    pool.chmod(0o777)
    port = free_port()
    d = Daemon(home=sockdir / "home", db_url=sqlite_url)
    d.home.mkdir()
    d.home.chmod(0o755)
    d.extra_env.update(
        TSSD_API_TCP=f"127.0.0.1:{port}",
        TSSD_API_TOKEN_FILE=str(token_file(tmp_path / "admin", ADMIN)),
        TSSD_LIMITS_READ_TOKEN_FILE=str(token_file(tmp_path / "read", READER, 0o640)),
        TSSD_API_POOL_ROOTS=str(pool),
        TSSD_LIMITS_CATALOG_IMPORT_MAX_BYTES="100000",
    )
    try:
        yield d, port, sockdir
    finally:
        if d.alive():
            d.stop(signal.SIGKILL)
        subprocess.run(["rm", "-rf", str(sockdir)], check=False)


def test_every_tcp_call_needs_a_token_and_the_read_token_only_reads(
    roles: tuple[Daemon, int, Path],
) -> None:
    daemon, port, sockdir = roles
    daemon.start()
    body = {"kind": "recall", "pnfsid": "00AB0001", "path": str(sockdir / "pool" / "f")}
    for method, path, payload in (("GET", "/v1/status", None), ("GET", "/v1/requests", None),
                                  ("GET", "/v1/catalog/export", None), ("GET", "/healthz", None),
                                  ("POST", "/v1/requests", body)):  # fmt: skip
        assert tcp_call(port, method, path, payload)[0] == 401, path
        assert tcp_call(port, method, path, payload, token="nope")[0] == 401, path
    assert tcp_call(port, "GET", "/v1/requests", token=READER)[0] == 200
    assert tcp_call(port, "GET", "/v1/catalog/export", token=READER)[0] == 200
    assert tcp_call(port, "POST", "/v1/requests/query", {"ids": [1]}, token=READER)[0] == 200
    for method, path, payload in (("POST", "/v1/requests", body),
                                  ("POST", "/v1/catalog/import", {"csv": CATALOG}),
                                  ("PATCH", "/v1/queues/default", {"paused": True}),
                                  ("POST", "/v1/drives/drive0/disable", {})):  # fmt: skip
        status, answer = tcp_call(port, method, path, payload, token=READER)
        assert status == 403 and answer["error"]["type"] == "Forbidden", (path, answer)
    assert daemon.requests() == []
    assert tcp_call(port, "POST", "/v1/catalog/import", {"csv": CATALOG}, token=ADMIN)[0] == 200
    assert tcp_call(port, "POST", "/v1/requests", body, token=ADMIN)[0] == 201
    events = {e.get("event") for e in daemon.events()}
    assert {"api.unauthorized", "api.forbidden"} <= events
    assert daemon.stop() == 0


@pytest.mark.parametrize("setting", ["TSSD_API_TOKEN_FILE", "TSSD_LIMITS_READ_TOKEN_FILE"])
@pytest.mark.parametrize("mode", [0o620, 0o602])
def test_writable_token_files_are_refused_at_start(
    roles: tuple[Daemon, int, Path], setting: str, mode: int
) -> None:
    daemon, _port, _sockdir = roles
    Path(daemon.extra_env[setting]).chmod(mode)
    with pytest.raises(DaemonError, match="group- or world-writable"):
        daemon.start(timeout=30)


POOL_SCRIPT = """
import json, os, sys
from tssd.wire import ApiError, Client
client = Client(sys.argv[1])
calls = json.loads(sys.argv[2])
os.setgroups([])
os.setgid(os.getgid())
os.setuid(int(sys.argv[3]))
out = []
for method, path, body in calls:
    try:
        answer = client.call(method, path, body)
        out.append([200, answer.get("request", {}).get("id")])
    except ApiError as exc:
        out.append([exc.status, exc.type])
print(json.dumps(out))
"""


def as_pool(socket_path: Path, calls: list[tuple[str, str, Any]]) -> list[list[Any]]:
    """Make *calls* on the Unix socket as another uid in the socket's group."""
    # Imports happen before setuid: this interpreter's files may be root's only.
    proc = subprocess.run(
        [sys.executable, "-c", POOL_SCRIPT, str(socket_path), json.dumps(calls), str(POOL_UID)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    result: list[list[Any]] = json.loads(proc.stdout)
    return result


@pytest.mark.skipif(os.geteuid() != 0, reason="changing uid needs root")
def test_socket_owner_is_admin_and_other_peers_are_pools(
    roles: tuple[Daemon, int, Path],
) -> None:
    daemon, _port, sockdir = roles
    daemon.start()
    sock = daemon.socket
    env = {**daemon.env, "TSSD_URL": str(sock)}
    # The owner (tssctl as the daemon's user) keeps every command.
    csv_file = daemon.home / "catalog.csv"
    csv_file.write_text(CATALOG)
    commands = (
        ["status"],
        ["queues", "list"],
        ["drives", "list"],
        ["catalog", "import", str(csv_file)],
        ["queues", "set", "slow", "--priority", "1"],
    )
    for args in commands:
        res = daemon.ctl(*args, env=env)
        assert res.returncode == 0, (args, res.stderr)
    pool = str(sockdir / "pool")
    mine = {"kind": "recall", "pnfsid": "00AB0002", "path": f"{pool}/mine"}
    theirs = {"kind": "recall", "pnfsid": "00AB0003", "path": f"{pool}/theirs"}
    owner_id = daemon.client().call("POST", "/v1/requests", theirs)["request"]["id"]
    [submitted, own_read, *refused] = as_pool(sock, [
        ("POST", "/v1/requests", mine),
        ("GET", f"/v1/requests/{owner_id}", None),
        ("GET", "/v1/requests", None),
        ("GET", "/v1/catalog/export", None),
        ("POST", "/v1/catalog/import", {"csv": HEADER, "replace": True, "force": True}),
        ("PATCH", "/v1/queues/default", {"paused": True}),
        ("POST", f"/v1/requests/{owner_id}/retry", {}),
        ("POST", f"/v1/requests/{owner_id}/cancel", {}),
    ])  # fmt: skip
    assert submitted[0] == 200 and own_read == [200, owner_id]
    assert refused == [[403, "Forbidden"]] * 6, refused
    [cancel_own] = as_pool(sock, [("POST", f"/v1/requests/{submitted[1]}/cancel", {})])
    assert cancel_own[0] in (200, 409), cancel_own  # 409: it already failed (no copy)
    assert len(daemon.ctl("catalog", "export", str(daemon.home / "out.csv"),
                          env=env).stderr) == 0  # fmt: skip
    assert (daemon.home / "out.csv").read_text().count("\n") == CATALOG.count("\n")
    assert daemon.alive()


def test_catalog_import_reads_only_small_regular_files(
    roles: tuple[Daemon, int, Path], tmp_path: Path
) -> None:
    daemon, _port, _sockdir = roles
    daemon.start()
    client = daemon.client()
    assert client.call("POST", "/v1/catalog/import", {"csv": CATALOG})["rows"] == 20
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    target = tmp_path / "good.csv"
    target.write_text(CATALOG)
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    big = tmp_path / "big.csv"
    big.write_text(HEADER + "x" * 200_000)
    empty = tmp_path / "empty.csv"
    empty.write_text(HEADER)
    # Every refusal comes at once, and the daemon keeps answering meanwhile.
    stalls: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        while not stop.is_set():
            start = time.monotonic()
            client.call("GET", "/healthz")
            stalls.append(time.monotonic() - start)
            time.sleep(0.02)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        for path, why in ((fifo, "not a regular file"), ("/dev/zero", "not a regular file"),
                          (link, "symbolic links"), (big, "catalog_import_max_bytes")):  # fmt: skip
            start = time.monotonic()
            status, answer = call(client, {"path": str(path), "replace": True})
            assert status == 400 and why in answer["message"], (path, answer)
            assert time.monotonic() - start < 10, path
        # Replacing with an empty catalog needs "force"; the catalog is untouched until then.
        for body in ({"path": str(empty), "replace": True}, {"csv": HEADER, "replace": True}):
            status, answer = call(client, body)
            assert status == 409 and "force" in answer["message"], answer
    finally:
        stop.set()
        prober.join()
    assert max(stalls) < 5.0
    res = daemon.ctl("catalog", "import", "--replace", str(empty))
    assert res.returncode != 0 and "force" in res.stderr
    assert client.call("GET", "/v1/catalog/copies/00AB0001")["copies"]
    res = daemon.ctl("catalog", "import", "--replace", "--force", str(empty))
    assert res.returncode == 0, res.stderr
    assert call(client, {"path": str(target)})[0] == 200  # a regular file is read as before
    assert daemon.alive()


def call(client: Any, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    from tssd.wire import ApiError

    try:
        return 200, client.call("POST", "/v1/catalog/import", body)
    except ApiError as exc:
        return exc.status, {"message": exc.message, "type": exc.type}
