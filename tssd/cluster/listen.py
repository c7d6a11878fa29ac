"""What other instances did to the queue: PostgreSQL ``LISTEN tssd_work, tssd_done``.

The listener holds a database connection of its own, so it lives in
:mod:`tssd.db.listen`; this name stays for the cluster's callers.
"""

from __future__ import annotations

from tssd.db.listen import CHANNEL, DONE_CHANNEL, WorkListener

__all__ = ["CHANNEL", "DONE_CHANNEL", "WorkListener"]
