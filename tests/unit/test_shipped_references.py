"""Nothing in the repository points at a file that does not ship with it.

A reader of the code, the docs or a message (a site admin with a release, not the
project's working tree) cannot open a planning document, a section of one, or a path of
the machine the project was built on; every reference names a file of the repository or
a public source.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(
    r"contracts? section \d|reference(?:\.md)? section \d|\bcontracts\.md|\breference\.md"
    r"|\.\./shared/|\bshared/[a-z]+\.md|/work/(?:main|wt|shared)\b"
)
SHIPPED = ("tssd", "tests", "benchmarks", "docs", "deploy", "migrations", ".ci")
SUFFIXES = {".py", ".md", ".toml", ".service", ".yml", ".yaml", ".json", ".sh", ".conf", ""}


def shipped_files() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "pyproject.toml"]
    for top in SHIPPED:
        found += [
            p for p in sorted((ROOT / top).rglob("*"))
            if p.is_file() and p.suffix in SUFFIXES and "__pycache__" not in p.parts
        ]  # fmt: skip
    return [p for p in found if p.exists() and p != Path(__file__).resolve()]


def test_no_reference_to_a_file_that_does_not_ship() -> None:
    files = shipped_files()
    assert len(files) > 200
    hits = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not hits, "\n".join(hits)
