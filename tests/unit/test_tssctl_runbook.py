"""docs/operations.md lists every log event the code emits and every metric it exports.

The events are found in the source (every ``log.<level>("name", ...)`` call), so a new
event without a runbook line fails here. ``python tests/unit/test_tssctl_runbook.py``
prints the missing ones.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tssd.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = ROOT / "docs" / "operations.md"
LEVELS = {"debug", "info", "warning", "error", "exception", "critical"}


def logged_events() -> dict[str, str]:
    """Event name -> the first file that logs it."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "tssd").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "log"
                and node.func.attr in LEVELS
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.setdefault(node.args[0].value, str(path.relative_to(ROOT)))
    return found


def documented() -> set[str]:
    return set(re.findall(r"`([a-z_]+(?:\.[a-z_]+)+)`", RUNBOOK.read_text(encoding="utf-8")))


def missing_events() -> dict[str, str]:
    names = documented()
    return {e: where for e, where in logged_events().items() if e not in names}


def test_every_log_event_is_in_the_runbook() -> None:
    assert len(logged_events()) > 40
    assert missing_events() == {}


def test_every_metric_is_in_the_runbook() -> None:
    text = RUNBOOK.read_text(encoding="utf-8")
    for family in Metrics().registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        assert f"`{name}`" in text or f"`{name}`," in text, name


if __name__ == "__main__":
    for event, where in sorted(missing_events().items()):
        print(f"{event}\t{where}")
