"""ENDIT mode end to end: a driver that behaves like dCache's endit provider, a real tssd.

The driver (``Plugin``) does what the provider's FlushTask, StageTask and RemoveTask do,
on one pool: flush = request file written atomically, then a hardlink into ``out/``,
done when ``out/<id>`` is gone; stage = take ``in/<id>`` at once if it has the size,
else write the request file in place (non-atomically), then poll: an ``.err`` is read
after a 1 s grace and fails the stage (deleting ``in/``, ``.err`` and the request); an
``in/<id>`` of the right size deletes the request and is moved into the pool after 1 s;
cancel = delete request, ``.err`` and ``in/``; pool start = every file in ``request/``
deleted; remove = ``trash/<id>`` holding the URI, written atomically.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import Daemon
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import create_async_engine

from tssd.db.models import SimObject
from tssd.testing import adler32_file

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

GRACE_S = 1.0  # the provider's GRACE_PERIOD and ERROR_GRACE_PERIOD
HSM = "pool1"
CLASSES = ("atlas:tape@osm", "cms:raw@osm")


@dataclass
class Job:
    pnfsid: str
    size: int
    dest: Path | None = None  # stage: where the pool keeps the file
    storage_class: str = CLASSES[0]
    outcome: str = ""  # "", "done", "failed:<rc>:<message>", "cancelled"


class Plugin:
    """dCache's endit provider (polling flavour) for one pool, in a thread."""

    def __init__(self, base: Path, pool: Path, period: float = 0.1) -> None:
        self.base, self.pool, self.period = base, pool, period
        for sub in ("in", "out", "request", "trash"):
            (base / sub).mkdir(parents=True, exist_ok=True)
        self.stages: dict[str, Job] = {}
        self.flushes: dict[str, Job] = {}
        self.finished: list[tuple[str, Job]] = []
        self._later: list[tuple[float, Job, Callable[[], None]]] = []
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="endit-plugin", daemon=True)
        self._writes = 0
        self.start_pool()
        self._thread.start()

    def path(self, sub: str, name: str) -> Path:
        return self.base / sub / name

    # -- what dCache asks the provider for -------------------------------------------

    def start_pool(self) -> None:
        """The provider is configured at pool start: every request file is deleted."""
        with self._lock:
            for entry in (self.base / "request").iterdir():
                entry.unlink(missing_ok=True)

    def flush(self, job: Job) -> None:
        with self._lock:
            self.flushes[job.pnfsid] = job
            self._flush_start(job)

    def _flush_start(self, job: Job) -> None:
        body = {
            "file_size": job.size,
            "time": int(time.time()),
            "storage_class": job.storage_class,
            "action": "migrate",
            "path": f"/pnfs/test/{job.pnfsid}",
            "checksumType": "adler32",
            "checksumValue": adler32_file(self.pool / job.pnfsid),
        }
        fd, tmp = tempfile.mkstemp(
            dir=self.base / "request", prefix=f"{job.pnfsid}.", suffix=".flush.tmp"
        )
        with os.fdopen(fd, "w") as fh:
            json.dump(body, fh)
        os.replace(tmp, self.path("request", job.pnfsid))
        with contextlib.suppress(FileExistsError):
            os.link(self.pool / job.pnfsid, self.path("out", job.pnfsid))

    def stage(self, job: Job) -> None:
        with self._lock:
            if self._take(job):
                return
            self.stages[job.pnfsid] = job
            self._stage_write(job)

    def _take(self, job: Job) -> bool:
        inbox = self.path("in", job.pnfsid)
        if inbox.is_file() and inbox.stat().st_size == job.size:
            assert job.dest is not None
            os.replace(inbox, job.dest)
            job.outcome = "done"
            self.finished.append(("stage", job))
            return True
        return False

    def _stage_write(self, job: Job) -> None:
        text = json.dumps(
            {
                "file_size": job.size,
                "parent_pid": os.getpid(),
                "time": int(time.time()),
                "storage_class": job.storage_class,
                "action": "recall",
                "path": f"/pnfs/test/{job.pnfsid}",
            }
        )
        # FileUtils.write: in place, so a reader may catch half of it.
        self._writes += 1
        with self.path("request", job.pnfsid).open("w") as fh:
            half = len(text) // 2
            fh.write(text[:half])
            fh.flush()
            if self._writes % 25 == 0:
                time.sleep(0.002)
            fh.write(text[half:])

    def cancel(self, pnfsid: str) -> None:
        with self._lock:
            job = self.stages.pop(pnfsid)
            for sub, name in (("request", pnfsid), ("request", f"{pnfsid}.err"), ("in", pnfsid)):
                self.path(sub, name).unlink(missing_ok=True)
            job.outcome = "cancelled"

    def remove(self, pnfsid: str) -> None:
        uri = f"osm://{HSM}?bfid={pnfsid}"
        fd, tmp = tempfile.mkstemp(
            dir=self.base / "trash", prefix=f"{pnfsid}.", suffix=".remove.tmp"
        )
        with os.fdopen(fd, "w") as fh:
            fh.write(uri)
        os.replace(tmp, self.path("trash", pnfsid))

    def restart_pool(self) -> None:
        """Pool restart: request/ wiped, then every pending flush and stage issued again."""
        with self._lock:
            interrupted = [job for _, job, _ in self._later] + list(self.stages.values())
            self._later.clear()
            self.stages.clear()
            self.start_pool()
            for job in self.flushes.values():
                self._flush_start(job)
            for job in interrupted:
                self.stage(job)

    def pending(self) -> int:
        with self._lock:
            return len(self.stages) + len(self.flushes) + len(self._later)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()

    # -- polling -----------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            with self._lock:
                self._poll()

    def _poll(self) -> None:
        now = time.monotonic()
        due = [fn for t, _, fn in self._later if t <= now]
        self._later = [item for item in self._later if item[0] > now]
        for fn in due:
            fn()
        for job in list(self.flushes.values()):
            if not self.path("out", job.pnfsid).exists():
                self.path("request", job.pnfsid).unlink(missing_ok=True)
                del self.flushes[job.pnfsid]
                job.outcome = "done"
                self.finished.append(("flush", job))
        for job in list(self.stages.values()):
            self._poll_stage(job, now)

    def _poll_stage(self, job: Job, now: float) -> None:
        err = self.path("request", f"{job.pnfsid}.err")
        if err.exists():
            del self.stages[job.pnfsid]
            self._later.append((now + GRACE_S, job, lambda: self._fail(job)))
            return
        inbox = self.path("in", job.pnfsid)
        if inbox.is_file() and inbox.stat().st_size == job.size:
            self.path("request", job.pnfsid).unlink(missing_ok=True)
            del self.stages[job.pnfsid]
            self._later.append((now + GRACE_S, job, lambda: self._move(job)))

    def _fail(self, job: Job) -> None:
        err = self.path("request", f"{job.pnfsid}.err")
        try:
            lines = err.read_text().splitlines()
        finally:
            for path in (self.path("in", job.pnfsid), err, self.path("request", job.pnfsid)):
                path.unlink(missing_ok=True)
        rc = int(lines[0]) if lines and lines[0].strip().isdigit() else 1
        job.outcome = f"failed:{rc}:{' '.join(lines[1:])}"
        self.finished.append(("stage", job))

    def _move(self, job: Job) -> None:
        assert job.dest is not None
        os.replace(self.path("in", job.pnfsid), job.dest)
        job.outcome = "done"
        self.finished.append(("stage", job))


