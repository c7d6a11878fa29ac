"""Request handlers. Domain errors map to HTTP statuses in one middleware."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

import structlog
from aiohttp import web

from tssd.api.admission import Overloaded, admission
from tssd.api.bulk_json import decode_bulk, encode_results, in_bulk_thread
from tssd.api.inputs import decode_json, read_body
from tssd.api.openapi import openapi_document
from tssd.api.roles import PEER_UID, ROLE, Forbidden, Role, Unauthorized, is_own
from tssd.api.schemas import request_json
from tssd.db.engine import is_transient
from tssd.db.models import Kind, State
from tssd.db.store import ListFilter
from tssd.errors import (
    Conflict,
    DatabaseUnavailable,
    InvalidRequest,
    NotFound,
    NotSupported,
    ShuttingDown,
    TssdError,
)
from tssd.files import PoolRoots, effective_roots
from tssd.metrics import CONTENT_TYPE
from tssd.scheduler.explain import eta_fields, explain
from tssd.services import Services
from tssd.shim.names import QUEUE, VOLUME, Name, is_int, pnfsid_or_none
from tssd.submit import SubmitSpec, parse_submit

log = structlog.get_logger()
SERVICES: web.AppKey[Services] = web.AppKey("services", Services)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_STATUS = {
    InvalidRequest: 400,
    NotFound: 404,
    Conflict: 409,
    NotSupported: 501,
    ShuttingDown: 503,
    Overloaded: 503,
    Unauthorized: 401,
    Forbidden: 403,
}


def error_body(exc: TssdError | Exception, status: int) -> web.Response:
    exit_code = exc.exit_code if isinstance(exc, TssdError) else 1
    error = {"type": type(exc).__name__, "message": str(exc), "exit_code": exit_code}
    if isinstance(exc, Overloaded):
        error["retry_after_s"] = exc.retry_after_s
    response = web.json_response({"error": error}, status=status)
    if isinstance(exc, Overloaded):
        response.headers["Retry-After"] = str(exc.retry_after_s)
    return response


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_body(InvalidRequest(exc.reason or "bad request"), exc.status)
    except TssdError as exc:
        status = next((s for cls, s in _STATUS.items() if isinstance(exc, cls)), 500)
        if status == 500:
            log.error("api.error", path=request.path, error=str(exc))
        return error_body(exc, status)
    except (UnicodeError, RecursionError) as exc:
        # Input tssd cannot represent (a surrogate, a non-UTF-8 byte, absurd nesting) that
        # got past decoding: the client's mistake, never a 500 (docs/reliability.md).
        log.warning("api.bad_input", path=request.path, error=type(exc).__name__)
        return error_body(InvalidRequest(f"input cannot be represented: {exc}"[:300]), 400)
    except Exception as exc:
        if not is_transient(exc):
            raise
        # The database is restarting: the client retries, nothing was recorded half.
        log.warning("api.database_unavailable", path=request.path, error=str(exc)[:200])
        return error_body(DatabaseUnavailable("the database is unavailable; retry"), 503)


def services(request: web.Request) -> Services:
    return request.app[SERVICES]


async def read_json(request: web.Request) -> Any:
    """The body's JSON value (see :mod:`tssd.api.inputs`); 408 for a body that stalls."""
    raw = await read_body(request, services(request).settings.limits.idle_timeout_s)
    return decode_json(raw)


def int_param(
    request: web.Request, name: str, default: int | None = None, *, lo: int = 0, hi: int = 2**62
) -> int | None:
    raw = request.query.get(name) if name in request.query else request.match_info.get(name)
    if raw is None or raw == "":
        return default
    if not is_int(raw):
        raise InvalidRequest(f"{name} must be an integer")
    value = int(raw)
    if not lo <= value <= hi:
        raise InvalidRequest(f"{name} must be between {lo} and {hi}")
    return value


def pnfsid_param(value: str | None) -> str:
    """A pnfsid from a query or path, normalised as submitted ones are (tssd/shim/names.py)."""
    pnfsid = pnfsid_or_none(value)
    if pnfsid is None:
        raise InvalidRequest("pnfsid must be 1-64 hex digits")
    return pnfsid


def _checked(name: Name, value: str | None) -> str | None:
    if not value:
        return None
    if not name.fullmatch(value):
        raise InvalidRequest(name.describe())
    return value


def request_id(request: web.Request) -> int:
    value = int_param(request, "id", lo=1)
    assert value is not None
    return value


def _accepting(svc: Services) -> None:
    if not svc.accepting:
        raise ShuttingDown("tssd is shutting down and accepts no new requests")


def check_paths(svc: Services, spec: SubmitSpec) -> None:
    """Recall destinations and migrate sources must lie inside api.pool_roots."""
    what = "recall destination" if spec.kind == "recall" else "migrate source"
    roots = effective_roots(svc.settings.api.pool_roots, svc.settings.home_path)
    PoolRoots.from_setting(roots).check(spec.path, what)


