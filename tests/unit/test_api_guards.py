"""Input decoding, role table, connection caps, catalog file checks, long-poll wake-ups
(issue 17 points 4, 7, 8, 9; the attacks themselves run against real daemons in
tests/acceptance/test_api_limits.py and test_api_roles.py)."""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from backend_stub import StubBackend
from hypothesis import given
from hypothesis import strategies as st
from structlog.testing import capture_logs

from tssd.api.admission import Admission, Overloaded
from tssd.api.bulk_json import ENCODE_SLICE, PIECEWISE_ABOVE, decode_bulk, encode_results
from tssd.api.catalog_file import has_rows, read_catalog_file
from tssd.api.connections import connection_caps
from tssd.api.inputs import MAX_DEPTH, decode_json
from tssd.api.roles import Role, admin_only, allowed
from tssd.clock import RealClock
from tssd.config.sections import LimitsSettings
from tssd.db.engine import create_engine, session_factory
from tssd.db.memory import MemoryStore
from tssd.db.models import Base, State
from tssd.db.store import RequestStore
from tssd.errors import InvalidRequest
from tssd.metrics import Metrics
from tssd.retry import Retrier, RetryPolicy
from tssd.scheduler.policy import get_policy
from tssd.submit import parse_submit


@pytest.mark.parametrize(
    "raw",
    [
        b"[" * 1000 + b"]" * 1000,
        b'{"a":' * (MAX_DEPTH + 1) + b"1" + b"}" * (MAX_DEPTH + 1),
        b'{"path": "/p/\\ud800"}',
        b'["\\uDFFF"]',
        b'{"\\udc80": 1}',
        b'{"path": "\xff"}',
        b"{",
    ],
)
def test_undecodable_bodies_are_invalid_requests(raw: bytes) -> None:
    with pytest.raises(InvalidRequest):
        decode_json(raw)


def test_real_bodies_decode() -> None:
    assert decode_json(b'{"path": "/p/\\u00e9 [x] {y}", "n": [[1]]}') == {
        "path": "/p/\u00e9 [x] {y}",
        "n": [[1]],
    }
    # A surrogate pair is a real character, not a lone surrogate.
    assert decode_json(b'["\\ud83d\\ude00"]') == ["\U0001f600"]
    bulk = b'{"requests": [' + b",".join([b'{"kind": "recall"}'] * 5000) + b"]}"
    assert len(decode_json(bulk)["requests"]) == 5000


@given(st.recursive(st.none() | st.integers() | st.text(), lambda c: st.lists(c, max_size=3)))
def test_any_value_tssd_could_send_round_trips(value: Any) -> None:
    import json

    raw = json.dumps(value).encode()
    try:
        assert decode_json(raw) == value
    except InvalidRequest:
        # Only what holds a lone surrogate or nests too deep may be refused.
        assert "\\ud" in raw.decode().lower() or raw.count(b"[") > MAX_DEPTH


def test_roles() -> None:
    assert allowed(Role.ADMIN, "POST", "/v1/catalog/import")
    assert not allowed(Role.READ, "POST", "/v1/catalog/import")
    assert not allowed(Role.POOL, "POST", "/v1/catalog/import")
    assert allowed(Role.READ, "GET", "/v1/catalog/export")
    assert allowed(Role.READ, "POST", "/v1/requests/query")
    assert not allowed(Role.READ, "POST", "/v1/requests")
    assert allowed(Role.POOL, "POST", "/v1/requests/obtain")
    assert allowed(Role.POOL, "POST", "/v1/requests/{id}/cancel")
    assert not allowed(Role.POOL, "GET", "/v1/requests")
    assert not allowed(Role.POOL, "GET", "/v1/catalog/export")
    for route in ("/v1/queues/{name}", "/v1/drives/{name}/enable", "/v1/requests/{id}/retry"):
        method = "PATCH" if "queues" in route else "POST"
        assert admin_only(method, route), route


def test_connection_caps_keep_the_unix_share() -> None:
    # A default daemon under a 1024-descriptor limit: TCP gets what is left, never all.
    caps = connection_caps(1024, tcp=1000, unix=4000, reserve=256)
    assert caps.unix + caps.tcp + 256 <= 1024 and caps.unix > 0
    caps = connection_caps(1024, tcp=1000, unix=200, reserve=100)
    assert caps == type(caps)(tcp=724, unix=200)
    caps = connection_caps(1 << 20, tcp=1000, unix=4000, reserve=256)
    assert caps == type(caps)(tcp=1000, unix=4000)


