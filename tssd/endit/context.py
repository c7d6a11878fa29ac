"""What the stage, flush and remove books of one ENDIT directory share."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from tssd.config import EnditDirectory, EnditSettings
from tssd.config.storage_classes import DEFAULT_STORAGE_CLASSES, StorageClassSettings
from tssd.db.interface import RequestStoreInterface
from tssd.domain import Request, State
from tssd.endit.dirs import EnditPaths
from tssd.metrics import EnditMetrics
from tssd.ports.history import RequestHistory

T = TypeVar("T")


@dataclass
class DirContext:
    store: RequestStoreInterface
    #: The reads of requests and request events the reconciliation makes.
    history: RequestHistory
    paths: EnditPaths
    directory: EnditDirectory
    settings: EnditSettings
    queue: str
    #: The daemon's metrics; None in tests that wire a directory by hand.
    metrics: EnditMetrics | None = None
    #: ``[[storage_classes]]``: a flush of a class none admits is held, never submitted.
    storage_classes: tuple[StorageClassSettings, ...] = DEFAULT_STORAGE_CLASSES

    def count(self, name: str, amount: float = 1, **labels: str) -> None:
        """Add *amount* to the ENDIT counter *name* of this directory."""
        if self.metrics is not None and amount:
            metric = getattr(self.metrics, name)
            metric.labels(directory=str(self.paths.base), **labels).inc(amount)

    def gauge(self, name: str, value: float) -> None:
        if self.metrics is not None:
            getattr(self.metrics, name).labels(directory=str(self.paths.base)).set(value)

    def common(self) -> dict[str, Any]:
        """Submit fields every request of this directory carries."""
        return {
            "queue": self.queue,
            "priority": self.directory.priority,
            "hsm_instance": self.directory.hsm_name,
        }

    async def rows(self, ids: Sequence[int]) -> list[Request]:
        """The current rows of *ids* (those that exist)."""
        return await self.history.requests_by_id(ids)


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    return await asyncio.to_thread(fn, *args)


class Watches:
    """Completion of tracked requests, from the store's in-process notifier.

    Another daemon sharing the database finishes requests without telling this one: the
    periodic reconciliation finds those.
    """

    def __init__(self, store: RequestStoreInterface) -> None:
        self.store = store
        self._events: dict[int, asyncio.Event] = {}

    def add(self, request_id: int) -> None:
        if request_id not in self._events:
            self._events[request_id] = self.store.notifier.watch(request_id)

    def discard(self, request_id: int) -> None:
        event = self._events.pop(request_id, None)
        if event is not None:
            self.store.notifier.unwatch(request_id, event)

    def finished(self) -> list[int]:
        return [i for i, e in self._events.items() if e.is_set()]

    def close(self) -> None:
        for request_id in list(self._events):
            self.discard(request_id)


class Tracked(Protocol):
    """A file of the directory that has a request in tssd."""

    name: str
    request_id: int | None
    foreign: bool  # the request writes or reads another path (e.g. a tss-hsm call's)


F = TypeVar("F", bound=Tracked)


class RequestBook(Generic[F]):
    """The files of one directory that have a request, by name and by request id, each
    request watched until it finishes.

    Subclasses say where a file's path is (:meth:`path_of`) and what a finished request
    means for its file; an account kept per tracked file extends :meth:`_track` and
    :meth:`_forget`.
    """

    def __init__(
        self, ctx: DirContext, watches: Watches, now: Callable[[], float] = time.monotonic
    ) -> None:
        self.ctx = ctx
        self.watches = watches
        self.now = now
        self.tracked: dict[str, F] = {}
        self.by_id: dict[int, str] = {}

    @property
    def directory(self) -> str:
        return str(self.ctx.paths.base)

    def path_of(self, name: str) -> str:
        raise NotImplementedError

    def _track(self, item: F, row: Request) -> None:
        item.request_id = row.id
        item.foreign = row.path != self.path_of(item.name)
        self.tracked[item.name] = item
        self.by_id[row.id] = item.name
        self.watches.add(row.id)

    def _forget(self, item: F) -> None:
        self.tracked.pop(item.name, None)
        if item.request_id is not None:
            self.by_id.pop(item.request_id, None)
            self.watches.discard(item.request_id)

    def _closed(self, rows: Sequence[Request]) -> list[tuple[F, Request]]:
        """The tracked files among *rows* whose request has ended, forgotten here.

        A row found open again (retried by an operator, or by a reconciliation) stays
        tracked and is watched anew: its old watch has fired.
        """
        ended = []
        for row in rows:
            name = self.by_id.get(row.id)
            item = self.tracked.get(name) if name is not None else None
            if item is None:
                continue
            if State(row.state).is_open:
                self.watches.discard(row.id)
                self.watches.add(row.id)
                continue
            self._forget(item)
            ended.append((item, row))
        return ended
