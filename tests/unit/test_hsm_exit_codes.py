"""Every exit code of the dCache side, path by path (docs/dcache.md, "Exit codes").

What dCache does with a code, read in its source:

- ``modules/dcache/src/main/java/diskCacheV111/util/HsmRunSystem.java``: 0 done, 72
  ``InProgressCacheException`` (called again after ``p:delay``), 71 delay error, 143
  ``TimeoutCacheException``, anything else a ``CacheException`` with that code.
- ``modules/dcache/src/main/java/org/dcache/pool/classic/PoolV4.java`` (the fetch
  callback): 41, 42, 43 and ``ERROR_IO_DISK`` (204) disable the whole pool.
- ``neicnordic/dcache-endit-provider`` ``src/main/java/org/ndgf/endit/EnditException.java``:
  an ``.err`` file's first line is the code if it is an integer, else the code is 1;
  ENDIT's own ``tsmretriever.pl`` (``fail_request``) writes only a message.

The shim-side paths that need a daemon (0, 31, 32, 41/43 passed through, 42, 43, 143,
1 for a cancel) are in ``test_hsm_fake_daemon.py``; this module adds the restart paths
(72 in poll mode, reconnect in block mode) and the daemon-side mapping of OS errors.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_hsm_fake_daemon import (
    PNFSID,
    URI,
    FakeTssd,
    one_line,
    run_hsm,
    source_file,
    start_hsm,
)

from tssd.cli.render import status as render_status
from tssd.endit.protocol import EnditPaths, err_code, write_error
from tssd.errors import (
    AccessDenied,
    DestinationUnwritable,
    InvalidRequest,
    NoSpace,
    SourceUnreadable,
)
from tssd.files import FileSink, FileSource, PoolRoots
from tssd.ownership import ROOT_WARNING, ownership_warnings
from tssd.shim import fastclient
from tssd.shim.actions import Unreachable, unreachable


@pytest.fixture
def sock(tmp_path: Path) -> Iterator[Path]:
    # sun_path holds at most 107 bytes.
    short = Path(f"/tmp/hsm-x-{os.getpid()}-{time.monotonic_ns()}.sock")
    yield short
    short.unlink(missing_ok=True)


def calls(tmp_path: Path) -> dict[str, tuple[str, ...]]:
    path, si = source_file(tmp_path)
    dest = tmp_path / "restore" / PNFSID
    dest.parent.mkdir(exist_ok=True)
    return {
        "put": ("put", PNFSID, str(path), si),
        "get": ("get", PNFSID, str(dest), "-si=size=10;", f"-uri={URI}"),
        "remove": ("remove", f"-uri={URI}"),
    }


@pytest.mark.parametrize("verb", ["put", "get", "remove"])
def test_poll_mode_without_tssd_exits_72_with_one_line(
    sock: Path, tmp_path: Path, verb: str
) -> None:
    """A restart is "not yet" in poll mode: 72, and dCache's deadline still bounds it."""
    result = run_hsm(FakeTssd(sock), *calls(tmp_path)[verb], "-mode=poll")
    assert (result.returncode, result.stdout) == (72, "")
    assert "unreachable" in one_line(result.stderr)


def test_poll_mode_with_tssd_shutting_down_exits_72(sock: Path, tmp_path: Path) -> None:
    fake = FakeTssd(sock).start()
    try:
        fake.refuse = (503, {"error": {"type": "ShuttingDown", "message": "stopping"}})
        result = run_hsm(fake, *calls(tmp_path)["put"], "-mode=poll")
    finally:
        fake.stop()
    assert (result.returncode, result.stdout) == (72, "")
    assert "tssd unavailable (stopping)" in one_line(result.stderr)


def test_block_mode_waits_for_tssd_to_come_back(sock: Path, tmp_path: Path) -> None:
    absent = FakeTssd(sock)
    proc = start_hsm(absent, *calls(tmp_path)["put"])
    fake = FakeTssd(sock)
    try:
        time.sleep(0.8)  # the first attempts find nobody
        fake.start()
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
        fake.stop()
    assert (proc.returncode, stdout) == (0, URI + "\n"), stderr
    lines = stderr.splitlines()
    assert [line.split(" ")[1] for line in lines] == ["lost", "reconnected"]
    assert len(fake.requests) == 1


def test_block_mode_gives_up_after_the_reconnect_timeout(sock: Path, tmp_path: Path) -> None:
    started = time.monotonic()
    result = run_hsm(FakeTssd(sock), *calls(tmp_path)["get"], "-reconnect-timeout=1")
    assert time.monotonic() - started >= 1
    assert (result.returncode, result.stdout) == (1, "")
    assert "unreachable for 1 s" in result.stderr.splitlines()[-1]