async def check_paths_off_loop(svc: Services, specs: Sequence[SubmitSpec]) -> None:
    """:func:`check_paths` of every spec in a worker thread: it resolves each path on the
    file system (``realpath``), which took 3.7 s of event loop for a 100k bulk submit.
    A refusal names the index of the request in the batch."""

    def check_all() -> None:
        for index, spec in enumerate(specs):
            try:
                check_paths(svc, spec)
            except InvalidRequest as exc:
                if len(specs) == 1:
                    raise
                raise InvalidRequest(f"request {index}: {exc}") from exc

    await asyncio.to_thread(check_all)


def owned(request: web.Request, spec: SubmitSpec) -> SubmitSpec:
    """*spec* marked with the submitting Unix peer's uid (a pool cancels only its own)."""
    uid = request.get(PEER_UID)
    return spec if uid is None else replace(spec, owner_uid=uid)


async def submit(request: web.Request) -> web.Response:
    svc = services(request)
    _accepting(svc)
    spec = owned(
        request, parse_submit(await read_json(request), svc.settings.scheduler.default_queue)
    )
    await check_paths_off_loop(svc, [spec])
    with admission(request) as ticket:
        [(created, row)] = await svc.store.submit([spec])
        ticket.created = int(created)
    if created:
        log.info(
            "request.submitted",
            request_id=row.id,
            kind=row.kind,
            pnfsid=row.pnfsid,
            queue=row.queue,
        )
    body = {"created": created, "request": request_json(row)}
    return web.json_response(body, status=201 if created else 200)


async def submit_bulk(request: web.Request) -> web.Response:
    svc = services(request)
    _accepting(svc)
    raw = await read_body(request, svc.settings.limits.idle_timeout_s)
    # In a worker thread, a piece at a time (tssd.api.bulk_json): 10 MB is 100 ms of decoding.
    body = await in_bulk_thread(lambda: decode_bulk(raw))
    entries = body.get("requests") if isinstance(body, dict) else None
    if not isinstance(entries, list) or not entries:
        raise InvalidRequest('body must be {"requests": [...]} with at least one request')
    if len(entries) > svc.settings.api.max_bulk:
        raise InvalidRequest(f"at most {svc.settings.api.max_bulk} requests per bulk submit")

    def validate() -> list[SubmitSpec]:
        specs = []
        for index, entry in enumerate(entries):
            try:
                spec = parse_submit(entry, svc.settings.scheduler.default_queue)
            except InvalidRequest as exc:
                raise InvalidRequest(f"request {index}: {exc}") from exc
            specs.append(owned(request, spec))
        return specs

    # Validation and the answer of 100,000 requests are seconds of pure Python: in a worker
    # thread the interpreter still hands the event loop its turn every few milliseconds.
    specs = await in_bulk_thread(validate)
    await check_paths_off_loop(svc, specs)
    with admission(request, len(specs)) as ticket:
        results = await submit_in_chunks(svc, specs)
        created = ticket.created = sum(1 for c, _ in results if c)
    log.info("request.bulk_submitted", count=len(specs), created=created)

    def answer() -> bytes:
        return encode_results([{"created": c, "request": request_json(r)} for c, r in results])

    return web.Response(body=await in_bulk_thread(answer), content_type="application/json")


#: Requests per transaction of a bulk submit. On PostgreSQL one chunk's statements run on
#: the event loop (about 15 ms of core SQL per 100; on a SQLite file they run in a writer
#: thread, tssd.db.submits); 1,000 at once through the ORM held the loop for hundreds of
#: milliseconds (benchmarks/admission_load.py).
SUBMIT_CHUNK = 100


async def submit_in_chunks(svc: Services, specs: Sequence[SubmitSpec]) -> list[tuple[bool, Any]]:
    """Record a validated bulk submit one chunk per transaction, letting the loop run
    between chunks. Each request is recorded whole or not at all; a bulk cut short by a
    database error is simply sent again, since a submit attaches to the open request."""
    results: list[tuple[bool, Any]] = []
    for start in range(0, len(specs), SUBMIT_CHUNK):
        results.extend(await svc.store.submit(specs[start : start + SUBMIT_CHUNK]))
        await asyncio.sleep(0)
    return results


async def get_request(request: web.Request) -> web.Response:
    svc = services(request)
    row = await svc.store.get(request_id(request))
    return web.json_response({"request": request_json(row) | eta_fields(svc.scheduler, row)})


async def why_request(request: web.Request) -> web.Response:
    svc = services(request)
    row = await svc.store.get(request_id(request))
    return web.json_response(explain(svc.scheduler, row))


async def wait_request(request: web.Request) -> web.Response:
    svc = services(request)
    timeout = float(int_param(request, "timeout", 30, hi=86400) or 0)
    timeout = min(timeout, svc.settings.api.max_wait_s)
    row, finished = await svc.store.wait(request_id(request), timeout)
    return web.json_response({"request": request_json(row), "finished": finished})


