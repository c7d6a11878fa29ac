"""Catalog routes: where a file's copies are, duplicates, and catalog CSV import/export.

``where`` uses the backend interface every backend has (:meth:`TapeBackend.locate`); the
others use its optional catalog tools, which answer 501 on a backend without them.
"""

from __future__ import annotations

import asyncio
import csv
import io
from typing import Any

import structlog
from aiohttp import web

from tssd.api.catalog_file import catalog_text, has_rows
from tssd.api.helpers import read_json, services
from tssd.api.params import PNFSID_PATH, DuplicatesParams, query_params
from tssd.api.roles import PEER_UID
from tssd.backends.base import TapeCopy
from tssd.backends.duplicates import duplicates_report
from tssd.bodies import CatalogImport, convert
from tssd.errors import Conflict, InvalidRequest, NotFound

log = structlog.get_logger()


def copy_json(copy: TapeCopy) -> dict[str, Any]:
    return {
        "volume": copy.volume,
        "seq": copy.position,
        "size": copy.size,
        "written_at": copy.written_at.isoformat(),
        "media": copy.media,
        "bfid": copy.bfid,
        "storage_class": copy.storage_class,
        "offset": copy.offset,
        "adler32": copy.adler32,
    }


async def where(request: web.Request) -> web.Response:
    pnfsid = PNFSID_PATH.value(request)
    found = await services(request).backend.locate([pnfsid])
    copies = sorted(found.get(pnfsid, []), key=lambda c: (c.written_at, c.restore_order))
    if not copies:
        raise NotFound(f"no copy of {pnfsid} in the {services(request).backend.name} catalog")
    return web.json_response({"pnfsid": pnfsid, "copies": [copy_json(c) for c in copies]})


async def duplicates(request: web.Request) -> web.Response:
    limit = query_params(request, DuplicatesParams).limit
    placements = await services(request).backend.placements()
    return web.json_response(duplicates_report(placements, limit))


async def import_catalog(request: web.Request) -> web.Response:
    """Admin only (:mod:`tssd.api.roles`): the catalog decides which copy a recall reads."""
    svc = services(request)
    hint = " (api.max_body_bytes; a larger catalog is imported by path)"
    body = convert(await read_json(request, svc.settings.api.max_body_bytes, hint), CatalogImport)
    if body.csv is None and body.path is None:
        raise InvalidRequest('body must be {"csv": TEXT} or {"path": SERVER_PATH}, + "replace"')
    replace, force = body.replace, body.force
    path = None if body.csv is not None else body.path
    text = await catalog_text(body.csv, path, svc.settings.limits.catalog_import_max_bytes)
    if replace and not force and not await asyncio.to_thread(has_rows, text):
        raise Conflict(
            "the catalog CSV holds no rows: replacing would empty the catalog; "
            'send "force": true (tssctl catalog import --replace --force) to mean it'
        )
    try:
        summary = await svc.backend.import_catalog(io.StringIO(text, newline=""), replace=replace)
    except csv.Error as exc:  # found by fuzzing: malformed CSV is the client's mistake
        raise InvalidRequest(f"catalog CSV is malformed: {exc}") from exc
    log.info("catalog.imported", replace=replace, force=force, path=path,
             rows=summary.get("rows"), uid=request.get(PEER_UID))  # fmt: skip
    return web.json_response(summary)


async def export_catalog(request: web.Request) -> web.Response:
    out = io.StringIO()
    rows = await services(request).backend.export_catalog(out)
    return web.json_response({"rows": rows, "csv": out.getvalue()})


def add_routes(app: web.Application) -> None:
    app.router.add_get("/v1/catalog/copies/{pnfsid}", where)
    app.router.add_get("/v1/catalog/duplicates", duplicates)
    app.router.add_post("/v1/catalog/import", import_catalog)
    app.router.add_get("/v1/catalog/export", export_catalog)
