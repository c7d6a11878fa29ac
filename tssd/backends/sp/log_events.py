"""The log events of the IBM Spectrum Protect backend (declared as tssd/log_events.py says)."""

from __future__ import annotations

from tssd.log_events import LogEvent

EVENTS: tuple[LogEvent, ...] = (
    LogEvent(
        ("sp.library.open",),
        "info",
        "SP backend opened (API library, filespace, session slots)",
    ),
    LogEvent(
        ("sp.session.open", "sp.session.closed"),
        "info",
        "an SP session signed on (dsmInitEx) / off (dsmTerminate)",
    ),
    LogEvent(
        ("sp.session.lost",),
        "warning",
        (
            "the server dropped a session (communication failure, `rc`, `call`): it signs on "
            "again at its next use, the read or write is retried"
        ),
        "persistent: check the SP server and the network",
    ),
    LogEvent(
        ("sp.mount.ready", "sp.dismount.done"),
        "info",
        "a session slot claimed a volume / released it",
    ),
    LogEvent(
        ("sp.read.file", "sp.write.file", "sp.write.exists", "sp.remove.done"),
        "debug / info",
        (
            "SP data path (`sp.write.exists`: the file was already archived with the same size "
            "and adler32; that copy is answered)"
        ),
    ),
    LogEvent(
        ("sp.read.failed", "sp.write.failed", "sp.read.end_failed"),
        "warning",
        "an object's retrieve or archive failed (`error` has the SP return code and its text)",
        "[backend errors](#backend-errors)",
    ),
    LogEvent(
        ("sp.admin.unanswered",),
        "warning",
        "`sp.admin_command` gave no volume name: the volume is named by its restore-order key",
        "check the admin client's id and password",
    ),
)
