"""The HTTP API fuzzed from its own OpenAPI document (schemathesis) against the real daemon.

Every operation gets generated calls, valid and invalid: no answer may be a 5xx, the
daemon must stay up, and whatever was recorded must be whole (a request with its
'submitted' event and valid fields). Request bodies over api.max_body_bytes are refused.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from conftest import Daemon
from hypothesis import HealthCheck, given, settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TOKEN = "fuzz-token"
#: Generated calls per operation in CI (the benchmark figure is in docs/reliability.md).
EXAMPLES = int(os.environ.get("TSSD_FUZZ_EXAMPLES", "15"))
MAX_BODY = 64 * 1024
PNFSID = re.compile(r"^[0-9A-F]{1,64}$")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def exposed(tmp_path: Path, sqlite_url: str) -> Iterator[tuple[Daemon, str, Path]]:
    pool = tmp_path / "pool"
    pool.mkdir()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    port = free_port()
    d = Daemon(home=tmp_path / "home", db_url=sqlite_url)
    d.extra_env.update(
        TSSD_API_TCP=f"127.0.0.1:{port}",
        TSSD_API_TOKEN_FILE=str(token_file),
        TSSD_API_POOL_ROOTS=str(pool),
        TSSD_API_MAX_BODY_BYTES=str(MAX_BODY),
        TSSD_API_MAX_WAIT_S="0.2",
    )
    d.start()
    try:
        yield d, f"http://127.0.0.1:{port}", pool
    finally:
        if d.alive():
            d.stop(signal.SIGKILL)


def raw_post(base: str, path: str, body: bytes) -> int:
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request(
            "POST", path, body=body,
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )  # fmt: skip
        return conn.getresponse().status
    except (ConnectionResetError, BrokenPipeError):
        return 413  # the server may close the connection before reading all of it
    finally:
        conn.close()


#: Inputs that each gave a 500 (issue 17.9) and their kin: (method, path, headers, body).
#: Every one must be answered 4xx: the client's mistake, not the daemon's.
DEEP = b"[" * 1000 + b"]" * 1000
ATTACKS: list[tuple[str, str, dict[str, bytes], bytes]] = [
    ("POST", "/v1/requests", {}, DEEP),
    ("POST", "/v1/requests/bulk", {}, b'{"requests": ' + DEEP + b"}"),
    ("POST", "/v1/requests/obtain", {}, b'{"a": ' * 900 + b"1" + b"}" * 900),
    ("POST", "/v1/requests", {}, b'{"kind": "recall", "pnfsid": "AB", "path": "/p/\\ud800"}'),
    ("POST", "/v1/requests/obtain", {}, b'{"kind": "recall", "pnfsid": "AB", "path": "/\\uDFFF"}'),
    ("POST", "/v1/requests", {}, b'{"kind": "recall", "pnfsid": "AB", "path": "/pool/\xff"}'),
    ("POST", "/v1/requests", {"Authorization": b"Bearer \xff"}, b"{}"),
    ("GET", "/v1/status", {"Authorization": b"Bearer \xff\xfe"}, b""),
    ("GET", "/v1/status", {"Authorization": b"Bearer " + TOKEN.encode() + b"\xff"}, b""),
    ("GET", "/v1/requests?pnfsid=%ED%A0%80&state=%FF", {}, b""),
    ("GET", "/v1/requests/latest?kind=recall&pnfsid=%ED%A0%80", {}, b""),
    ("GET", "/v1/catalog/copies/%ED%A0%80", {}, b""),
    ("GET", "/v1/tapes/%FF%FE", {}, b""),
    ("PATCH", "/v1/queues/%ED%A0%80", {}, b"{}"),
    ("POST", "/v1/catalog/import", {}, b'{"path": "/\\ud800"}'),
]  # fmt: skip


def raw_call(base: str, method: str, path: str, headers: dict[str, bytes], body: bytes) -> int:
    """One request written byte for byte (http.client would refuse to send these)."""
    host, port = base.removeprefix("http://").split(":")
    head = {
        b"Host": b"x",
        b"Authorization": f"Bearer {TOKEN}".encode(),
        b"Content-Type": b"application/json",
        b"Content-Length": str(len(body)).encode(),
    }
    head.update({k.encode(): v for k, v in headers.items()})
    lines = [f"{method} {path} HTTP/1.1".encode()] + [k + b": " + v for k, v in head.items()]
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        answer = b""
        while b"\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def test_inputs_that_gave_500_are_4xx(exposed: tuple[Daemon, str, Path]) -> None:
    daemon, base, _pool = exposed
    answers = {f"{m} {p} {h} {b[:60]!r}": raw_call(base, m, p, h, b) for m, p, h, b in ATTACKS}
    assert {k: v for k, v in answers.items() if not 400 <= v < 500} == {}
    assert daemon.alive()
    assert daemon.requests() == []
    logged = [e for e in daemon.events() if e.get("level") == "error" or "Traceback" in str(e)]
    assert logged == [], logged[:3]
    assert "Error handling request" not in daemon.log()


def fuzz_operation(operation: Any, base: str, headers: dict[str, str], failures: list[str]) -> int:
    """Run generated calls of one operation; record 5xx answers; return how many ran."""
    calls = 0

    @settings(
        max_examples=EXAMPLES, deadline=None, database=None,
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(case=operation.as_strategy())
    def fuzz(case: Any) -> None:
        nonlocal calls
        calls += 1
        response = case.call(base_url=base, headers=headers, timeout=30)
        if response.status_code >= 500 and response.status_code != 501:
            failures.append(
                f"{operation.method.upper()} {operation.path} -> {response.status_code}: "
                f"{response.text[:200]}"
            )

    fuzz()
    return calls


def test_fuzzed_api_never_answers_5xx(exposed: tuple[Daemon, str, Path]) -> None:
    daemon, base, pool = exposed
    doc = daemon.client().call("GET", "/openapi.json")
    schema = schemathesis.openapi.from_dict(doc)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    failures: list[str] = []
    calls = 0
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 10
    for operation in operations:
        calls += fuzz_operation(operation, base, headers, failures)
    assert failures == [], failures[:5]
    assert calls >= len(operations) * 5
    assert daemon.alive()
    # Bodies over the limit are refused without harm.
    big = json.dumps({"kind": "recall", "pnfsid": "AB", "path": "/x" * MAX_BODY}).encode()
    assert raw_post(base, "/v1/requests", big) == 413
    assert daemon.alive()
    # Whatever was recorded is whole: valid fields, and its 'submitted' event.
    roots = str(pool)
    for r in daemon.requests():
        assert r["kind"] in ("recall", "migrate", "remove"), r
        assert r["state"] in ("queued", "active", "done", "failed", "cancelled"), r
        if r["kind"] != "remove":
            assert PNFSID.match(r["pnfsid"]), r
            assert r["path"].startswith(roots + "/"), r
        if r["kind"] == "migrate":
            assert r["size"] >= 0 and r["storage_class"], r
    db = sqlite3.connect(daemon.db_url.split("///", 1)[1])
    try:
        orphans = db.execute(
            "SELECT id FROM requests WHERE id NOT IN "
            "(SELECT request_id FROM request_events WHERE reason = 'submitted')"
        ).fetchall()
    finally:
        db.close()
    assert orphans == []
    bad = [e for e in daemon.events() if e.get("event") in ("api.error", "scheduler.pass_crashed")]
    assert bad == [], bad[:3]
    print(f"fuzz: {calls} generated calls over {len(operations)} operations")