# -- daemon side: only the pool's file system gives 41-43 ------------------------------


def fail_with(code: int) -> object:
    def raise_it(*args: object, **kwargs: object) -> None:
        raise OSError(code, os.strerror(code))

    return raise_it


@pytest.mark.parametrize(
    ("code", "error", "exit_code"),
    [
        (errno.EACCES, AccessDenied, 1),  # tssd's user may not write there: install fault
        (errno.EPERM, AccessDenied, 1),
        (errno.ENOSPC, NoSpace, 41),  # the pool's file system is full
        (errno.EROFS, DestinationUnwritable, 43),  # the pool's file system went read-only
        (errno.EIO, DestinationUnwritable, 43),  # the pool's disk fails
    ],
)
async def test_recall_write_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, error: type, exit_code: int
) -> None:
    monkeypatch.setattr(FileSink, "_write_sync", fail_with(code))
    with pytest.raises(error) as caught:
        await FileSink(tmp_path / "f").write(b"data")
    assert type(caught.value) is error
    assert caught.value.exit_code == exit_code


_LOCKED_WRITE = """
import asyncio, sys
from pathlib import Path
from tssd.errors import AccessDenied
from tssd.files import FileSink
try:
    asyncio.run(FileSink(Path(sys.argv[1]) / "f").write(b"data"))
except AccessDenied as exc:
    print(exc.exit_code)
"""


def test_recall_into_a_directory_tssd_may_not_write_is_1() -> None:
    # Root writes everywhere (and CI runs as root). In a user namespace of its own
    # (unshare(1), util-linux) root keeps its uid but loses CAP_DAC_OVERRIDE over files
    # whose owner the namespace does not map (linux kernel/capability.c,
    # capable_wrt_inode_uidgid: ns_capable and kuid_has_mapping of the inode's uid): the
    # mode bits then refuse it as they refuse a tssd started under the wrong user, and the
    # checkout, root's own, stays readable. setpriv to nobody is the fallback.
    with tempfile.TemporaryDirectory() as top:
        os.chmod(top, 0o755)
        locked = Path(top) / "pool"
        locked.mkdir(mode=0o555)
        command = [sys.executable, "-c", _LOCKED_WRITE, str(locked)]
        if os.geteuid() == 0:
            command = [*_unprivileged(), *command]
        out = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    unreachable = ("ermission denied", "No module named 'tssd'")
    if os.geteuid() == 0 and out.returncode != 0 and any(u in out.stderr for u in unreachable):
        pytest.skip("nobody cannot reach this checkout (it lies in a 0700 directory)")
    assert out.stdout.strip() == "1", out.stderr


def _unprivileged() -> list[str]:
    """A command prefix that runs as root without its override of file modes."""
    if shutil.which("unshare") is not None:
        probe = subprocess.run(["unshare", "--user", "true"], capture_output=True, check=False)
        if probe.returncode == 0:
            return ["unshare", "--user"]
    if shutil.which("setpriv") is None:
        pytest.skip("neither unshare nor setpriv (util-linux) can drop root's override")
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.mark.parametrize(
    ("code", "error", "exit_code"),
    [
        (errno.EACCES, AccessDenied, 1),
        (errno.EPERM, AccessDenied, 1),
        (errno.EIO, SourceUnreadable, 42),
        (errno.ENOENT, SourceUnreadable, 42),
    ],
)
async def test_migration_open_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, error: type, exit_code: int
) -> None:
    source = FileSource(tmp_path / "f", 4)
    monkeypatch.setattr(FileSource, "_open_sync", fail_with(code))
    with pytest.raises(error) as caught:
        await source.chunks().__anext__()
    assert type(caught.value) is error
    assert caught.value.exit_code == exit_code


# -- endit: the .err file ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("failed_with", "written"),
    [(1, 1), (31, 31), (32, 32), (41, 1), (42, 1), (43, 1), (204, 1), (99, 1)],
)
def test_endit_err_codes(tmp_path: Path, failed_with: int, written: int) -> None:
    paths = EnditPaths(tmp_path)
    paths.request.mkdir()
    write_error(paths, PNFSID, failed_with, "tape\nunreadable")
    assert err_code(failed_with) == written
    assert (paths.request / f"{PNFSID}.err").read_text() == f"{written}\ntape unreadable\n"


