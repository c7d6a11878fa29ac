"""``tssd simulate``: parse inputs, run the campaign in virtual time, write the report."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tssd.backends.sim.layout import physical_offsets
from tssd.scheduler.policy import get_policy
from tssd.simulate.bound import lower_bound
from tssd.simulate.campaign import copies_by_pnfsid, load_catalog_rows, load_requests
from tssd.simulate.report import build_report, plot
from tssd.simulate.runner import Options, Outcome, run_campaign, simulation_settings
from tssd.simulate.vloop import run_virtual
from tssd.tape.geometry import PROFILES, get_profile


def list_profiles() -> dict[str, Any]:
    return {name: profile.as_dict() for name, profile in sorted(PROFILES.items())}


def simulate(options: Options, report_path: Path | None, plot_path: Path | None) -> dict[str, Any]:
    """Run the campaign; return the report (also written to *report_path* when given)."""
    outcome, report = run(options)
    if report_path is not None:
        report_path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if plot_path is not None:
        plot(outcome, report, plot_path)
    return report


def run(options: Options) -> tuple[Outcome, dict[str, Any]]:
    """Run the campaign; return what it did and its report."""
    profile = get_profile(options.profile)
    get_policy(options.policy)
    arrivals = load_requests(options.requests)
    catalog_text = options.catalog.read_text(encoding="utf-8")
    rows = load_catalog_rows(options.catalog)
    sim = simulation_settings(options, Path("/nonexistent")).sim

    def layout(volume: str, objects: Sequence[tuple[int, int, int]]) -> list[tuple[int, int]]:
        # The bound charges the library's true positions, which the scheduler estimates.
        return physical_offsets(volume, objects, sim.layout_spread, sim.file_spread, sim.seed)

    bound = lower_bound(
        arrivals, copies_by_pnfsid(rows), profile, options.drives, options.robot_arms, layout
    )
    outcome = run_virtual(lambda: run_campaign(options, arrivals, catalog_text))
    return outcome, build_report(options, outcome, bound.value)
