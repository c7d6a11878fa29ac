"""Listeners: the full API on the Unix socket (and optional TCP), metrics on TCP."""

from __future__ import annotations

import contextlib
import grp
import os
import socket
from contextlib import AsyncExitStack
from pathlib import Path

import structlog
from aiohttp import web

from tssd.api.routes import SERVICES, add_probe_routes, add_routes, error_middleware
from tssd.errors import ConfigError
from tssd.services import Services

log = structlog.get_logger()


def make_app(services: Services, *, probes_only: bool = False) -> web.Application:
    app = web.Application(
        middlewares=[error_middleware], client_max_size=services.settings.api.max_body_bytes
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
        host, port = split_hostport(api.tcp, "api.tcp")
        await web.TCPSite(runner, host, port, backlog=api.backlog).start()
        addresses.append(f"http://{host}:{port}")
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
