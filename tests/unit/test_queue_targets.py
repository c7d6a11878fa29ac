"""Queue latency targets, the plumbing: ``[[queues]]`` settings, the queues table on SQLite
and PostgreSQL, the API's queue JSON against its OpenAPI schema, and ``tssctl why``."""

from __future__ import annotations

import argparse
import tomllib
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import async_sessionmaker

from tssd.api.admin_openapi import QUEUE_SCHEMA
from tssd.api.openapi import openapi_document
from tssd.cli import views
from tssd.cli.commands.queues import target
from tssd.config import load_settings
from tssd.config.queues import QueueSettings, load_queues, parse_duration
from tssd.config.render import queues_toml
from tssd.db.admin import AdminStore
from tssd.db.engine import create_engine, session_factory
from tssd.db.models import Base, Request
from tssd.errors import ConfigError
from tssd.scheduler.explain import against_target


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("3600", 3600.0), ("90s", 90.0), ("15m", 900.0), ("1h", 3600.0), ("1.5d", 129600.0),
     (" 2H ", 7200.0)],
)  # fmt: skip
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "1w", "soon", "nan", "inf", "1e999h", "1 h x"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_tssctl_target_argument() -> None:
    assert target("1h") == 3600.0 and target("none") is None and target("NONE") is None
    for bad in ("0", "-1h", "400d", "soon"):
        with pytest.raises(argparse.ArgumentTypeError):
            target(bad)


def test_queue_tables_from_the_file_and_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "tssd.toml"
    config.write_text(
        '[scheduler]\nrao = "off"\n\n'
        '[[queues]]\nname = "atlas"\npriority = 5\nmax_drives = 2\nlatency_target_s = "1h"\n\n'
        '[[queues]]\nname = "cms"\nmax_drives = "any"\nlatency_target_s = 900\npaused = true\n'
    )
    settings, origin = load_settings(config, environ={})
    atlas, cms = settings.queues
    given = frozenset({"priority", "max_drives", "latency_target_s"})
    assert atlas == QueueSettings("atlas", 5, 2, False, 3600.0, given)
    assert (cms.max_drives, cms.paused, cms.latency_target_s) == (None, True, 900.0)
    assert origin["queues"] == "file" and settings.scheduler.rao == "off"
    # The rendering reads back as the same settings (tssd config shows what it applies).
    text = "\n".join(queues_toml(settings.queues))
    assert load_queues(tomllib.loads(text)["queues"]) == settings.queues
    env = {"TSSD_QUEUES": '[{name = "lhcb", latency_target_s = "none"}]'}
    settings, origin = load_settings(config, environ=env)
    assert settings.queues == (QueueSettings("lhcb", given=frozenset({"latency_target_s"})),)
    assert origin["queues"] == "env"
    assert load_settings(None, environ={})[0].queues == ()


