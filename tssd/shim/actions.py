"""What tss-hsm does for put, get and remove, in block and in poll mode.

A call first looks up the newest request of its kind for the pnfsid. It adopts that request
when it is still open (a dCache retry, a poll, a restarted pool), or when it has finished,
belongs to this destination and its outcome has not been reported to anyone yet (the poll
after the recall finished; the ``get`` re-issued after a SIGTERM). Otherwise it submits.
Once it has told dCache an outcome, it marks the request reported, so that the next stage
of the same file, a week later, starts a new recall instead of reusing an old failure.
Without this, a poll arriving after its recall finished would start another recall, and
poll mode would never end.
"""

from __future__ import annotations

import errno
import os
import sys
import time

from tssd.printable import printable_line
from tssd.shim import fastclient
from tssd.shim.args import (
    EXIT_NO_SPACE,
    EXIT_OK,
    EXIT_OTHER,
    EXIT_PENDING,
    EXIT_PERMANENT,
    EXIT_READ,
    EXIT_WRITE,
    Call,
    HsmExit,
    Location,
    Options,
    Transfer,
)
from tssd.shim.poolfiles import check_destination, check_source, finish_recall, part_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    Request = dict[str, Any]
    T = TypeVar("T")

# dCache sets a flush failing with 30-39 aside for an admin and disables the pool when a
# stage fails with 41-43 (docs/dcache.md, "Exit codes"), so only the codes the API
# documents pass through; anything else a daemon might invent becomes a retryable 1.
PASS_THROUGH = frozenset({EXIT_PERMANENT, 32, EXIT_NO_SPACE, EXIT_READ, EXIT_WRITE})
FINISHED = frozenset({"done", "failed", "cancelled", "abandoned"})
WAIT_S = 30
# The HTTP read must outlive the server-side wait, or every quiet wait looks like an outage.
WAIT_READ_S = WAIT_S + 30
BACKOFF_FIRST_S = 0.2
BACKOFF_MAX_S = 5.0


def run(call: Call) -> int:
    client = fastclient.Client(call.options.tssd)
    deadline = time.monotonic() + call.options.reconnect_timeout
    while True:
        try:
            if call.transfer is None:
                return do_remove(client, call)
            action = do_put if call.verb == "put" else do_get
            return action(client, call, call.transfer)
        except fastclient.ApiError as exc:
            # 503: tssd admits no new request now (admission control, too many
            # connections). Poll mode: exit 72, dCache calls again after p:delay. Block
            # mode waits as for a restarting tssd, then exits 1 (dCache retries).
            if exc.status != 503:
                raise
            if call.options.mode == "poll":
                diag(f"tssd is busy, call again ({exc.message})")
                return EXIT_PENDING
            pause = min(max(exc.retry_after_s, 0.1), 60.0)
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)


class Unreachable(HsmExit):
    """tssd cannot be reached or is shutting down (a restart): "not yet", not a failure."""

    def __init__(self, message: str) -> None:
        super().__init__(EXIT_OTHER, message)


def reaching(options: Options, what: str, action: Callable[[], T]) -> T:
    """Run *action* (the call's first contact with tssd) through a tssd restart.

    Poll mode: an absent tssd is "not yet": exit 72, and dCache calls again after
    ``p:delay`` (its deadline still bounds the request). Block mode: retry with backoff
    for ``-reconnect-timeout`` seconds, as a waiting call does.
    """
    pacing: Reconnect | None = None
    while True:
        try:
            result = action()
        except Unreachable as exc:
            if options.mode == "poll":
                raise HsmExit(
                    EXIT_PENDING, f"{exc.message}; dCache calls again after p:delay"
                ) from exc
            if pacing is None:
                pacing = Reconnect(what, options.reconnect_timeout)
            pacing.lost(exc.message)
            continue
        if pacing is not None:
            pacing.back()
        return result


def do_put(client: fastclient.Client, call: Call, transfer: Transfer) -> int:
    path = os.path.abspath(transfer.path)
    check_source(path, transfer.si.size)
    body = _compact(_file_body("migrate", call, transfer, path))

    def same_file(request: Request) -> bool:
        checksum, expected = request.get("checksum"), transfer.si.adler32
        return request.get("size") == transfer.si.size and (
            checksum is None or expected is None or checksum == expected
        )

    found = reaching(call.options, "put", lambda: obtain(client, body, path, same_file))
    request = settle(client, found, call.options)
    if request is None:
        return EXIT_PENDING
    conclude(client, request, path, lambda: print_uri(request))
    return EXIT_OK


def print_uri(request: Request) -> None:
    # dCache records every line of stdout as a location (ScriptNearlineStorage.flush): a
    # control character (CR, ESC, ...) is never part of a URI tssd makes, so an answer
    # carrying one is refused, not handed to the namespace or to a terminal.
    uri = request.get("uri")
    if not isinstance(uri, str) or not uri or not uri.isprintable() or not uri.isascii():
        raise HsmExit(EXIT_OTHER, f"request {request['id']} is done but has no usable URI")
    sys.stdout.write(uri + "\n")
    sys.stdout.flush()


