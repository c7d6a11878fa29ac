"""The OpenAPI 3.1 document the daemon serves at ``/openapi.json``."""

from __future__ import annotations

from functools import cache
from typing import Any

from tssd.api.admin_openapi import ADMIN_PATHS
from tssd.api.body_schemas import body_ref, body_schemas, request_body
from tssd.api.params import (
    PNFSID_PATH,
    REQUEST_ID,
    DuplicatesParams,
    LatestParams,
    ListParams,
    WaitParams,
    query_parameters,
)
from tssd.domain import Kind, State
from tssd.scheduler.rules import RULES

_KINDS = [kind.value for kind in Kind]
_STATES = [state.value for state in State]
_STR = {"type": "string"}
_NSTR = {"type": ["string", "null"]}
#: The ``rule`` of a ``why`` answer: every name in scheduler/rules.py, with its meaning.
_WHY_RULE = {
    "type": "string",
    "enum": list(RULES),
    "description": "; ".join(f"{r.name}: {r.meaning}" for r in RULES.values()),
}
_NINT = {"type": ["integer", "null"]}

REQUEST = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "kind": {"enum": _KINDS},
        "state": {"enum": _STATES},
        "pnfsid": _NSTR,
        "path": _NSTR,
        "size": _NINT,
        "storage_class": _NSTR,
        "checksum": _NSTR,
        "hsm_type": _STR,
        "hsm_instance": _STR,
        "store": _NSTR,
        "group": _NSTR,
        "bfid": _NSTR,
        "uri": _NSTR,
        "queue": _STR,
        "priority": {"type": "integer"},
        "volume": _NSTR,
        "position": _NINT,
        "drive": _NSTR,
        "attempts": {"type": "integer"},
        "adler32": _NSTR,
        "error_code": _NINT,
        "error": _NSTR,
        "created_at": _STR,
        "started_at": _NSTR,
        "finished_at": _NSTR,
        "updated_at": _STR,
        "delivery": _NSTR,
        "eta_s": {"type": ["number", "null"], "description": "Estimated seconds until served"},
        "eta": {"type": ["string", "null"], "description": "Estimated time served (UTC)"},
    },
    "required": ["id", "kind", "state"],
}

ERROR = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {"type": _STR, "message": _STR, "exit_code": {"type": "integer"}},
        }
    },
}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    return {str(c): _json({"$ref": "#/components/schemas/Error"}, "error") for c in codes}


_REQ_REF = {"$ref": "#/components/schemas/Request"}
_ONE = {"type": "object", "properties": {"request": _REQ_REF}}
_SUBMITTED = {"type": "object", "properties": {"created": {"type": "boolean"}, "request": _REQ_REF}}
_OBTAINED = {
    "type": "object",
    "properties": {
        "created": {"type": "boolean"},
        "reported": {"type": "boolean"},
        "request": _REQ_REF,
    },
}
_BODY = request_body("Submit")


_COPY = {
    "type": "object",
    "properties": {
        "volume": _STR,
        "seq": {"type": "integer"},
        "size": {"type": "integer"},
        "written_at": _STR,
        "media": {"enum": ["tape", "disk"]},
        "bfid": _STR,
        "storage_class": _NSTR,
        "offset": {"type": "integer"},
        "adler32": _NSTR,
    },
}
CATALOG_PATHS: dict[str, Any] = {
    "/v1/catalog/copies/{pnfsid}": {
        "get": {
            "summary": "Every copy of a file: volume, sequence, size, written time, media",
            "operationId": "where",
            "parameters": [PNFSID_PATH.document()],
            "responses": {
                "200": _json(
                    {
                        "type": "object",
                        "properties": {
                            "pnfsid": _STR,
                            "copies": {"type": "array", "items": _COPY},
                        },
                    }
                ),
                **_errors(400, 404),
            },
        }
    },
    "/v1/catalog/duplicates": {
        "get": {
            "summary": "Files with several copies and the mounts the choice of copy costs",
            "operationId": "duplicates",
            "parameters": query_parameters(DuplicatesParams),
            "responses": {"200": _json({"type": "object"}), **_errors(400, 501)},
        }
    },
    "/v1/catalog/import": {
        "post": {
            "summary": "Load a catalog CSV (text or a path on the daemon's host)",
            "operationId": "catalogImport",
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": body_ref("CatalogImport")}},
            },
            "responses": {"200": _json({"type": "object"}), **_errors(400, 409, 413, 501)},
        }
    },
    "/v1/catalog/export": {
        "get": {
            "summary": "The catalog as CSV",
            "operationId": "catalogExport",
            "responses": {
                "200": _json(
                    {
                        "type": "object",
                        "properties": {"rows": {"type": "integer"}, "csv": _STR},
                    }
                ),
                **_errors(501),
            },
        }
    },
}


