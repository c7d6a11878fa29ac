"""Listeners: the full API on the Unix socket (and optional TCP), metrics on TCP."""

from __future__ import annotations

import contextlib
import grp
import hmac
import os
import socket
import stat
from contextlib import AsyncExitStack
from pathlib import Path

import structlog
from aiohttp import web
from aiohttp.typedefs import Middleware

from tssd.api.routes import (
    SERVICES,
    Handler,
    add_probe_routes,
    add_routes,
    error_body,
    error_middleware,
)
from tssd.errors import ConfigError, TssdError
from tssd.files import effective_roots
from tssd.services import Services

log = structlog.get_logger()


#: Methods that change nothing: allowed over TCP without a token.
READ_ONLY = frozenset({"GET", "HEAD", "OPTIONS"})


class Unauthorized(TssdError):
    """A mutating call over TCP without the right bearer token."""


def token_middleware(token: str) -> Middleware:
    """Every mutating call must carry ``Authorization: Bearer <token>``."""
    expected = f"Bearer {token}".encode()

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method not in READ_ONLY:
            given = request.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                log.warning("api.unauthorized", method=request.method, path=request.path,
                            peer=request.remote)  # fmt: skip
                return error_body(Unauthorized("a bearer token is required (api.token_file)"), 401)
        return await handler(request)

    return check


def read_token(path: str) -> str:
    """The bearer token in *path*; refuse an empty, missing or world-readable file."""
    try:
        info = os.stat(path)
        token = Path(path).read_text().strip()
    except OSError as exc:
        raise ConfigError(f"api.token_file: cannot read {path}: {exc.strerror}") from exc
    if not token:
        raise ConfigError(f"api.token_file: {path} is empty")
    if info.st_mode & stat.S_IROTH:
        raise ConfigError(f"api.token_file: {path} is readable by everyone (chmod o-r)")
    return token


def make_app(
    services: Services, *, probes_only: bool = False, token: str | None = None
) -> web.Application:
    middlewares: list[Middleware] = [error_middleware]
    if token is not None:
        middlewares.insert(0, token_middleware(token))
    app = web.Application(
        middlewares=middlewares, client_max_size=services.settings.api.max_body_bytes
    )
    app[SERVICES] = services
    if probes_only:
        add_probe_routes(app)
    else:
        add_routes(app)
    return app


def split_hostport(value: str, what: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise ConfigError(f"{what} must be HOST:PORT, got {value!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def prepare_socket(path: Path) -> None:
    """Refuse to start beside a live daemon; remove a stale socket left by a crash."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except OSError:
        path.unlink()
    else:
        raise ConfigError(f"another tssd is serving {path}; stop it first")
    finally:
        probe.close()


async def start_listeners(services: Services, stack: AsyncExitStack) -> list[str]:
    """Start every configured listener; the stack closes them. Returns their addresses."""
    api = services.settings.api
    addresses: list[str] = []
    roots = [r.strip() for r in effective_roots(api.pool_roots, services.settings.home_path)
             .split(",") if r.strip()]  # fmt: skip
    log.info("api.pool_roots", roots=roots,
             detail="recall destinations and migrate sources must lie below these")  # fmt: skip
    for root in roots:
        if not os.path.isdir(root):  # once, at start: every request below it would fail
            log.warning("api.pool_root_missing", root=root)
    runner = web.AppRunner(make_app(services), handle_signals=False, shutdown_timeout=5.0)
    await runner.setup()
    stack.push_async_callback(runner.cleanup)
    sock_path = services.settings.path(api.socket)
    prepare_socket(sock_path)
    # Pools poll in bursts (one process per request): a short backlog refuses them.
    await web.UnixSite(runner, str(sock_path), backlog=api.backlog).start()
    stack.callback(_unlink, sock_path)
    os.chmod(sock_path, api.socket_mode)
    _chgrp(sock_path, api.socket_group)
    addresses.append(f"unix:{sock_path}")
    if api.tcp:
        addresses.append(await _start_tcp(services, stack))
    if api.metrics_tcp:
        host, port = split_hostport(api.metrics_tcp, "api.metrics_tcp")
        probes = web.AppRunner(make_app(services, probes_only=True), handle_signals=False)
        await probes.setup()
        stack.push_async_callback(probes.cleanup)
        try:
            await web.TCPSite(probes, host, port).start()
        except OSError as exc:
            raise ConfigError(f"cannot listen on {api.metrics_tcp}: {exc.strerror}") from exc
        addresses.append(f"http://{host}:{port}/metrics")
    return addresses


async def _start_tcp(services: Services, stack: AsyncExitStack) -> str:
    """The API over TCP: anyone on the network may connect, so mutations need a token."""
    api = services.settings.api
    if not api.token_file:
        raise ConfigError("api.tcp is set but api.token_file is not: TCP needs a bearer token")
    token = read_token(str(services.settings.path(api.token_file)))
    host, port = split_hostport(api.tcp, "api.tcp")
    runner = web.AppRunner(
        make_app(services, token=token), handle_signals=False, shutdown_timeout=5.0
    )
    await runner.setup()
    stack.push_async_callback(runner.cleanup)
    try:
        await web.TCPSite(runner, host, port, backlog=api.backlog).start()
    except OSError as exc:
        raise ConfigError(f"cannot listen on {api.tcp}: {exc.strerror}") from exc
    return f"http://{host}:{port}"


def _chgrp(path: Path, group: str) -> None:
    if not group:
        return
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError as exc:
        raise ConfigError(f"api.socket_group: no group {group!r}") from exc
    os.chown(path, -1, gid)


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
