"""The reference pages of docs/reference/ are current, and the log-event declarations complete.

Each page is generated from the declarations it describes (``tssd/reference/``); a page
that differs from what the code generates now is stale: run
``python -m tssd.reference docs/reference`` and commit the result. The log events are
found in the source (every ``log.<level>("name", ...)`` call), so an event logged without
a declaration fails here; ``python tests/unit/test_reference_docs.py`` prints the missing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tssd.reference import PAGES, page
from tssd.reference.__main__ import main as generate
from tssd.reference.events import declared_names
from tssd.shim import args as shim_args
from tssd.shim.exit_codes import EXIT_CODES

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"
LEVELS = {"debug", "info", "warning", "error", "exception", "critical"}


def _log_call(node: ast.AST) -> str | None:
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "log"
        and node.func.attr in LEVELS
        and node.args
    ):
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def _sources() -> list[Path]:
    return [p for p in sorted((ROOT / "tssd").rglob("*.py")) if p.name != "log_events.py"]


def logged_events() -> dict[str, str]:
    """Event name -> the first file that logs it."""
    found: dict[str, str] = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = _log_call(node)
            if name is not None:
                found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def string_constants() -> set[str]:
    return {
        node.value
        for path in _sources()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


@pytest.mark.parametrize("name", sorted(PAGES))
def test_each_reference_page_is_current(name: str) -> None:
    path = REFERENCE / name
    assert path.exists(), f"{path} missing: run python -m tssd.reference docs/reference"
    assert path.read_text(encoding="utf-8") == page(name), (
        f"docs/reference/{name} is stale: run python -m tssd.reference docs/reference"
    )


def test_the_generator_writes_and_checks(tmp_path: Path) -> None:
    assert generate([str(tmp_path), "--check"]) == 1
    assert generate([str(tmp_path)]) == 0
    assert generate([str(tmp_path), "--check"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(PAGES)


def test_every_logged_event_is_declared() -> None:
    logged = logged_events()
    assert len(logged) > 40
    assert {e: where for e, where in logged.items() if e not in declared_names()} == {}


def test_every_exit_code_of_the_shim_is_explained() -> None:
    constants = {v for k, v in vars(shim_args).items() if k.startswith("EXIT_")}
    assert constants == {e.code for e in EXIT_CODES}


def test_every_declared_event_is_in_the_code() -> None:
    assert declared_names() - string_constants() == set()


if __name__ == "__main__":
    for event, where in sorted(logged_events().items()):
        if event not in declared_names():
            print(f"{event}\t{where}")
