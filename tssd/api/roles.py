"""Who may call what: the roles of the API (docs/reliability.md, "Threat model").

Three roles, decided per request from the listener it came through:

* ``admin``: everything. Over TCP, the admin token (``api.token_file``); on the Unix
  socket, a peer running as the daemon's own user (``SO_PEERCRED``), which is how
  ``tssctl`` is run by the operator.
* ``read``: every call that changes nothing. Over TCP, the read-only token
  (``limits.read_token_file``).
* ``pool``: any other peer on the Unix socket, i.e. the socket's group (dCache pools'
  ``tss-hsm``): submit, poll and cancel its own requests, read a request by id.

Every TCP call needs a token, reads included: without one, the list and the catalog gave
every path on the site to anyone on the network.
"""

from __future__ import annotations

import hmac
import os
import socket
import stat
import struct
from enum import Enum
from pathlib import Path

import structlog
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from tssd.api.http_errors import Forbidden, Unauthorized, error_body
from tssd.api.inputs import header_text
from tssd.errors import ConfigError

log = structlog.get_logger()


class Role(Enum):
    ADMIN = "admin"
    READ = "read"
    POOL = "pool"


ROLE: web.RequestKey[Role] = web.RequestKey("role", Role)
#: The Unix peer's uid, for "its own" requests (None over TCP).
PEER_UID: web.RequestKey[int] = web.RequestKey("peer_uid", int)


#: Calls that change nothing although they are POSTs.
_READ_POSTS = frozenset({"/v1/requests/query"})
#: What the pool role may do: (method, route) with the route as registered.
_POOL = frozenset(
    {
        ("POST", "/v1/requests"),
        ("POST", "/v1/requests/bulk"),
        ("POST", "/v1/requests/obtain"),
        ("POST", "/v1/requests/query"),
        ("POST", "/v1/requests/{id}/cancel"),
        ("POST", "/v1/requests/{id}/reported"),
        ("GET", "/v1/requests/latest"),
        ("GET", "/v1/requests/{id}"),
        ("GET", "/v1/requests/{id}/wait"),
        ("GET", "/v1/requests/{id}/why"),
        ("GET", "/v1/status"),
        ("GET", "/healthz"),
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
    }
)


def route_of(request: web.Request) -> str:
    info = request.match_info.route.resource
    return info.canonical if info is not None else request.path


def allowed(role: Role, method: str, route: str) -> bool:
    if role is Role.ADMIN:
        return True
    if role is Role.READ:
        return method in ("GET", "HEAD", "OPTIONS") or route in _READ_POSTS
    return (("GET" if method == "HEAD" else method), route) in _POOL


def admin_only(method: str, route: str) -> bool:
    """Whether only the admin role may make this call (for docs and tests)."""
    return not any(allowed(r, method, route) for r in (Role.READ, Role.POOL))


def _refuse(request: web.Request, role: Role, why: str) -> web.Response:
    log.warning("api.forbidden", method=request.method, path=request.path, role=role.value,
                peer=request.remote, reason=why)  # fmt: skip
    return error_body(Forbidden(f"the {role.value} role may not {why}"), 403)


def tcp_middleware(admin_token: str, read_token: str | None) -> Middleware:
    """Every TCP call needs ``Authorization: Bearer <token>``; the token names the role."""
    tokens = [(f"Bearer {admin_token}".encode(), Role.ADMIN)]
    if read_token:
        tokens.append((f"Bearer {read_token}".encode(), Role.READ))

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        given = header_text(request, "Authorization").encode()
        # Every token compared, in constant time: the answer's timing names none.
        found = [role for token, role in tokens if hmac.compare_digest(given, token)]
        if not found:
            log.warning("api.unauthorized", method=request.method, path=request.path,
                        peer=request.remote)  # fmt: skip
            return error_body(Unauthorized("a bearer token is required (api.token_file)"), 401)
        role = found[0]
        if not allowed(role, request.method, route_of(request)):
            return _refuse(request, role, f"{request.method} {route_of(request)}")
        request[ROLE] = role
        return await handler(request)

    return check


def unix_middleware() -> Middleware:
    """The daemon's own user is admin on the socket; any other peer is a pool."""
    own_uid = os.geteuid()

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        uid = peer_uid(request)
        role = Role.ADMIN if uid == own_uid else Role.POOL
        if not allowed(role, request.method, route_of(request)):
            return _refuse(request, role, f"{request.method} {route_of(request)} "
                           "(run tssctl as the daemon's user)")  # fmt: skip
        request[ROLE] = role
        if uid is not None:
            request[PEER_UID] = uid
        return await handler(request)

    return check


_UCRED = struct.Struct("3i")


def peer_uid(request: web.Request) -> int | None:
    """The uid of the process at the other end of a Unix socket (SO_PEERCRED)."""
    transport = request.transport
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    except OSError:
        return None
    _pid, uid, _gid = _UCRED.unpack(raw)
    return int(uid)


def is_own(request: web.Request, owner_uid: int | None) -> bool:
    """Whether the caller may act on a request submitted by *owner_uid*."""
    if request.get(ROLE, Role.ADMIN) is Role.ADMIN:
        return True
    return owner_uid is not None and request.get(PEER_UID) == owner_uid


def read_token(path: str, setting: str) -> str:
    """The token in *path*; refuse a file that is empty, missing, world-readable, or that
    anyone but its owner may write (who could write it could choose the token)."""
    try:
        info = os.stat(path)
        token = Path(path).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"{setting}: cannot read {path}: {exc.strerror}") from exc
    if not token:
        raise ConfigError(f"{setting}: {path} is empty")
    if info.st_mode & stat.S_IROTH:
        raise ConfigError(f"{setting}: {path} is readable by everyone (chmod o-r)")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ConfigError(f"{setting}: {path} is group- or world-writable (chmod go-w)")
    return token
