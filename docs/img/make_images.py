"""Make docs/img/top.png and docs/img/status.png from a real ``tssd serve``.

    .venv/bin/python docs/img/make_images.py [OUTDIR]

A simulated library (three drives, accelerated time) recalls four tapes in two queues;
``tssctl top`` runs in a private tmux server (100 x 26), its screen is captured with
``capture-pane -e`` and drawn by rich's SVG export, then photographed by headless
Chromium; ``/status`` is photographed directly. So that the 24-hour figures of the status
page show a day, the demo database is given a day of closed mounts before the campaign
(rows this script writes, with random times, tapes and efficiencies); the
current mounts, the drive table and the queue depth are the campaign's own. Needs tmux
and chromium.
"""

from __future__ import annotations

import os
import random
import shlex
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rich.console import Console
from rich.text import Text

from tssd.testing import BIN, serve_env, spawn_serve, stop_serve, wait_ready

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def campaign(work: Path) -> tuple[Path, dict[str, Path]]:
    out = work / "recalled"
    out.mkdir()
    rows, lists = [], {"atlas": [], "cms": []}
    for v in range(4):
        for seq in range(1, 61):
            pnfsid = f"00{v:04X}{seq:06X}"
            rows.append(f"{pnfsid},VT{v:04d}L8,{seq},{3_000_000 * (1 + seq % 4)},atlas:tape,"
                        "2025-01-01T00:00:00Z")  # fmt: skip
            lists["atlas" if seq % 3 else "cms"].append(f"{pnfsid} {out / pnfsid}")
    catalog = work / "catalog.csv"
    catalog.write_text("pnfsid,volume,seq,size,storage_class,written_at\n" + "\n".join(rows))
    paths = {}
    for queue, lines in lists.items():
        paths[queue] = work / f"{queue}.txt"
        paths[queue].write_text("\n".join(lines) + "\n")
    return catalog, paths


def day_of_history(db: Path) -> None:
    """Closed mounts over the last day (before the campaign), as tssd records them."""
    rng = random.Random(21)
    now = datetime.now(UTC)
    con = sqlite3.connect(db)
    with con:
        for drive in ("drive0", "drive1", "drive2"):
            t = now - timedelta(hours=23.5)
            while t < now - timedelta(minutes=25):
                held = timedelta(minutes=rng.uniform(8, 70))
                volume = f"VT{rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]):04d}L8"
                files = rng.randint(3, 400)
                eff = min(0.95, max(0.03, rng.betavariate(2, 2)))
                ready = t + timedelta(seconds=rng.uniform(60, 110))
                con.execute(
                    "INSERT INTO mounts (drive, volume, purpose, requested_at, ready_at, "
                    "dismounted_at, files, bytes, transfer_s) VALUES (?,?,?,?,?,?,?,?,?)",
                    (drive, volume, "recall" if rng.random() < 0.8 else "migrate",
                     t.isoformat(), ready.isoformat(), (t + held).isoformat(), files,
                     files * 3_500_000_000, eff * held.total_seconds()),
                )  # fmt: skip
                t += held + timedelta(minutes=rng.uniform(2, 90))
    con.close()


def tmux(sock: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
    env.update(LANG="C.UTF-8", LC_ALL="C.UTF-8", TERM="xterm-256color")
    cmd = ["tmux", "-u", "-f", "/dev/null", "-S", str(sock), *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout


def chromium(url: str, png: Path, width: int, height: int, profile: Path) -> None:
    subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         f"--user-data-dir={profile}", f"--screenshot={png}",
         f"--window-size={width},{height}", url],
        capture_output=True, check=True, timeout=120,
    )  # fmt: skip


def top_png(capture: str, work: Path, out: Path) -> None:
    console = Console(record=True, width=100, force_terminal=True, color_system="truecolor")
    console.print(Text.from_ansi(capture.rstrip("\n")))
    svg = work / "top.svg"
    svg.write_text(console.export_svg(title="tssctl top"))
    page = work / "top.html"
    page.write_text(f'<html><body style="margin:0;background:#fff">{svg.read_text()}</body></html>')
    chromium(page.as_uri(), out, 1010, 545, work / "profile")


def main(outdir: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        home, port = work / "home", free_port()
        db = home / "tssd.db"
        env = serve_env(home, f"sqlite+aiosqlite:///{db}", {
            "TSSD_API_METRICS_TCP": f"127.0.0.1:{port}", "TSSD_API_STATUS_SAMPLE_S": "2",
            "TSSD_SIM_DRIVES": "3", "TSSD_SIM_TIME_SCALE": "0.1",
            "TSSD_SCHEDULER_FILL_WAIT_S": "0", "TSSD_SCHEDULER_KEEP_MOUNTED_S": "2",
        })  # fmt: skip
        proc = spawn_serve(env, home / "tssd.log")
        try:
            wait_ready(proc, home / "tssd.sock", 60, (home / "tssd.log").read_text)
            day_of_history(db)
            catalog, lists = campaign(work)
            ctl = [str(BIN / "tssctl"), "--tssd", str(home / "tssd.sock")]
            subprocess.run([*ctl, "catalog", "import", str(catalog)], check=True)
            time.sleep(20)  # a little queue depth history before the recalls arrive
            for queue, path in lists.items():
                subprocess.run([*ctl, "recall", "--file-list", str(path), "--queue", queue],
                               check=True, capture_output=True)  # fmt: skip
            sock = work / "tmux.sock"
            top = " ".join(shlex.quote(a) for a in [*ctl, "top", "--interval", "1"])
            tmux(sock, "new-session", "-d", "-s", "top", "-x", "100", "-y", "26", top)
            time.sleep(12)
            capture = tmux(sock, "capture-pane", "-e", "-p", "-t", "top")
            top_png(capture, work, outdir / "top.png")
            tmux(sock, "send-keys", "-t", "top", "q")
            chromium(f"http://127.0.0.1:{port}/status", outdir / "status.png", 1000, 950,
                     work / "profile")  # fmt: skip
        finally:
            subprocess.run(["tmux", "-S", str(work / "tmux.sock"), "kill-server"],
                           capture_output=True, check=False)  # fmt: skip
            stop_serve(proc)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
