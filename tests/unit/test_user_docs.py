"""The documents for the people who run tssd cite no issue and no commit.

Experiment logs with their rounds and commits live in docs/research/; every other page
(README.md, docs/, docs/guide/, the generated docs/reference/) is written for a site's
administrator. The check is the plain one a reader would run:
``grep -rE "issue [0-9]+|[0-9a-f]{7,40}" docs/ README.md`` outside docs/research/.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITATION = re.compile(r"issue [0-9]+|[0-9a-f]{7,40}")


def user_documents() -> list[Path]:
    docs = [p for p in (ROOT / "docs").rglob("*.md") if "research" not in p.parts]
    return [ROOT / "README.md", *sorted(docs)]


def test_no_user_document_cites_an_issue_or_a_commit() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {match.group(0)}"
        for path in user_documents()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for match in [CITATION.search(line)]
        if match
    ]
    assert len(user_documents()) > 10
    assert found == []


def test_the_guide_is_in_task_order_and_the_readme_links_each_page() -> None:
    pages = sorted(p.name for p in (ROOT / "docs" / "guide").glob("*.md"))
    assert pages == [
        "1-install.md",
        "2-connect-a-pool.md",
        "3-operate.md",
        "4-tune.md",
        "5-upgrade.md",
        "6-troubleshoot.md",
    ]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert all(f"docs/guide/{page}" in readme for page in pages)
