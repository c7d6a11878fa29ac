"""The hold rules are declared once (tssd/scheduler/rules.py): every view knows every rule.

Each rule needs a row in the scenario tables below (a tape the cost model holds by it, a
request ``why`` answers with it), so a new rule fails here until the cost model, explain,
the OpenAPI document, tssctl and docs/scheduling.md all give it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tssd.api.openapi import openapi_document
from tssd.backends.sim.profiles import LTO9
from tssd.cli import views
from tssd.config import SchedulerSettings
from tssd.db.memory import MemoryStore
from tssd.domain import Kind, Request, State
from tssd.scheduler.choose import Chooser, Running
from tssd.scheduler.context import Context, QueuePolicy
from tssd.scheduler.cost import Verdict, evaluate
from tssd.scheduler.drives import DriveState
from tssd.scheduler.explain import explain
from tssd.scheduler.planner import Entry, Planner
from tssd.scheduler.queues import MountLedger
from tssd.scheduler.rules import ANSWERS, HOLD_RULES, RULES

GB = 10**9
DOCS = Path(__file__).resolve().parents[2] / "docs"
HOLD = [r.name for r in HOLD_RULES]


def planner_of(volume: str = "A", n: int = 60, **kw: Any) -> Planner:
    planner = Planner()
    fields: dict[str, Any] = {"size": GB, "priority": 0, "queue": "default", "arrived": 0.0}
    fields.update(kw)
    planner.add([Entry(i, volume, i, **fields) for i in range(1, n + 1)])
    return planner


def context(**kw: Any) -> Context:
    base: dict[str, Any] = {
        "now": 1000.0,
        "settings": SchedulerSettings(fill_wait_s=600.0, mount_budget_per_day=3),
        "profile": LTO9,
        "queues": {"paused": QueuePolicy(paused=True), "one": QueuePolicy(max_drives=1)},
        "mounted": frozenset(),
        "queue_drives": {"one": 1},
        "mounts_today": lambda v: 0,
    }
    return Context(**(base | kw))


#: A tape (planner arguments) and a pass (Context arguments) each hold rule holds back.
HOLD_SCENARIOS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "queue_paused": ({"queue": "paused"}, {}),
    "max_drives": ({"queue": "one"}, {}),
    "mount_budget": ({}, {"mounts_today": lambda v: 3}),
    "fill_wait": ({"n": 2, "arrived": 900.0}, {}),
    "tape_unavailable": ({}, {"mountable": lambda v: False}),
    "drive_cleaning_due": ({}, {"free": (DriveState("d1", cleaning_due=True),)}),
}


def test_every_hold_rule_has_a_scenario() -> None:
    assert sorted(HOLD_SCENARIOS) == sorted(HOLD)


@pytest.mark.parametrize("name", HOLD)
def test_the_cost_model_holds_a_tape_by_each_rule(name: str) -> None:
    tape_kw, ctx_kw = HOLD_SCENARIOS[name]
    tape = planner_of(**tape_kw).tapes["A"]
    assert evaluate(tape, context(**ctx_kw)).rule == name
    assert evaluate(planner_of().tapes["A"], context()).rule == ""  # the same tape, free


def test_drive_cleaning_due_holds_only_what_a_dirty_drive_would_mount() -> None:
    tape = planner_of().tapes["A"]
    dirty, clean = DriveState("d1", cleaning_due=True), DriveState("d2")
    assert evaluate(tape, context(free=(dirty,))).rule == "drive_cleaning_due"
    assert evaluate(tape, context(free=(dirty, clean))).rule == ""  # d2 takes it
    assert evaluate(tape, context()).rule == ""  # no free drive: in line (drives_busy)
    in_drive = DriveState("d1", volume="A", cleaning_due=True)
    assert evaluate(tape, context(free=(in_drive,), mounted=frozenset("A"))).rule == ""


def test_drive_cleaning_due_from_the_drive_table_to_why() -> None:
    drive = DriveState("d1")
    drives = SimpleNamespace(drives={"d1": drive}, free=lambda: [drive], ledger=MountLedger())
    clock = SimpleNamespace(now=lambda: 1000.0)
    queue = MemoryStore()
    chooser = Chooser(
        SchedulerSettings(), queue.scheduling, queue.queue_settings, drives, LTO9, clock
    )
    chooser.planner = planner_of()
    assert [v.volume for v in chooser.rank((), lambda v: True)] == ["A"]
    drive.cleaning_due = True  # the drive asks for cleaning
    assert chooser.rank((), lambda v: True) == []
    assert chooser.verdicts["A"].rule == "drive_cleaning_due"
    sched = SimpleNamespace(chooser=chooser, settings=chooser.settings,
                            drives=SimpleNamespace(clock=clock, ledger=drives.ledger),
                            runner=SimpleNamespace(backpressure=None))  # fmt: skip
    why = explain(sched, request())  # type: ignore[arg-type]
    assert (why["rule"], why["eta_s"]) == ("drive_cleaning_due", None)
    assert "every free drive has asked for cleaning" in why["detail"]


# --- explain: a fake scheduler with just what explain reads -----------------------------


def request(**kw: Any) -> Request:
    t = datetime(2026, 12, 1, tzinfo=UTC)
    fields: dict[str, Any] = dict.fromkeys(Request.__slots__)
    fields |= {"id": 7, "kind": Kind.RECALL, "state": State.QUEUED, "key": "00AA",
               "hsm_type": "osm", "hsm_instance": "osm", "queue": "default", "priority": 0,
               "volume": "A", "position": 1, "attempts": 0, "created_at": t,
               "updated_at": t}  # fmt: skip
    return Request(**(fields | kw))


def scheduler(verdict: str = "", **kw: Any) -> Any:
    planner = planner_of(n=2, arrived=900.0)
    verdicts = {"A": Verdict("A", verdict, 0, 100.0, 50.0, (), frozenset(), "default")}
    chooser = SimpleNamespace(queues={}, running=kw.get("running", {}), verdicts=verdicts,
                              planner=planner, starts=kw.get("starts", {"A": 1000.0}))  # fmt: skip
    ledger = MountLedger()
    ledger.record("A", 500.0)
    return SimpleNamespace(
        chooser=chooser,
        settings=SchedulerSettings(fill_wait_s=600.0, mount_budget_per_day=1),
        drives=SimpleNamespace(clock=SimpleNamespace(now=lambda: 1000.0), ledger=ledger),
        runner=SimpleNamespace(backpressure=kw.get("backpressure")),
    )


FULL = SimpleNamespace(held_reason=lambda row: "destination file system /pool is nearly full")

#: A scheduler and a request for which ``why`` gives each of the other answers.
ANSWER_SCENARIOS: dict[str, Callable[[], tuple[Any, Request]]] = {
    "done": lambda: (scheduler(), request(state=State.DONE)),
    "active": lambda: (scheduler(), request(state=State.ACTIVE, drive="d1")),
    "disk_full": lambda: (scheduler(backpressure=FULL), request()),
    "locating": lambda: (scheduler(), request(volume=None)),
    "tape_busy": lambda: (
        scheduler(running={"d1": Running("A", "default", 0, 1500.0)}),
        request(),
    ),
    "drives_busy": lambda: (scheduler(starts={"A": 1200.0}), request()),
    "queued_position": lambda: (scheduler(), request()),
}


def test_every_answer_has_a_scenario() -> None:
    assert sorted(ANSWER_SCENARIOS) == sorted(r.name for r in ANSWERS)


@pytest.mark.parametrize("name", [r.name for r in ANSWERS])
def test_explain_gives_each_answer(name: str) -> None:
    sched, row = ANSWER_SCENARIOS[name]()
    assert explain(sched, row)["rule"] == name


@pytest.mark.parametrize("name", HOLD)
def test_explain_gives_each_hold_rule_its_detail_and_eta(name: str) -> None:
    why = explain(scheduler(name), request())
    assert why["rule"] == name
    assert why["detail"] == RULES[name].describe("A", scheduler().settings)
    assert "A" in why["detail"] and "{" not in why["detail"]
    if name == "fill_wait":  # oldest arrived at 900, waits up to 600 s: 500 s left
        assert why["eta_s"] == 500.0
    if name == "mount_budget":  # mounted at 500, one a day: free a day after
        assert why["eta_s"] == 86400.0 - 500.0


# --- the API and tssctl -------------------------------------------------------------------


def test_openapi_lists_every_rule() -> None:
    paths = openapi_document()["paths"]
    why = paths["/v1/requests/{id}/why"]["get"]["responses"]["200"]["content"]
    rule = why["application/json"]["schema"]["properties"]["rule"]
    assert rule["enum"] == list(RULES)
    assert all(f"{name}:" in rule["description"] for name in RULES)


@pytest.mark.parametrize("name", list(RULES))
def test_tssctl_why_gives_each_rule_its_meaning(name: str) -> None:
    assert views.RULES[name] == RULES[name].meaning
    text = views.why_view({"id": 7, "state": "queued", "rule": name, "detail": "x"})
    assert RULES[name].meaning in " ".join(text.split())


def test_the_scheduling_doc_lists_every_rule() -> None:
    text = (DOCS / "scheduling.md").read_text()
    table = text[text.index("**Rules that hold a tape back**") : text.index("A drive is idle")]
    rows = re.findall(r"^\| `(\w+)` \|", table, re.MULTILINE)
    assert rows == HOLD, "docs/scheduling.md: a row per hold rule, in the order tried"
    other = text[text.index("Other answers:") :][:800]
    assert all(f"`{r.name}`" in other for r in ANSWERS)


@pytest.mark.parametrize("state", ["done", "failed", "cancelled", "abandoned"])
def test_a_finished_request_has_no_eta(state: str) -> None:
    from tssd.scheduler.explain import explain

    at = datetime(2026, 11, 30, tzinfo=UTC)
    row = SimpleNamespace(id=1, state=state, queue="default", created_at=at, finished_at=at)
    scheduler = SimpleNamespace(chooser=SimpleNamespace(queues={}))
    why = explain(scheduler, row)  # type: ignore[arg-type]
    assert (why["rule"], why["eta_s"], why["eta"]) == ("done", None, None)
