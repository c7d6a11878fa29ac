"""The HTML of the ``/status`` page: inline SVG figures, inline CSS, no script, no asset.

Pure functions of the page's data (:class:`Page`), so they are tested without a daemon.
Every text that came from outside (drive and volume names, queue names) goes through
:func:`esc`; numbers are formatted here, never taken as text.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tssd.activity import DepthSample

REFRESH_S = 30
WIDTH = 960
LABEL_W = 130
ROW_H = 22
DAY_S = 86400.0
#: Lines of the queue-depth chart named in its legend (the deepest queues).
DEPTH_LINES = 5
PALETTE = ("#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2")

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222;background:#fff}
h1{font-size:1.3em;margin:.2em 0}h2{font-size:1.1em;margin:1.2em 0 .3em}
table{border-collapse:collapse}td,th{padding:2px 10px;text-align:left;border-bottom:1px solid #ddd}
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}
.muted{color:#666}.note{color:#a50}svg{display:block}svg text{font:11px sans-serif;fill:#333}
"""


@dataclass
class Page:
    """What the page shows; times are wall-clock seconds (epoch)."""

    now: float
    title: str
    drives: list[dict[str, Any]]  # name, state, volume, purpose, mounted_s, files, mb_s
    mounts: list[dict[str, Any]]  # id, drive, volume, start, end (None: open), files, ...
    depth: Sequence[DepthSample]
    wear: list[tuple[str, int]]
    notes: list[str] = field(default_factory=list)
    #: Seconds between queue-depth samples (api.status_sample_s).
    depth_every_s: float = 60.0


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def render(page: Page) -> str:
    stamp = datetime.fromtimestamp(page.now, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="refresh" content="{REFRESH_S}">',
        # An empty icon: the browser asks for no /favicon.ico (a 404 in its console).
        '<link rel="icon" href="data:,">',
        f"<title>{esc(page.title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{esc(page.title)}</h1>",
        f'<p class="muted">{esc(stamp)}; this page refreshes every {REFRESH_S} s.</p>',
        "<h2>Drives now</h2>",
        drives_table(page.drives),
        "<h2>Drive timeline, last 24 hours</h2>",
        timeline_svg(page),
        efficiency_legend(),
        "<h2>Queue depth, last 24 hours</h2>",
        depth_svg(page.now, page.depth),
        depth_caption(page),
        "<h2>Tapes mounted most often today</h2>",
        wear_svg(page.wear),
        *(f'<p class="note">{esc(n)}</p>' for n in page.notes),
        "</body></html>",
    ]
    return "\n".join(parts)


# -- current state ------------------------------------------------------------------------


def drives_table(drives: list[dict[str, Any]]) -> str:
    if not drives:
        return '<p class="muted">no drives</p>'
    head = "".join(f"<th>{h}</th>" for h in ("drive", "state", "tape", "purpose", "mounted",
                                               "files", "MB/s"))  # fmt: skip
    rows = []
    for d in drives:
        mb_s = "-" if d.get("mb_s") is None else f"{d['mb_s']:.1f}"
        cells = [
            esc(d["name"]),
            esc(d["state"]),
            esc(d.get("volume") or "-"),
            esc(d.get("purpose") or "-"),
            esc(duration(d.get("mounted_s"))),
        ]
        numbers = [str(int(d.get("files_done") or 0)), esc(mb_s)]
        rows.append(
            "<tr>"
            + "".join(f"<td>{c}</td>" for c in cells)
            + "".join(f'<td class="n">{c}</td>' for c in numbers)
            + "</tr>"
        )
    return f'<table class="drives"><tr>{head}</tr>{"".join(rows)}</table>'


def duration(value: float | None) -> str:
    if value is None:
        return "-"
    s = int(value)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


# -- timeline -----------------------------------------------------------------------------


def efficiency_colour(efficiency: float | None) -> str:
    """Red (0) through yellow to green (1); grey when unknown."""
    if efficiency is None:
        return "#999999"
    hue = round(120 * max(0.0, min(1.0, efficiency)))
    return f"hsl({hue},70%,45%)"


