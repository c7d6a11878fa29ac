"""The JSON of a large bulk submit, decoded and encoded in pieces.

``json.loads`` and ``json.dumps`` are C code that holds the interpreter lock from start to
end: for one bulk of 100,000 requests (10 MB each way) that is about 100 ms during which
no other thread, the event loop included, runs, even when the call is made in a worker
thread. Decoded here one request at a time (``raw_decode``) and encoded a slice at a time,
the worker thread lets the loop in every few milliseconds. Small bodies take the plain
path: the pieces cost more than they save.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from tssd.api.inputs import _SURROGATE_ESCAPE, _too_deep, decode_json

#: Bodies up to this size are decoded whole (a few milliseconds at most).
PIECEWISE_ABOVE = 1 << 20
#: Results per ``json.dumps`` call of an answer.
ENCODE_SLICE = 1000
_DECODER = json.JSONDecoder()
T = TypeVar("T")
#: The one thread that decodes, validates and answers bulk submits. Four concurrent bulks
#: in four threads took the interpreter from the event loop in turn, each for up to the
#: switch interval (5 ms); the work is no faster in parallel anyway.
_WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tssd-bulk")


async def in_bulk_thread(fn: Callable[[], T]) -> T:
    """``fn()`` in the bulk worker thread."""
    return await asyncio.get_running_loop().run_in_executor(_WORKER, fn)


_HEAD = re.compile(r'[ \t\n\r]*\{[ \t\n\r]*"requests"[ \t\n\r]*:[ \t\n\r]*\[')


def decode_bulk(raw: bytes) -> Any:
    """The JSON value of a bulk submit body, as :func:`decode_json` decodes it (a body
    of another shape, or one its checks refuse or must walk, is decoded whole)."""
    if len(raw) <= PIECEWISE_ABOVE or _too_deep(raw) or _SURROGATE_ESCAPE.search(raw):
        return decode_json(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return decode_json(raw)  # its error
    entries = _entries(text)
    return decode_json(raw) if entries is None else {"requests": entries}


def _entries(text: str) -> list[Any] | None:
    """The elements of ``{"requests": [...]}`` decoded one by one, or None when *text*
    is not exactly that shape."""
    head = _HEAD.match(text)
    if head is None:
        return None
    entries: list[Any] = []
    pos = _skip(text, head.end())
    if text.startswith("]", pos):
        return entries if _closed(text, pos + 1) else None
    while True:
        try:
            value, pos = _DECODER.raw_decode(text, pos)
        except ValueError:
            return None
        entries.append(value)
        pos = _skip(text, pos)
        if text.startswith(",", pos):
            pos = _skip(text, pos + 1)
        elif text.startswith("]", pos):
            return entries if _closed(text, pos + 1) else None
        else:
            return None


def _skip(text: str, pos: int) -> int:
    """The position of the first character at or after *pos* that is not JSON space."""
    while pos < len(text) and text[pos] in " \t\n\r":
        pos += 1
    return pos


def _closed(text: str, pos: int) -> bool:
    """Whether *text* from *pos* is the object's closing brace and space only."""
    pos = _skip(text, pos)
    return text.startswith("}", pos) and _skip(text, pos + 1) == len(text)


def encode_results(results: Sequence[dict[str, Any]]) -> bytes:
    """``{"results": [...]}`` as ``json.dumps`` writes it, one slice per call."""
    parts = [
        json.dumps(list(results[i : i + ENCODE_SLICE]))[1:-1]
        for i in range(0, len(results), ENCODE_SLICE)
    ]
    return ('{"results": [' + ", ".join(p for p in parts if p) + "]}").encode()
