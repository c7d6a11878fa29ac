"""The SP sessions tssd holds: one per drive slot (at most ``sp.max_mount_points``, the
node's MAXNUMMP) plus one for catalog queries and deletes, each on its own thread.

A session is signed on when first needed and signed off (``dsmTerminate``) when its slot
is emptied, when the server lost it, or at close; ``dsmCleanUp`` follows the last one.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import structlog

from tssd.backends.sp.client import Library, Session, SignOn
from tssd.backends.sp.rc import SpCallFailed, session_lost, translate
from tssd.backends.sp.worker import SessionThread
from tssd.config import SpSettings
from tssd.errors import ConfigError, TransientBackendError

T = TypeVar("T")
log = structlog.get_logger()


def library_env(settings: SpSettings) -> dict[str, str]:
    """The DSMI_* variables the settings give (the unset ones are left as they are)."""
    env = {
        "DSMI_CONFIG": settings.options_file,
        "DSMI_DIR": settings.dsmi_dir,
        "DSMI_LOG": settings.dsmi_log,
    }
    return {name: value for name, value in env.items() if value}


def sign_on_of(settings: SpSettings) -> SignOn:
    password = ""
    if settings.password_file:
        text = read_password(Path(settings.password_file))
        password = (text.splitlines() or [""])[0].strip()
        if not password:
            raise ConfigError(f"sp.password_file {settings.password_file} holds no password")
    return SignOn(node=settings.node, owner=settings.owner, password=password)


def read_password(path: Path) -> str:
    """The password file: a regular file (no symlink), at most 4 KiB, that only its owner
    may read or write (who could write it could choose the node's password)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            info = os.fstat(fd)
            raw = os.read(fd, 4096) if stat.S_ISREG(info.st_mode) else b""
        finally:
            os.close(fd)
    except OSError as exc:
        raise ConfigError(f"sp.password_file: cannot read {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"sp.password_file: {path} is not a regular file")
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(f"sp.password_file: {path} is open to others (chmod 0600)")
    return raw.decode("utf-8", "replace")


class SpSession:
    """One session and its thread; the event loop side of :class:`~.client.Session`."""

    def __init__(self, name: str, library: Library, settings: SpSettings, who: SignOn) -> None:
        self.name = name
        self.thread = SessionThread(name)
        self._library = library
        self._settings = settings
        self._who = who
        self._session: Session | None = None

    @property
    def signed_on(self) -> bool:
        return self._session is not None

    def _open_sync(self) -> Session:
        session = Session(self._library.open(), self._settings.buffer_size)
        session.sign_on(self._who)
        try:
            session.register(self._settings.filespace)
        except SpCallFailed:
            session.terminate()
            raise
        return session

    async def session(self) -> Session:
        if self._session is None:
            try:
                self._session = await self.thread.call(self._open_sync)
            except SpCallFailed as exc:
                raise translate(exc, f"sign-on of session {self.name}") from exc
            except (OSError, AttributeError) as exc:
                # No library, or one without the API's functions: sp.api_library is wrong.
                raise ConfigError(
                    f"sp.api_library: cannot load the SP API library "
                    f"{self._settings.api_library}: {exc}"
                ) from exc
            log.info("sp.session.open", session=self.name)
        return self._session

    async def run(self, what: str, func: Callable[[Session], T]) -> T:
        """``func(session)`` on the session's thread; a failure as tssd's error.

        After a code that loses the session, the session is ended so that the next call
        signs on again.
        """
        session = await self.session()
        try:
            return await self.thread.call(func, session)
        except SpCallFailed as exc:
            if session_lost(exc.rc):
                log.warning("sp.session.lost", session=self.name, rc=exc.rc, call=exc.call)
                await self.close()
            raise translate(exc, what) from exc

    async def close(self) -> None:
        """Sign off; never raises."""
        session, self._session = self._session, None
        if session is not None:
            with contextlib.suppress(OSError, RuntimeError):
                await self.thread.call(session.terminate)
            log.info("sp.session.closed", session=self.name)

    async def shutdown(self) -> None:
        await self.close()
        self.thread.shutdown()


def lost(exc: BaseException) -> bool:
    """Whether *exc* (translated) lost its session: the read breaks off."""
    return (
        isinstance(exc, TransientBackendError) and exc.code is not None and session_lost(exc.code)
    )
