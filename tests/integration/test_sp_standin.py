"""The stand-in SP client API library through tssd's ctypes declarations: real bytes
stored, queried, retrieved and deleted; MAXNUMMP shared across processes; one session per
volume; injected faults; the position log; and the stand-in dsmadmc.

The stand-in models IBM's libApiTSM64.so as its callers use it: GSI-HPC/ltsm
src/lib/tsmapi.c (the query loop on DSM_RC_MORE_DATA / DSM_RC_FINISHED, the
dsmBeginGetData / dsmGetObj / dsmGetData / dsmEndGetObj / dsmEndGetData sequence, the
store transaction ending in dsmEndTxnEx) and the API book's dsmapitd.h / dsmrc.h.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.sp_fixtures import ApiClient, ApiError
from tssd.backends.sp import abi_consts as c
from tssd.backends.sp.standin import (
    DSMADMC_NAME,
    LIBRARY_NAME,
    ServerSettings,
    backward_locates,
    make_server,
    mounts,
    reads,
)

pytestmark = pytest.mark.sp

REPO = Path(__file__).resolve().parents[2]
Client = Callable[[], ApiClient]


def _payloads(count: int, size: int) -> list[bytes]:
    return [os.urandom(size + 977 * i) for i in range(count)]


def _info(data: bytes) -> bytes:
    return f"{len(data)}:{zlib.adler32(data):08x}".encode()


def test_store_query_retrieve_delete_with_real_bytes(sp_server, sp_client: Client) -> None:
    sp_server(capacity_bytes=300_000, max_mount_points=1)
    client = sp_client()
    data = _payloads(6, 100_000)
    client.store([("/store/group", f"/{i:04d}", d, _info(d)) for i, d in enumerate(data)])

    found = client.query("/store/group", "/*")
    assert [a.ll for a in found] == [f"/{i:04d}" for i in range(6)]
    assert all(a.media_class == c.MEDIA_LIBRARY for a in found)
    assert [a.obj_info for a in found] == [_info(d) for d in data]
    # Volumes fill in sequence: three objects of 100-300 kB per 300 kB volume at most.
    assert [a.volume for a in found] == sorted(a.volume for a in found)
    assert len({a.volume for a in found}) > 1
    assert [a.order for a in found] == sorted(a.order for a in found)

    got = client.retrieve([a.object_id for a in found])
    assert [zlib.adler32(g) for g in got] == [zlib.adler32(d) for d in data]
    assert got == data

    # An exact name is found through the stand-in's name index, a deleted one no more.
    assert client.query("/store/group", "/0003") == [found[3]]
    assert client.delete([found[0].object_id]) == 0
    assert client.query("/store/group", "/0000") == []
    assert [a.ll for a in client.query("/store/group", "/*")] == [f"/{i:04d}" for i in range(1, 6)]
    # A delete naming an object no longer there aborts with the server's "no match".
    assert client.delete([found[0].object_id]) == c.DSM_RC_ABORT_NO_MATCH


def test_a_query_without_match_and_an_aborted_store(sp_server, sp_client: Client) -> None:
    sp_server()
    client = sp_client()
    assert client.query("/nothing", "*") == []
    with pytest.raises(ApiError) as err:
        client.store([("/a", "/b", b"x" * 10, b"")], vote=c.DSM_VOTE_ABORT)
    assert err.value.rc == c.DSM_RC_CHECK_REASON_CODE
    assert client.query() == []


_HOLDER = """
import sys
sys.path.insert(0, {repo!r})
from tests.sp_fixtures import ApiClient
client = ApiClient({library!r})
client.sign_on()
client.begin_get([{object_id}], mount_wait=False)
print("held", flush=True)
sys.stdin.readline()
client.end_get()
client.close()
"""


def _hold(library: Path, object_id: int) -> subprocess.Popen[str]:
    """Another process that mounts *object_id*'s volume and keeps it until told."""
    code = _HOLDER.format(repo=str(REPO), library=str(library), object_id=object_id)
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def _release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("\n")
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    assert proc.stdout is not None
    proc.stdout.close()


