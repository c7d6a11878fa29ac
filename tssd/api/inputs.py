"""Decoding what a client sends: a body or a header tssd cannot represent is a 400.

Found by attack (docs/reliability.md, "No 500s"): JSON nested a thousand deep exhausted the
parser's recursion, a ``\\ud800`` escape decoded to a string that no database or log line
can encode, and a header byte that is not UTF-8 reached a comparison as a surrogate. Each
is the client's mistake; none may become a 500.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from aiohttp import web

from tssd.errors import InvalidRequest

#: Deeper bodies are refused: no tssd request nests more than a few levels.
MAX_DEPTH = 32
#: A JSON escape of a UTF-16 surrogate (the only way a lone one reaches a decoded string).
_SURROGATE_ESCAPE = re.compile(rb"\\[uU][dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def decode_json(raw: bytes) -> Any:
    """The JSON value of *raw*; :class:`InvalidRequest` for anything tssd cannot represent."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest(f"body is not UTF-8: {exc.reason} at byte {exc.start}") from None
    if _too_deep(raw):
        raise InvalidRequest(f"body nests deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(text)
    except RecursionError:
        raise InvalidRequest(f"body nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        raise InvalidRequest(f"body is not valid JSON: {exc}") from exc
    # Escapes are rare in real requests: only then is the decoded value walked.
    if _SURROGATE_ESCAPE.search(raw) and _has_surrogate(value):
        raise InvalidRequest("body holds a lone UTF-16 surrogate (\\ud800-\\udfff)")
    return value


def _too_deep(raw: bytes) -> bool:
    """Whether brackets nest deeper than MAX_DEPTH, without parsing (cheap, conservative).

    Brackets inside strings count too, so a string full of '[' may be refused here only if
    it also has more than MAX_DEPTH of them in a row before any closing one: never in a
    request tssd takes (paths, ids, names).
    """
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return False
    depth = 0
    for byte in raw.translate(None, _NOT_BRACKET):
        depth += 1 if byte in (0x5B, 0x7B) else -1
        if depth > MAX_DEPTH:
            return True
    return False


_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


def _has_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


class BodyTooLarge(InvalidRequest):
    """A body larger than the route takes (413): refused before it is read whole."""


async def read_body(
    request: web.Request, timeout_s: float, max_bytes: int | None = None, hint: str = ""
) -> bytes:
    """The whole body, or 408 when the client stops sending it for *timeout_s*.

    With *max_bytes*, a body announced or found larger is :class:`BodyTooLarge` after at
    most *max_bytes* + one chunk were read (its message ends with *hint*): a 64 MiB body
    to a single-request route held the event loop for 10 s when it was read and scanned
    whole.
    """
    try:
        if max_bytes is None:
            return await asyncio.wait_for(request.read(), timeout_s)
        return await asyncio.wait_for(_read_at_most(request, max_bytes, hint), timeout_s)
    except TimeoutError:
        raise web.HTTPRequestTimeout(reason="request body not received in time") from None


async def _read_at_most(request: web.Request, max_bytes: int, hint: str) -> bytes:
    announced = request.content_length
    if announced is not None and announced > max_bytes:
        raise _too_large(request, max_bytes, f"{announced} bytes announced", hint)
    chunks: list[bytes] = []
    size = 0
    while chunk := await request.content.readany():
        size += len(chunk)
        if size > max_bytes:
            raise _too_large(request, max_bytes, f"more than {max_bytes} bytes sent", hint)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(request: web.Request, max_bytes: int, found: str, hint: str) -> BodyTooLarge:
    where = f"{request.method} {request.path}"
    return BodyTooLarge(f"body too large for {where}: {found}, at most {max_bytes}{hint}")


def header_text(request: web.Request, name: str) -> str:
    """A header's value; a byte that is not UTF-8 makes it :class:`InvalidRequest`."""
    value = request.headers.get(name, "")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidRequest(f"header {name} is not UTF-8") from None
    return value
