"""tssctl where, duplicates and catalog import/export against a real daemon."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Daemon

pytestmark = pytest.mark.slow

HEADER = "pnfsid,volume,seq,size,storage_class,written_at\n"


def pnfsid(i: int) -> str:
    return f"0000{i:032X}"


def gridka_like_catalog() -> str:
    """20 files on 2 tapes, then re-written copies of 12 of them spread over 3 more."""
    rows = []
    for i in range(20):
        volume, seq = f"GK{i // 10:04d}", i % 10 + 1
        rows.append((volume, seq, pnfsid(i), "2019-01-01T00:00:00+00:00"))
    for n, i in enumerate(range(0, 20, 2)):
        volume, seq = f"GX{n % 3:04d}", n // 3 + 1
        rows.append((volume, seq, pnfsid(i), f"2019-02-{n + 1:02d}T00:00:00+00:00"))
    # One file written three times.
    rows.append(("GX0000", 5, pnfsid(1), "2019-03-01T00:00:00+00:00"))
    rows.append(("GX0001", 5, pnfsid(1), "2019-03-02T00:00:00+00:00"))
    rows.sort()
    lines = [f"{p},{v},{s},{1000 + s},atlas:tape,{w}" for v, s, p, w in rows]
    return HEADER + "\n".join(lines) + "\n"


def test_catalog_where_duplicates(daemon: Daemon, tmp_path: Path) -> None:
    daemon.start()
    catalog = tmp_path / "catalog.csv"
    catalog.write_text(gridka_like_catalog())

    res = daemon.ctl("catalog", "import", str(catalog))
    assert res.returncode == 0, res.stderr
    assert "32 rows on 5 volumes" in res.stdout

    # where: every copy, oldest first, with sequence, size, written time and media.
    res = daemon.ctl("where", pnfsid(1), "--json")
    assert res.returncode == 0, res.stderr
    copies = json.loads(res.stdout)["copies"]
    assert [(c["volume"], c["seq"]) for c in copies] == [
        ("GK0000", 2),
        ("GX0000", 5),
        ("GX0001", 5),
    ]
    assert [c["written_at"][:10] for c in copies] == ["2019-01-01", "2019-03-01", "2019-03-02"]
    assert {c["media"] for c in copies} == {"tape"} and copies[0]["size"] == 1002
    table = daemon.ctl("where", pnfsid(1)).stdout
    assert "GX0001" in table and "tape" in table and "WRITTEN" in table
    missing = daemon.ctl("where", "ABCDEF")
    assert missing.returncode == 4 and "no copy" in missing.stderr

    # duplicates: reading the newest copies mounts 5 tapes, the originals only 2.
    res = daemon.ctl("duplicates", "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert (report["files"], report["copies"], report["duplicated_files"]) == (20, 32, 11)
    assert report["mounts"] == {"newest": 5, "oldest": 2, "minimum": 2}
    assert report["extra_mounts"] == 3
    assert report["duplicates"][0]["pnfsid"] == pnfsid(1)
    assert report["duplicates"][0]["copies"] == 3
    human = daemon.ctl("duplicates", "--limit", "3").stdout
    assert "extra mounts" in human and "(first 3 of 11" in human

    # export gives back exactly what was imported; a re-import changes nothing.
    out = tmp_path / "export.csv"
    assert daemon.ctl("catalog", "export", str(out)).returncode == 0
    assert out.read_text() == catalog.read_text()
    assert daemon.ctl("catalog", "import", str(out)).returncode == 0
    assert daemon.ctl("catalog", "export", "-").stdout == catalog.read_text()

    # A bad catalog names its lines and changes nothing.
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + "00AB,GK0009,1,10,atlas:tape,2019-01-01\n00AC,GK0009,x,1,a,b\n")
    res = daemon.ctl("catalog", "import", "--replace", str(bad))
    assert res.returncode == 6
    assert "line 3: seq 'x' is not an integer" in res.stderr
    assert daemon.ctl("catalog", "export", "-").stdout == catalog.read_text()

    # Imported copies are recalled like any other (filler bytes of the catalog size).
    listing = tmp_path / "list"
    listing.write_text(f"{pnfsid(3)} {tmp_path / 'r3'}\n{pnfsid(4)} {tmp_path / 'r4'}\n")
    res = daemon.ctl("recall", "--file-list", str(listing), "--wait")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "r3").stat().st_size == 1004
    assert (tmp_path / "r4").stat().st_size == 1005
