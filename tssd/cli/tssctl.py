"""tssctl: the operator command line of tssd.

It talks to a running tssd over its HTTP API (docs/api.md) with the standard-library
client in :mod:`tssd.wire`, found like ``tss-hsm`` finds it: ``--tssd TARGET`` (socket
path or http(s) URL), else ``$TSSD_URL``, else ``$TSSD_HOME/tssd.sock``, else
``~/.local/state/tssd/tssd.sock``. Human tables by default; ``--json`` prints the API's
own JSON objects for scripts.

Exit codes:
  0    ok
  1    some requests failed or were cancelled, or another error
  2    usage error
  3    tssd unreachable (not running, wrong --tssd / TSSD_URL, or shutting down)
  4    not found (HTTP 404)
  5    conflict with the current state (HTTP 409)
  6    rejected as invalid (HTTP 400, or bad lines in a --file-list)
  130  interrupted (the requests already submitted stay in tssd)

Each subcommand is one function registered with :func:`command`; adding one (queues,
drives, tapes, ...) needs no change elsewhere.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO
from urllib.parse import urlencode

from tssd.cli import render
from tssd.wire import ApiError, Client, WireError, resolve_target

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_NOT_FOUND = 4
EXIT_CONFLICT = 5
EXIT_INVALID = 6
EXIT_INTERRUPTED = 130


def _epilog(doc: str | None) -> str:
    """--help shows the exit codes of the module docstring, kept in one place."""
    codes = (doc or "").partition("Exit codes:\n")[2].partition("\n\n")[0]
    return f"exit codes:\n{codes}\n\n{FINDING}"


FINDING = """\
tssd is found at --tssd, else $TSSD_URL, else $TSSD_HOME/tssd.sock,
else ~/.local/state/tssd/tssd.sock. Set TSSCTL_DEBUG=1 to see tracebacks."""
EPILOG = _epilog(__doc__)
HELP_LAYOUT: dict[str, Any] = {
    "epilog": EPILOG,
    "formatter_class": argparse.RawDescriptionHelpFormatter,
}
STATES = render.STATES
KINDS = ("recall", "migrate", "remove")
PAGE_MAX = 1000  # the API's largest page
BULK_CHUNK = 10_000
QUERY_CHUNK = 100_000  # the API's limit on ids per progress query
BULK_TIMEOUT_S = 300.0  # a bulk insert of 10,000 rows can take a while on a busy database
PIPE_REPORT_S = 5.0  # progress line interval when stderr is a file or a pipe
MAX_LISTED_FAILURES = 20
MAX_LISTED_BAD_LINES = 50

Runner = Callable[[argparse.Namespace, Client], int]
Arguments = Callable[[argparse.ArgumentParser], None]


# --- subcommand registry ------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    words: tuple[str, ...]  # ("requests", "list") for `tssctl requests list`
    help: str
    run: Runner
    add_arguments: Arguments | None = None


COMMANDS: list[Command] = []
GROUPS = {"requests": "list, show, cancel and retry requests"}


def command(name: str, help: str, arguments: Arguments | None = None) -> Callable[[Runner], Runner]:
    """Register ``run(args, client) -> exit code`` as ``tssctl <name>``."""

    def register(run: Runner) -> Runner:
        COMMANDS.append(Command(tuple(name.split()), help, run, arguments))
        return run

    return register


def _common_options() -> argparse.ArgumentParser:
    # SUPPRESS defaults let the options sit before or after the subcommand without the
    # subcommand's parser overwriting a value given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--tssd",
        metavar="TARGET",
        default=argparse.SUPPRESS,
        help="tssd socket path or http(s) URL (default: $TSSD_URL, $TSSD_HOME/tssd.sock)",
    )
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print the API's JSON"
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common_options()
    parser = argparse.ArgumentParser(
        prog="tssctl",
        description="Operator command line of tssd, the tape recall queue manager for dCache.",
        parents=[common],
        **HELP_LAYOUT,
    )
    top = parser.add_subparsers(dest="command_name", metavar="COMMAND", required=True)
    groups: dict[str, Any] = {}
    for cmd in COMMANDS:
        subparsers = top
        if len(cmd.words) > 1:
            if cmd.words[0] not in groups:
                groups[cmd.words[0]] = _add_group(top, cmd.words[0])
            subparsers = groups[cmd.words[0]]
        leaf = subparsers.add_parser(
            cmd.words[-1], help=cmd.help, description=cmd.help, parents=[common], **HELP_LAYOUT
        )
        if cmd.add_arguments:
            cmd.add_arguments(leaf)
        leaf.set_defaults(run=cmd.run)
    return parser


def _add_group(top: Any, name: str) -> Any:
    """The parser of `tssctl NAME ACTION ...`, e.g. `tssctl requests list`."""
    group = top.add_parser(name, help=GROUPS.get(name), description=GROUPS.get(name), **HELP_LAYOUT)
    return group.add_subparsers(dest=f"{name}_action", metavar="ACTION", required=True)


# --- entry point and error mapping -------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already reported
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    explicit = getattr(args, "tssd", None)
    try:
        client = Client(explicit)
    except WireError as exc:
        return fail(str(exc), EXIT_FAILED)
    try:
        result: int = args.run(args, client)
        return result
    except WireError as exc:
        return fail(unreachable_message(exc, explicit), EXIT_UNREACHABLE)
    except ApiError as exc:
        return fail(f"{exc.message} (HTTP {exc.status})", api_exit_code(exc.status))
    except KeyboardInterrupt:
        return fail("interrupted (requests already submitted stay in tssd)", EXIT_INTERRUPTED)
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away; Python would complain again at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_FAILED
    except Exception as exc:  # the CLI promises one line, never a traceback
        if os.environ.get("TSSCTL_DEBUG"):
            raise
        return fail(f"unexpected error: {type(exc).__name__}: {exc}", EXIT_FAILED)


def fail(message: str, code: int) -> int:
    print(f"tssctl: {message}", file=sys.stderr)
    return code


def api_exit_code(status: int) -> int:
    return {400: EXIT_INVALID, 404: EXIT_NOT_FOUND, 409: EXIT_CONFLICT}.get(
        status, EXIT_UNREACHABLE if status == 503 else EXIT_FAILED
    )


def target_origin(explicit: str | None, environ: dict[str, str] | os._Environ[str]) -> str:
    if explicit:
        return "from --tssd"
    if environ.get("TSSD_URL"):
        return "from TSSD_URL"
    if environ.get("TSSD_HOME"):
        return "from TSSD_HOME"
    return "the default location"


def unreachable_message(exc: WireError, explicit: str | None) -> str:
    target = resolve_target(explicit)
    cause = exc.__cause__
    if not isinstance(cause, OSError | http.client.HTTPException):
        return f"{exc} ({target_origin(explicit, os.environ)})"
    reasons: dict[type[Exception], str] = {
        FileNotFoundError: "no such socket",
        ConnectionRefusedError: "connection refused",
        PermissionError: "permission denied",
        TimeoutError: "timed out",
    }
    reason = reasons.get(type(cause), str(cause) or type(cause).__name__)
    return (
        f"cannot reach tssd at {target} ({target_origin(explicit, os.environ)}: {reason}); "
        "is `tssd serve` running? Point tssctl elsewhere with --tssd TARGET or TSSD_URL"
    )


def wants_json(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "json", False))


def emit_json(data: Any) -> None:
    print(json.dumps(data, indent=2))


# --- argument types ----------------------------------------------------------------

QUEUE_RE = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
PNFSID_RE = re.compile(r"[0-9A-Fa-f]{1,64}")


def positive(convert: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be more than 0: {text!r}")
        return value

    return parse


positive_int = positive(int)
positive_float = positive(float)


def queue_name(text: str) -> str:
    if not QUEUE_RE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"not a queue name ([A-Za-z0-9_.:-]{{1,64}}): {text!r}")
    return text


# --- status ------------------------------------------------------------------------


@command("status", "daemon, queues, drives, pending counts and throughput")
def status(args: argparse.Namespace, client: Client) -> int:
    data = client.call("GET", "/v1/status")
    if wants_json(args):
        emit_json(data)
    else:
        print(render.status(data))
    return EXIT_OK


# --- requests ----------------------------------------------------------------------


def _list_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state", choices=STATES)
    parser.add_argument("--kind", choices=KINDS)
    parser.add_argument("--queue", type=queue_name)
    parser.add_argument("--tape", metavar="VOLUME", help="requests for files on this volume")
    parser.add_argument("--pnfsid")
    parser.add_argument("--limit", type=positive_int, default=100, metavar="N", help="at most N")
    parser.add_argument("--all", action="store_true", help="page through every match")


@command("requests list", "list requests, oldest first", _list_arguments)
def requests_list(args: argparse.Namespace, client: Client) -> int:
    filters = {
        "state": args.state,
        "kind": args.kind,
        "queue": args.queue,
        "volume": args.tape,
        "pnfsid": args.pnfsid,
    }
    limit = None if args.all else args.limit
    found, after = fetch_requests(client, {k: v for k, v in filters.items() if v}, limit)
    if wants_json(args):
        emit_json({"requests": found, "next": after})
        return EXIT_OK
    print(render.request_table(found))
    if after is not None:
        more = f"more requests may match; use --all or --limit N (next id {after})"
        print(f"tssctl: {more}", file=sys.stderr)
    return EXIT_OK


def fetch_requests(
    client: Client, filters: dict[str, Any], limit: int | None
) -> tuple[list[dict[str, Any]], Any]:
    """Up to ``limit`` matches (all when None), and the API's ``next`` cursor after them."""
    found: list[dict[str, Any]] = []
    after: Any = None
    while True:
        page = PAGE_MAX if limit is None else min(PAGE_MAX, limit - len(found))
        query = {**filters, "limit": page} | ({"after": after} if after is not None else {})
        data = client.call("GET", "/v1/requests?" + urlencode(query))
        found.extend(data["requests"])
        after = data.get("next")
        if after is None or (limit is not None and len(found) >= limit):
            return found, after