def test_max_mount_points_are_shared_across_processes(
    sp_server, sp_client: Client, sp_build: Path
) -> None:
    sp_server(capacity_bytes=1000, max_mount_points=1)
    client = sp_client()
    client.store([("/h", "/first", b"a" * 800, b""), ("/h", "/second", b"b" * 800, b"")])
    first, second = client.query()
    assert first.volume != second.volume

    holder = _hold(sp_build / LIBRARY_NAME, first.object_id)
    try:
        with pytest.raises(ApiError) as err:
            client.begin_get([second.object_id], mount_wait=False)
        assert err.value.rc == c.DSM_RC_ABORT_EXCEED_MAX_MP

        # With mountWait the call waits for the other process's mount point.
        outcome: list[object] = []
        waiter = threading.Thread(
            target=lambda: outcome.append(client.retrieve([second.object_id], mount_wait=True))
        )
        waiter.start()
    finally:
        _release(holder)
    waiter.join(timeout=60)
    assert outcome == [[b"b" * 800]]


def test_one_session_per_volume(sp_server, sp_client: Client, sp_build: Path) -> None:
    sp_server(capacity_bytes=1000, max_mount_points=2)
    client = sp_client()
    client.store([("/h", "/first", b"a" * 800, b""), ("/h", "/second", b"b" * 800, b"")])
    first, second = client.query()

    holder = _hold(sp_build / LIBRARY_NAME, first.object_id)
    try:
        with pytest.raises(ApiError) as err:
            client.begin_get([first.object_id], mount_wait=False)
        assert err.value.rc == c.DSM_RC_ABORT_MOUNT_NOT_POSSIBLE
        assert client.retrieve([second.object_id], mount_wait=False) == [b"b" * 800]
    finally:
        _release(holder)
    assert client.retrieve([first.object_id], mount_wait=False) == [b"a" * 800]


def test_transient_codes_are_injected_at_the_configured_rate(sp_server, sp_client: Client) -> None:
    options = sp_server()
    client = sp_client()
    client.store([("/h", f"/{i}", b"z" * 100, b"") for i in range(3)])
    ids = [a.object_id for a in client.query()]
    client.close()

    make_server(options.parent, ServerSettings(transient_rate=1.0, transient_codes=(12, 41)))
    with pytest.raises(ApiError) as err:
        sp_client()
    assert err.value.rc in (12, 41)

    make_server(options.parent, ServerSettings(transient_rate=0.5, transient_codes=(14,)))
    outcomes = []
    for _ in range(40):
        try:
            session = sp_client()
            session.retrieve(ids)
            outcomes.append(0)
        except ApiError as exc:
            outcomes.append(exc.rc)
    assert set(outcomes) == {0, c.DSM_RC_ABORT_DATA_UNAVAILABLE}

    make_server(options.parent, ServerSettings())
    assert sp_client().retrieve(ids) == [b"z" * 100] * 3


def test_a_session_lost_mid_retrieve(sp_server, sp_client: Client) -> None:
    sp_server(drop_after_objects=2, drop_sessions=1)
    client = sp_client()
    data = _payloads(4, 5000)
    client.store([("/h", f"/{i}", d, b"") for i, d in enumerate(data)])
    ids = [a.object_id for a in client.query()]

    client.begin_get(ids)
    assert [client.get_one(i) for i in ids[:2]] == data[:2]
    with pytest.raises(ApiError) as err:
        client.get_one(ids[2])
    assert err.value.rc == c.DSM_RC_TCPIP_FAILURE
    assert "communication" in str(err.value)
    # The session stays lost: the next call fails the same way.
    with pytest.raises(ApiError) as err:
        client.end_get()
    assert err.value.rc == c.DSM_RC_TCPIP_FAILURE
    client.close()

    # The fault is spent: a new session reads everything.
    assert sp_client().retrieve(ids) == data


