"""The simulated backend outside a demo home is warned about (tssd/deployment.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from tssd.deployment import SIM_WARNING, backend_warnings
from tssd.shim.endpoint import DEFAULT_HOME


def test_sim_in_a_production_home_warns() -> None:
    assert backend_warnings("sim", Path("/var/lib/tssd")) == [SIM_WARNING]


def test_sim_in_a_demo_home_does_not() -> None:
    assert backend_warnings("sim", Path(DEFAULT_HOME)) == []
    assert backend_warnings("sim", Path(tempfile.gettempdir()) / "demo") == []


def test_other_backends_do_not() -> None:
    assert backend_warnings("sp", Path("/var/lib/tssd")) == []
    assert backend_warnings("scsi", Path("/var/lib/tssd")) == []