def _time_axis(now: float, x0: int, width: int, y: int, height: int) -> list[str]:
    start = now - DAY_S
    first = (int(start) // 10800 + 1) * 10800  # every 3 hours, on the hour (UTC)
    out = []
    for t in range(first, int(now) + 1, 10800):
        x = x0 + (t - start) / DAY_S * width
        label = datetime.fromtimestamp(t, UTC).strftime("%H:%M")
        out.append(f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{x:.1f}" y="{y}" text-anchor="middle">{label}</text>')
    return out


def timeline_svg(page: Page) -> str:
    names = sorted({d["name"] for d in page.drives} | {m["drive"] for m in page.mounts})
    if not names:
        return '<p class="muted">no drives</p>'
    plot_w = WIDTH - LABEL_W - 10
    height = ROW_H * len(names) + 20
    row_of = {n: i for i, n in enumerate(names)}
    start = page.now - DAY_S
    parts = _time_axis(page.now, LABEL_W, plot_w, height - 5, height - 18)
    for name, i in row_of.items():
        y = i * ROW_H
        parts.append(f'<text x="4" y="{y + 15}">{esc(name)}</text>')
        parts.append(f'<line x1="{LABEL_W}" y1="{y + ROW_H}" x2="{WIDTH - 10}" '
                     f'y2="{y + ROW_H}" stroke="#eee"/>')  # fmt: skip
    for m in page.mounts:
        begin = max(m["start"], start)
        end = page.now if m["end"] is None else max(m["end"], begin)
        x = LABEL_W + (begin - start) / DAY_S * plot_w
        w = max(1.5, (end - begin) / DAY_S * plot_w)
        y = row_of[m["drive"]] * ROW_H + 3
        eff = m.get("efficiency")
        tip = (
            f"{m['volume']} on {m['drive']} ({m.get('purpose') or '?'}), "
            f"{_clock(m['start'])}-{'now' if m['end'] is None else _clock(m['end'])}, "
            f"{m.get('files', 0)} files, {m.get('bytes', 0) / 1e9:.2f} GB, "
            f"efficiency {'-' if eff is None else f'{100 * eff:.0f}%'}"
        )
        outline = ' stroke="#000" stroke-dasharray="2,1"' if m["end"] is None else ""
        parts.append(
            f'<rect class="mount" data-mount-id="{int(m["id"])}" x="{x:.1f}" y="{y}" '
            f'width="{w:.1f}" height="{ROW_H - 6}" fill="{efficiency_colour(eff)}"{outline}>'
            f"<title>{esc(tip)}</title></rect>"
        )
    return _svg("timeline", height, parts, f"one bar per mount, {len(page.mounts)} mounts")


def _clock(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S")


def efficiency_legend() -> str:
    steps = [0.0, 0.25, 0.5, 0.75, 1.0]
    items = []
    for i, e in enumerate(steps):
        x = 10 + i * 110
        items.append(f'<rect x="{x}" y="4" width="14" height="12" fill="{efficiency_colour(e)}"/>')
        items.append(f'<text x="{x + 18}" y="14">efficiency {int(100 * e)}%</text>')
    x = 10 + len(steps) * 110
    items.append(f'<rect x="{x}" y="4" width="14" height="12" fill="#999999" stroke="#000" '
                 'stroke-dasharray="2,1"/>')  # fmt: skip
    items.append(f'<text x="{x + 18}" y="14">still mounted</text>')
    return _svg("legend", 20, items, "colour of a mount by its efficiency")


# -- queue depth --------------------------------------------------------------------------


def depth_svg(now: float, depth: Sequence[DepthSample]) -> str:
    samples = [s for s in depth if s.at >= now - DAY_S]
    if not samples:
        return '<p class="muted">no samples yet (api.status_sample_s)</p>'
    plot_w, plot_h, x0 = WIDTH - LABEL_W - 10, 160, LABEL_W
    top = max([1] + [max(s.queued, s.active) for s in samples])
    start = now - DAY_S

    def point(t: float, v: int) -> str:
        return f"{x0 + (t - start) / DAY_S * plot_w:.1f},{plot_h - v / top * (plot_h - 6):.1f}"

    totals: dict[str, int] = {}
    for s in samples:
        for q, n in s.queues:
            totals[q] = max(totals.get(q, 0), n)
    named = sorted(totals, key=lambda q: (-totals[q], q))[:DEPTH_LINES]
    series: list[tuple[str, str, list[str]]] = [
        ("queued, all queues", "#000", [point(s.at, s.queued) for s in samples]),
        ("active, all queues", "#2ca02c", [point(s.at, s.active) for s in samples]),
    ]
    for colour, q in zip(PALETTE, named, strict=False):
        values = [point(s.at, dict(s.queues).get(q, 0)) for s in samples]
        series.append((f"queued in {q}", colour, values))
    parts = _time_axis(now, x0, plot_w, plot_h + 14, plot_h)
    parts.append(f'<text x="4" y="12">{top}</text><text x="4" y="{plot_h}">0</text>')
    parts.append(f'<line x1="{x0}" y1="{plot_h}" x2="{WIDTH - 10}" y2="{plot_h}" stroke="#999"/>')
    for i, (label, colour, pts) in enumerate(series):
        width = 2 if i == 0 else 1.5
        parts.append(f'<polyline class="depth" fill="none" stroke="{colour}" '
                     f'stroke-width="{width}" points="{" ".join(pts)}"/>')  # fmt: skip
        if len(pts) == 1:  # one sample: a dot, a line needs two
            x, y = pts[0].split(",")
            parts.append(f'<circle cx="{x}" cy="{y}" r="2.5" fill="{colour}"/>')
        lx, ly = 10 + (i % 4) * 230, plot_h + 34 + (i // 4) * 16
        parts.append(f'<rect x="{lx}" y="{ly - 9}" width="14" height="4" fill="{colour}"/>')
        parts.append(f'<text x="{lx + 18}" y="{ly - 3}">{esc(label)}</text>')
    height = plot_h + 40 + ((len(series) - 1) // 4) * 16
    return _svg("depth", height, parts, f"queue depth, {len(samples)} samples")


def depth_caption(page: Page) -> str:
    if not page.depth:
        return ""
    first = datetime.fromtimestamp(page.depth[0].at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f'<p class="muted">{len(page.depth)} sample{"s" * (len(page.depth) != 1)}, '
        f"one every {page.depth_every_s:g} s, "
        f"since {esc(first)} (kept in tssd's memory: a restart starts afresh).</p>"
    )


# -- wear ---------------------------------------------------------------------------------


def wear_svg(wear: list[tuple[str, int]]) -> str:
    if not wear:
        return '<p class="muted">no mounts today</p>'
    most = max(n for _, n in wear)
    bar_w = WIDTH - LABEL_W - 60
    parts = []
    for i, (volume, n) in enumerate(wear):
        y = i * ROW_H
        w = max(2.0, n / most * bar_w)
        parts.append(f'<text x="4" y="{y + 15}">{esc(volume)}</text>')
        parts.append(f'<rect class="wear" x="{LABEL_W}" y="{y + 3}" width="{w:.1f}" '
                     f'height="{ROW_H - 6}" fill="#4878a8"><title>{esc(volume)}: {n} mounts'
                     "</title></rect>")  # fmt: skip
        parts.append(f'<text x="{LABEL_W + w + 6:.1f}" y="{y + 15}">{n}</text>')
    return _svg("wear", ROW_H * len(wear), parts, "mounts per tape today")


def _svg(name: str, height: int, parts: list[str], label: str) -> str:
    return (
        f'<svg class="{name}" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
        f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'aria-label="{esc(label)}">' + "".join(parts) + "</svg>"
    )
