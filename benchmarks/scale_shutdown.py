"""SIGTERM to exit of a ``tssd serve`` at scale, with every drive reading (issue 22).

Runs on the work directory a ``scale_end_to_end.py --db sqlite --keep`` run left (its
database of N queued recalls, 8 simulated drives at time scale 0.1): starts the daemon,
waits until every drive is busy and 20 s more of reading, sends SIGTERM and times the
exit. Prints one JSON object: busy and mounted drives at the signal, seconds to exit,
the shutdown events the daemon logged at warning level (``scheduler.cancelled_sessions``,
``scheduler.left_mounted``).

    nice -n 10 .venv/bin/python benchmarks/scale_shutdown.py /tmp/tssd-scale-XXXX --grace 5
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from scale_end_to_end import Daemon


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="work directory of a kept SQLite scale run")
    parser.add_argument("--grace", type=float, default=30.0, help="scheduler.shutdown_grace_s")
    parser.add_argument("--unload", type=float, default=None, help="scheduler.shutdown_unload_s")
    parser.add_argument("--drives", type=int, default=8)
    parser.add_argument("--time-scale", type=float, default=0.1)
    parser.add_argument("--read-s", type=float, default=20.0, help="reading before SIGTERM")
    args = parser.parse_args()
    root: Path = args.root
    env = {
        "TSSD_SIM_DRIVES": str(args.drives),
        "TSSD_SIM_TAPES": "0",
        "TSSD_SIM_TIME_SCALE": str(args.time_scale),
        "TSSD_LOG_LEVEL": "warning",
        "TSSD_ENDIT_DIRECTORIES": f'[{{path = "{root / "endit"}", hsm_name = "osm"}}]',
        "TSSD_SCHEDULER_SHUTDOWN_GRACE_S": str(args.grace),
    }
    if args.unload is not None:
        env["TSSD_SCHEDULER_SHUTDOWN_UNLOAD_S"] = str(args.unload)
    d = Daemon(root, f"sqlite+aiosqlite:///{root / 'home' / 'tssd.db'}", env)
    d.starts = 100 + len(list(root.glob("tssd-*.log")))  # a log of its own
    ready = d.start()
    while True:
        drives = d.client().call("GET", "/v1/drives")["drives"]
        if sum(x["state"] == "busy" for x in drives) == args.drives:
            break
        time.sleep(1)
    time.sleep(args.read_s)
    report = d.stop_timed()
    report.update(ready_s=round(ready, 1), load_average=os.getloadavg(), grace_s=args.grace)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
