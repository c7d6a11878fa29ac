"""``tssd simulate --config`` with ``[[queues]]`` tables: the queues reach the scheduler
(a drive limit slows the campaign) and the report gives each queue's target and whether
its p95 met it."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

from tssd.cli.daemon import _simulate_options, build_parser
from tssd.simulate.command import simulate

GB = 10**9


def campaign(root: Path) -> tuple[Path, Path]:
    """Three tapes of eight 2 GB files, all requested at 0: half in queue "urgent"."""
    catalog, requests = root / "catalog.csv", root / "requests.csv"
    with catalog.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["pnfsid", "volume", "seq", "size", "storage_class", "written_at"])
        for t in range(3):
            for seq in range(1, 9):
                w.writerow([f"{t:04X}{seq:08X}", f"V{t:04d}", seq, 2 * GB, "atlas:tape",
                            "2020-01-01T00:00:00+00:00"])  # fmt: skip
    with requests.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["pnfsid", "at", "queue"])
        for t in range(3):
            for seq in range(1, 9):
                w.writerow([f"{t:04X}{seq:08X}", 0, "urgent" if seq % 2 else "bulk"])
    return catalog, requests


def report(root: Path, *argv: str) -> dict[str, Any]:
    catalog, requests = campaign(root)
    args = build_parser().parse_args(
        ["simulate", "--catalog", str(catalog), "--requests", str(requests), "--drives", "3",
         *argv]
    )  # fmt: skip
    return simulate(_simulate_options(args), None, None)


def test_config_queues_reach_the_simulation_and_its_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TSSD_CONFIG", raising=False)
    monkeypatch.delenv("TSSD_QUEUES", raising=False)
    plain = report(tmp_path)
    assert plain["queues"]["urgent"]["target_s"] is None
    assert plain["queues"]["urgent"]["met"] is None
    config = tmp_path / "tssd.toml"
    config.write_text(
        '[[queues]]\nname = "urgent"\nlatency_target_s = "1h"\nmax_drives = 1\n\n'
        '[[queues]]\nname = "bulk"\nmax_drives = 1\nlatency_target_s = 1\n'
    )
    got = report(tmp_path, "--config", str(config))
    urgent, bulk = got["queues"]["urgent"], got["queues"]["bulk"]
    assert (urgent["target_s"], bulk["target_s"]) == (3600.0, 1.0)
    assert urgent["met"] is (urgent["p95_s"] <= 3600.0)
    assert bulk["met"] is False and bulk["within_target"] == 0.0  # a mount takes longer
    assert urgent["files"] == bulk["files"] == 12
    # Both queues share every tape and may use one drive each: at most two tapes at once.
    assert got["makespan_s"] > plain["makespan_s"]