def test_catalog_file_must_be_a_small_regular_file(tmp_path: Path) -> None:
    good = tmp_path / "good.csv"
    good.write_text("pnfsid,volume,seq,size,storage_class,written_at\nAB,V1,1,1,a:b,2020\n")
    assert has_rows(read_catalog_file(str(good), 1000))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link.csv"
    link.symlink_to(good)
    for path, why in ((fifo, "not a regular file"), ("/dev/zero", "not a regular file"),
                      (link, "symbolic links"), (tmp_path, "not a regular file")):  # fmt: skip
        with pytest.raises(InvalidRequest, match=why):
            read_catalog_file(str(path), 1000)
    with pytest.raises(InvalidRequest, match="catalog_import_max_bytes"):
        read_catalog_file(str(good), 10)
    assert not has_rows("pnfsid,volume,seq,size,storage_class,written_at\n\n")
    assert not has_rows("")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[RequestStore]:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'w.db'}")
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    try:
        yield RequestStore(session_factory(engine), postgres=False)
    finally:
        await engine.dispose()


async def test_long_polls_read_the_database_only_when_woken(store: RequestStore) -> None:
    """4,000 waiters re-read the database every 2 s (issue 17.8): now each reads once when
    it starts and once when a state change (or its timeout) wakes it."""
    specs = [parse_submit({"kind": "recall", "pnfsid": f"{i:04X}", "path": f"/p/{i}"})
             for i in range(1, 201)]  # fmt: skip
    rows = [row for _, row in await store.submit(specs)]
    reads = 0
    real_get = store.get

    async def counting_get(request_id: int) -> Any:
        nonlocal reads
        reads += 1
        return await real_get(request_id)

    store.get = counting_get  # type: ignore[method-assign]
    waiters = [asyncio.create_task(store.wait(r.id, timeout=4.5)) for r in rows]
    await asyncio.sleep(2.5)  # past the old 2 s re-read
    assert reads == len(rows)
    await store.cancel([r.id for r in rows[:100]], "cancelled by operator")
    finished = await asyncio.gather(*waiters[:100])
    assert all(done for _, done in finished)
    assert reads == len(rows) + 100
    rest = await asyncio.gather(*waiters[100:])
    assert not any(done for _, done in rest)
    assert reads == 2 * len(rows)


class Counted:
    """The open-request count admission reads (``OpenCount``), fixed."""

    def __init__(self, n: int) -> None:
        self.n = n

    async def count_open(self) -> int:
        return self.n


async def test_admission_reserves_for_submits_in_flight() -> None:
    """Concurrent bulk submits each passed the same check and together went past the
    limit (measured by benchmarks/admission_load.py): a submit now reserves its share."""
    settings = LimitsSettings(max_open_requests=10, retry_after_s=3)
    admission = Admission(settings, store=Counted(0))
    with capture_logs() as logs:
        admission.admit(6)
        with pytest.raises(Overloaded) as refused:
            admission.admit(5)
        assert refused.value.retry_after_s == 3 and refused.value.exit_code == 72
        admission.settle(6, 2)  # four of the six attached to requests already open
        assert admission.open_requests == 2
        admission.admit(8)
        with pytest.raises(Overloaded, match="max_open_requests"):
            admission.admit(1)
    assert admission.refused == 2
    # Refusals are logged, at most one line per interval.
    assert [e["event"] for e in logs] == ["admission.refused"]


async def test_admission_counts_rarely_only_far_below_its_limit() -> None:
    """The open-request count walks every open request's index entry: far below the
    limit it is read every FAR_REFRESH_S, near it every REFRESH_S."""
    admission = Admission(LimitsSettings(max_open_requests=10), store=Counted(0))
    admission.admit(4)
    assert admission.far_below_limit()
    admission.admit(1)
    assert not admission.far_below_limit()
    unlimited = Admission(LimitsSettings(max_open_requests=0), store=Counted(0))
    unlimited.admit(10**9)
    assert unlimited.far_below_limit()


def test_the_descriptor_limit_is_raised_to_the_hard_limit() -> None:
    code = "from tssd.api.connections import raise_nofile; print(raise_nofile())"
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        preexec_fn=lower,
    )  # fmt: skip
    assert int(out.stdout) == hard


async def test_only_lag_tssd_causes_refuses_submits() -> None:
    """A loop held up by other processes (here: a sleep, which uses no CPU) is not tssd's
    overload; a loop busy with tssd's own work (here: a spin) is."""
    settings = LimitsSettings(max_loop_lag_s=0.2)
    admission = Admission(settings, store=Counted(0))
    watcher = asyncio.create_task(admission._watch_loop())
    try:
        await asyncio.sleep(0.15)
        time.sleep(0.5)  # the loop blocked, but not computing
        await asyncio.sleep(0.15)
        admission.admit()
        end = time.thread_time() + 0.5
        while time.thread_time() < end:  # the loop computing (0.5 s of its own CPU)
            pass
        await asyncio.sleep(0.15)
        with pytest.raises(Overloaded, match="event loop"):
            admission.admit()
    finally:
        watcher.cancel()


