"""The screen of ``tssctl top``, drawn from one ``GET /v1/top`` answer (docs/api.md).

:func:`screen` returns a rich renderable laid out for 100 columns: a header, one line per
drive, one per queue, the last mounts and a foot with the totals. The same renderable is
printed as plain text when stdout is not a terminal (``plain=True``: ASCII bars, no
colour).
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.markup import escape as markup_escape
from rich.table import Table
from rich.text import Text

from tssd.cli.render import NONE, human_duration, human_size, parse_time, when
from tssd.printable import printable

BAR = 10
STATE_STYLE = {"busy": "bold green", "mounting": "yellow", "mounted": "cyan", "empty": "dim",
               "disabled": "red"}  # fmt: skip


def screen(data: dict[str, Any], *, interval: float, plain: bool = False) -> RenderableType:
    several = len({d.get("instance") for d in data["drives"]} - {None}) > 1
    parts: list[RenderableType] = [
        _header(data, interval, plain),
        drives_table(data["drives"], several, plain),
        queues_table(data["queues"]),
        mounts_table(data["mounts"]),
        _foot(data["totals"], plain),
    ]
    return Group(*parts)


def _table(title: str, plain: bool = False) -> Table:
    return Table(
        title=title,
        title_justify="left",
        title_style="" if plain else "bold",
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),
        pad_edge=False,
        show_edge=False,
        header_style="" if plain else "bold",
    )


def _header(data: dict[str, Any], interval: float, plain: bool) -> Text:
    at = parse_time(data.get("at"))
    stamp = at.astimezone(UTC).strftime("%H:%M:%S UTC") if at else NONE
    instance = f" - instance {printable(str(data['instance']))}" if data.get("instance") else ""
    keys = "" if plain else "  (q quits)"
    text = Text(f"tssd top - {stamp}{instance} - every {interval:g} s{keys}", style="bold")
    if data.get("stale"):
        stale = printable(str(data["stale"]))
        text.append(f"\ntssd unreachable, figures are stale: {stale}", style="bold red")
    return text


def _text(value: str) -> str:
    """A cell from the API, control characters escaped, safe as rich markup."""
    return markup_escape(printable(value))


def bar(done: int, planned: int, plain: bool = False) -> str:
    """A bar of *done* out of *planned* and its percentage, BAR + 5 columns."""
    frac = done / planned if planned > 0 else 0.0
    filled = round(max(0.0, min(1.0, frac)) * BAR)
    on, off = ("#", ".") if plain else ("\u2588", "\u2591")
    pct = f"{100 * frac:3.0f}%" if planned > 0 else "   -"
    return on * filled + off * (BAR - filled) + " " + pct


def drives_table(drives: list[dict[str, Any]], several: bool, plain: bool) -> Table:
    t = _table("Drives", plain)
    t.add_column("DRIVE", max_width=10, no_wrap=True, overflow="ellipsis")
    if several:
        t.add_column("INSTANCE", max_width=8, no_wrap=True, overflow="ellipsis")
    t.add_column("STATE", no_wrap=True)
    t.add_column("TAPE", max_width=8, no_wrap=True, overflow="ellipsis")
    t.add_column("FOR", no_wrap=True)
    t.add_column("PROGRESS", no_wrap=True, min_width=BAR + 5)
    t.add_column("FILES", justify="right", no_wrap=True)
    t.add_column("BYTES", justify="right", no_wrap=True)
    t.add_column("MB/s", justify="right", no_wrap=True)
    t.add_column("UP", justify="right", no_wrap=True)
    for d in drives:
        mounted = d.get("volume") is not None
        state = d["state"]
        cells = [_text(d["name"])]
        if several:
            cells.append(_text(d.get("instance") or NONE))
        cells += [
            _text(state) if plain else f"[{STATE_STYLE.get(state, '')}]{_text(state)}[/]",
            _text(d.get("volume") or NONE),
            _text(_purpose(d.get("purpose"))),
            bar(d["bytes_done"], d["bytes_planned"], plain) if mounted else NONE,
            f"{count(d['files_done'])}/{count(d['files_planned'])}" if mounted else NONE,
            f"{size(d['bytes_done'])}/{size(d['bytes_planned'])}" if mounted else NONE,
            rate(d.get("mb_s")),
            _short_duration(d.get("mounted_s")),
        ]
        t.add_row(*cells)
    return t


def _purpose(purpose: str | None) -> str:
    """recall, migrate, or both (a tape written and read in one mount)."""
    if not purpose:
        return NONE
    return "both" if "+" in purpose else purpose


def count(n: int) -> str:
    """At most four characters: 999, 1.2k, 12k, 1.2M."""
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if n >= scale:
            value = n / scale
            return f"{value:.1f}{unit}" if value < 10 else f"{value:.0f}{unit}"
    return str(n)


def size(nbytes: int) -> str:
    """Bytes in at most five characters: 512B, 1.2G, 180M, 99T."""
    value = float(nbytes)
    for unit in "BkMGTPE":
        if value < 999.5 or unit == "E":
            break
        value /= 1000
    return f"{value:.1f}{unit}" if value < 10 and unit != "B" else f"{value:.0f}{unit}"


def rate(mb_s: float | None) -> str:
    if mb_s is None:
        return NONE
    return f"{mb_s:.1f}" if mb_s < 100 else f"{mb_s:.0f}"


def _short_duration(seconds: float | None) -> str:
    return human_duration(seconds).replace(" ", "")


def queues_table(queues: list[dict[str, Any]]) -> Table:
    t = _table("Queues")
    t.add_column("QUEUE", max_width=16, no_wrap=True, overflow="ellipsis")
    t.add_column("QUEUED", justify="right", no_wrap=True)
    t.add_column("ACTIVE", justify="right", no_wrap=True)
    t.add_column("OLDEST", justify="right", no_wrap=True)
    t.add_column("P95 1H", justify="right", no_wrap=True)
    t.add_column("TARGET", justify="right", no_wrap=True)
    t.add_column("ETA LAST", justify="right", no_wrap=True)
    t.add_column("", no_wrap=True)
    for q in queues:
        target = q.get("latency_target_s")
        p95 = q.get("p95_1h_s")
        late = target is not None and p95 is not None and p95 > target
        notes = [n for n, on in (("paused", q.get("paused")), ("over target", late)) if on]
        t.add_row(
            _text(q["name"]),
            str(q["queued"]),
            str(q["active"]),
            _short_duration(q.get("oldest_wait_s")),
            _short_duration(p95),
            _short_duration(target),
            _short_duration(q.get("eta_s")),
            ", ".join(notes),
        )
    return t


def mounts_table(mounts: list[dict[str, Any]]) -> Table:
    t = _table("Last mounts")
    t.add_column("DRIVE", max_width=12, no_wrap=True, overflow="ellipsis")
    t.add_column("TAPE", max_width=8, no_wrap=True, overflow="ellipsis")
    t.add_column("FOR", no_wrap=True)
    t.add_column("MOUNTED AT", no_wrap=True)
    t.add_column("HELD", justify="right", no_wrap=True)
    t.add_column("FILES", justify="right", no_wrap=True)
    t.add_column("BYTES", justify="right", no_wrap=True)
    t.add_column("EFF", justify="right", no_wrap=True)
    for m in reversed(mounts):  # newest first
        eff = m.get("efficiency")
        t.add_row(
            _text(m["drive"]),
            _text(m["volume"]),
            _text(m.get("purpose") or NONE),
            when(m.get("requested_at")),
            "open" if m.get("open") else _short_duration(m.get("session_s")),
            str(m["files"]),
            human_size(m["bytes"]),
            NONE if eff is None else f"{100 * eff:.0f}%",
        )
    return t


def _foot(totals: dict[str, Any], plain: bool) -> Text:
    line = (
        f"{totals['drives_busy']}/{totals['drives']} drives busy | "
        f"{totals['queued']} queued | {totals['active']} active | "
        f"{totals['done_1h']} done in 1 h | {rate(totals['mb_s'])} MB/s now, "
        f"{rate(totals['mb_s_last_minute'])} over 1 min"
    )
    return Text(line, style="" if plain else "bold")
