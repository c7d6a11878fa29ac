"""The scheduler reaches the database only through ``tssd/db/`` (issue 19 point 1)."""

from __future__ import annotations

import ast
from pathlib import Path

import tssd.scheduler

SCHEDULER = Path(tssd.scheduler.__file__).parent


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_scheduler_module_imports_sqlalchemy() -> None:
    offenders = {
        path.name: sorted(n for n in _imports(path) if n.split(".")[0] == "sqlalchemy")
        for path in sorted(SCHEDULER.glob("*.py"))
    }
    assert {k: v for k, v in offenders.items() if v} == {}
