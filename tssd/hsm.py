"""``tss-hsm``: the script a dCache pool runs to put, get and remove files via tssd.

One dCache call becomes one tssd request (one per URI for ``remove``) and its outcome the exit
code dCache expects (contracts section 2). dCache forks it for every file, so it imports only
the standard library and :mod:`tssd.wire`. Layout: parsing (pure, returns a :class:`Call`),
actions, waiting, exit-code mapping in :func:`main`.
"""

from __future__ import annotations

import errno
import math
import os
import re
import signal
import sys
import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass
from types import FrameType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tssd import wire

EXIT_OK = 0
EXIT_OTHER = 1
EXIT_PERMANENT = 31
EXIT_INVALID = 32
EXIT_NO_SPACE = 41
EXIT_READ = 42
EXIT_WRITE = 43
EXIT_PENDING = 72
EXIT_TERMINATED = 143

# dCache never retries 30-39 and disables the pool on 41-43 for a get, so only the codes the
# API documents pass through; anything else a daemon might invent becomes a retryable 1.
PASS_THROUGH = frozenset({EXIT_PERMANENT, EXIT_INVALID, EXIT_NO_SPACE, EXIT_READ, EXIT_WRITE})

VERBS = ("put", "get", "remove")
MODES = ("block", "poll")
FINISHED = frozenset({"done", "failed", "cancelled"})
WAIT_S = 30
# The HTTP read must outlive the server-side wait, or every quiet wait looks like an outage.
WAIT_READ_S = WAIT_S + 30
BACKOFF_FIRST_S = 0.2
BACKOFF_MAX_S = 5.0
DEFAULT_RECONNECT_S = 3600.0

_PNFSID = re.compile(r"[0-9A-Fa-f]{1,64}")
_INT = re.compile(r"[+-]?[0-9]{1,19}")  # bounded: int() refuses huge digit strings
_ADLER32 = re.compile(r"[0-9A-Fa-f]{1,8}")

HELP = """\
usage: tss-hsm put <pnfsid> <path> -si=<storage info> [-key=value ...]
       tss-hsm get <pnfsid> <path> -si=<storage info> -uri=<uri> [-uri=<uri> ...] [-key=value ...]
       tss-hsm remove -uri=<uri> [-uri=<uri> ...] [-key=value ...]

The dCache HSM script of tssd (hsm create osm <name> script -command=.../tss-hsm ...).
  put      migrate the pool file <path> to tape; prints its tape URI on stdout
  get      recall the file to <path>; writes <path>.crcval with its adler32
  remove   delete the tape copy of each -uri= (named by its bfid= parameter)

Options, as -key=value (a bare -key is empty, i.e. unset; unknown options are ignored):
  -tssd=TARGET          socket path, unix:PATH or http(s):// URL; default $TSSD_URL,
                        else $TSSD_HOME/tssd.sock, else ~/.local/state/tssd/tssd.sock
  -mode=block|poll      block (default) waits for the request; poll submits (or attaches
                        to the open request) and exits 72 until it has finished
  -queue=NAME           tssd queue (default: the daemon's)
  -priority=INT         priority within the queue
  -hsmType=TYPE         URI scheme (default: hsm= of the storage info, else osm)
  -hsmInstance=NAME     URI authority (default: that of the first -uri=, else the type)
  -reconnect-timeout=S  how long to wait for a restarting tssd mid-wait (default 3600)
  -si=STORAGEINFO       from dCache: size=..;sClass=..;flag-c=1:<adler32>;store=..;...
  -uri=URI              a copy on tape: <type>://<instance>/?store=..&group=..&bfid=..
Environment: TSSD_URL, TSSD_HOME (see -tssd), TSSD_TOKEN_FILE (API bearer token).

Exit codes: 0 done; 1 tssd unreachable or other failure (dCache retries); 31 permanent
backend failure; 32 invalid arguments; 41 no space on the destination; 42 source
unreadable; 43 destination unwritable; 72 in progress (poll mode); 143 SIGTERM (the
request stays in tssd and the next call attaches to it). stdout carries only put's URI;
every diagnostic is one line on stderr.
"""