def _id_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", type=positive_int, metavar="ID", help="request id")


@command("requests show", "every field of one request", _id_argument)
def requests_show(args: argparse.Namespace, client: Client) -> int:
    data = client.call("GET", f"/v1/requests/{args.id}")
    if wants_json(args):
        emit_json(data)
    else:
        print(render.request(data["request"]))
    return EXIT_OK


@command("requests cancel", "cancel a queued or active request", _id_argument)
def requests_cancel(args: argparse.Namespace, client: Client) -> int:
    return _change(args, client, "cancel")


@command("requests retry", "queue a failed or cancelled request again", _id_argument)
def requests_retry(args: argparse.Namespace, client: Client) -> int:
    return _change(args, client, "retry")


def _change(args: argparse.Namespace, client: Client, action: str) -> int:
    data = client.call("POST", f"/v1/requests/{args.id}/{action}")
    if wants_json(args):
        emit_json(data)
    else:
        print(f"request {args.id}: {data['request'].get('state')}")
    return EXIT_OK


# --- recall ------------------------------------------------------------------------


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
        help="one 'pnfsid path' per line ('-' = stdin); blank lines and # comments ignored;"
        " the path is everything after the first blank and may contain blanks",
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


def report_bad_lines(errors: list[str]) -> int:
    for message in errors[:MAX_LISTED_BAD_LINES]:
        print(message, file=sys.stderr)
    more = len(errors) - MAX_LISTED_BAD_LINES
    tail = f" ({more} more not shown)" if more > 0 else ""
    return fail(f"{len(errors)} bad lines{tail}; nothing submitted", EXIT_INVALID)


def display_name(path: str) -> str:
    return "<stdin>" if path == "-" else path


def read_file_list(path: str) -> tuple[list[Entry], list[str]]:
    """Parse the whole list first, so a bad line stops the run before anything is sent."""
    name = display_name(path)
    if path == "-":
        return parse_file_list(sys.stdin.buffer, name)
    with open(path, "rb") as fh:
        return parse_file_list(fh, name)


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
    if not PNFSID_RE.fullmatch(pnfsid):
        return f"pnfsid {pnfsid!r} is not 1 to 64 hex digits"
    if not path.startswith("/"):
        return f"path {path!r} is not absolute"
    return pnfsid, path


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


# --- waiting for a batch -----------------------------------------------------------


def query_batch(client: Client, ids: list[int]) -> dict[str, Any]:
    """One progress answer for any number of ids, merged from API-sized queries."""
    merged: dict[str, Any] = {
        "counts": dict.fromkeys(STATES, 0),
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
        if line.tty:  # end the rewritten line so the message does not overwrite it
            stream.write("\n")
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
        line.show(progress.line(unsuccessful), now, final=pending == 0)
        if pending == 0:
            return result
        time.sleep(interval)


if __name__ == "__main__":
    sys.exit(main())
