"""The named transitions of :class:`tssd.lifecycle.RequestLedger`, written once for both
request stores on their private conditional ``_apply``.

Each method says which columns its transition writes; the from-states and the to-state
come from :data:`tssd.lifecycle.LIFECYCLE` inside ``_apply``, so no caller names them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, Protocol

from sqlalchemy.exc import IntegrityError

from tssd.db.models import utcnow
from tssd.errors import Conflict
from tssd.lifecycle import Transition


class Applies(Protocol):
    """What the named transitions need of their store."""

    def _apply(
        self,
        transition: Transition,
        ids: Sequence[int],
        *,
        reason: str | None = None,
        values: dict[str, Any] | None = None,
    ) -> Awaitable[list[int]]: ...


class Ledger:
    """The named transitions for a store with ``_apply`` (tssd/db/store.py, memory.py).

    ``_apply(transition, ids, reason=..., values=...)`` moves those of *ids* in the
    transition's from-states to its to-state, writing *values* and ``updated_at``, and
    returns the ids that moved (see :class:`tssd.lifecycle.RequestLedger`).
    """

    async def requeue(
        self: Applies, ids: Sequence[int], reason: str, *, error: str | None = None
    ) -> list[int]:
        values: dict[str, Any] = {"drive": None}
        if error is not None:
            values["error"] = error
        return await self._apply(Transition.REQUEUE, ids, reason=reason, values=values)

    async def relocate(self: Applies, ids: Sequence[int], reason: str) -> list[int]:
        values = {"volume": None, "position": None, "drive": None}
        return await self._apply(Transition.RELOCATE, ids, reason=reason, values=values)

    async def restart(self: Applies, ids: Sequence[int], reason: str) -> list[int]:
        values = {"drive": None, "started_at": None}
        return await self._apply(Transition.RESTART, ids, reason=reason, values=values)

    async def finish(
        self: Applies, request_id: int, reason: str | None = None, **values: Any
    ) -> bool:
        return await _end(self, Transition.FINISH, request_id, reason, values)

    async def fail(
        self: Applies, request_id: int, reason: str | None = None, **values: Any
    ) -> bool:
        return await _end(self, Transition.FAIL, request_id, reason, values)

    async def reject(
        self: Applies, ids: Sequence[int], reason: str, *, error: str, error_code: int | None
    ) -> list[int]:
        values = {"error": error, "error_code": error_code, "finished_at": utcnow()}
        return await self._apply(Transition.REJECT, ids, reason=reason, values=values)

    async def withdraw(self: Applies, ids: Sequence[int], reason: str) -> list[int]:
        values = {"error": reason, "finished_at": utcnow()}
        return await self._apply(Transition.WITHDRAW, ids, reason=reason, values=values)

    async def cancel(self: Applies, ids: Sequence[int], reason: str) -> list[int]:
        values = {"error": reason, "finished_at": utcnow()}
        return await self._apply(Transition.CANCEL, ids, reason=reason, values=values)

    async def abandon(self: Applies, ids: Sequence[int], reason: str, *, error: str) -> list[int]:
        return await self._apply(Transition.ABANDON, ids, reason=reason, values={"error": error})

    async def retry(self: Applies, ids: Sequence[int], reason: str) -> list[int]:
        values = {"error": None, "error_code": None, "finished_at": None, "attempts": 0}
        try:
            return await self._apply(Transition.RETRY, ids, reason=reason, values=values)
        except IntegrityError as exc:
            # The open-key rule (uq_requests_open_key): the key has another open request.
            raise Conflict(f"another open request has the key of one of {list(ids)}") from exc


async def _end(
    store: Applies,
    transition: Transition,
    request_id: int,
    reason: str | None,
    values: dict[str, Any],
) -> bool:
    """An active request's end (finish or fail), ``finished_at`` now unless given."""
    values.setdefault("finished_at", utcnow())
    return bool(await store._apply(transition, [request_id], reason=reason, values=values))
