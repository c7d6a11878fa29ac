"""Domain errors as HTTP answers: one middleware maps each error class to its status.

Every error answer has the same body, ``{"error": {"type", "message", "exit_code"}}``
(docs/api.md), whether a handler raised it or a role check refused the call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog
from aiohttp import web

from tssd.api.admission import Overloaded
from tssd.api.inputs import BodyTooLarge
from tssd.config.storage_classes import StorageClassRefused
from tssd.db.engine import is_transient
from tssd.errors import (
    Conflict,
    DatabaseUnavailable,
    InvalidRequest,
    NotFound,
    NotSupported,
    ShuttingDown,
    TssdError,
)

log = structlog.get_logger()
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Unauthorized(TssdError):
    """A call over TCP without a valid bearer token."""


class Forbidden(TssdError):
    """A call the caller's role does not allow."""


_STATUS = {
    BodyTooLarge: 413,  # before InvalidRequest, its base
    InvalidRequest: 400,
    NotFound: 404,
    Conflict: 409,
    NotSupported: 501,
    ShuttingDown: 503,
    Overloaded: 503,
    Unauthorized: 401,
    Forbidden: 403,
    StorageClassRefused: 403,
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