async def latest_request(request: web.Request) -> web.Response:
    kind = request.query.get("kind", "")
    if kind not in ("recall", "migrate"):
        raise InvalidRequest("kind must be recall or migrate")
    pnfsid = pnfsid_param(request.query.get("pnfsid"))
    found = await services(request).store.latest(kind, pnfsid)
    if found is None:
        raise NotFound(f"no {kind} request for {pnfsid}")
    row, reported = found
    return web.json_response({"request": request_json(row), "reported": reported})


async def report_request(request: web.Request) -> web.Response:
    row = await services(request).store.mark_reported(request_id(request))
    return web.json_response({"request": request_json(row)})


async def cancel_request(request: web.Request) -> web.Response:
    store = services(request).store
    # Only a pool pays the extra read: the admin may cancel any request.
    pool = request.get(ROLE) is Role.POOL
    if pool and not is_own(request, (await store.get(request_id(request))).owner_uid):
        raise Forbidden("a pool may cancel only the requests it submitted")
    row = await store.cancel(request_id(request))
    log.info("request.cancelled", request_id=row.id, pnfsid=row.pnfsid)
    return web.json_response({"request": request_json(row)})


async def retry_request(request: web.Request) -> web.Response:
    row = await services(request).store.retry(request_id(request))
    log.info("request.retried", request_id=row.id, pnfsid=row.pnfsid)
    return web.json_response({"request": request_json(row)})


_STATES = frozenset(state.value for state in State)
_KINDS = frozenset(kind.value for kind in Kind)


async def list_requests(request: web.Request) -> web.Response:
    q = request.query
    if q.get("state") and q["state"] not in _STATES:
        raise InvalidRequest(f"state must be one of {', '.join(sorted(_STATES))}")
    if q.get("kind") and q["kind"] not in _KINDS:
        raise InvalidRequest(f"kind must be one of {', '.join(sorted(_KINDS))}")
    flt = ListFilter(
        state=q.get("state") or None,
        kind=q.get("kind") or None,
        queue=_checked(QUEUE, q.get("queue")),
        volume=_checked(VOLUME, q.get("volume")),
        pnfsid=pnfsid_param(q["pnfsid"]) if q.get("pnfsid") else None,
        limit=int_param(request, "limit", 100, lo=1, hi=1000) or 100,
        after=int_param(request, "after", None),
    )
    # One row more than asked tells whether another page follows.
    rows = await services(request).store.list_requests(replace(flt, limit=flt.limit + 1))
    nxt = rows[flt.limit - 1].id if len(rows) > flt.limit else None
    rows = rows[: flt.limit]
    return web.json_response({"requests": [request_json(r) for r in rows], "next": nxt})


async def query_requests(request: web.Request) -> web.Response:
    body = await read_json(request)
    ids = body.get("ids") if isinstance(body, dict) else None
    if not isinstance(ids, list) or len(ids) > 100_000:
        raise InvalidRequest('body must be {"ids": [...]} with at most 100000 ids')
    # Bounded: a database integer is 64 bits (found by the fuzz test, docs/reliability.md).
    if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 2**63 for i in ids):
        raise InvalidRequest("ids must be integers between 0 and 2**63-1")
    result = await services(request).store.query(ids)
    result["failed"] = [request_json(r) for r in result["failed"]]
    return web.json_response(result)


async def status(request: web.Request) -> web.Response:
    return web.json_response(await services(request).status())


async def healthz(request: web.Request) -> web.Response:
    ok = services(request).accepting
    return web.json_response({"status": "ok" if ok else "stopping"}, status=200 if ok else 503)


async def metrics(request: web.Request) -> web.Response:
    body = services(request).metrics.exposition()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())


def add_routes(app: web.Application) -> None:
    app.router.add_post("/v1/requests", submit)
    app.router.add_post("/v1/requests/bulk", submit_bulk)
    app.router.add_post("/v1/requests/query", query_requests)
    app.router.add_get("/v1/requests", list_requests)
    # Before /v1/requests/{id}, which would otherwise take "latest" for an id.
    app.router.add_get("/v1/requests/latest", latest_request)
    app.router.add_get("/v1/requests/{id}", get_request)
    app.router.add_get("/v1/requests/{id}/wait", wait_request)
    app.router.add_get("/v1/requests/{id}/why", why_request)
    app.router.add_post("/v1/requests/{id}/cancel", cancel_request)
    app.router.add_post("/v1/requests/{id}/retry", retry_request)
    app.router.add_post("/v1/requests/{id}/reported", report_request)
    app.router.add_get("/v1/status", status)
    # Imported here: the catalog handlers use this module's helpers.
    from tssd.api.admin import add_admin_routes
    from tssd.api.catalog import add_catalog_routes
    from tssd.api.polls import add_poll_routes
    from tssd.api.top import add_top_routes

    add_catalog_routes(app)
    add_top_routes(app)
    add_admin_routes(app)
    add_poll_routes(app)
    add_probe_routes(app)
    app.router.add_get("/openapi.json", openapi)


def add_probe_routes(app: web.Application) -> None:
    from tssd.api.status_page import status_page  # it uses this module's helpers

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/status", status_page)
