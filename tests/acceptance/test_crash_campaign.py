"""Crash safety: tssd is SIGKILLed at random during a mixed put/get campaign (real bytes).

The CI variant of benchmarks/crash_campaign.py (8 kills per database; the benchmark runs
20 and more, docs/reliability.md has its figures). Invariants: every request done exactly
once, no duplicate tape copy, every recalled file checksum-verified.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from crash_campaign import Node, run_campaign

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.mark.persistent
def test_random_kills_lose_nothing_and_write_nothing_twice(tmp_path: Path, db_url: str) -> None:
    node = Node(home=tmp_path / "home", db_url=db_url)
    node.start()
    try:
        figures = run_campaign(node, tmp_path, kills=8, files=16, seed=7, timeout_s=240)
    finally:
        if node.proc is not None and node.proc.poll() is None:
            node.stop()
    assert figures["kills"] == 8
    assert figures["daemon_starts"] == 9
    assert figures["requests_lost"] == 0 and figures["duplicate_copies"] == 0
    assert figures["recalls_verified"] == 16
    assert figures["orphaned_objects"] == 0
