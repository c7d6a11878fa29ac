"""``tssctl recall``: submit a file list as recalls, optionally following them to the end.

The list is parsed completely before anything is sent, submitted in bulk chunks, and with
``--wait`` followed through progress queries until every request has finished.
"""

from __future__ import annotations

import argparse
import os
import stat
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from tssd.cli import render
from tssd.cli.commands import (
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_OK,
    command,
    emit_json,
    fail,
    positive_float,
    queue_name,
    wants_json,
)
from tssd.printable import printable_line
from tssd.shim.names import MAX_PATH, PNFSID
from tssd.wire import ApiError, Client

BULK_CHUNK = 10_000
QUERY_CHUNK = 100_000  # the API's limit on ids per progress query
BULK_TIMEOUT_S = 300.0  # a bulk insert of 10,000 rows can take a while on a busy database
PIPE_REPORT_S = 5.0  # progress line interval when stderr is a file or a pipe
MAX_LISTED_FAILURES = 20
MAX_LISTED_BAD_LINES = 50
#: A list longer than this is refused: a typo (`/dev/zero`) must not fill the memory.
MAX_LINES = 1_000_000
#: The longest line: a pnfsid, a blank and the longest path the API takes, with room for
#: indentation and a trailing comment.
MAX_LINE_BYTES = MAX_PATH + 1024


class FileListError(Exception):
    """The file list as a whole cannot be used (not a regular file, too long a line)."""


@dataclass(frozen=True)
class Entry:
    line: int
    pnfsid: str
    path: str


def _recall_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--file-list",
        required=True,
        metavar="FILE",
        help="a regular file with one 'pnfsid path' per line ('-' = stdin); blank lines and #"
        " comments ignored; the path is everything after the first blank and may contain"
        f" blanks; at most {MAX_LINES:,} lines of {MAX_LINE_BYTES:,} bytes",
    )
    parser.add_argument("--queue", type=queue_name, help="queue (default: the daemon's choice)")
    parser.add_argument("--priority", type=int, metavar="N", help="priority within the queue")
    parser.add_argument("--wait", action="store_true", help="show progress until all finish")
    parser.add_argument(
        "--interval", type=positive_float, default=1.0, metavar="S", help="--wait poll period"
    )


@command("recall", "recall a list of files from tape", _recall_arguments)
def recall(args: argparse.Namespace, client: Client) -> int:
    try:
        entries, errors = read_file_list(args.file_list)
    except OSError as exc:
        return fail(f"cannot read {args.file_list}: {exc.strerror or exc}", EXIT_FAILED)
    except FileListError as exc:
        return fail(f"{display_name(args.file_list)}: {exc}; nothing submitted", EXIT_INVALID)
    if errors:
        return report_bad_lines(errors)
    if not entries:
        return fail(f"{display_name(args.file_list)} lists no files", EXIT_OK)
    results = submit_recalls(client, entries, args)
    ids = list(dict.fromkeys(r["request"]["id"] for r in results))
    created = sum(1 for r in results if r.get("created"))
    summary = {"submitted": len(results), "created": created, "attached": len(results) - created}
    if not wants_json(args):
        print(f"{len(results)} recalls submitted: {created} new, {summary['attached']} attached")
    final = wait_for(client, ids, args.interval, sys.stderr) if args.wait else None
    if wants_json(args):
        emit_json({**summary, "ids": ids} | ({"result": final} if final else {}))
    if final is None or final["counts"].get("done", 0) == len(ids):
        return EXIT_OK
    return EXIT_FAILED


# --- the file list -------------------------------------------------------------------


def report_bad_lines(errors: list[str]) -> int:
    for message in errors[:MAX_LISTED_BAD_LINES]:
        print(printable_line(message), file=sys.stderr)
    more = len(errors) - MAX_LISTED_BAD_LINES
    tail = f" ({more} more not shown)" if more > 0 else ""
    return fail(f"{len(errors)} bad lines{tail}; nothing submitted", EXIT_INVALID)


def display_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


def read_file_list(path: str) -> tuple[list[Entry], list[str]]:
    """Parse the whole list first, so a bad line stops the run before anything is sent."""
    name = display_name(path)
    if path == "-":
        return parse_file_list(bounded_lines(sys.stdin.buffer), name)
    # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise FileListError("not a regular file (a FIFO, device or directory)")
    os.set_blocking(fd, True)
    with open(fd, "rb") as fh:
        return parse_file_list(bounded_lines(fh), name)


def bounded_lines(stream: Any) -> Iterator[bytes]:
    """The lines of *stream*, refusing a line or a list beyond the bounds."""
    for number in range(1, MAX_LINES + 2):
        raw: bytes = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        if number > MAX_LINES:
            raise FileListError(f"more than {MAX_LINES:,} lines; split the list")
        if len(raw) > MAX_LINE_BYTES:
            raise FileListError(f"line {number} is longer than {MAX_LINE_BYTES:,} bytes")
        yield raw


