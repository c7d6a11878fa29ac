"""docs/reference/log-events.md: every log event, from the declarations of each package."""

from __future__ import annotations

import re

from tssd import log_events
from tssd.backends.scsi import log_events as scsi_events
from tssd.backends.sim import log_events as sim_events
from tssd.backends.sp import log_events as sp_events
from tssd.cluster import log_events as cluster_events
from tssd.endit import log_events as endit_events
from tssd.log_events import LogEvent
from tssd.reference.table import table

#: Where each part of the tree declares its events, in the order of the page.
DECLARATIONS = (
    ("The daemon, its API, requests and the scheduler", log_events.EVENTS),
    ("The ENDIT directories", endit_events.EVENTS),
    ("Several instances on one database", cluster_events.EVENTS),
    ("The simulated library", sim_events.EVENTS),
    ("The SCSI library", scsi_events.EVENTS),
    ("IBM Spectrum Protect", sp_events.EVENTS),
)


def declared() -> tuple[LogEvent, ...]:
    return tuple(event for _, events in DECLARATIONS for event in events)


def declared_names() -> set[str]:
    return {name for event in declared() for name in event.names}


def _action(text: str) -> str:
    # Actions link to runbook sections of docs/operations.md by their anchor alone.
    return re.sub(r"\]\(#", "](../operations.md#", text)


def render() -> str:
    parts = [
        "# Log events\n\n"
        "tssd logs JSON lines (one object per event; `event` is the stable name, then "
        "key-value fields such as `request_id`, `pnfsid`, `volume`, `drive`) when stderr is "
        "not a terminal, readable lines on a terminal (`log.format`). Each event below is "
        "declared once in the code, beside the part of tssd that logs it.\n"
    ]
    for title, events in DECLARATIONS:
        rows = [
            (" / ".join(f"`{n}`" for n in e.names), e.level, e.meaning, _action(e.action))
            for e in events
        ]
        parts.append(f"\n## {title}\n\n" + table(("event", "level", "meaning", "action"), rows))
    return "".join(parts)
