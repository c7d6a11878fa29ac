"""docs/operations.md lists every metric tssd exports.

The log events are declared in the code and their reference page generated from the
declarations: tests/unit/test_reference_docs.py.
"""

from __future__ import annotations

from pathlib import Path

from tssd.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = ROOT / "docs" / "operations.md"


def test_every_metric_is_in_the_runbook() -> None:
    text = RUNBOOK.read_text(encoding="utf-8")
    for family in Metrics().registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        assert f"`{name}`" in text or f"`{name}`," in text, name
