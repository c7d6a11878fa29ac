"""The request store in dictionaries: the contract of :mod:`tssd.db.interface`, no database.

For tests that need a request store but not SQL: its operations cost microseconds where
an SQLite transaction costs milliseconds. ``tests/integration/test_store_contract.py``
holds it to the same suite as the SQLite and PostgreSQL store. Like procrastinate's
``InMemoryConnector``, it keeps the rows as plain values and enforces by hand what the
database enforces by constraints: one open request per ``(kind, key)`` (the partial
unique index), conditional transitions (``UPDATE ... WHERE state IN ...``).

Every operation runs without an ``await`` between its read and its write, so on one
event loop each is atomic, as a transaction is. Reads return :class:`tssd.domain.Request`
records, as the real store does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy.exc import IntegrityError

from tssd.db.actions import OperatorActions
from tssd.db.memory_scheduling import MemoryScheduling
from tssd.db.models import Request as RequestRow
from tssd.db.models import utcnow
from tssd.db.notifier import COUNTED, Notifier, Outcomes
from tssd.db.pages import ListFilter
from tssd.db.polls import REPORTED, Obtained, PollIndex, adoptable, new_request, on_tape_already
from tssd.db.views import request_of
from tssd.domain import OPEN_STATES, Kind, Request, State
from tssd.errors import Conflict, NotFound
from tssd.lifecycle import LIFECYCLE, Transition, sources, target
from tssd.ports.scheduling import QueueRecord
from tssd.submit import SubmitSpec
from tssd.work import WorkSignal

if TYPE_CHECKING:
    from tssd.db.interface import RequestStoreInterface
    from tssd.db.store import RequestStore
    from tssd.ports.admission import OpenCount
    from tssd.ports.scheduling import IntakeLedger, SchedulerStore, SessionLedger

#: Every column attribute of a request, with its value before anything sets it.
_BLANK: dict[str, Any] = {attr.key: None for attr in RequestRow.__mapper__.column_attrs}
_FILTERED = ("state", "kind", "queue", "volume", "pnfsid")


class MemoryQueues:
    """The queue settings of a :class:`MemoryStore` (``QueueStore`` of tssd.db.queues)."""

    def __init__(self, queues: dict[str, dict[str, Any]]) -> None:
        self._queues = queues

    async def rows(self) -> list[QueueRecord]:
        return [QueueRecord(**q) for _, q in sorted(self._queues.items())]

    async def paused(self) -> frozenset[str]:
        return frozenset(name for name, q in self._queues.items() if q["paused"])


@dataclass(frozen=True, slots=True)
class Event:
    """One line of a request's history (the ``request_events`` table)."""

    #: Increasing in the order of recording, across requests (the table's id).
    id: int
    request_id: int
    at: datetime
    from_state: str | None
    to_state: str
    reason: str | None