class HsmExit(Exception):
    """Ends the call with ``code``; ``message`` is its one diagnostic line."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class UsageError(HsmExit):
    """The arguments or the storage info are invalid (exit 32)."""

    def __init__(self, message: str) -> None:
        super().__init__(EXIT_INVALID, message)


class Terminated(BaseException):
    """SIGTERM. A BaseException so that no ``except Exception`` on the way can swallow it."""


@dataclass(frozen=True)
class StorageInfo:
    """The parts of dCache's storage info string that tssd needs."""

    size: int
    storage_class: str | None = None
    hsm: str | None = None
    store: str | None = None
    group: str | None = None
    adler32: str | None = None
    locations: tuple[str, ...] = ()


@dataclass(frozen=True)
class Location:
    """One ``-uri=``: a tape copy as ``put`` once printed it."""

    uri: str
    bfid: str
    instance: str


@dataclass(frozen=True)
class Transfer:
    """The file a put or get moves."""

    pnfsid: str
    path: str
    si: StorageInfo


@dataclass(frozen=True)
class Options:
    tssd: str | None = None
    mode: str = "block"
    queue: str | None = None
    priority: int | None = None
    hsm_type: str | None = None
    hsm_instance: str | None = None
    reconnect_timeout: float = DEFAULT_RECONNECT_S


@dataclass(frozen=True)
class Call:
    """A parsed invocation; ``transfer`` is set for put and get."""

    verb: str
    options: Options
    uris: tuple[Location, ...] = ()
    transfer: Transfer | None = None


def parse_args(argv: Sequence[str]) -> Call:
    """Parse one dCache call. Raises :class:`UsageError` and nothing else."""
    positionals, options = split_argv(argv)
    if not positionals:
        raise UsageError("missing command: expected put, get or remove")
    verb, rest = positionals[0], positionals[1:]
    if verb not in VERBS:
        raise UsageError(f"unknown command {verb!r}: expected put, get or remove")
    uris = tuple(parse_location(uri) for uri in options.get("uri", []))
    parsed = parse_options(options)
    if verb != "remove":
        return Call(verb, parsed, uris, transfer=parse_transfer(verb, rest, options))
    if rest:
        raise UsageError(f"unexpected argument {rest[0][:80]!r}")
    if not uris:
        raise UsageError("remove needs at least one -uri=")
    return Call(verb, parsed, uris)