def test_ownership_warning_only_for_root() -> None:
    assert ownership_warnings(0) == [ROOT_WARNING]
    assert ownership_warnings(1000) == []
    text = render_status({"version": "x", "warnings": [ROOT_WARNING]})
    assert text.splitlines()[1].startswith("WARNING: tssd runs as root")
    assert " ".join(text.split()).count(ROOT_WARNING) == 1
    assert max(len(line) for line in text.splitlines()) <= 100


def test_a_socket_the_pool_user_may_not_open_is_1_not_72() -> None:
    """EACCES on connect is a setup fault that no restart heals: exit 1 in either mode."""
    try:
        try:
            raise PermissionError(errno.EACCES, "Permission denied")
        except OSError as exc:
            raise fastclient.WireError("tssd unreachable at /run/tssd/tssd.sock") from exc
    except fastclient.WireError as exc:
        denied = unreachable(exc)
    assert not isinstance(denied, Unreachable)
    assert denied.code == 1 and "api.socket_group" in denied.message
    refused = fastclient.WireError("tssd unreachable")
    refused.__cause__ = ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    assert isinstance(unreachable(refused), Unreachable)


@pytest.mark.parametrize(
    "uri",
    [
        URI + "\r",  # CR: a terminal returns to the line start; dCache trims it silently
        URI + "\x1b]0;owned\x07",  # OSC: retitles the admin's terminal
        URI + "\x85",  # C1 NEL
        "osm://osm/?store=atlas&group=tape\x00&bfid=b1",
    ],
)
def test_a_uri_with_a_control_character_is_refused_not_printed(
    sock: Path, tmp_path: Path, uri: str
) -> None:
    """``put``'s stdout goes to the namespace: ScriptNearlineStorage.flush (dCache's
    ``modules/dcache/src/main/java/org/dcache/pool/nearline/script/
    ScriptNearlineStorage.java``) splits it on newlines and records each line as a
    location. A URI tssd makes never holds a control character, so one that does is an
    answer not to pass on: exit 1 (the flush is retried), nothing on stdout."""
    fake = FakeTssd(sock).start()
    try:
        fake.finish = lambda request: request.update(state="done", uri=uri, adler32="0a1b2c3d")
        result = run_hsm(fake, *calls(tmp_path)["put"])
    finally:
        fake.stop()
    assert (result.returncode, result.stdout) == (1, "")
    assert "has no usable URI" in one_line(result.stderr)


# -- a path outside tssd's pool roots: an installation fault, 1 -------------------------


def test_a_path_outside_the_pool_roots_is_refused_with_1_naming_pool_root(
    tmp_path: Path,
) -> None:
    """The daemon side: the refusal names the fix, and its code is 1, not 32."""
    pool = tmp_path / "pool"
    pool.mkdir()
    with pytest.raises(InvalidRequest) as refused:
        PoolRoots((str(pool),)).check(str(tmp_path / "elsewhere" / PNFSID), "migrate source")
    assert refused.value.exit_code == 1
    assert "--pool-root" in str(refused.value)


@pytest.mark.parametrize("verb", ["put", "get"])
def test_tss_hsm_exits_1_when_tssd_refuses_a_path_outside_its_roots(
    sock: Path, tmp_path: Path, verb: str
) -> None:
    """dCache's ``modules/dcache/src/main/java/org/dcache/pool/classic/StorageClassInfo.java``
    (``internalFailed``) moves a flush that failed with 30-39 to the failed requests, which
    wait for an admin; any other code is flushed again. A pool whose data directory is
    not among tssd's roots is fixed on tssd's side (``--pool-root``), after which dCache's
    own retry must succeed: exit 1, with tssd's message on one stderr line."""
    fake = FakeTssd(sock).start()
    try:
        message = f"{verb} path is not inside a pool root of tssd: start it with --pool-root"
        fake.refuse = (
            400,
            {"error": {"type": "OutsidePoolRoots", "message": message, "exit_code": 1}},
        )
        result = run_hsm(fake, *calls(tmp_path)[verb])
    finally:
        fake.stop()
    assert (result.returncode, result.stdout) == (1, "")
    assert "--pool-root" in one_line(result.stderr)


def test_a_deadline_passed_is_not_yet() -> None:
    """A call whose exchange outlived its deadline (fastclient: TimeoutError under the
    WireError) is "tssd away": exit 72 in poll mode, a reconnect wait in block mode."""
    slow = fastclient.WireError("tssd at /run/tssd/tssd.sock gave no complete answer within 30 s")
    slow.__cause__ = TimeoutError("deadline passed")
    assert isinstance(unreachable(slow), Unreachable)
