"""Text formatting for tssctl: sizes, durations, timestamps, tables and progress lines.

Sizes use SI units (1 MB = 10^6 bytes) like the rest of tssd (the simulation reports too),
so that figures in tssctl, the metrics and simulation reports can be compared directly.
Every cell and value shown passes through :func:`cell`, which escapes control characters
(:mod:`tssd.printable`): the text comes from pools, operators and backends.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from rich.cells import cell_len, set_cell_size

from tssd.domain import State
from tssd.printable import printable

if TYPE_CHECKING:  # rich's console and progress cost tens of ms: imported when a bar is drawn
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID

_UNITS = ("B", "kB", "MB", "GB", "TB", "PB", "EB")
NONE = "-"
PIPE_WIDTH = 100
#: Queues shown by `tssctl status`, the busiest first; `tssctl queues list` shows them all.
STATUS_QUEUES = 20


def human_size(size: float | None) -> str:
    if size is None:
        return NONE
    value = float(size)
    for unit in _UNITS:
        if abs(value) < 1000 or unit == _UNITS[-1]:
            break
        value /= 1000
    if unit == "B":
        return f"{int(value)} B"
    return f"{value:.1f} {unit}"


def human_rate(bytes_per_s: float | None) -> str:
    return NONE if bytes_per_s is None else f"{human_size(bytes_per_s)}/s"


def human_duration(seconds: float | None) -> str:
    """Two most significant units: an operator reads "3h 12m", not "11520s"."""
    if seconds is None:
        return NONE
    total = max(0, round(seconds))
    if total < 60:
        return f"{total}s"
    parts: list[str] = []
    for unit, width in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        amount, total = divmod(total, width)
        if amount or parts:
            parts.append(f"{amount}{unit}")
    return " ".join(parts[:2])


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    # A naive timestamp from the API is UTC: the daemon never speaks local time.
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def when(value: Any) -> str:
    """A time as ``HH:MM:SS`` today, else ``MM-DD HH:MM`` (UTC)."""
    stamp = parse_time(value)
    if stamp is None:
        return NONE
    stamp = stamp.astimezone(UTC)
    if stamp.date() == datetime.now(UTC).date():
        return stamp.strftime("%H:%M:%S")
    return stamp.strftime("%m-%d %H:%M")


def age(value: Any, now: datetime | None = None) -> str:
    when = parse_time(value)
    if when is None:
        return NONE
    return human_duration(((now or datetime.now(UTC)) - when).total_seconds())


def cell(value: Any) -> str:
    if value is None:
        return NONE
    if isinstance(value, bool):
        return "yes" if value else "no"
    return printable(str(value))


def shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def output_width() -> int:
    """The terminal's width on a terminal; 100 columns into a pipe or file."""
    if sys.stdout.isatty():
        return shutil.get_terminal_size((PIPE_WIDTH, 24)).columns
    return PIPE_WIDTH


