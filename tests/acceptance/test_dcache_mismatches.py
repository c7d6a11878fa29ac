"""What a real pool hands tss-hsm that our own model of it did not.

- ``modules/dcache-vehicles/src/main/java/diskCacheV111/vehicles/OSMStorageInfo.java``:
  a directory without OSM tags gives ``store=<Unknown>;group=<Unknown>`` and the storage
  class ``<Unknown>:<Unknown>`` (``getStorageClass``), which ``GenericStorageInfo.toString``
  prints as ``sClass=``.
- ``neicnordic/dcache-endit-provider`` ``src/main/java/org/ndgf/endit/FlushTask.java``:
  the endit provider reports ``new URI(type, name, null, "bfid=" + pnfsId, null)``, i.e.
  ``osm://<name>?bfid=<pnfsid>``; a pool that moves from endit to tss-hsm hands those
  URIs to ``remove``.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from conftest import Daemon
from test_dcache_hsm import FAST, a_file, dcache_si, options, pnfsid

from tssd.testing import adler32_file
from tssd.wire import ApiError

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def untagged_si(size: int, adler: str, uris: tuple[str, ...] = ()) -> str:
    si = (
        f"size={size};new={str(not uris).lower()};stored={str(bool(uris)).lower()};"
        "sClass=<Unknown>:<Unknown>;cClass=-;hsm=osm;accessLatency=NEARLINE;"
        f"retentionPolicy=CUSTODIAL;path=/pnfs/example.org/untagged/f;uid=1;gid=2;"
        f"flag-c=1:{adler};store=<Unknown>;group=<Unknown>;"
    )
    return si + "".join(f"{uri};" for uri in uris)


def test_untagged_directory_put_and_get(daemon: Daemon, tmp_path: Path) -> None:
    # An untagged file's class must be listed like any other to claim a cartridge.
    daemon.extra_env["TSSD_STORAGE_CLASSES"] = '[{name = "unknown:unknown"}]'
    daemon.start()
    path = tmp_path / "pool" / pnfsid(20)
    path.parent.mkdir()
    path.write_bytes(random.Random(20).randbytes(7777))
    adler, pid = adler32_file(path), pnfsid(20)
    res = daemon.run(FAST, "put", pid, str(path), f"-si={untagged_si(7777, adler)}",
                     *options(daemon))  # fmt: skip
    assert res.returncode == 0, res.stderr
    [uri] = res.stdout.splitlines()
    # The documented storage class of an untagged file (docs/dcache.md).
    assert uri.startswith("osm://osm/?store=unknown&group=unknown&bfid=")
    [migration] = daemon.requests(kind="migrate")
    assert migration["storage_class"] == "unknown:unknown"

    dest = tmp_path / "restore" / pid
    dest.parent.mkdir()
    res = daemon.run(FAST, "get", pid, str(dest), f"-si={untagged_si(7777, adler, (uri,))}",
                     f"-uri={uri}", *options(daemon, "-mode=poll"))  # fmt: skip
    while res.returncode == 72:  # poll mode: p:delay, then again
        time.sleep(0.2)
        res = daemon.run(FAST, *res.args[1:])
    assert res.returncode == 0, res.stderr
    assert dest.read_bytes() == path.read_bytes()


def test_remove_of_an_endit_uri_removes_the_copy(daemon: Daemon, tmp_path: Path) -> None:
    daemon.start()
    pid, path, adler = a_file(tmp_path / "pool", 21, 3000)
    res = daemon.run(FAST, "put", pid, str(path), f"-si={dcache_si(3000, adler)}",
                     *options(daemon))  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert daemon.client().call("GET", f"/v1/catalog/copies/{pid}")["copies"]

    endit_uri = f"osm://osm?bfid={pid}"
    res = daemon.run(FAST, "remove", f"-uri={endit_uri}", *options(daemon))
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")
    with pytest.raises(ApiError) as caught:
        daemon.client().call("GET", f"/v1/catalog/copies/{pid}")
    assert caught.value.status == 404
    # Removing it again (dCache repeats removes) still succeeds.
    assert daemon.run(FAST, "remove", f"-uri={endit_uri}", *options(daemon)).returncode == 0


def test_serve_as_root_warns_at_start_and_in_status(daemon: Daemon) -> None:
    """ENDIT's ``startup/systemd/endit-retriever.service`` runs as ``User=dcache``: the
    pool's user. A tssd started as root says so, and still serves."""
    daemon.start()
    status = daemon.ctl("status")
    assert status.returncode == 0, status.stderr
    warned = [e for e in daemon.events() if e.get("event") == "daemon.runs_as_root"]
    if os.geteuid() == 0:
        assert "WARNING: tssd runs as root" in status.stdout
        assert "pool's user" in " ".join(status.stdout.split())
        assert len(warned) == 1 and warned[0]["level"] == "warning"
    else:
        assert "WARNING" not in status.stdout
        assert warned == []


def test_sim_outside_a_demo_home_warns_at_start_and_in_status(
    daemon: Daemon, tmp_path: Path
) -> None:
    """A pool deployed on the simulated library would record local-disk URIs as tape
    copies: a daemon whose home is no demo's (here: not below its temporary directory)
    says so at start and in ``tssctl status``, and still serves."""
    elsewhere = tmp_path / "not-the-home"
    elsewhere.mkdir()
    daemon.extra_env["TMPDIR"] = str(elsewhere)
    daemon.start()
    status = daemon.ctl("status")
    assert status.returncode == 0, status.stderr
    assert "WARNING: backend.type is 'sim'" in status.stdout
    warned = [e for e in daemon.events() if e.get("event") == "daemon.simulated_backend"]
    assert len(warned) == 1 and warned[0]["level"] == "warning"


def test_sim_in_a_demo_home_does_not_warn(daemon: Daemon) -> None:
    daemon.start()
    assert "backend.type is 'sim'" not in daemon.ctl("status").stdout
    assert not [e for e in daemon.events() if e.get("event") == "daemon.simulated_backend"]