def do_get(client: fastclient.Client, call: Call, transfer: Transfer) -> int:
    path = os.path.abspath(transfer.path)
    check_destination(path)

    def delivered(request: Request) -> bool:
        size = request.get("size")
        expected = size if type(size) is int else transfer.si.size
        for candidate in (part_path(path), path):
            try:
                if os.stat(candidate).st_size == expected:
                    return True
            except OSError:
                pass
        return False

    body = get_body(call, transfer, path)
    found = reaching(call.options, "get", lambda: obtain(client, body, path, delivered))
    request = settle(client, found, call.options)
    if request is None:
        return EXIT_PENDING

    def finish() -> None:
        if not is_own(request, path):
            raise HsmExit(
                EXIT_OTHER,
                f"request {request['id']} recalled this pnfsid for another pool's path "
                f"{request.get('path')}, not {path}; dCache stages it again",
            )
        finish_recall(request, path, transfer.si)

    conclude(client, request, path, finish)
    return EXIT_OK


def do_remove(client: fastclient.Client, call: Call) -> int:
    # Always waits: removal is a catalogue operation that needs no drive, and tssd cannot
    # look a removal up by bfid cheaply, which poll mode would need to avoid submitting
    # a new removal on every poll.
    submitted = [submit_reaching(client, call, location) for location in call.uris]
    for request in submitted:
        finished = request
        if request.get("state") not in FINISHED:
            finished = wait_block(client, request["id"], call.options.reconnect_timeout)
        ensure_done(finished)
    return EXIT_OK


def submit_reaching(client: fastclient.Client, call: Call, location: Location) -> Request:
    return reaching(call.options, "remove", lambda: submit(client, remove_body(call, location)))


def obtain(
    client: fastclient.Client, body: Request, path: str, usable: Callable[[Request], bool]
) -> Request:
    """The request this call is about: adopted (see the module docstring) or submitted.

    One round trip: tssd decides in one transaction (``POST /v1/requests/obtain``). Only a
    finished recall whose file is not usable here, or a finished migration of a different
    file, costs a second call, which adopts open requests only and so submits.
    """
    request = post_obtain(client, {**body, "adopt": "finished"})
    if request is None:
        return legacy_obtain(client, body, path, usable)
    if request.get("state") == "done" and not usable(request):
        request = post_obtain(client, {**body, "adopt": "open"}) or submit(client, body)
    return request


def post_obtain(client: fastclient.Client, body: Request) -> Request | None:
    """POST /v1/requests/obtain; None from a tssd that predates it."""
    try:
        answer = client.call("POST", "/v1/requests/obtain", body)
    except fastclient.ApiError as exc:
        if exc.status in (404, 405):
            return None
        restarting(exc)
        raise
    except fastclient.WireError as exc:
        raise unreachable(exc) from exc
    return request_of(answer)


def unreachable(exc: fastclient.WireError) -> HsmExit:
    """tssd away is "not yet"; a socket the pool's user may not open is a setup fault (1)."""
    cause = exc.__cause__
    if isinstance(cause, OSError) and cause.errno in (errno.EACCES, errno.EPERM):
        return HsmExit(EXIT_OTHER, f"{exc} (add the pool's user to api.socket_group)")
    return Unreachable(str(exc))


def restarting(exc: fastclient.ApiError) -> None:
    """503: tssd is shutting down (about to restart) or has lost its database for now."""
    if exc.status == 503:
        raise Unreachable(f"tssd unavailable ({exc.message})") from exc


def legacy_obtain(
    client: fastclient.Client, body: Request, path: str, usable: Callable[[Request], bool]
) -> Request:
    """What :func:`obtain` does, in two round trips, with a tssd without the obtain route."""
    found = latest(client, body["kind"], body["pnfsid"])
    if found is not None:
        request, reported = found
        if request.get("state") not in FINISHED:
            return request
        if not reported and request.get("path") == path:
            state = request.get("state")
            if state != "done" or usable(request):
                return request
    return submit(client, body)


def latest(client: fastclient.Client, kind: str, pnfsid: str) -> tuple[Request, bool] | None:
    try:
        answer = client.call("GET", f"/v1/requests/latest?kind={kind}&pnfsid={pnfsid}")
    except fastclient.ApiError as exc:
        # 404: none yet; 405 and friends: a tssd from before this route, so just submit.
        if 400 < exc.status < 500:
            return None
        restarting(exc)
        raise
    except fastclient.WireError as exc:
        raise unreachable(exc) from exc
    return request_of(answer), answer.get("reported") is True


def settle(client: fastclient.Client, request: Request, options: Options) -> Request | None:
    """The finished request, or None when poll mode leaves it open for the next call."""
    if request.get("state") in FINISHED:
        return request
    if options.mode == "poll":
        return None
    return wait_block(client, request["id"], options.reconnect_timeout)