class MemoryStore(OperatorActions):
    """The request store in dictionaries (see the module docstring).

    It has no ``sessions`` or ``engine``: what is typed on :mod:`tssd.db.interface` or on
    the views of :mod:`tssd.ports.scheduling` runs on it, the whole scheduler included
    (``tests/unit/test_sched_on_memory.py``); code that still queries SQL itself needs
    :class:`~tssd.db.store.RequestStore`.
    """

    def __init__(
        self,
        outcomes: Outcomes | None = None,
        *,
        notifier: Notifier | None = None,
        poll_ttl_s: float = 600.0,
    ) -> None:
        self.notifier = notifier if notifier is not None else Notifier()
        self.outcomes = outcomes
        self.work = WorkSignal()
        self.polls = PollIndex(ttl_s=poll_ttl_s)
        self.instance: str | None = None
        self._rows: dict[int, dict[str, Any]] = {}
        #: (kind, key) -> id of its open request: the ``uq_requests_open_key`` index.
        self._open: dict[tuple[str, str], int] = {}
        #: History per request id; and the newest ids per (kind, pnfsid) and (kind, key),
        #: so that a poll's or a put's look-up stays a dict read at any size.
        self._events: dict[int, list[Event]] = {}
        #: Every event, oldest (lowest id) first: the reads since an id
        #: (:class:`tssd.db.memory_history.MemoryHistory`).
        self._log: list[Event] = []
        self._next_event = 1
        self._by_pnfsid: dict[tuple[str, str | None], list[int]] = {}
        self._by_key: dict[tuple[str, str], list[int]] = {}
        self._queues: dict[str, dict[str, Any]] = {}
        self._next_id = 1
        #: The scheduler's reads and claims, as ``RequestStore.scheduling``
        #: (tssd.db.scheduling), and its queue rows.
        self.scheduling = MemoryScheduling(self._rows, self._claim)
        self.queue_settings = MemoryQueues(self._queues)

    # -- test set-up and inspection (not part of the interface) -------------------------

    def set_queue(self, name: str, **values: Any) -> None:
        """Configure queue *name* (what ``tssctl queue`` and the config seeding write)."""
        row = {"name": name, "priority": 0, "max_drives": None, "paused": False,
               "latency_target_s": None}  # fmt: skip
        row.update(self._queues.get(name, {}), **values)
        self._queues[name] = row

    def events(self, request_id: int) -> list[Event]:
        """The history of *request_id*, oldest first."""
        return list(self._events.get(request_id, ()))

    # -- intake -------------------------------------------------------------------------

    async def submit(self, specs: Sequence[SubmitSpec]) -> list[tuple[bool, Request]]:
        results: list[tuple[bool, Request]] = []
        made: dict[tuple[str, str], int] = {}
        for spec in specs:
            ident = (spec.kind.value, spec.key)
            if ident in made:
                results.append((True, self._snapshot(made[ident])))
            elif ident in self._open:
                results.append((False, self._snapshot(self._open[ident])))
            else:
                made[ident] = self._insert(spec)
                results.append((True, self._snapshot(made[ident])))
        self.polls.seen((row for _, row in results), add=len(specs) == 1)
        if made:
            self.work.submitted(Kind(kind) for kind, _ in made)
        return results

    async def obtain(self, spec: SubmitSpec, *, adopt_finished: bool) -> Obtained:
        found = await self.latest(spec.kind.value, spec.key)
        if found is not None:
            row, reported = found
            if adoptable(row, reported, spec.path, adopt_finished=adopt_finished) or (
                on_tape_already(row, spec)
                and row.bfid is not None
                and not self._copy_removed(row.bfid)
            ):
                self.polls.seen([row])
                return Obtained(False, row, reported)
        created = self._snapshot(self._insert(spec))
        self.polls.seen([created])
        self.work.submitted((spec.kind,))
        return Obtained(True, created, False)

    def _insert(self, spec: SubmitSpec) -> int:
        request_id, self._next_id = self._next_id, self._next_id + 1
        values = {**_BLANK, **new_request(spec), "id": request_id}
        self._rows[request_id] = values
        self._open[(values["kind"], values["key"])] = request_id
        self._by_pnfsid.setdefault((values["kind"], values["pnfsid"]), []).append(request_id)
        self._by_key.setdefault((values["kind"], values["key"]), []).append(request_id)
        self._event([request_id], None, State.QUEUED, "submitted")
        return request_id

    def _copy_removed(self, bfid: str) -> bool:
        removals = self._by_key.get((Kind.REMOVE.value, bfid), ())
        return any(self._rows[i]["state"] == State.DONE for i in removals)

    # -- queries ------------------------------------------------------------------------

    async def get(self, request_id: int) -> Request:
        if request_id not in self._rows:
            raise NotFound(f"no request {request_id}")
        return self._snapshot(request_id)

    async def list_requests(self, flt: ListFilter) -> list[Request]:
        wanted = {name: value for name in _FILTERED if (value := getattr(flt, name)) is not None}
        found: list[Request] = []
        for request_id in self._rows:  # added in id order (retention only removes)
            if len(found) >= flt.limit:
                break
            values = self._rows[request_id]
            if flt.after is not None and request_id <= flt.after:
                continue
            if all(values[k] == v for k, v in wanted.items()):
                found.append(self._snapshot(request_id))
        return found

    async def query(self, ids: Sequence[int]) -> dict[str, Any]:
        counts = {s.value: 0 for s in State}
        total = done = 0
        failed: list[Request] = []
        present = sorted(i for i in set(ids) if i in self._rows)
        for request_id in present:
            values = self._rows[request_id]
            counts[values["state"]] += 1
            total += values["size"] or 0
            done += (values["size"] or 0) if values["state"] == State.DONE else 0
            if values["state"] in (State.FAILED, State.CANCELLED) and len(failed) < 100:
                failed.append(self._snapshot(request_id))
        return {
            "counts": counts,
            "bytes_total": total,
            "bytes_done": done,
            "missing": [i for i in ids if i not in self._rows],
            "failed": failed,
        }

    async def counts(self) -> list[tuple[str, str, str, int]]:
        groups: dict[tuple[str, str, str], int] = {}
        for v in self._rows.values():
            group = (v["kind"], v["queue"], v["state"])
            groups[group] = groups.get(group, 0) + 1
        return [(*group, n) for group, n in sorted(groups.items())]

    async def queues(self) -> list[dict[str, Any]]:
        return [dict(q) for _, q in sorted(self._queues.items())]

    async def count_open(self) -> int:
        return len(self._open)  # one entry per open request (the open-key index)

    # wait: tssd.db.actions.OperatorActions

    async def latest(self, kind: str, pnfsid: str) -> tuple[Request, bool] | None:
        matching = self._by_pnfsid.get((kind, pnfsid))
        if not matching:
            return None
        newest = matching[-1]
        reported = any(e.reason == REPORTED for e in self._events[newest])
        return request_of(self._rows[newest]), reported

    async def mark_reported(self, request_id: int) -> Request:
        values = self._rows.get(request_id)
        if values is None:
            raise NotFound(f"no request {request_id}")
        state = State(values["state"])
        if state.is_open:
            raise Conflict(f"request {request_id} is {state.value}: not finished")
        if values["delivery"] == "claim":
            values["delivery"] = "claimed"
        self._event([request_id], state, state, REPORTED)
        return self._snapshot(request_id)

    # cancel and retry: tssd.db.actions.OperatorActions

    # -- scheduler side -----------------------------------------------------------------

    async def _apply(
        self,
        transition: Transition,
        ids: Sequence[int],
        *,
        reason: str | None = None,
        values: dict[str, Any] | None = None,
    ) -> list[int]:
        """The ledger's conditional move (``RequestStore._apply``)."""
        from_states = set(sources(transition))
        to_state = target(transition)
        moved = list(
            dict.fromkeys(i for i in ids if self._rows.get(i, {}).get("state") in from_states)
        )
        changes = {"state": to_state.value, "updated_at": utcnow(), **(values or {})}
        unknown = set(changes) - set(_BLANK)
        if unknown:
            raise ValueError(f"not request columns: {sorted(unknown)}")
        self._check_open_keys(moved, to_state)
        for request_id in moved:
            row = self._rows[request_id]
            ident = (row["kind"], row["key"])
            if row["state"] in OPEN_STATES and not to_state.is_open:
                del self._open[ident]
            elif to_state.is_open:
                self._open[ident] = request_id
            row.update(changes)
        self._event(moved, None, to_state, reason)
        if moved and self.outcomes is not None and to_state in COUNTED:
            ended = [self._rows[i] for i in moved]
            self.outcomes(to_state, [(row["kind"], row["queue"]) for row in ended])
        self.polls.moved(moved, to_state)
        if not to_state.is_open:
            self.notifier.finished(moved)
        elif moved and to_state is State.QUEUED:
            self.work.requeued()
        return moved

    def _check_open_keys(self, moved: Sequence[int], to_state: State) -> None:
        """Refuse, before changing anything, to open a second request of one key."""
        if not to_state.is_open:
            return
        opening: set[tuple[str, str]] = set()
        for request_id in moved:
            row = self._rows[request_id]
            ident = (row["kind"], row["key"])
            holder = self._open.get(ident)
            if (holder is not None and holder != request_id) or (
                holder is None and ident in opening
            ):
                raise IntegrityError("transition", None, ValueError("uq_requests_open_key"))
            opening.add(ident)

    async def requeue_active(self, reason: str) -> int:
        ids = [
            i
            for i, v in self._rows.items()
            if v["state"] == State.ACTIVE
            and (self.instance is None or v["instance"] in (None, self.instance))
        ]
        return len(await self.restart(ids, reason))

    async def set_locations(self, located: dict[int, tuple[str, int]]) -> None:
        for request_id, (volume, position) in located.items():
            if request_id in self._rows:
                self._rows[request_id].update(volume=volume, position=position)

    def _claim(self, ids: Sequence[int], drive: str | None) -> list[Request]:
        """Move queued *ids* to active on *drive* (the one write of every claim)."""
        now, active = utcnow(), target(Transition.CLAIM)
        for request_id in ids:
            row = self._rows[request_id]
            row.update(state=active.value, drive=drive, started_at=now, updated_at=now,
                       attempts=row["attempts"] + 1, instance=self.instance)  # fmt: skip
        [queued] = LIFECYCLE[Transition.CLAIM].sources
        self._event(ids, queued, active, drive)
        self.polls.moved(ids, active)
        return [self._snapshot(i) for i in ids]

    # -- helpers ------------------------------------------------------------------------

    def _snapshot(self, request_id: int) -> Request:
        return request_of(self._rows[request_id])

    def _event(
        self, ids: Sequence[int], source: State | None, target: State, reason: str | None
    ) -> None:
        at = utcnow()
        origin = source.value if source is not None else None
        for request_id in ids:
            event = Event(self._next_event, request_id, at, origin, target.value, reason)
            self._next_event += 1
            self._events.setdefault(request_id, []).append(event)
            self._log.append(event)

    def _forget(self, ids: Sequence[int]) -> None:
        """Delete the finished requests *ids* and their events (retention's purge)."""
        gone = set(ids)
        for request_id in gone:
            row = self._rows.pop(request_id)
            self._events.pop(request_id, None)
            for index, ident in ((self._by_pnfsid, (row["kind"], row["pnfsid"])),
                                 (self._by_key, (row["kind"], row["key"]))):  # fmt: skip
                index[ident].remove(request_id)
                if not index[ident]:
                    del index[ident]
        self._log = [e for e in self._log if e.request_id not in gone]


if TYPE_CHECKING:

    def _conforms(memory: MemoryStore, sql: RequestStore) -> None:
        """For mypy: both stores have the interface's signatures, so every consumer typed
        on it or on one of its views (tssd.ports) runs on either."""
        stores: list[RequestStoreInterface] = [memory, sql]
        sessions: list[SessionLedger] = [memory, sql]
        intakes: list[IntakeLedger] = [memory, sql]
        schedulers: list[SchedulerStore] = [memory, sql]
        counts: list[OpenCount] = [memory, sql]
        del stores, sessions, intakes, schedulers, counts
