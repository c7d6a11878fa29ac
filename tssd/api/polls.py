"""``POST /v1/requests/obtain``: every ``tss-hsm`` put or get, in one round trip.

In poll mode dCache calls the script for every pending stage every ``p:delay``, so this is
the hottest route tssd has. An open request is answered from the store's
:class:`~tssd.db.polls.PollIndex` with bytes encoded when the request last changed; only
the first call of a stage and the call that collects the outcome reach the database.
"""

from __future__ import annotations

import structlog
from aiohttp import web

from tssd.api.admission import admission
from tssd.api.attach import check_attach
from tssd.api.helpers import (
    check_paths_off_loop,
    check_storage_classes,
    owned,
    read_json,
    services,
)
from tssd.api.schemas import request_json
from tssd.bodies import Obtain, convert
from tssd.domain import OPEN_STATES, Kind
from tssd.errors import InvalidRequest, ShuttingDown
from tssd.submit import submit_spec

log = structlog.get_logger()


async def obtain_request(request: web.Request) -> web.Response:
    """Adopt the request this call is about, or submit it (see docs/dcache.md).

    The body is a request as for ``POST /v1/requests`` plus ``"adopt"``: ``"finished"``
    (default) adopts an open request, or a finished one for the same path whose outcome
    has not been reported; ``"open"`` adopts only an open one. The answer is
    ``{"created", "reported", "request"}``; for an open request, ``request`` may carry
    only ``id``, ``kind``, ``state``, ``pnfsid``, ``path`` and ``queue``.
    """
    svc = services(request)
    body = convert(await read_json(request), Obtain)
    adopt = body.adopt
    spec = owned(request, submit_spec(body, svc.settings.scheduler.default_queue))
    if spec.kind is Kind.REMOVE:
        raise InvalidRequest("obtain takes a recall or a migration; submit removals")
    entry = svc.store.polls.lookup(spec.kind.value, spec.key)
    if entry is not None:
        check_attach(svc.metrics, spec, entry.request_id, entry.size, entry.checksum)
        return web.Response(body=entry.answer, content_type="application/json")
    if not svc.accepting:
        raise ShuttingDown("tssd is shutting down and accepts no new requests")
    check_storage_classes(svc, [spec])
    await check_paths_off_loop(svc, [spec])  # after the poll lookup: only new requests pay
    # Before the database: a call that would adopt a finished request is refused too,
    # and simply comes back (exit 72) after Retry-After.
    with svc.scheduler.work.foreground.call(), admission(request) as ticket:
        found = await svc.store.obtain(spec, adopt_finished=adopt == "finished")
        ticket.created = int(found.created)
    if not found.created and found.row.state in OPEN_STATES:
        check_attach(svc.metrics, spec, found.row.id, found.row.size, found.row.checksum)
    row = found.row
    if found.created:
        log.info(
            "request.submitted", request_id=row.id, kind=row.kind, pnfsid=row.pnfsid,
            queue=row.queue,
        )  # fmt: skip
    answer = {"created": found.created, "reported": found.reported, "request": request_json(row)}
    return web.json_response(answer, status=201 if found.created else 200)


def add_routes(app: web.Application) -> None:
    app.router.add_post("/v1/requests/obtain", obtain_request)
