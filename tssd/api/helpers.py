"""What every handler uses: the daemon's services, the JSON body, checked parameters, and
the checks a new request passes before it is recorded (accepting, pool roots, owner).

Route modules import from here and register their own routes; nothing here imports a
route module, so the API has no import circle (issue 19).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from aiohttp import web

from tssd.api.inputs import decode_json, read_body
from tssd.api.roles import PEER_UID
from tssd.config.storage_classes import StorageClassRefused, check_admitted
from tssd.domain import Kind
from tssd.errors import InvalidRequest, ShuttingDown
from tssd.files import PoolRoots, effective_roots
from tssd.services import Services
from tssd.submit import SubmitSpec

SERVICES: web.AppKey[Services] = web.AppKey("services", Services)


def services(request: web.Request) -> Services:
    return request.app[SERVICES]


#: Bodies up to this size are decoded on the event loop (well under a millisecond).
DECODE_ON_LOOP_MAX = 16 * 1024
SINGLE_HINT = " (api.max_request_body_bytes; many requests go in one POST /v1/requests/bulk)"


async def read_json(request: web.Request, max_bytes: int | None = None, hint: str = "") -> Any:
    """The body's JSON value (see :mod:`tssd.api.inputs`); 408 for a body that stalls, 413
    past *max_bytes* (default ``api.max_request_body_bytes``: a body of one request) or
    ``api.max_body_bytes``, whichever is less."""
    settings = services(request).settings
    if max_bytes is None:
        max_bytes, hint = settings.api.max_request_body_bytes, SINGLE_HINT
    if settings.api.max_body_bytes < max_bytes:  # the bound of every body
        max_bytes, hint = settings.api.max_body_bytes, " (api.max_body_bytes)"
    raw = await read_body(request, settings.limits.idle_timeout_s, max_bytes, hint)
    if len(raw) <= DECODE_ON_LOOP_MAX:
        return decode_json(raw)
    # The depth scan and json.loads of a large body are C loops holding the loop.
    return await asyncio.to_thread(decode_json, raw)


def check_accepting(svc: Services) -> None:
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
                raise type(exc)(f"request {index}: {exc}") from exc

    await asyncio.to_thread(check_all)


def check_storage_classes(svc: Services, specs: Sequence[SubmitSpec]) -> None:
    """Every migration's storage class is one ``[[storage_classes]]`` admits: a class
    nobody listed would take an empty cartridge for itself (tssd.config.storage_classes).
    A refusal names the index of the request in the batch."""
    tables = svc.settings.storage_classes
    for index, spec in enumerate(specs):
        if spec.kind is not Kind.MIGRATE:
            continue
        try:
            check_admitted(tables, spec.storage_class or "")
        except StorageClassRefused as exc:
            if len(specs) == 1:
                raise
            raise StorageClassRefused(f"request {index}: {exc}") from exc


def owned(request: web.Request, spec: SubmitSpec) -> SubmitSpec:
    """*spec* marked with the submitting Unix peer's uid (a pool cancels only its own)."""
    uid = request.get(PEER_UID)
    return spec if uid is None else replace(spec, owner_uid=uid)