# -- the scenario ----------------------------------------------------------------------


def pnfsid(i: int) -> str:
    return f"0000{i:020X}"


def wait_until(predicate: Callable[[], bool], daemon: Daemon, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"condition not met in {timeout} s\n{daemon.log()[-4000:]}")


def copies_on_tape(db_url: str) -> dict[str, int]:
    async def count() -> dict[str, int]:
        engine = create_async_engine(db_url)
        try:
            async with engine.connect() as conn:
                stmt = select(SimObject.pnfsid, func.count()).group_by(SimObject.pnfsid)
                return {p: n for p, n in (await conn.execute(stmt)).all()}
        finally:
            await engine.dispose()

    return asyncio.run(count())


def write_config(path: Path, base: Path) -> Path:
    path.write_text(
        f"""
# The classes the flushes use (CLASSES): a class no table admits claims no cartridge.
[[storage_classes]]
name = "atlas:tape"
[[storage_classes]]
name = "cms:raw"

[endit]
rescan_s = 2.0
cancel_grace_s = 8.0
[[endit.directories]]
path = "{base}"
hsm_name = "{HSM}"
queue = "endit"
"""
    )
    return path


@pytest.fixture
def endit_daemon(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Daemon]:
    db_url = request.getfixturevalue(request.param)
    d = Daemon(home=tmp_path / "home", db_url=db_url)
    # Re-flushed files meet their tape copy in the scheduler's intake, not in a session.
    d.extra_env["TSSD_SCHEDULER_MIGRATE_MAX_AGE_S"] = "2"
    d.extra_env["TSSD_CONFIG"] = str(write_config(tmp_path / "tssd.toml", tmp_path / "endit"))
    try:
        yield d
    finally:
        if d.proc is not None and d.proc.poll() is None:
            d.stop(signal.SIGKILL)