def test_the_position_log_shows_reads_in_restore_order(
    sp_server, sp_client: Client, sp_build: Path
) -> None:
    options = sp_server(capacity_bytes=4000, max_mount_points=2)
    client = sp_client()
    client.store([("/h", f"/{i:02d}", bytes([i]) * 700, b"") for i in range(12)])
    found = client.query()
    in_order = sorted(found, key=lambda a: a.order)
    client.retrieve([a.object_id for a in in_order])

    lines = (options.parent / "positions.log").read_text().splitlines()
    logged = [line.split() for line in lines]
    assert [int(r[4]) for r in logged] == [a.object_id for a in in_order]
    by_volume: dict[str, list[int]] = {}
    for _, session, volume, position, _ in logged:
        by_volume.setdefault(f"{session}/{volume}", []).append(int(position))
    assert all(positions == sorted(positions) for positions in by_volume.values())
    mount_lines = (options.parent / "mounts.log").read_text().splitlines()
    assert len(mount_lines) == len({a.volume for a in found})
    assert [r.object_id for r in reads(options.parent)] == [a.object_id for a in in_order]
    assert backward_locates(options.parent) == 0
    assert mounts(options.parent) == dict.fromkeys({a.volume for a in found}, 1)

    # Read against the restore order, the log shows the locates that went back.
    client.retrieve([a.object_id for a in reversed(in_order)])
    assert backward_locates(options.parent) > 0


def test_dsmadmc_answers_the_select_on_contents(
    sp_server, sp_client: Client, sp_build: Path
) -> None:
    sp_server(capacity_bytes=1000, volume_prefix="VT", volume_suffix="L9")
    client = sp_client()
    client.store([("/h", "/one", b"1" * 800, b""), ("/h", "/two", b"2" * 800, b"")])
    found = client.query()

    run = subprocess.run(
        [
            sp_build / DSMADMC_NAME,
            "-id=admin",
            "-password=x",
            "-dataonly=yes",
            "-comma",
            "select volume_name, filespace_name, file_name from contents where node_name='TSSD'",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout
    assert run.stdout.splitlines() == [f"VT{a.volume:04d}L9,/tssd,/h {a.ll}" for a in found]
    # The backend's form: one object by node, filespace and name, quotes doubled.
    client.store([("/h", "/it's", b"3" * 10, b"")])
    quoted = subprocess.run(
        [
            sp_build / DSMADMC_NAME, "-dataonly=yes", "-comma",
            "select volume_name from contents where node_name='TSSD' and "
            "filespace_name='/tssd' and file_name='/h /it''s'",
        ],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert quoted.returncode == 0, quoted.stdout
    (third,) = client.query("/h", "/it's")
    assert quoted.stdout == f"VT{third.volume:04d}L9\n"
    none = subprocess.run(
        [
            sp_build / DSMADMC_NAME,
            "-dataonly=yes",
            "-comma",
            "select volume_name from contents where volume_name='NOPE'",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert none.returncode == 11
    assert "ANR2034E" in none.stdout


def test_one_session_per_thread_with_mount_wait(sp_server, sp_client: Client) -> None:
    """DSM_MULTITHREAD: four threads, a session each, on two mount points; every thread
    waits its turn for a mount point and reads its own volume's bytes."""
    sp_server(capacity_bytes=3000, max_mount_points=2)
    writer = sp_client()
    data = [bytes([v]) * 900 for v in range(12)]
    writer.store([("/t", f"/{i:02d}", d, b"") for i, d in enumerate(data)])
    by_volume: dict[int, list[int]] = {}
    for a in writer.query():
        by_volume.setdefault(a.volume, []).append(a.object_id)
    assert len(by_volume) == 4
    sessions = [sp_client() for _ in by_volume]

    results: dict[int, list[bytes]] = {}
    errors: list[BaseException] = []

    def read(session: ApiClient, volume: int) -> None:
        try:
            results[volume] = session.retrieve(by_volume[volume], mount_wait=True)
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=read, args=(session, volume))
        for session, volume in zip(sessions, by_volume, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    got = [b for volume in sorted(results) for b in results[volume]]
    assert got == data
