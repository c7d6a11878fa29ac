"""Catalog routes: where a file's copies are, duplicates, and catalog CSV import/export.

``where`` uses the backend interface every backend has (:meth:`TapeBackend.locate`); the
others use its optional catalog tools, which answer 501 on a backend without them.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from aiohttp import web

from tssd.api.routes import int_param, pnfsid_param, read_json, services
from tssd.backends.base import TapeCopy
from tssd.backends.copies import duplicates_report
from tssd.errors import InvalidRequest, NotFound


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
    pnfsid = pnfsid_param(request.match_info["pnfsid"])
    found = await services(request).backend.locate([pnfsid])
    copies = sorted(found.get(pnfsid, []), key=lambda c: (c.written_at, c.restore_order))
    if not copies:
        raise NotFound(f"no copy of {pnfsid} in the {services(request).backend.name} catalog")
    return web.json_response({"pnfsid": pnfsid, "copies": [copy_json(c) for c in copies]})


async def duplicates(request: web.Request) -> web.Response:
    limit = int_param(request, "limit", 100, lo=0, hi=1_000_000)
    assert limit is not None
    placements = await services(request).backend.placements()
    return web.json_response(duplicates_report(placements, limit))


async def import_catalog(request: web.Request) -> web.Response:
    body = await read_json(request)
    if not isinstance(body, dict) or not (isinstance(body.get("csv"), str) or "path" in body):
        raise InvalidRequest('body must be {"csv": TEXT} or {"path": SERVER_PATH}, + "replace"')
    replace = body.get("replace", False)
    if not isinstance(replace, bool):
        raise InvalidRequest("replace must be true or false")
    try:
        summary = await _import(services(request).backend, body, replace)
    except csv.Error as exc:  # found by fuzzing: malformed CSV is the client's mistake
        raise InvalidRequest(f"catalog CSV is malformed: {exc}") from exc
    return web.json_response(summary)


async def _import(backend: Any, body: dict[str, Any], replace: bool) -> dict[str, Any]:
    if isinstance(body.get("csv"), str):
        summary: dict[str, Any] = await backend.import_catalog(
            io.StringIO(body["csv"], newline=""), replace=replace
        )
    else:
        path = body["path"]
        if not isinstance(path, str) or not Path(path).is_absolute():
            raise InvalidRequest("path must be an absolute path on the daemon's host")
        try:
            with Path(path).open(newline="", encoding="utf-8") as fh:
                summary = await backend.import_catalog(fh, replace=replace)
        except OSError as exc:
            raise InvalidRequest(f"cannot read {path}: {exc.strerror}") from exc
    return summary


async def export_catalog(request: web.Request) -> web.Response:
    out = io.StringIO()
    rows = await services(request).backend.export_catalog(out)
    return web.json_response({"rows": rows, "csv": out.getvalue()})


def add_catalog_routes(app: web.Application) -> None:
    app.router.add_get("/v1/catalog/copies/{pnfsid}", where)
    app.router.add_get("/v1/catalog/duplicates", duplicates)
    app.router.add_post("/v1/catalog/import", import_catalog)
    app.router.add_get("/v1/catalog/export", export_catalog)