@cache
def openapi_document() -> dict[str, Any]:
    paths: dict[str, Any] = {
        "/v1/requests": {
            "post": {
                "summary": "Submit one request (idempotent while open)",
                "operationId": "submit",
                "requestBody": _BODY,
                "responses": {
                    "200": _json(_SUBMITTED, "attached"),
                    "201": _json(_SUBMITTED, "created"),
                    **_errors(400, 403, 409, 413, 503),
                },
            },
            "get": {
                "summary": "List requests",
                "operationId": "list",
                "parameters": query_parameters(ListParams),
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "requests": {"type": "array", "items": _REQ_REF},
                                "next": _NINT,
                            },
                        }
                    ),
                    **_errors(400),
                },
            },
        },
        "/v1/requests/bulk": {
            "post": {
                "summary": "Submit many requests at once; all or nothing",
                "operationId": "bulk",
                "requestBody": request_body("Bulk"),
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {"results": {"type": "array", "items": _SUBMITTED}},
                        }
                    ),
                    **_errors(400, 403, 413, 503),
                },
            }
        },
        "/v1/requests/query": {
            "post": {
                "summary": "Progress of a batch of requests",
                "operationId": "query",
                "requestBody": request_body("Query"),
                "responses": {"200": _json({"type": "object"}), **_errors(400, 413)},
            }
        },
        "/v1/requests/obtain": {
            "post": {
                "summary": "tss-hsm: adopt the open (or finished, unreported) request, or submit",
                "description": "Body as for submit, plus adopt: finished (default) or open. "
                "For an open request, request may carry only id, kind, state, pnfsid, path "
                "and queue. A migration whose size or adler32 differs from the open "
                "migration of its pnfsid is refused (409, OtherFile).",
                "operationId": "obtain",
                "requestBody": request_body("Obtain"),
                "responses": {
                    "200": _json(_OBTAINED, "adopted"),
                    "201": _json(_SUBMITTED, "created"),
                    **_errors(400, 403, 409, 413, 503),
                },
            }
        },
        "/v1/requests/latest": {
            "get": {
                "summary": "The newest recall or migration of a pnfsid, open or finished",
                "operationId": "latest",
                "parameters": query_parameters(LatestParams),
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {"request": _REQ_REF, "reported": {"type": "boolean"}},
                        }
                    ),
                    **_errors(400, 404),
                },
            }
        },
        "/v1/requests/{id}": {
            "get": {
                "summary": "One request",
                "operationId": "get",
                "parameters": [REQUEST_ID.document()],
                "responses": {"200": _json(_ONE), **_errors(400, 404)},
            }
        },
        "/v1/requests/{id}/wait": {
            "get": {
                "summary": "Long-poll until the request finishes or the timeout passes",
                "operationId": "wait",
                "parameters": [REQUEST_ID.document(), *query_parameters(WaitParams)],
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {"request": _REQ_REF, "finished": {"type": "boolean"}},
                        }
                    ),
                    **_errors(400, 404),
                },
            }
        },
        "/v1/requests/{id}/why": {
            "get": {
                "summary": "The rule a request waits on, and its ETA",
                "operationId": "why",
                "parameters": [REQUEST_ID.document()],
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "properties": {
                                "id": {"type": "integer"},
                                "state": _STR,
                                "rule": _WHY_RULE,
                                "detail": _STR,
                                "eta_s": {"type": ["number", "null"]},
                                "eta": _NSTR,
                                "queue": _STR,
                                "target_s": {"type": ["number", "null"]},
                                "deadline": _NSTR,
                                "slack_s": {"type": ["number", "null"]},
                                "on_target": {"type": ["boolean", "null"]},
                            },
                        }
                    ),
                    **_errors(400, 404),
                },
            }
        },
        "/v1/requests/{id}/cancel": {
            "post": {
                "summary": "Cancel an open request",
                "operationId": "cancel",
                "parameters": [REQUEST_ID.document()],
                "responses": {"200": _json(_ONE), **_errors(400, 404, 409)},
            }
        },
        "/v1/requests/{id}/retry": {
            "post": {
                "summary": "Queue a failed or cancelled request again",
                "operationId": "retry",
                "parameters": [REQUEST_ID.document()],
                "responses": {"200": _json(_ONE), **_errors(400, 404, 409)},
            }
        },
        "/v1/requests/{id}/reported": {
            "post": {
                "summary": "Record that a client was told the outcome of a finished request",
                "operationId": "reported",
                "parameters": [REQUEST_ID.document()],
                "responses": {"200": _json(_ONE), **_errors(400, 404, 409)},
            }
        },
        "/v1/status": {
            "get": {
                "summary": "Daemon, queues, drives, counts, throughput",
                "operationId": "status",
                "responses": {"200": _json({"type": "object"})},
            }
        },
        "/healthz": {
            "get": {
                "summary": "Liveness",
                "operationId": "healthz",
                "responses": {"200": _json({"type": "object"}), "503": _json({"type": "object"})},
            }
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus exposition",
                "operationId": "metrics",
                "responses": {
                    "200": {"description": "OK", "content": {"text/plain": {"schema": _STR}}}
                },
            }
        },
    }
    paths.update(CATALOG_PATHS)
    paths.update(ADMIN_PATHS)
    return {
        "openapi": "3.1.0",
        "info": {"title": "tssd", "version": "1", "description": "Tape recall queue manager API"},
        "paths": paths,
        "components": {"schemas": {"Request": REQUEST, "Error": ERROR, **body_schemas()}},
    }
