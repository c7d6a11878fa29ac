"""The request lifecycle's one table (tssd/lifecycle.py) against docs/architecture.md's
"Request lifecycle", and the rule that nothing above ``tssd/db/`` moves a request
except by a named transition."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tssd.domain import OPEN_STATES, TERMINAL_STATES, State
from tssd.lifecycle import LIFECYCLE, Transition, sources, target

ROOT = Path(__file__).resolve().parents[2] / "tssd"

DOCS = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
ARROW = re.compile(r"^(\w+(?:/\w+)*)\s+--(\w+)-->\s+(\w+)")


def documented() -> set[tuple[State, Transition, State]]:
    """The arrows of docs/architecture.md's "Request lifecycle" block, as (from,
    transition, to)."""
    text = DOCS.read_text().split("## Request lifecycle", 1)[1]
    block = text.split("```", 2)[1]
    found = set()
    for line in block.splitlines():
        if match := ARROW.match(line):
            froms, name, to = match.groups()
            found |= {(State(f), Transition(name), State(to)) for f in froms.split("/")}
    return found


def edges() -> set[tuple[State, Transition, State]]:
    return {(s, name, move.target) for name, move in LIFECYCLE.items() for s in move.sources}


def test_every_transition_is_in_the_table_once_and_as_documented() -> None:
    assert set(LIFECYCLE) == set(Transition)
    assert edges() == documented()
    for name, move in LIFECYCLE.items():
        assert move.target not in move.sources, name
        assert len(set(move.sources)) == len(move.sources), name
        assert sources(name) == tuple(s.value for s in move.sources)
        assert target(name) is move.target


def test_every_state_is_reachable_from_a_submitted_request() -> None:
    reached, frontier = {State.QUEUED}, [State.QUEUED]
    while frontier:
        state = frontier.pop()
        for source, _, to in edges():
            if source is state and to not in reached:
                reached.add(to)
                frontier.append(to)
    assert reached == set(State)


def test_a_terminal_state_is_left_only_by_retry_or_abandon() -> None:
    """A finished request stays finished: only an operator's retry (failed, cancelled ->
    queued) and the reaper's abandon (an unclaimed done recall) move it."""
    assert set(OPEN_STATES) | set(TERMINAL_STATES) == {s.value for s in State}
    leaving = {(s, name, to) for s, name, to in edges() if s.value in TERMINAL_STATES}
    assert leaving == {
        (State.FAILED, Transition.RETRY, State.QUEUED),
        (State.CANCELLED, Transition.RETRY, State.QUEUED),
        (State.DONE, Transition.ABANDON, State.ABANDONED),
    }
    assert not any(s is State.ABANDONED for s, _, _ in edges())


def test_only_the_stores_move_requests_outside_the_named_transitions() -> None:
    """Above ``tssd/db/`` a request changes state through a named transition of the
    ledger, never through a generic ``transition(ids, from_states, to_state)``."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.relative_to(ROOT).parts[0] == "db":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("transition", "_apply")
            ):
                found.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    assert found == []
