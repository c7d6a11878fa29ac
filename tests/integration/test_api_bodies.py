"""Bodies of single-request calls are bounded (a 64 MiB body to ``/v1/requests``,
``/obtain`` or ``/query`` held the event loop 10-14 s while it was read, scanned and
decoded): past the bound the answer is 413 before the body is read whole, and the
daemon answers other calls meanwhile."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tssd.api.server import make_app
from tssd.app import build_services
from tssd.config import ApiSettings, DatabaseSettings, Settings, SimSettings
from tssd.services import Services

BIG = 64 * 1024 * 1024
CHUNK = 64 * 1024


@pytest.fixture
async def svc(tmp_path: Path, sqlite_url: str) -> AsyncIterator[Services]:
    settings = Settings(
        home=str(tmp_path / "home"),
        database=DatabaseSettings(url=sqlite_url),
        sim=SimSettings(drives=0, tapes=0),
        api=ApiSettings(pool_roots="/"),
    )
    async with build_services(settings) as services:
        yield services


async def _answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, object]]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return status, json.loads(await reader.readexactly(length))


@pytest.mark.parametrize("path", ["/v1/requests", "/v1/requests/obtain", "/v1/requests/query"])
async def test_an_announced_large_body_is_refused_before_it_is_sent(
    svc: Services, path: str
) -> None:
    async with TestClient(TestServer(make_app(svc))) as client:
        reader, writer = await asyncio.open_connection(client.host, client.port)
        writer.write(
            f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            f"Content-Length: {BIG}\r\n\r\n".encode()
            + b'{"kind": "recall", "path": "'
            + b"a" * CHUNK
        )
        await writer.drain()
        # Only the head and 64 kB of the 64 MiB were sent: the answer comes all the same.
        status, body = await _answer(reader)
        writer.close()
        assert status == 413
        error = body["error"]
        assert isinstance(error, dict) and error["type"] == "BodyTooLarge"
        assert f"{BIG} bytes announced" in error["message"]
        if path != "/v1/requests/query":
            assert "api.max_request_body_bytes" in error["message"]


async def test_a_streamed_large_body_is_cut_off_and_other_calls_are_answered(
    svc: Services,
) -> None:
    limit = svc.settings.api.max_request_body_bytes
    async with TestClient(TestServer(make_app(svc))) as client:
        reader, writer = await asyncio.open_connection(client.host, client.port)
        writer.write(
            b"POST /v1/requests HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        answered = asyncio.create_task(_answer(reader))
        sent = 0
        payload = b'{"kind": "recall", "path": "' + b"a" * (CHUNK - 28)
        while not answered.done() and sent < BIG:
            writer.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            sent += len(payload)
            payload = b"a" * CHUNK
            await writer.drain()
            # While the body streams in, the daemon answers another caller.
            assert (await client.get("/healthz")).status == 200
        status, body = await answered
        writer.close()
        assert status == 413
        assert sent < BIG, "the whole 64 MiB was taken in before the answer"
        error = body["error"]
        assert isinstance(error, dict) and f"more than {limit} bytes" in str(error["message"])


async def test_a_real_request_still_goes_in(svc: Services, tmp_path: Path) -> None:
    async with TestClient(TestServer(make_app(svc))) as client:
        body = {"kind": "recall", "pnfsid": "00AA0001", "path": str(tmp_path / "x")}
        answer = await client.post("/v1/requests", json=body)
        assert answer.status == 201, await answer.text()
        ids = {"ids": list(range(1, 100_001))}  # the most one query takes: over 256 kB
        answer = await client.post("/v1/requests/query", json=ids)
        assert answer.status == 200, await answer.text()
