"""A real ``tssd serve`` as a subprocess: for acceptance tests and benchmarks.

Tests and benchmarks must exercise the daemon as operators run it (its own process, its
settings from the environment, its Unix socket), not an in-process copy. These helpers
are the one place that knows how to start one and tell when it is ready.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tssd.wire import Client, WireError

#: The directory of this interpreter's console scripts (tssd, tssctl, tss-hsm).
BIN = Path(sys.executable).parent


class DaemonError(RuntimeError):
    """The daemon exited or did not become ready in time."""


def serve_env(home: Path, db_url: str, settings: Mapping[str, str]) -> dict[str, str]:
    """The environment of a ``tssd serve`` of *home* on *db_url*.

    TSSD_* variables of the caller's environment are dropped so that nothing leaks into
    the daemon unnoticed; *settings* are further TSSD_* variables. The metrics listener
    is off (tests run many daemons side by side) and logs are JSON lines. The directory
    holding *home* (a test's tmp dir) is the pool root unless *settings* name others: a
    daemon is confined by default (``$TSSD_HOME/pools``), and tests keep their files
    beside its home.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("TSSD_")}
    env.update(
        TSSD_HOME=str(home),
        TSSD_DATABASE_URL=db_url,
        TSSD_API_METRICS_TCP="",
        TSSD_LOG_FORMAT="json",
        TSSD_API_POOL_ROOTS=str(home.parent),
    )
    env.update(settings)
    return env


def spawn_serve(
    env: Mapping[str, str], log_path: Path, *, append: bool = False, args: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    """Start ``tssd serve *args`` with *env*, its output going to *log_path*."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab" if append else "wb") as log:
        return subprocess.Popen(
            [str(BIN / "tssd"), "serve", *args],
            env=dict(env),
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def stop_serve(
    proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 60.0
) -> int:
    """Send *sig* unless the daemon already exited; its exit code."""
    if proc.poll() is None:
        proc.send_signal(sig)
    return proc.wait(timeout=timeout)


class ServeProcess:
    """Mixin for a test's handle on one ``tssd serve`` process (its ``proc``)."""

    proc: subprocess.Popen[bytes] | None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        """Stop the daemon with *sig* (see :func:`stop_serve`); its exit code."""
        assert self.proc is not None
        code = stop_serve(self.proc, sig, timeout)
        self.proc = None
        return code

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def wait_ready(
    proc: subprocess.Popen[bytes],
    socket: Path,
    timeout: float,
    log: Callable[[], str],
    name: str = "tssd",
    poll_s: float = 0.1,
) -> None:
    """Return once the daemon answers ``GET /healthz`` on *socket*; raise
    :class:`DaemonError` (with the tail of *log*) if it exits or *timeout* passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DaemonError(f"{name} exited {proc.returncode}:\n{log()}")
        try:
            if Client(str(socket)).call("GET", "/healthz", timeout=2).get("status") == "ok":
                return
        except WireError:
            pass
        time.sleep(poll_s)
    raise DaemonError(f"{name} did not become ready:\n{log()}")


def adler32_file(path: Path) -> str:
    """The adler32 of a file as dCache writes it: eight lower-case hex digits."""
    value = 1
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            value = zlib.adler32(chunk, value)
    return f"{value:08x}"