def _bulk(n: int, sep: bytes = b", ") -> bytes:
    entry = (
        b'{"kind": "recall", "pnfsid": "00AD01", "path": "/p/\\u00e9 [x]", "n": [1, {"a": null}]}'
    )
    return b'{"requests": [' + sep.join([entry] * n) + b"]}"


@pytest.mark.parametrize(
    "raw",
    [
        _bulk(20_000),
        b" \n" + _bulk(20_000, b" ,\n ") + b" \r\n",
        _bulk(20_000)[:-1] + b', "more": 1}',  # another key: decoded whole
        _bulk(20_000) + b"x",
        _bulk(20_000)[:-2] + b",]}",
        _bulk(20_000).replace(b"null", b"nul", 1),
        _bulk(20_000).replace(b"[x]", b"\\ud800", 1),
        b'{"requests": [' + b"[" * 40 + b"]" * 40 + b"," + _bulk(20_000)[14:],
    ],
)
def test_large_bulk_bodies_decode_in_pieces_as_whole(raw: bytes) -> None:
    """A bulk body of megabytes is decoded one request at a time (json.loads held the
    interpreter lock, and so the event loop, for 100 ms per 10 MB): same value, same
    refusals as decode_json."""
    import json

    assert len(raw) > PIECEWISE_ABOVE
    try:
        expected = decode_json(raw)
    except InvalidRequest as exc:
        with pytest.raises(InvalidRequest, match=str(exc)[:20]):
            decode_bulk(raw)
        return
    assert decode_bulk(raw) == expected == json.loads(raw)


def test_bulk_answers_encode_in_slices_as_whole() -> None:
    import json

    for n in (1, ENCODE_SLICE, 2 * ENCODE_SLICE + 1):
        results = [{"created": i % 2 == 0, "request": {"id": i, "path": "/p/é"}} for i in range(n)]
        assert encode_results(results) == json.dumps({"results": results}).encode()


async def test_submits_are_recorded_off_the_event_loop(store: RequestStore) -> None:
    """On a SQLite file a submit's SQL runs in the writer thread (tssd.db.submits), and
    what it returns reads like a Request; a second submit attaches to the open request."""
    specs = [parse_submit({"kind": "recall", "pnfsid": f"AB{i:02X}", "path": f"/p/{i}"})
             for i in range(250)]  # fmt: skip
    first = await store.submit(specs)
    assert all(created for created, _ in first)
    assert store._writer is not None
    assert [row.path for _, row in first] == [s.path for s in specs]
    assert first[0][1].state == State.QUEUED and first[0][1].group is None
    again = await store.submit(specs[:3] + specs[:1])
    assert [(c, r.id) for c, r in again] == [(False, r.id) for _, r in first[:3] + first[:1]]
    row = await store.get(first[0][1].id)
    assert row.key == specs[0].key
    store._writer.close()


def test_locate_passes_follow_the_loop_cpu_they_take() -> None:
    """A locate pass over budget shrinks the next to what fits; a cheap full one doubles
    it, up to the batch; a full pass reports ``batch`` so the scheduler locates on."""
    from tssd.scheduler.intake import LOCATE_BUDGET_S, LOCATE_MIN, LOCATE_START, Intake

    retrier = Retrier(RetryPolicy(0, 0.0, 0.0, 1), Metrics(), RealClock())
    intake = Intake(MemoryStore(), StubBackend(), retrier, get_policy("fifo"), batch=5000)
    assert intake.locate_limit == LOCATE_START
    intake._locate_took(LOCATE_BUDGET_S * 5, 250, 250)
    assert intake.locate_limit == 50
    intake._locate_took(LOCATE_BUDGET_S * 100, 50, 50)
    assert intake.locate_limit == LOCATE_MIN
    intake._locate_took(LOCATE_BUDGET_S / 4, LOCATE_MIN, LOCATE_MIN)
    assert intake.locate_limit == 2 * LOCATE_MIN
    intake._locate_took(LOCATE_BUDGET_S / 4, 10, 2 * LOCATE_MIN)  # not full: stays
    assert intake.locate_limit == 2 * LOCATE_MIN
    for _ in range(10):
        intake._locate_took(0.0, intake.locate_limit, intake.locate_limit)
    assert intake.locate_limit == 5000