def _fit(natural: list[int], room: int) -> list[int]:
    """Column widths within *room*: the widest columns give way first, down to 4."""
    widths = list(natural)
    while sum(widths) > room:
        widest = max(range(len(widths)), key=lambda i: widths[i])
        if widths[widest] <= 4:
            break
        widths[widest] -= 1
    return widths


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[Any]],
    right: Iterable[int] = (),
    width: int | None = None,
) -> str:
    """Aligned columns, two blanks apart, that fit *width*; ``right`` lists the numeric
    columns; the header is bold on a terminal.

    Cells too wide for the terminal are cut with an ellipsis rather than wrapped, so a
    row stays one line (``| grep`` and ``| wc -l`` keep working). Laid out here rather
    than by rich's Table, which took 10 s for 20,000 rows.
    """
    cells = [[cell(v) for v in row] for row in rows]
    width = width or output_width()
    natural = [max([cell_len(h), *(cell_len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    widths = _fit(natural, width - 2 * (len(headers) - 1))
    align = set(right)
    head = _line(headers, widths, align)
    if sys.stdout.isatty():
        head = f"\x1b[1m{head}\x1b[0m"
    return "\n".join([head, *(_line(row, widths, align) for row in cells)])


def _line(values: Sequence[str], widths: Sequence[int], right: set[int]) -> str:
    parts = []
    for i, (value, room) in enumerate(zip(values, widths, strict=True)):
        text = set_cell_size(value, room - 1) + "…" if cell_len(value) > room else value
        pad = " " * (room - cell_len(text))
        parts.append(pad + text if i in right else text + pad)
    return "  ".join(parts).rstrip()


def key_values(pairs: Iterable[tuple[str, Any]]) -> str:
    items = [(k, cell(v)) for k, v in pairs]
    width = max((len(k) for k, _ in items), default=0)
    return "\n".join(f"{k + ':':<{width + 1}} {v}" for k, v in items)


@dataclass
class Progress:
    """Rate and ETA of a batch, from successive (files done, bytes done) samples.

    The rate is taken over a sliding window so that it follows the current pace of the
    drives rather than the average since the start (which includes the first mounts).
    """

    files_total: int
    bytes_total: int = 0
    window_s: float = 60.0
    started: float = field(default_factory=time.monotonic)
    files_done: int = 0
    bytes_done: int = 0
    _samples: deque[tuple[float, int, int]] = field(default_factory=deque)

    def update(self, files_done: int, bytes_done: int, bytes_total: int, now: float) -> None:
        self.files_done, self.bytes_done, self.bytes_total = files_done, bytes_done, bytes_total
        self._samples.append((now, files_done, bytes_done))
        while len(self._samples) > 2 and now - self._samples[0][0] > self.window_s:
            self._samples.popleft()

    def rates(self) -> tuple[float | None, float | None]:
        """(files/s, bytes/s) over the window; None until two samples exist."""
        if len(self._samples) < 2:
            return None, None
        t0, f0, b0 = self._samples[0]
        t1, f1, b1 = self._samples[-1]
        if t1 <= t0:
            return None, None
        return (f1 - f0) / (t1 - t0), (b1 - b0) / (t1 - t0)

    def eta(self) -> float | None:
        file_rate, byte_rate = self.rates()
        if self.files_done >= self.files_total:
            return None  # finished: nothing is expected any more ("ETA 0s" read as coming)
        # Bytes predict better than files when sizes vary, but recall sizes may be unknown.
        if byte_rate and self.bytes_total > self.bytes_done:
            return (self.bytes_total - self.bytes_done) / byte_rate
        if file_rate:
            return (self.files_total - self.files_done) / file_rate
        return None

    def line(self, failed: int = 0) -> str:
        _, byte_rate = self.rates()
        pct = 100.0 * self.files_done / self.files_total if self.files_total else 100.0
        finished = self.files_done >= self.files_total
        text = (
            f"files {self.files_done}/{self.files_total} ({pct:.1f}%)"
            f"  bytes {human_size(self.bytes_done)}/{human_size(self.bytes_total)}"
            f"  rate {human_rate(byte_rate)}"
        ) + ("" if finished else f"  ETA {human_duration(self.eta())}")
        return text + (f"  failed {failed}" if failed else "")


class ProgressLine:
    """A progress bar on a terminal; a plain line every few seconds into a log or pipe.

    The text (files, bytes, rate, ETA) is the same either way; the bar shows the share of
    files finished.
    """

    def __init__(self, stream: TextIO, every_s: float = 5.0) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.every_s = every_s
        self.last = -every_s
        self._bar: RichProgress | None = None
        self._task: TaskID | None = None

    def show(
        self, text: str, now: float, final: bool = False, done: float = 0, total: float = 0
    ) -> None:
        if self.tty:
            self._draw(text, done, total, final)
            return
        if final or now - self.last >= self.every_s:
            self.stream.write(text + "\n")
            self.last = now
        self.stream.flush()

    def _draw(self, text: str, done: float, total: float, final: bool) -> None:
        if self._bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, TextColumn
            from rich.progress import Progress as RichProgress

            console = Console(file=self.stream, force_terminal=True, highlight=False)
            self._bar = RichProgress(
                BarColumn(bar_width=24), TextColumn("{task.description}"), console=console
            )
            self._task = self._bar.add_task(text, total=total or None)
            self._bar.start()
        assert self._task is not None
        self._bar.update(self._task, completed=done, total=total or None, description=text)
        if final:
            self.close()

    def close(self) -> None:
        """Leave the bar's last state on screen and give the terminal back."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


# --- API objects ---------------------------------------------------------------------

STATES = tuple(state.value for state in State)


def status(data: dict[str, Any]) -> str:
    accepting = "accepting requests" if data.get("accepting", True) else "NOT accepting requests"
    head = (
        f"tssd {cell(data.get('version', '?'))}  up {human_duration(data.get('uptime_s'))}"
        f"  backend {cell(data.get('backend', '?'))}  database {cell(data.get('database', '?'))}"
        f"  {accepting}"
    )
    warnings = data.get("warnings") or []
    if isinstance(warnings, list):
        for warning in warnings:
            # Every line of tssctl's output fits 100 columns.
            text = f"WARNING: {cell(warning)}"
            head += "\n" + textwrap.fill(text, 100, subsequent_indent="  ")
    throughput = data.get("throughput") or {}
    last_minute = throughput.get("bytes_last_minute")
    rate = human_rate(last_minute / 60 if last_minute is not None else None)
    return "\n\n".join(
        [
            head,
            _counts_table(data.get("counts") or {}),
            _queues_table(data.get("queues") or []),
            _drives_table(data.get("drives") or []),
            f"throughput {rate} ({human_size(last_minute)} in the last minute)",
        ]
    )


def _counts_table(counts: dict[str, dict[str, int]]) -> str:
    rows = [[kind, *(by_state.get(s, 0) for s in STATES)] for kind, by_state in counts.items()]
    return table(["REQUESTS", *(s.upper() for s in STATES)], rows, range(1, len(STATES) + 1))


def _queues_table(queues: list[dict[str, Any]]) -> str:
    """The busiest STATUS_QUEUES queues: a site with thousands of queues (one per VO and
    activity) still gets one screen, and a table of 20,000 rows took rich 18 s."""
    shown = sorted(queues, key=lambda q: -(q.get("queued", 0) + q.get("active", 0)))
    shown = shown[:STATUS_QUEUES]
    more = len(queues) - len(shown)
    rows = [
        [
            q["name"],
            q.get("priority"),
            q.get("max_drives") or "any",
            q.get("paused"),
            human_duration(q.get("latency_target_s")),
            q.get("queued", 0),
            q.get("active", 0),
        ]
        for q in shown
    ]
    headers = ["QUEUE", "PRIORITY", "MAX DRIVES", "PAUSED", "TARGET", "QUEUED", "ACTIVE"]
    text = table(headers, rows, (1, 2, 4, 5, 6))
    if more > 0:
        text += f"\n... and {more} more queues (fewer requests): tssctl queues list"
    return text


def _drives_table(drives: list[dict[str, Any]]) -> str:
    rows = [[d["name"], d.get("enabled"), d.get("state"), d.get("volume")] for d in drives]
    return table(["DRIVE", "ENABLED", "STATE", "VOLUME"], rows)


def location(request: dict[str, Any]) -> str | None:
    volume = request.get("volume")
    if not volume:
        return None
    position = request.get("position")
    return f"{volume}:{position}" if position is not None else str(volume)


def request_table(requests: list[dict[str, Any]]) -> str:
    rows = [
        [
            r["id"],
            r.get("kind"),
            r.get("state"),
            r.get("pnfsid"),
            human_size(r.get("size")),
            r.get("queue"),
            location(r),
            age(r.get("created_at")),
            shorten(r["error"], 60) if r.get("error") else None,
        ]
        for r in requests
    ]
    headers = ["ID", "KIND", "STATE", "PNFSID", "SIZE", "QUEUE", "VOLUME:POS", "AGE", "ERROR"]
    return table(headers, rows, right=(0, 4, 7))


def request(fields: dict[str, Any]) -> str:
    def shown(key: str, value: Any) -> Any:
        if key == "size" and value is not None:
            return f"{human_size(value)} ({value} bytes)"
        if key.endswith("_at") and value:
            return f"{value} ({age(value)} ago)"
        return value

    return key_values((k, shown(k, v)) for k, v in fields.items())


def batch_summary(result: dict[str, Any], files_total: int, elapsed: float, listed: int) -> str:
    """End of `recall --wait`: totals, then up to ``listed`` failures with their error."""
    counts = result["counts"]
    rate = result["bytes_done"] / elapsed if elapsed > 0 else None
    lines = [
        f"done {counts.get('done', 0)}/{files_total} files, {human_size(result['bytes_done'])}"
        f" in {human_duration(elapsed)} ({human_rate(rate)}); failed {counts.get('failed', 0)},"
        f" cancelled {counts.get('cancelled', 0)}, unknown {len(result['missing'])}"
    ]
    failures = result["failed"][:listed]
    if failures:
        rows = [[r["id"], r.get("state"), r.get("pnfsid"), r.get("error")] for r in failures]
        lines.append(table(["ID", "STATE", "PNFSID", "ERROR"], rows, right=(0,)))
    hidden = counts.get("failed", 0) + counts.get("cancelled", 0) - len(failures)
    if hidden > 0:
        lines.append(f"... {hidden} more: tssctl requests list --state failed --all")
    if result["missing"]:
        shown = ", ".join(str(i) for i in result["missing"][:listed])
        lines.append(f"unknown to tssd (purged?): {shown}")
    return "\n".join(lines)
