"""The log events of the simulated library (declared as tssd/log_events.py says)."""

from __future__ import annotations

from tssd.log_events import LogEvent

EVENTS: tuple[LogEvent, ...] = (
    LogEvent(
        ("sim.library.open", "sim.catalog.imported"),
        "info",
        "simulated library opened / catalog imported",
    ),
    LogEvent(
        ("sim.objects.orphans",),
        "warning",
        (
            "at start: object files the catalog never recorded (a crash between writing and "
            "recording) and partial files were removed (`removed`, `bytes`, `partial`, `kept`)"
        ),
        "none: expected after a crash",
    ),
    LogEvent(
        ("sim.objects.shared",),
        "info",
        "another live process holds `sim.data_dir`'s lock: its store is not tidied by this one",
        "give each daemon its own `sim.data_dir`",
    ),
    LogEvent(
        ("sim.mount.ready", "sim.dismount.done", "sim.mount.failed"),
        "info / warning",
        "simulated robot",
    ),
    LogEvent(
        ("sim.read.file", "sim.write.file", "sim.write.exists", "sim.remove.done"),
        "debug / info",
        "simulated data path",
    ),
    LogEvent(
        ("sim.read.failed", "sim.write.failed"),
        "warning",
        "simulated (injected) errors",
    ),
)
