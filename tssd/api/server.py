"""Listeners: the full API on the Unix socket (and optional TCP), metrics on TCP."""

from __future__ import annotations

import asyncio
import contextlib
import grp
import os
import socket
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path

import structlog
from aiohttp import web
from aiohttp.typedefs import Middleware

from tssd.api import admin, catalog, polls, probes, requests, top
from tssd.api.admission import ADMISSION, Admission
from tssd.api.connections import CappedSite, connection_caps, raise_nofile
from tssd.api.helpers import SERVICES
from tssd.api.http_errors import error_middleware
from tssd.api.roles import read_token, tcp_middleware, unix_middleware
from tssd.errors import ConfigError
from tssd.files import effective_roots
from tssd.services import Services

log = structlog.get_logger()
Factory = Callable[[], asyncio.BaseProtocol]
Mount = Callable[[web.Application], None]

#: The full API: each route module registers its own routes, in this order (a module's
#: fixed paths come before its patterns; every route is in tssd/api/openapi.py).
ROUTES: tuple[Mount, ...] = (
    requests.add_routes,
    catalog.add_routes,
    top.add_routes,
    admin.add_routes,
    polls.add_routes,
    probes.add_probe_routes,
    probes.add_routes,
)
#: The metrics listener (``api.metrics_tcp``): probes only.
PROBE_ROUTES: tuple[Mount, ...] = (probes.add_probe_routes, probes.add_listener_routes)


def add_routes(app: web.Application, *, probes_only: bool = False) -> None:
    for mount in PROBE_ROUTES if probes_only else ROUTES:
        mount(app)


def make_app(
    services: Services,
    *,
    probes_only: bool = False,
    roles: Middleware | None = None,
    admission: Admission | None = None,
) -> web.Application:
    """The API application; *roles* decides who may call what (:mod:`tssd.api.roles`).

    The error middleware is outermost, so that whatever the role check refuses or cannot
    decode is answered as any other error is.
    """
    middlewares: list[Middleware] = [error_middleware]
    if roles is not None:
        middlewares.append(roles)
    app = web.Application(
        middlewares=middlewares, client_max_size=services.settings.api.max_body_bytes
    )
    app[SERVICES] = services
    if admission is not None:
        app[ADMISSION] = admission
    add_routes(app, probes_only=probes_only)
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
    api, limits = services.settings.api, services.settings.limits
    addresses: list[str] = []
    roots = [r.strip() for r in effective_roots(api.pool_roots, services.settings.home_path)
             .split(",") if r.strip()]  # fmt: skip
    log.info("api.pool_roots", roots=roots,
             detail="recall destinations and migrate sources must lie below these")  # fmt: skip
    for root in roots:
        if not os.path.isdir(root):  # once, at start: every request below it would fail
            log.warning("api.pool_root_missing", root=root)
    nofile = raise_nofile()
    caps = connection_caps(
        nofile, limits.max_connections_tcp, limits.max_connections_unix, limits.fd_reserve
    )
    log.info("api.connection_caps", nofile=nofile, tcp=caps.tcp, unix=caps.unix,
             header_timeout_s=limits.header_timeout_s)  # fmt: skip
    admission = Admission(limits, services.store)
    await admission.start()
    stack.push_async_callback(admission.stop)
    app = make_app(services, roles=unix_middleware(), admission=admission)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=5.0,
                           keepalive_timeout=limits.header_timeout_s)  # fmt: skip
    await runner.setup()
    stack.push_async_callback(runner.cleanup)
    sock_path = services.settings.path(api.socket)
    prepare_socket(sock_path)
    loop = asyncio.get_running_loop()

    def unix_server(factory: Factory) -> Awaitable[asyncio.AbstractServer]:
        # Pools poll in bursts (one process per request): a short backlog refuses them.
        return loop.create_unix_server(factory, str(sock_path), backlog=api.backlog)

    await CappedSite(runner, f"unix:{sock_path}", unix_server, caps.unix).start()
    stack.callback(_unlink, sock_path)
    os.chmod(sock_path, api.socket_mode)
    _chgrp(sock_path, api.socket_group)
    addresses.append(f"unix:{sock_path}")
    if api.tcp:
        addresses.append(await _start_tcp(services, stack, admission, caps.tcp))
    if api.metrics_tcp:
        host, port = split_hostport(api.metrics_tcp, "api.metrics_tcp")
        probes = web.AppRunner(make_app(services, probes_only=True), handle_signals=False,
                               keepalive_timeout=limits.header_timeout_s)  # fmt: skip
        await probes.setup()
        stack.push_async_callback(probes.cleanup)
        try:
            await web.TCPSite(probes, host, port).start()
        except OSError as exc:
            raise ConfigError(f"cannot listen on {api.metrics_tcp}: {exc.strerror}") from exc
        addresses.append(f"http://{host}:{port}/metrics")
    return addresses


async def _start_tcp(
    services: Services, stack: AsyncExitStack, admission: Admission, cap: int
) -> str:
    """The API over TCP: anyone on the network may connect, so every call needs a token."""
    api, limits = services.settings.api, services.settings.limits
    if not api.token_file:
        raise ConfigError("api.tcp is set but api.token_file is not: TCP needs a bearer token")
    admin = read_token(str(services.settings.path(api.token_file)), "api.token_file")
    reader = None
    if limits.read_token_file:
        path = str(services.settings.path(limits.read_token_file))
        reader = read_token(path, "limits.read_token_file")
        if reader == admin:
            raise ConfigError("limits.read_token_file holds the admin token (api.token_file)")
    host, port = split_hostport(api.tcp, "api.tcp")
    app = make_app(services, roles=tcp_middleware(admin, reader), admission=admission)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=5.0,
                           keepalive_timeout=limits.header_timeout_s)  # fmt: skip
    await runner.setup()
    stack.push_async_callback(runner.cleanup)
    loop = asyncio.get_running_loop()

    def tcp_server(factory: Factory) -> Awaitable[asyncio.AbstractServer]:
        return loop.create_server(factory, host, port, backlog=api.backlog)

    try:
        await CappedSite(runner, f"http://{host}:{port}", tcp_server, cap).start()
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