def parse_file_list(lines: Iterable[bytes], name: str) -> tuple[list[Entry], list[str]]:
    entries: list[Entry] = []
    errors: list[str] = []
    seen: dict[str, Entry] = {}
    for number, raw in enumerate(lines, 1):
        parsed = parse_line(raw)
        if parsed is None:
            continue
        if isinstance(parsed, str):
            errors.append(f"{name}:{number}: {parsed}")
            continue
        entry = Entry(number, *parsed)
        first = seen.setdefault(entry.pnfsid.upper(), entry)
        if first is entry:
            entries.append(entry)
        elif first.path != entry.path:
            errors.append(
                f"{name}:{number}: pnfsid {entry.pnfsid} already listed on line"
                f" {first.line} with another path"
            )
        # An exact repeat names the same recall: tssd would attach it anyway.
    return entries, errors


def parse_line(raw: bytes) -> tuple[str, str] | str | None:
    """(pnfsid, path), or the reason the line is bad, or None for nothing to do."""
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        return "not valid UTF-8"
    if not text or text.startswith("#"):
        return None
    fields = text.split(None, 1)
    if len(fields) < 2:
        return "expected 'pnfsid path'"
    pnfsid, path = fields
    if not PNFSID.fullmatch(pnfsid):
        return f"pnfsid {pnfsid!r} is not 1 to 64 hex digits"
    if not path.startswith("/"):
        return f"path {path!r} is not absolute"
    return pnfsid, path


# --- submitting ----------------------------------------------------------------------


def submit_recalls(
    client: Client, entries: list[Entry], args: argparse.Namespace
) -> list[dict[str, Any]]:
    extra: dict[str, Any] = {}
    if args.queue is not None:
        extra["queue"] = args.queue
    if args.priority is not None:
        extra["priority"] = args.priority
    results: list[dict[str, Any]] = []
    for start in range(0, len(entries), BULK_CHUNK):
        chunk = entries[start : start + BULK_CHUNK]
        body = {"requests": [recall_body(e, extra) for e in chunk]}
        try:
            data = client.call("POST", "/v1/requests/bulk", body, timeout=BULK_TIMEOUT_S)
        except ApiError:
            if results:
                done = f"lines up to {chunk[0].line - 1} ({len(results)} recalls) were submitted"
                print(f"tssctl: {done} before this error", file=sys.stderr)
            raise
        results.extend(data["results"])
    return results


def recall_body(entry: Entry, extra: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "recall", "pnfsid": entry.pnfsid, "path": entry.path, **extra}


# --- waiting for a batch -------------------------------------------------------------


def query_batch(client: Client, ids: list[int]) -> dict[str, Any]:
    """One progress answer for any number of ids, merged from API-sized queries."""
    merged: dict[str, Any] = {
        "counts": dict.fromkeys(render.STATES, 0),
        "bytes_total": 0,
        "bytes_done": 0,
        "missing": [],
        "failed": [],
    }
    for start in range(0, len(ids), QUERY_CHUNK):
        part = client.call("POST", "/v1/requests/query", {"ids": ids[start : start + QUERY_CHUNK]})
        for state, n in (part.get("counts") or {}).items():
            merged["counts"][state] = merged["counts"].get(state, 0) + n
        merged["bytes_total"] += part.get("bytes_total") or 0
        merged["bytes_done"] += part.get("bytes_done") or 0
        merged["missing"].extend(part.get("missing") or [])
        merged["failed"].extend(part.get("failed") or [])
    return merged


def wait_for(client: Client, ids: list[int], interval: float, stream: TextIO) -> dict[str, Any]:
    progress = render.Progress(files_total=len(ids))
    line = render.ProgressLine(stream, PIPE_REPORT_S)
    try:
        result = _poll_until_finished(client, ids, interval, progress, line)
    except KeyboardInterrupt:
        line.close()
        raise
    elapsed = time.monotonic() - progress.started
    summary = render.batch_summary(result, len(ids), elapsed, MAX_LISTED_FAILURES)
    stream.write(summary + "\n")
    return result


def _poll_until_finished(
    client: Client,
    ids: list[int],
    interval: float,
    progress: render.Progress,
    line: render.ProgressLine,
) -> dict[str, Any]:
    while True:
        result = query_batch(client, ids)
        counts = result["counts"]
        pending = counts.get("queued", 0) + counts.get("active", 0)
        unsuccessful = len(ids) - pending - counts.get("done", 0)
        now = time.monotonic()
        progress.update(len(ids) - pending, result["bytes_done"], result["bytes_total"], now)
        line.show(progress.line(unsuccessful), now, pending == 0, len(ids) - pending, len(ids))
        if pending == 0:
            return result
        time.sleep(interval)