@pytest.mark.parametrize(
    ("tables", "words"),
    [
        ([{"name": "a", "latency_target_s": 0}], "queues[0].latency_target_s"),
        ([{"name": "a", "latency_target_s": "-1h"}], "latency target must be"),
        ([{"name": "a", "latency_target_s": 10**9}], "latency target must be"),
        ([{"name": "a", "latency_target_s": True}], "expected seconds"),
        ([{"name": "a", "latency_target_s": "later"}], "not a duration"),
        ([{"name": "a", "priority": True}], "queues[0].priority"),
        ([{"name": "a", "max_drives": 0}], "queues[0].max_drives"),
        ([{"name": "a", "paused": "yes"}], "queues[0].paused"),
        ([{"name": "a", "target": 5}], "unknown setting(s) in queues[0]: target"),
        ([{"priority": 1}], "queues[0].name"),
        ([{"name": "a b"}], "queues[0].name"),
        ([{"name": "a"}, {"name": "a"}], "configured twice"),
        ({"name": "a"}, "expected [[queues]] tables"),
        ("[{name = ", "not a TOML inline array"),
    ],
)
def test_bad_queue_tables(tables: Any, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_queues(tables)
    assert words in str(err.value)


@pytest.fixture
async def sessions(db_url: str) -> AsyncIterator[async_sessionmaker[Any]]:
    engine = create_engine(db_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
        yield session_factory(engine)
    finally:
        await engine.dispose()


async def test_targets_in_the_queues_table(sessions: async_sessionmaker[Any]) -> None:
    admin = AdminStore(sessions)
    q = await admin.set_queue("atlas", priority=2, latency_target_s=3600.0)
    assert (q["priority"], q["latency_target_s"]) == (2, 3600.0)
    q = await admin.set_queue("atlas", max_drives=1)  # the target stays
    assert (q["max_drives"], q["latency_target_s"]) == (1, 3600.0)
    q = await admin.set_queue("atlas", latency_target_s=None)
    assert q["latency_target_s"] is None
    listed = {q["name"]: q for q in await admin.queues(always="default")}
    assert listed["default"]["latency_target_s"] is None
    # The API's queue JSON is what its OpenAPI schema documents, key for key.
    assert set(listed["atlas"]) == set(QUEUE_SCHEMA["properties"])


async def test_seeding_applies_the_keys_a_table_gives(sessions: async_sessionmaker[Any]) -> None:
    admin = AdminStore(sessions)
    await admin.set_queue("atlas", priority=9, max_drives=3, latency_target_s=60.0)
    await admin.seed_queues(
        load_queues([{"name": "atlas", "latency_target_s": "2h"}, {"name": "new", "priority": 4}])
    )
    listed = {q["name"]: q for q in await admin.queues()}
    atlas, new = listed["atlas"], listed["new"]
    assert (atlas["priority"], atlas["max_drives"], atlas["latency_target_s"]) == (9, 3, 7200.0)
    assert (new["configured"], new["priority"], new["latency_target_s"]) == (True, 4, None)
    await admin.seed_queues(load_queues([{"name": "atlas", "latency_target_s": "none"}]))
    assert next(q for q in await admin.queues() if q["name"] == "atlas")["latency_target_s"] is None


def test_openapi_documents_the_target() -> None:
    doc = openapi_document()
    paths = doc["paths"]
    patch = paths["/v1/queues/{name}"]["patch"]["requestBody"]["content"]["application/json"]
    assert patch["schema"] == {"$ref": "#/components/schemas/QueuePatch"}
    body = doc["components"]["schemas"]["QueuePatch"]
    # Every setting tssctl queues set changes, and nothing else (tssd.bodies.QueuePatch).
    assert set(body["properties"]) == {"priority", "max_drives", "paused", "latency_target_s"}
    assert body["additionalProperties"] is False
    listed = paths["/v1/queues"]["get"]["responses"]["200"]["content"]["application/json"]
    assert listed["schema"]["properties"]["queues"]["items"] is QUEUE_SCHEMA
    why = paths["/v1/requests/{id}/why"]["get"]["responses"]["200"]["content"]
    props = why["application/json"]["schema"]["properties"]
    assert {"queue", "target_s", "deadline", "slack_s", "on_target"} <= set(props)


T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_eta_against_the_target() -> None:
    row = Request(id=1, state="queued", queue="atlas", created_at=T0)
    now = T0 + timedelta(minutes=40)
    assert against_target(row, None, 100.0, now)["target_s"] is None
    on = against_target(row, 3600.0, 600.0, now)  # done at 50 min: 10 min to spare
    assert (on["slack_s"], on["on_target"]) == (600.0, True)
    assert on["deadline"] == (T0 + timedelta(hours=1)).isoformat()
    late = against_target(row, 3600.0, 1800.0, now)
    assert (late["slack_s"], late["on_target"]) == (-600.0, False)
    assert against_target(row, 3600.0, None, now)["on_target"] is None
    done = Request(id=2, state="done", queue="atlas", created_at=T0,
                   finished_at=T0 + timedelta(minutes=70))  # fmt: skip
    assert against_target(done, 3600.0, 0.0, now)["on_target"] is False


def test_why_view_shows_the_target() -> None:
    why = {"id": 3, "state": "queued", "rule": "drives_busy", "eta_s": 600.0, "queue": "atlas",
           "target_s": 3600.0, "deadline": "2026-11-30T13:00:00+00:00", "slack_s": -90.0,
           "on_target": False}  # fmt: skip
    text = views.why_view(why)
    assert "1h 0m (queue atlas)" in text and "LATE by 1m 30s" in text
    assert "to spare" in views.why_view({**why, "slack_s": 600.0, "on_target": True})
    assert "unknown" in views.why_view({**why, "slack_s": None, "on_target": None})
    assert "target" not in views.why_view({**why, "target_s": None})


def test_queues_table_has_the_target_within_100_columns() -> None:
    rows = [{"name": "a" * 64, "priority": -1000000, "max_drives": 10000, "paused": True,
             "latency_target_s": 365 * 86400.0, "queued": 10**7, "active": 10**4,
             "queued_bytes": 10**18, "active_bytes": 0, "oldest_queued_at": None}]  # fmt: skip
    text = views.queues_table(rows)
    assert "TARGET" in text.splitlines()[0] and "365d" in text
