"""What one tss-hsm call costs against a running tssd: wall time and peak RSS.

Budget (issue 5): median wall time of one call, submit or poll, at most 1.5 x that of
``python3 -I -S -c pass`` plus 10 ms, and at most 15 MB peak RSS. The calls are
interleaved (bare interpreter, submit, poll, the same poll through the console script)
so that load from elsewhere on the machine hits all of them alike. Each call is timed
from fork to reaped exit. Peak RSS comes from GNU time (``/usr/bin/time -v``), which
forks from a small process: wait4() of a child of this Python would include the pages
the child shared with its parent before exec. Where hyperfine is installed, its median
for the bare interpreter and for the poll is printed too.

    python benchmarks/shim_cost.py --rounds 300
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from dcache_common import BIN, Tssd, dump, percentile

SI = (
    "-si=size=4096;new=true;stored=false;sClass=atlas:tape;cClass=-;hsm=osm;store=atlas;group=tape;"
)


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """(wall seconds, exit code) of one run."""
    started = time.perf_counter()
    code = subprocess.run(argv, env=env, capture_output=True, check=False).returncode
    return time.perf_counter() - started, code


def peak_rss_kb(argv: list[str], env: dict[str, str], runs: int = 20) -> int | None:
    if not Path("/usr/bin/time").exists():
        return None
    peak = 0
    for _ in range(runs):
        res = subprocess.run(["/usr/bin/time", "-v", *argv], env=env, capture_output=True,
                             text=True, check=False)  # fmt: skip
        for line in res.stderr.splitlines():
            if "Maximum resident set size" in line:
                peak = max(peak, int(line.split(":")[1]))
    return peak


def summary(samples: list[tuple[float, int]]) -> dict[str, Any]:
    walls = [s[0] for s in samples]
    return {
        "median_ms": round(1000 * statistics.median(walls), 2),
        "p90_ms": round(1000 * percentile(walls, 90), 2),
        "min_ms": round(1000 * min(walls), 2),
        "exit_codes": sorted({s[1] for s in samples}),
    }


def hyperfine_medians(commands: dict[str, list[str]], env: dict[str, str]) -> dict[str, Any]:
    import json

    found: dict[str, Any] = {}
    hyperfine = shutil.which("hyperfine")
    if not hyperfine:
        return found
    for name, argv in commands.items():
        out = Path(tempfile.mkstemp(suffix=".json")[1])
        subprocess.run(
            [hyperfine, "-N", "-i", "-w", "10", "-r", "200", "--export-json", str(out),
             "--style", "none", subprocess.list2cmdline(argv)],
            env=env, check=True, capture_output=True,
        )  # fmt: skip
        found[f"hyperfine_{name}_median_ms"] = round(
            1000 * json.loads(out.read_text())["results"][0]["median"], 2
        )
        out.unlink()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tssd-shim-"))
    # Slow hardware: the migrations stay open, so every poll finds an open request.
    tssd = Tssd(work / "home", {"TSSD_SIM_TIME_SCALE": "1000"})
    try:
        tssd.start()
        report = measure(tssd, work, args.rounds)
    finally:
        tssd.stop()
        shutil.rmtree(work, ignore_errors=True)
    dump(report)


def measure(tssd: Tssd, work: Path, rounds: int) -> dict[str, Any]:
    source = work / "file"
    source.write_bytes(os.urandom(4096))
    env = tssd.env()
    python = str(BIN / "python3")
    fast, script = str(BIN / "tss-hsm-fast"), str(BIN / "tss-hsm")

    def call(launcher: str, pnfsid: str) -> list[str]:
        return [launcher, "put", pnfsid, str(source), SI, "-mode=poll", f"-tssd={tssd.socket}"]

    bare = [python, "-I", "-S", "-c", "pass"]
    assert timed(call(fast, "0000F00D"), env)[1] == 72  # the request every poll finds open
    samples: dict[str, list[tuple[float, int]]] = {
        "bare_interpreter": [], "submit": [], "poll": [], "poll_console_script": [],
    }  # fmt: skip
    for i in range(rounds):
        samples["bare_interpreter"].append(timed(bare, env))
        samples["submit"].append(timed(call(fast, f"{i + 1:08X}"), env))
        samples["poll"].append(timed(call(fast, "0000F00D"), env))
        samples["poll_console_script"].append(timed(call(script, "0000F00D"), env))
    report: dict[str, Any] = {name: summary(s) for name, s in samples.items()}
    report["bare_interpreter"]["max_rss_kb"] = peak_rss_kb(bare, env)
    report["submit"]["max_rss_kb"] = peak_rss_kb(call(fast, "0000BEEF"), env)
    report["poll"]["max_rss_kb"] = peak_rss_kb(call(fast, "0000F00D"), env)
    bare_ms = report["bare_interpreter"]["median_ms"]
    budget = round(1.5 * bare_ms + 10, 2)
    report["budget_ms"] = budget
    bare_walls = [wall for wall, _ in samples["bare_interpreter"]]
    for name in ("submit", "poll"):
        report[f"{name}_within_budget"] = report[name]["median_ms"] <= budget
        # Paired with the bare run just before it, so that load from elsewhere, which
        # hits both, cancels out: the budget per round, and the median excess.
        pairs = list(zip(bare_walls, (wall for wall, _ in samples[name]), strict=True))
        report[f"{name}_rounds_within_budget"] = round(
            sum(call <= 1.5 * bare + 0.010 for bare, call in pairs) / len(pairs), 3
        )
        report[f"{name}_minus_bare_median_ms"] = round(
            1000 * statistics.median(call - bare for bare, call in pairs), 2
        )
        rss = report[name]["max_rss_kb"]
        report[f"{name}_rss_within_15mb"] = rss is not None and rss <= 15 * 1024
    report["rounds"] = rounds
    report.update(hyperfine_medians({"bare": bare, "poll": call(fast, "0000F00D")}, env))
    report["at"] = time.strftime("%Y-%m-%d %H:%M")
    return report


if __name__ == "__main__":
    main()