def conclude(
    client: fastclient.Client, request: Request, path: str, finish: Callable[[], None]
) -> None:
    """Decide the outcome (``finish`` raises :class:`HsmExit` on failure), mark it reported.

    Only a request for this call's *path* is marked: one this call attached to for another
    pool (the same pnfsid, another path) is that pool's to collect; marked here, that
    pool's next call would not find it and would start a second tape read.
    """
    own = is_own(request, path)
    try:
        ensure_done(request)
        finish()
    except HsmExit:
        if own:
            mark_reported(client, request["id"])
        raise
    if own:
        mark_reported(client, request["id"])


def is_own(request: Request, path: str) -> bool:
    """Whether *request* was made for this call's *path* (not another pool's)."""
    theirs = request.get("path")
    return theirs is None or theirs == path


def mark_reported(client: fastclient.Client, request_id: int) -> None:
    # Best effort: when it fails, the next stage of this file may see this outcome once more.
    try:
        client.call("POST", f"/v1/requests/{request_id}/reported", {})
    except (fastclient.WireError, fastclient.ApiError):
        pass


def _compact(body: Request) -> Request:
    # Unset fields are left out so the daemon applies its own defaults.
    return {key: value for key, value in body.items() if value is not None}


def _file_body(kind: str, call: Call, transfer: Transfer, path: str) -> Request:
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


def get_body(call: Call, transfer: Transfer, path: str) -> Request:
    # Without -uri= the storage info's own locations are the best hints there are.
    hints = [location.uri for location in call.uris] or list(transfer.si.locations)
    body = {**_file_body("recall", call, transfer, path), "uris": hints or None}
    return _compact({**body, "delivery": "claim"})


def remove_body(call: Call, location: Location) -> Request:
    return _compact(
        {
            "kind": "remove",
            "uris": [location.uri],
            "bfid": location.bfid,
            "queue": call.options.queue,
            "priority": call.options.priority,
        }
    )


def submit(client: fastclient.Client, body: Request) -> Request:
    """POST the request; tssd attaches a repeated submit to the open request."""
    try:
        answer = client.call("POST", "/v1/requests", body)
    except fastclient.ApiError as exc:
        restarting(exc)
        raise
    except fastclient.WireError as exc:
        raise unreachable(exc) from exc
    return request_of(answer)


def request_of(answer: Request) -> Request:
    request = answer.get("request")
    if not isinstance(request, dict) or type(request.get("id")) is not int:
        raise HsmExit(EXIT_OTHER, "tssd answered without a request")
    return request


def wait_block(client: fastclient.Client, request_id: int, limit_s: float) -> Request:
    pacing = Reconnect(f"request {request_id}", limit_s)
    path = f"/v1/requests/{request_id}/wait?timeout={WAIT_S}"
    while True:
        try:
            answer = client.call("GET", path, timeout=WAIT_READ_S)
        except fastclient.WireError as exc:
            pacing.lost(str(exc))
            continue
        except fastclient.ApiError as exc:
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

    def __init__(self, what: str, limit_s: float) -> None:
        self.what = what
        self.limit_s = limit_s
        self.delay = BACKOFF_FIRST_S
        self.since: float | None = None

    def lost(self, reason: str) -> None:
        now = time.monotonic()
        first = self.since is None
        if self.since is None:
            self.since = now
        left = self.since + self.limit_s - now
        if first and left > 0:
            diag(f"lost tssd while waiting for {self.what} ({reason}); retrying")
        if left <= 0:
            raise HsmExit(
                EXIT_OTHER,
                f"tssd unreachable for {self.limit_s:g} s while waiting for {self.what}: {reason}",
            )
        time.sleep(min(self.delay, left))
        self.delay = min(self.delay * 2, BACKOFF_MAX_S)

    def back(self) -> None:
        if self.since is not None:
            diag(f"reconnected to tssd; still waiting for {self.what}")
        self.since = None
        self.delay = BACKOFF_FIRST_S


def ensure_done(request: Request) -> None:
    state, request_id = request.get("state"), request["id"]
    if state == "done":
        return
    if state == "failed":
        reason = request.get("error") or "no reason given"
        code = request.get("error_code")
        code = code if type(code) is int and code in PASS_THROUGH else EXIT_OTHER
        raise HsmExit(code, f"request {request_id} failed: {reason}")
    if state == "cancelled":
        raise HsmExit(EXIT_OTHER, f"request {request_id} was cancelled in tssd")
    if state == "abandoned":
        raise HsmExit(EXIT_OTHER, f"request {request_id} was abandoned: nobody claimed its file")
    raise HsmExit(EXIT_OTHER, f"request {request_id} is in unexpected state {state!r}")


def diag(message: str) -> None:
    """Write one diagnostic line: dCache logs stderr line by line."""
    try:
        sys.stderr.write("tss-hsm: " + printable_line(message) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
