"""The ``/v1/requests`` handlers: submit, bulk submit, read, wait, list, cancel, retry.

The store hands out :class:`~tssd.domain.Request` records, which are shaped into JSON
here (``api/schemas.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import structlog
from aiohttp import web

from tssd.api.admission import admission
from tssd.api.attach import check_attach
from tssd.api.bulk_json import decode_bulk, encode_results, in_bulk_thread
from tssd.api.helpers import (
    check_accepting,
    check_paths_off_loop,
    check_storage_classes,
    owned,
    read_json,
    services,
)
from tssd.api.http_errors import Forbidden
from tssd.api.inputs import read_body
from tssd.api.params import LatestParams, ListParams, WaitParams, path_id, query_params
from tssd.api.roles import ROLE, Role, is_own
from tssd.api.schemas import request_json
from tssd.bodies import MAX_QUERY_IDS, Query, convert, convert_bulk
from tssd.db.pages import ListFilter
from tssd.errors import InvalidRequest, NotFound
from tssd.scheduler.explain import eta_fields, explain
from tssd.services import Services
from tssd.submit import SubmitSpec, parse_submit, submit_spec

log = structlog.get_logger()
#: A progress query's body: its ids, each at most 19 digits and a separator, and the rest.
QUERY_BODY_MAX = 1024 + MAX_QUERY_IDS * 24
QUERY_HINT = f" (at most {MAX_QUERY_IDS} ids per query)"


async def submit(request: web.Request) -> web.Response:
    svc = services(request)
    check_accepting(svc)
    spec = owned(
        request, parse_submit(await read_json(request), svc.settings.scheduler.default_queue)
    )
    check_storage_classes(svc, [spec])
    await check_paths_off_loop(svc, [spec])
    with svc.scheduler.work.foreground.call(), admission(request) as ticket:
        [(created, row)] = await svc.store.submit([spec])
        ticket.created = int(created)
    if not created:
        check_attach(svc.metrics, spec, row.id, row.size, row.checksum)
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
    check_accepting(svc)
    raw = await read_body(request, svc.settings.limits.idle_timeout_s)
    # In a worker thread, a piece at a time (tssd.api.bulk_json): 10 MB is 100 ms of decoding.
    body = await in_bulk_thread(lambda: decode_bulk(raw))
    entries = body.get("requests") if isinstance(body, dict) else None
    # The limit is a setting, not part of the body's schema: refused before any entry
    # is converted.
    if isinstance(entries, list) and len(entries) > svc.settings.api.max_bulk:
        raise InvalidRequest(f"at most {svc.settings.api.max_bulk} requests per bulk submit")

    def validate() -> list[SubmitSpec]:
        specs = []
        for index, entry in enumerate(convert_bulk(body)):
            try:
                spec = submit_spec(entry, svc.settings.scheduler.default_queue)
            except InvalidRequest as exc:
                raise InvalidRequest(f"request {index}: {exc}") from exc
            specs.append(owned(request, spec))
        return specs

    # Validation and the answer of 100,000 requests are seconds of pure Python: in a worker
    # thread the interpreter still hands the event loop its turn every few milliseconds.
    specs = await in_bulk_thread(validate)
    check_storage_classes(svc, specs)
    await check_paths_off_loop(svc, specs)
    with admission(request, len(specs)) as ticket:
        results = await submit_in_chunks(svc, specs)
        created = ticket.created = sum(1 for c, _ in results if c)
    log.info("request.bulk_submitted", count=len(specs), created=created)

    def answer() -> bytes:
        answers = [{"created": c, "request": request_json(r)} for c, r in results]
        return encode_results(answers)

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
    view = await svc.store.get(path_id(request))
    return web.json_response({"request": request_json(view) | eta_fields(svc.scheduler, view)})


async def why_request(request: web.Request) -> web.Response:
    svc = services(request)
    view = await svc.store.get(path_id(request))
    return web.json_response(explain(svc.scheduler, view))


async def wait_request(request: web.Request) -> web.Response:
    svc = services(request)
    timeout = float(query_params(request, WaitParams).timeout)
    timeout = min(timeout, svc.settings.api.max_wait_s)
    row, finished = await svc.store.wait(path_id(request), timeout)
    return web.json_response({"request": request_json(row), "finished": finished})


async def latest_request(request: web.Request) -> web.Response:
    params = query_params(request, LatestParams)
    kind, pnfsid = params.kind, params.pnfsid
    found = await services(request).store.latest(kind, pnfsid)
    if found is None:
        raise NotFound(f"no {kind} request for {pnfsid}")
    row, reported = found
    return web.json_response({"request": request_json(row), "reported": reported})


async def report_request(request: web.Request) -> web.Response:
    row = await services(request).store.mark_reported(path_id(request))
    return web.json_response({"request": request_json(row)})


async def cancel_request(request: web.Request) -> web.Response:
    store = services(request).store
    # Only a pool pays the extra read: the admin may cancel any request.
    pool = request.get(ROLE) is Role.POOL
    if pool and not is_own(request, (await store.get(path_id(request))).owner_uid):
        raise Forbidden("a pool may cancel only the requests it submitted")
    row = await store.cancel_request(path_id(request))
    log.info("request.cancelled", request_id=row.id, pnfsid=row.pnfsid)
    return web.json_response({"request": request_json(row)})


async def retry_request(request: web.Request) -> web.Response:
    row = await services(request).store.retry_request(path_id(request))
    log.info("request.retried", request_id=row.id, pnfsid=row.pnfsid)
    return web.json_response({"request": request_json(row)})


async def list_requests(request: web.Request) -> web.Response:
    q = query_params(request, ListParams)
    flt = ListFilter(
        state=q.state.value if q.state is not None else None,
        kind=q.kind.value if q.kind is not None else None,
        queue=q.queue,
        volume=q.volume,
        pnfsid=q.pnfsid,
        limit=q.limit,
        after=q.after,
    )
    # One row more than asked tells whether another page follows.
    rows = await services(request).store.list_requests(replace(flt, limit=flt.limit + 1))
    nxt = rows[flt.limit - 1].id if len(rows) > flt.limit else None
    rows = rows[: flt.limit]
    return web.json_response({"requests": [request_json(r) for r in rows], "next": nxt})


async def query_requests(request: web.Request) -> web.Response:
    # Ids are bounded: a database integer is 64 bits (found by the fuzz test,
    # docs/reliability.md); tssd.bodies.Query says so.
    query = convert(await read_json(request, QUERY_BODY_MAX, QUERY_HINT), Query)
    result = await services(request).store.query(query.ids)
    result["failed"] = [request_json(r) for r in result["failed"]]
    return web.json_response(result)


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