def split_argv(argv: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Split into positionals and ``-key[=value]`` options (every value kept, in order)."""
    positionals: list[str] = []
    options: dict[str, list[str]] = {}
    for arg in argv:
        if arg.startswith("-") and len(arg) > 1:
            key, _, value = arg.lstrip("-").partition("=")
            options.setdefault(key, []).append(value)
        else:
            positionals.append(arg)
    return positionals, options


def _last(options: dict[str, list[str]], key: str) -> str | None:
    # An empty value (bare -key) means "not set", as an emptied `hsm set` line would.
    values = options.get(key)
    return values[-1] if values and values[-1] else None


def parse_options(options: dict[str, list[str]]) -> Options:
    mode = _last(options, "mode") or "block"
    if mode not in MODES:
        raise UsageError(f"-mode must be block or poll, not {mode!r}")
    return Options(
        tssd=_last(options, "tssd"),
        mode=mode,
        queue=_last(options, "queue"),
        priority=_priority(_last(options, "priority")),
        hsm_type=_last(options, "hsmType"),
        hsm_instance=_last(options, "hsmInstance"),
        reconnect_timeout=_seconds(_last(options, "reconnect-timeout")),
    )


def _priority(text: str | None) -> int | None:
    if text is None:
        return None
    if not _INT.fullmatch(text):
        raise UsageError(f"-priority must be an integer, not {text!r}")
    return int(text)


def _seconds(text: str | None) -> float:
    if text is None:
        return DEFAULT_RECONNECT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"-reconnect-timeout must be a number of seconds, not {text!r}")
    return value


def parse_pnfsid(text: str) -> str:
    if not _PNFSID.fullmatch(text):
        raise UsageError(f"pnfsid {text[:80]!r} is not 1 to 64 hex digits")
    return text


def parse_transfer(verb: str, rest: list[str], options: dict[str, list[str]]) -> Transfer:
    if len(rest) < 2:
        raise UsageError(f"{verb} needs <pnfsid> <path>")
    if len(rest) > 2:
        raise UsageError(f"unexpected argument {rest[2][:80]!r}")
    pnfsid, path = parse_pnfsid(rest[0]), rest[1]
    if not path:
        raise UsageError("the path is empty")
    si = options.get("si")
    if si is None:
        raise UsageError(f"{verb} needs -si=<storage info>")
    return Transfer(pnfsid, path, parse_storage_info(si[-1]))


def parse_location(uri: str) -> Location:
    try:
        parts = urlsplit(uri)
        bfids = parse_qs(parts.query).get("bfid")
    except ValueError as exc:
        raise UsageError(f"malformed -uri {uri[:200]!r}: {exc}") from exc
    if not bfids or not bfids[0]:
        raise UsageError(f"-uri {uri[:200]!r} has no bfid")
    return Location(uri, bfids[0], parts.netloc)


def parse_storage_info(text: str) -> StorageInfo:
    """Parse ``key=value;`` pairs and bare ``uri;`` locations as dCache joins them."""
    keys: dict[str, str] = {}
    locations: list[str] = []
    for entry in text.split(";"):
        if _is_uri(entry):
            locations.append(entry)
        elif "=" in entry:
            key, _, value = entry.partition("=")
            keys[key] = value
    store, group = keys.get("store") or None, keys.get("group") or None
    return StorageInfo(
        size=_size(keys.get("size")),
        storage_class=_storage_class(keys.get("sClass"), store, group),
        hsm=keys.get("hsm") if keys.get("hsm") not in (None, "", "-") else None,
        store=store,
        group=group,
        adler32=_flag_adler32(keys.get("flag-c")),
        locations=tuple(locations),
    )


def _is_uri(entry: str) -> bool:
    # Values may contain "://" (a path=), so only an entry whose scheme precedes any "=" counts.
    scheme_end = entry.find("://")
    return scheme_end > 0 and "=" not in entry[:scheme_end]


def _size(text: str | None) -> int:
    if text is None:
        raise UsageError("storage info has no size=")
    if not _INT.fullmatch(text):
        raise UsageError(f"storage info size {text[:80]!r} is not an integer")
    size = int(text)
    if size < 0:
        raise UsageError(f"storage info size {size} is negative")
    return size


def _storage_class(sclass: str | None, store: str | None, group: str | None) -> str | None:
    if sclass and sclass != "-":
        return sclass
    return f"{store}:{group}" if store and group else None


def _flag_adler32(value: str | None) -> str | None:
    """The adler32 of ``flag-c`` (type 1), 8 lower-case hex digits; other types are ignored."""
    for item in (value or "").split(","):
        ctype, _, digits = item.partition(":")
        if ctype.strip() != "1":
            continue
        if not _ADLER32.fullmatch(digits):
            raise UsageError(f"flag-c adler32 {digits[:80]!r} is not 1 to 8 hex digits")
        return digits.lower().zfill(8)
    return None


def run(call: Call) -> int:
    client = wire.Client(call.options.tssd)
    if call.transfer is None:
        return do_remove(client, call)
    action = do_put if call.verb == "put" else do_get
    return action(client, call, call.transfer)


def do_put(client: wire.Client, call: Call, transfer: Transfer) -> int:
    path = os.path.abspath(transfer.path)
    check_source(path, transfer.si.size)
    body = _compact(_file_body("migrate", call, transfer, path))
    request = await_request(client, submit(client, body), call.options)
    if request is None:
        return EXIT_PENDING
    uri = request.get("uri")
    if not isinstance(uri, str) or not uri or "\n" in uri:
        raise HsmExit(EXIT_OTHER, f"request {request['id']} is done but has no usable URI")
    sys.stdout.write(uri + "\n")
    sys.stdout.flush()
    return EXIT_OK


def do_get(client: wire.Client, call: Call, transfer: Transfer) -> int:
    path = os.path.abspath(transfer.path)
    check_destination(path)
    request = await_request(client, submit(client, get_body(call, transfer, path)), call.options)
    if request is None:
        return EXIT_PENDING
    return finish_recall(request, path, transfer.si)


def do_remove(client: wire.Client, call: Call) -> int:
    submitted = [submit(client, remove_body(call, location)) for location in call.uris]
    finished = [await_request(client, request, call.options) for request in submitted]
    return EXIT_PENDING if any(request is None for request in finished) else EXIT_OK


def check_source(path: str, size: int) -> None:
    try:
        with open(path, "rb") as fh:
            actual = os.fstat(fh.fileno()).st_size
    except OSError as exc:
        raise HsmExit(EXIT_READ, f"cannot read source {path}: {exc.strerror or exc}") from exc
    if actual != size:
        raise HsmExit(
            EXIT_READ, f"source {path} has {actual} bytes but the storage info says {size}"
        )


def check_destination(path: str) -> None:
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        raise HsmExit(EXIT_WRITE, f"destination directory {directory} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise HsmExit(EXIT_WRITE, f"destination directory {directory} is not writable")


def finish_recall(request: dict[str, Any], path: str, si: StorageInfo) -> int:
    size, actual = request.get("size"), request.get("adler32")
    check_delivered(request["id"], path, size if type(size) is int else si.size)
    if not isinstance(actual, str) or not _ADLER32.fullmatch(actual):
        raise HsmExit(EXIT_OTHER, f"request {request['id']} is done but reports no adler32")
    actual = actual.lower().zfill(8)
    if si.adler32 is not None and actual != si.adler32:
        # No .crcval: dCache only reads it after exit 0, so it would be litter in the pool.
        raise HsmExit(
            EXIT_PERMANENT,
            f"adler32 of recalled {path} is {actual} but flag-c says {si.adler32}",
        )
    write_crcval(path, actual)
    return EXIT_OK


def check_delivered(request_id: int, path: str, size: int) -> None:
    # The daemon said done, so a missing or short file is its mistake, not the pool disk's:
    # exit 1 lets dCache retry instead of disabling the pool as 43 would.
    try:
        actual = os.stat(path).st_size
    except OSError as exc:
        raise HsmExit(
            EXIT_OTHER, f"request {request_id} is done but {path} is unusable: {exc.strerror}"
        ) from exc
    if actual != size:
        raise HsmExit(
            EXIT_OTHER, f"request {request_id} is done but {path} has {actual} bytes, not {size}"
        )


def write_crcval(path: str, adler32: str) -> None:
    # Written under a temporary name so dCache never reads a half-written checksum.
    target = path + ".crcval"
    temporary = f"{target}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="ascii") as fh:
            fh.write(adler32 + "\n")
        os.replace(temporary, target)
    except OSError as exc:
        code = EXIT_NO_SPACE if exc.errno == errno.ENOSPC else EXIT_WRITE
        raise HsmExit(code, f"cannot write {target}: {exc.strerror or exc}") from exc
    finally:
        with suppress(OSError):
            os.unlink(temporary)


def _compact(body: dict[str, Any]) -> dict[str, Any]:
    # Unset fields are left out so the daemon applies its own defaults.
    return {key: value for key, value in body.items() if value is not None}


def _file_body(kind: str, call: Call, transfer: Transfer, path: str) -> dict[str, Any]:
    si, options = transfer.si, call.options
    hsm_type = options.hsm_type or si.hsm or "osm"
    # dCache passes only URIs whose authority is this pool's HSM instance name.
    from_uri = call.uris[0].instance if call.uris else None
    return {
        "kind": kind,
        "pnfsid": transfer.pnfsid,
        "path": path,
        "size": si.size,
        "storage_class": si.storage_class,
        "checksum": si.adler32,
        "hsm_type": hsm_type,
        "hsm_instance": options.hsm_instance or from_uri or hsm_type,
        "store": si.store,
        "group": si.group,
        "queue": options.queue,
        "priority": options.priority,
    }


def get_body(call: Call, transfer: Transfer, path: str) -> dict[str, Any]:
    # Without -uri= the storage info's own locations are the best hints there are.
    hints = [location.uri for location in call.uris] or list(transfer.si.locations)
    return _compact({**_file_body("recall", call, transfer, path), "uris": hints or None})


def remove_body(call: Call, location: Location) -> dict[str, Any]:
    return _compact(
        {
            "kind": "remove",
            "uris": [location.uri],
            "bfid": location.bfid,
            "queue": call.options.queue,
            "priority": call.options.priority,
        }
    )


def submit(client: wire.Client, body: dict[str, Any]) -> dict[str, Any]:
    """POST the request; tssd attaches a repeated submit to the open request."""
    try:
        answer = client.call("POST", "/v1/requests", body)
    except wire.WireError as exc:
        raise HsmExit(EXIT_OTHER, str(exc)) from exc
    return request_of(answer)


def request_of(answer: dict[str, Any]) -> dict[str, Any]:
    request = answer.get("request")
    if not isinstance(request, dict) or type(request.get("id")) is not int:
        raise HsmExit(EXIT_OTHER, "tssd answered without a request")
    return request


def await_request(
    client: wire.Client, request: dict[str, Any], options: Options
) -> dict[str, Any] | None:
    """The done request, or None when poll mode leaves it open. Raises if it did not succeed.

    Poll mode relies on submit being idempotent: the next call finds the same request.
    """
    if request.get("state") not in FINISHED:
        if options.mode == "poll":
            return None
        request = wait_block(client, request["id"], options.reconnect_timeout)
    return ensure_done(request)


def wait_block(client: wire.Client, request_id: int, limit_s: float) -> dict[str, Any]:
    pacing = Reconnect(request_id, limit_s)
    path = f"/v1/requests/{request_id}/wait?timeout={WAIT_S}"
    while True:
        try:
            answer = client.call("GET", path, timeout=WAIT_READ_S)
        except wire.WireError as exc:
            pacing.lost(str(exc))
            continue
        except wire.ApiError as exc:
            if exc.status != 503:  # 503: tssd is shutting down, i.e. about to restart
                raise
            pacing.lost(exc.message)
            continue
        pacing.back()
        request = request_of(answer)
        if answer.get("finished") is True or request.get("state") in FINISHED:
            return request


class Reconnect:
    """Paces retries while tssd is away (a restart) and gives up after ``limit_s``."""

    def __init__(self, request_id: int, limit_s: float) -> None:
        self.request_id = request_id
        self.limit_s = limit_s
        self.delay = BACKOFF_FIRST_S
        self.since: float | None = None

    def lost(self, reason: str) -> None:
        now = time.monotonic()
        if self.since is None:
            self.since = now
            diag(f"lost tssd while waiting for request {self.request_id} ({reason}); retrying")
        left = self.since + self.limit_s - now
        if left <= 0:
            raise HsmExit(
                EXIT_OTHER,
                f"tssd unreachable for {self.limit_s:g} s while waiting for request "
                f"{self.request_id}: {reason}",
            )
        time.sleep(min(self.delay, left))
        self.delay = min(self.delay * 2, BACKOFF_MAX_S)

    def back(self) -> None:
        if self.since is not None:
            diag(f"reconnected to tssd; still waiting for request {self.request_id}")
        self.since = None
        self.delay = BACKOFF_FIRST_S


def ensure_done(request: dict[str, Any]) -> dict[str, Any]:
    state, request_id = request.get("state"), request["id"]
    if state == "done":
        return request
    if state == "failed":
        reason = request.get("error") or "no reason given"
        code = request.get("error_code")
        code = code if type(code) is int and code in PASS_THROUGH else EXIT_OTHER
        raise HsmExit(code, f"request {request_id} failed: {reason}")
    if state == "cancelled":
        raise HsmExit(EXIT_OTHER, f"request {request_id} was cancelled in tssd")
    raise HsmExit(EXIT_OTHER, f"request {request_id} is in unexpected state {state!r}")


def api_exit_code(exc: wire.ApiError) -> int:
    if exc.exit_code in PASS_THROUGH:
        return exc.exit_code
    return EXIT_INVALID if exc.status == 400 else EXIT_OTHER


def diag(message: str) -> None:
    """Write one diagnostic line: dCache logs stderr line by line."""
    with suppress(OSError, ValueError):
        sys.stderr.write("tss-hsm: " + " ".join(message.split()) + "\n")
        sys.stderr.flush()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # A second SIGTERM during the farewell line must kill us, not raise out of main.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise Terminated


def _dispatch(args: Sequence[str]) -> int:
    if "--help" in args or args[:1] in (["-h"], ["help"]):
        sys.stdout.write(HELP)
        return EXIT_OK
    try:
        return run(parse_args(args))
    except HsmExit as exc:
        diag(exc.message)
        return exc.code
    except wire.ApiError as exc:
        diag(f"tssd refused ({exc.status} {exc.type}): {exc.message}")
        return api_exit_code(exc)
    except wire.WireError as exc:
        diag(str(exc))
        return EXIT_OTHER


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``tss-hsm``; returns the exit code for dCache."""
    args = list(sys.argv[1:] if argv is None else argv)
    previous: Any = signal.SIG_DFL
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
        return _dispatch(args)
    except Terminated:
        diag("terminated by SIGTERM (dCache timeout); the request stays in tssd")
        return EXIT_TERMINATED
    except BaseException as exc:  # a traceback would reach dCache as many lines of noise
        diag(f"internal error: {type(exc).__name__}: {exc}")
        return EXIT_OTHER
    finally:
        with suppress(Terminated, ValueError, TypeError):
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
