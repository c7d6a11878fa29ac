"""A real ``tssd serve`` whose ENDIT directories hold planted symlinks.

Anyone who can write into an ENDIT directory (the pool's user, by design) tried to make
tssd write or delete elsewhere: a symlink at the ``.err`` file's temporary name, ``in/``
and ``trash/`` replaced by symlinks to directories with pnfsid-named files. The peer is
neicnordic/dcache-endit-provider's ``StageTask.java`` (it reads ``request/<id>.err``) and
``RemoveTask.java`` (``trash/<id>`` holds the URI).
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import Daemon

PNFSID = "0000ABCDEF0123456789ABCD"
OTHER = "0000ABCDEF0123456789ABC7"


def endit_dir(root: Path) -> Path:
    for sub in ("in", "out", "request", "trash"):
        (root / sub).mkdir(parents=True)
    return root


def test_planted_symlinks_lead_nowhere(daemon: Daemon, tmp_path: Path) -> None:
    first, second = endit_dir(tmp_path / "pool1"), endit_dir(tmp_path / "pool2")
    victim = tmp_path / "victim.db"
    victim.write_text("precious")
    (first / "request" / f".{PNFSID}.err.tssd-part").symlink_to(victim)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / PNFSID).write_text(f"osm://pool2?bfid={PNFSID}")
    (elsewhere / OTHER).write_text("precious")
    for sub in ("in", "trash"):
        (second / sub).rmdir()
        (second / sub).symlink_to(elsewhere, target_is_directory=True)
    config = tmp_path / "tssd.toml"
    config.write_text(
        "[endit]\nrescan_s = 0.5\ncancel_grace_s = 0.5\norphan_grace_s = 0.5\n"
        f'[[endit.directories]]\npath = "{first}"\nhsm_name = "pool1"\n'
        f'[[endit.directories]]\npath = "{second}"\nhsm_name = "pool2"\n'
    )
    daemon.extra_env["TSSD_CONFIG"] = str(config)
    daemon.start()
    broken = json.dumps({"file_size": "ten", "action": "recall"})
    for base in (first, second):
        (base / "request" / PNFSID).write_text(broken)
    daemon.wait_for(
        lambda: all((b / "request" / f"{PNFSID}.err").exists() for b in (first, second))
    )
    assert victim.read_text() == "precious"

    def refused() -> set[str]:
        return {e["subdir"] for e in daemon.events() if e.get("event") == "endit.dir_refused"}

    daemon.wait_for(lambda: refused() == {"in", "trash"})
    (second / "request" / OTHER).write_text(broken)  # a later pass, after the refusals
    daemon.wait_for((second / "request" / f"{OTHER}.err").exists)
    assert victim.read_text() == "precious"
    assert (first / "request" / f"{PNFSID}.err").read_text().startswith("32\n")
    assert sorted(p.name for p in elsewhere.iterdir()) == sorted([PNFSID, OTHER])
    assert daemon.requests(kind="remove") == []
    opened = [e for e in daemon.events() if e.get("event") == "endit.root_opened"]
    assert {e["resolved"] for e in opened} == {str(first), str(second)}
