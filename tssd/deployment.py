"""Whether this daemon is a demo: the simulated library outside a demo home is a mistake.

The simulated library keeps its "tape" copies on local disk. A pool deployed with it
would record those URIs as tape copies, so ``tssd serve`` warns at start (and ``tssctl
status`` repeats it) when ``backend.type = "sim"`` runs with a home that is not a demo's:
the per-user default of the README's first command, or a directory under the system's
temporary directory (tests, benchmarks).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from tssd.shim.endpoint import DEFAULT_HOME

SIM_WARNING = (
    "backend.type is 'sim': the simulated library keeps its copies on this host's disk, not "
    "on tape; a production tape server uses 'sp' or 'scsi' (docs/backends.md)"
)


def demo_home(home: Path) -> bool:
    """The README's default home, or one below the temporary directory."""
    resolved = home.expanduser().resolve()
    demos = (Path(DEFAULT_HOME).expanduser().resolve(), Path(tempfile.gettempdir()).resolve())
    return resolved == demos[0] or resolved.is_relative_to(demos[1])


def backend_warnings(backend_type: str, home: Path) -> list[str]:
    """Warnings about the backend (shown at start and by ``tssctl status``)."""
    if backend_type == "sim" and not demo_home(home):
        return [SIM_WARNING]
    return []
