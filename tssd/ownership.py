"""Who tssd runs as.

dCache's pool keeps file metadata on its replicas (it sets their times, which needs the
file's owner), so the files tssd writes into a pool must belong to the pool's user: a
production tape server runs tssd as the pool's user on the pool host, as ENDIT runs its
daemons (``startup/systemd/endit-retriever.service``: ``User=dcache``). Running as root
still works (the README's quick start does), so this is a warning, not a refusal.
"""

from __future__ import annotations

import os

ROOT_WARNING = (
    "tssd runs as root: a production tape server runs it as the dCache pool's user on the "
    "pool host (User= in deploy/tssd.service, docs/dcache.md 'Who owns the files'), so that "
    "the files it writes into the pool belong to the pool"
)


def ownership_warnings(euid: int | None = None) -> list[str]:
    """Warnings about the user tssd runs as (shown at start and by ``tssctl status``)."""
    if (os.geteuid() if euid is None else euid) == 0:
        return [ROOT_WARNING]
    return []