def open_recalls(daemon: Daemon) -> dict[str, int]:
    return {
        r["pnfsid"]: r["id"]
        for r in daemon.requests(kind="recall")
        if r["state"] in ("queued", "active")
    }


def run_scenario(daemon: Daemon, tmp_path: Path, flushes: int, rounds: int, removes: int) -> None:
    """*flushes* files flushed through the directory, then staged *rounds* times each.

    Round 1 is interrupted by a tssd restart, round 2 by a pool restart with recalls
    open; a few stages fail first (not on tape yet) and are retried; a few are cancelled;
    the first *removes* files are removed at the end.
    """
    rng = random.Random(flushes)
    pool, staged, endit = tmp_path / "pool", tmp_path / "staged", tmp_path / "endit"
    pool.mkdir()
    staged.mkdir()
    files = []
    for i in range(flushes):
        job = Job(pnfsid(i), rng.randint(0, 16384), storage_class=CLASSES[i % 2])
        (pool / job.pnfsid).write_bytes(rng.randbytes(job.size))
        files.append(job)
    daemon.start()
    plugin = Plugin(endit, pool)

    def stage_round(tag: str) -> list[Job]:
        jobs = [Job(f.pnfsid, f.size, staged / f"{tag}-{f.pnfsid}", f.storage_class) for f in files]
        for job in jobs:
            plugin.stage(job)
        return jobs

    def staged_ok(jobs: list[Job]) -> None:
        assert all(j.outcome == "done" for j in jobs), [
            j.outcome for j in jobs if j.outcome != "done"
        ]
        for job in jobs:
            assert job.dest is not None
            assert job.dest.read_bytes() == (pool / job.pnfsid).read_bytes(), job.dest

    try:
        # Stages of files not on tape yet fail with 31 through .err (retried in round 0).
        early = [Job(f.pnfsid, f.size, staged / f"early-{f.pnfsid}") for f in files[:10]]
        for job in early:
            plugin.stage(job)
        wait_until(lambda: plugin.pending() == 0, daemon)
        assert all(j.outcome.startswith("failed:31:") for j in early), [j.outcome for j in early]
        assert not list((endit / "request").iterdir())

        for f in files:
            plugin.flush(Job(f.pnfsid, f.size, storage_class=f.storage_class))
        wait_until(lambda: plugin.pending() == 0, daemon)
        assert {j.pnfsid for k, j in plugin.finished if k == "flush"} == {f.pnfsid for f in files}
        assert not list((endit / "out").iterdir())

        done: list[Job] = []
        for n in range(rounds):
            jobs = stage_round(f"r{n}")
            if n == 1:  # tssd restart with stages in flight
                wait_until(
                    lambda jobs=jobs: sum(j.outcome == "done" for j in jobs) >= len(jobs) // 3,
                    daemon,
                )
                assert daemon.stop(signal.SIGTERM) == 0
                daemon.start()
            if n == 2:  # pool restart with recalls open: request/ wiped, all re-issued
                before: dict[str, int] = {}

                def seen_open(found: dict[str, int] = before) -> bool:
                    found.update(open_recalls(daemon))
                    return bool(found)

                wait_until(seen_open, daemon)
                plugin.restart_pool()
            wait_until(lambda: plugin.pending() == 0, daemon)
            staged_ok(jobs)
            done += jobs
            if n == 2:
                ids = {r["id"] for r in daemon.requests(kind="recall", state="done")}
                assert set(before.values()) <= ids, "a re-issued stage did not attach"
        assert len(done) == rounds * flushes
        # One recall per stage: retries and re-issues attached, nothing recalled twice.
        recalls = [r for r in daemon.requests(kind="recall") if r["state"] != "failed"]
        assert len(recalls) == len(done)

        # Stages cancelled by dCache leave nothing behind (the recall is cancelled, or the
        # file it delivered meanwhile is removed once nobody asked for it again).
        last = max(r["id"] for r in daemon.requests(kind="recall"))
        for job in [Job(f.pnfsid, f.size, staged / f"x-{f.pnfsid}") for f in files[-5:]]:
            plugin.stage(job)
            plugin.cancel(job.pnfsid)

        def cancelled_cleanly() -> bool:
            late = [r for r in daemon.requests(kind="recall") if r["id"] > last]
            finished = all(r["state"] in ("done", "cancelled") for r in late)
            return finished and not list((endit / "in").iterdir())

        wait_until(cancelled_cleanly, daemon)

        # A flush of a file already on tape is acknowledged without a second copy.
        plugin.flush(Job(files[-1].pnfsid, files[-1].size, storage_class=files[-1].storage_class))
        wait_until(lambda: plugin.pending() == 0, daemon)
        copies = copies_on_tape(daemon.db_url)
        assert all(copies.get(f.pnfsid) == 1 for f in files), "a file is not on tape exactly once"

        for f in files[:removes]:
            plugin.remove(f.pnfsid)
        wait_until(lambda: not list((endit / "trash").iterdir()), daemon)
        wait_until(
            lambda: sum(r["state"] == "done" for r in daemon.requests(kind="remove")) == removes,
            daemon,
        )
        copies = copies_on_tape(daemon.db_url)
        assert not any(copies.get(f.pnfsid) for f in files[:removes])
        assert all(copies.get(f.pnfsid) == 1 for f in files[removes:])
        # A cancelled stage whose recall was submitted before tssd saw the cancel delivers
        # its file anyway: an orphan, removed after the grace period.
        wait_until(lambda: not list((endit / "in").iterdir()), daemon)
    finally:
        plugin.close()
    for sub in ("in", "out", "request", "trash"):
        assert not list((endit / sub).iterdir()), sub
    assert daemon.stop(signal.SIGTERM) == 0


@pytest.mark.parametrize("endit_daemon", ["sqlite_url"], indirect=True)
def test_endit_campaign_sqlite(endit_daemon: Daemon, tmp_path: Path) -> None:
    run_scenario(endit_daemon, tmp_path, flushes=500, rounds=4, removes=100)


@pytest.mark.postgres
@pytest.mark.parametrize("endit_daemon", ["pg_url"], indirect=True)
def test_endit_campaign_postgres(endit_daemon: Daemon, tmp_path: Path) -> None:
    run_scenario(endit_daemon, tmp_path, flushes=100, rounds=3, removes=20)
