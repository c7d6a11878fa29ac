"""OpenAPI paths of the operator routes (tssd/api/admin.py), merged into /openapi.json."""

from __future__ import annotations

from typing import Any

from tssd.api.body_schemas import request_body
from tssd.api.params import (
    DRIVE_PATH,
    QUEUE_PATH,
    VOLUME_PATH,
    MountsParams,
    ReportParams,
    TapesParams,
    query_parameters,
)

_OBJ = {"type": "object"}
_ERR = {"$ref": "#/components/schemas/Error"}


def _ok(schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": "OK", "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    body = {"description": "error", "content": {"application/json": {"schema": _ERR}}}
    return {str(c): body for c in codes}


def _list(key: str) -> dict[str, Any]:
    return {"type": "object", "properties": {key: {"type": "array", "items": _OBJ}}}


_TIME = {"type": "string", "format": "date-time"}
#: A queue as GET /v1/queues and PATCH /v1/queues/{name} return it (tssd.ports.reports.Admin).
QUEUE_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "configured": {"type": "boolean"},
        "priority": {"type": "integer"},
        "max_drives": {"type": ["integer", "null"]},
        "paused": {"type": "boolean"},
        "latency_target_s": {"type": ["number", "null"]},
        "queued": {"type": "integer"},
        "active": {"type": "integer"},
        "queued_bytes": {"type": "integer"},
        "active_bytes": {"type": "integer"},
        "oldest_queued_at": {"type": ["string", "null"], "format": "date-time"},
    },
}


_STR = {"type": "string"}
_NUM = {"type": ["number", "null"]}
_INT = {"type": "integer"}
_NSTR = {"type": ["string", "null"]}
_TOP_DRIVE = {
    "type": "object",
    "properties": {
        "name": _STR,
        "instance": _NSTR,
        "state": _STR,
        "volume": _NSTR,
        "purpose": _NSTR,
        "mounted_s": _NUM,
        "files_done": _INT,
        "bytes_done": _INT,
        "files_planned": _INT,
        "bytes_planned": _INT,
        "mb_s": _NUM,
    },
}
_TOP_QUEUE = {
    "type": "object",
    "properties": {
        "name": _STR,
        "paused": {"type": "boolean"},
        "queued": _INT,
        "active": _INT,
        "oldest_wait_s": _NUM,
        "p95_1h_s": _NUM,
        "done_1h": _INT,
        "latency_target_s": _NUM,
        "eta_s": _NUM,
    },
}
TOP = {
    "type": "object",
    "properties": {
        "at": _TIME,
        "instance": _NSTR,
        "drives": {"type": "array", "items": _TOP_DRIVE},
        "queues": {"type": "array", "items": _TOP_QUEUE},
        "mounts": {"type": "array", "items": _OBJ},
        "totals": _OBJ,
    },
}


def _drive_action(verb: str) -> dict[str, Any]:
    return {
        "post": {
            "summary": f"{verb.capitalize()} a drive",
            "operationId": f"{verb}Drive",
            "parameters": [DRIVE_PATH.document()],
            "responses": {"200": _ok(_OBJ), **_errors(400, 404)},
        }
    }


ADMIN_PATHS: dict[str, Any] = {
    "/v1/queues": {
        "get": {
            "summary": "Queues",
            "operationId": "listQueues",
            "responses": {
                "200": _ok(
                    {
                        "type": "object",
                        "properties": {"queues": {"type": "array", "items": QUEUE_SCHEMA}},
                    }
                )
            },
        }
    },
    "/v1/queues/{name}": {
        "patch": {
            "summary": "Create or change a queue",
            "operationId": "setQueue",
            "parameters": [QUEUE_PATH.document()],
            "requestBody": request_body("QueuePatch"),
            "responses": {
                "200": _ok({"type": "object", "properties": {"queue": QUEUE_SCHEMA}}),
                **_errors(400),
            },
        }
    },
    "/v1/drives": {
        "get": {
            "summary": "Drives",
            "operationId": "listDrives",
            "responses": {"200": _ok(_list("drives"))},
        }
    },
    "/v1/drives/{name}/enable": _drive_action("enable"),
    "/v1/drives/{name}/disable": _drive_action("disable"),
    "/v1/tapes": {
        "get": {
            "summary": "Tapes mounted or with recalls pending",
            "operationId": "listTapes",
            "parameters": query_parameters(TapesParams),
            "responses": {"200": _ok(_list("tapes")), **_errors(400)},
        }
    },
    "/v1/tapes/{volume}": {
        "get": {
            "summary": "One tape with its requests and last mounts",
            "operationId": "showTape",
            "parameters": [VOLUME_PATH.document()],
            "responses": {"200": _ok(_OBJ), **_errors(400, 404)},
        }
    },
    "/v1/mounts": {
        "get": {
            "summary": "Mount history",
            "operationId": "listMounts",
            "parameters": query_parameters(MountsParams),
            "responses": {"200": _ok(_list("mounts")), **_errors(400)},
        }
    },
    "/v1/top": {
        "get": {
            "summary": "Drives, queues, last mounts and totals at a glance (tssctl top)",
            "operationId": "top",
            "responses": {"200": _ok(TOP)},
        }
    },
    "/status": {
        "get": {
            "summary": "Read-only status page (HTML with inline SVG; also on the metrics listener)",
            "operationId": "statusPage",
            "responses": {"200": {"description": "OK", "content": {"text/html": {"schema": _STR}}}},
        }
    },
    "/v1/report/efficiency": {
        "get": {
            "summary": "Mount efficiency per drive, queue and tape",
            "operationId": "efficiencyReport",
            "parameters": query_parameters(ReportParams),
            "responses": {"200": _ok(_OBJ), **_errors(400)},
        }
    },
}
