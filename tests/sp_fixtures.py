"""Fixtures for the SP backend's tests: the stand-in library built once per run, server
directories for it, and a small synchronous client that drives the API through ctypes
with tssd's own declarations (tssd/backends/sp/abi.py).

The stand-in needs a C compiler. Without ``cc`` the tests that use it are skipped with
the reason, except under ``CI=true``, where a missing compiler is a failure.
"""

from __future__ import annotations

import ctypes
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tssd.backends.sp import abi
from tssd.backends.sp import abi_consts as c
from tssd.backends.sp.standin import LIBRARY_NAME, ServerSettings, build, make_server


@pytest.fixture(scope="session")
def sp_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the stand-in's libApiTSM64.so, abi-dump and dsmadmc."""
    if shutil.which("cc") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no C compiler (cc) in CI: the SP stand-in must be built")
        pytest.skip("no C compiler (cc): the SP stand-in library cannot be built")
    out = tmp_path_factory.mktemp("sp-standin")
    build(out)
    return out


@pytest.fixture
def sp_server(
    sp_build: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Path]:
    """Make a stand-in server directory with the given settings; DSMI_CONFIG names it."""

    def make(**settings: object) -> Path:
        options = make_server(tmp_path / "server", ServerSettings(**settings))  # type: ignore[arg-type]
        monkeypatch.setenv("DSMI_CONFIG", str(options))
        return options

    return make


class ApiError(Exception):
    def __init__(self, call: str, rc: int, text: str) -> None:
        super().__init__(f"{call}: {text}")
        self.call = call
        self.rc = rc


@dataclass(frozen=True)
class Archived:
    object_id: int
    hl: str
    ll: str
    size: int
    volume: int
    order: tuple[int, int, int, int, int]
    media_class: int
    obj_info: bytes


class ApiClient:
    """One API session, driven call by call as a test needs it."""

    def __init__(self, library: Path, fs: str = "/tssd") -> None:
        self.lib = abi.load(str(library))
        self.fs = fs
        self.handle = 0
        assert self.lib.dsmSetUp(c.DSM_MULTITHREAD, None) == c.DSM_RC_OK

    def check(self, call: str, rc: int, *ok: int) -> int:
        if rc not in (ok or (c.DSM_RC_OK,)):
            raise ApiError(call, rc, abi.rc_message(self.lib, self.handle, rc))
        return rc

    def sign_on(self) -> None:
        version = abi.dsmApiVersionEx(stVersion=c.apiVersionExVer, version=8, release=1)
        init_in = abi.dsmInitExIn_t(
            stVersion=c.dsmInitExInVersion,
            apiVersionExP=ctypes.pointer(version),
            clientNodeNameP=b"TSSD",
            clientOwnerNameP=b"",
            applicationTypeP=b"tssd",
        )
        init_out = abi.dsmInitExOut_t(stVersion=c.dsmInitExOutVersion)
        handle = abi.dsUint32_t(0)
        rc = self.lib.dsmInitEx(ctypes.byref(handle), ctypes.byref(init_in), ctypes.byref(init_out))
        self.handle = handle.value
        self.check("dsmInitEx", rc)
        fs = abi.regFSData(stVersion=c.regFSDataVersion, fsName=self.fs.encode(), fsType=b"TSSD")
        self.check("dsmRegisterFS", self.lib.dsmRegisterFS(self.handle, ctypes.byref(fs)), 0, 2062)

    def close(self) -> None:
        if self.handle:
            self.lib.dsmTerminate(self.handle)
            self.handle = 0

    def name(self, hl: str, ll: str) -> abi.dsmObjName:
        return abi.dsmObjName(
            fs=self.fs.encode(), hl=hl.encode(), ll=ll.encode(), objType=c.DSM_OBJ_FILE
        )

    def store(self, objects: list[tuple[str, str, bytes, bytes]], vote: int = 1) -> None:
        """Archive (hl, ll, data, objInfo) tuples in one transaction."""
        self.check("dsmBeginTxn", self.lib.dsmBeginTxn(self.handle))
        for hl, ll, data, info in objects:
            name = self.name(hl, ll)
            key = abi.mcBindKey(stVersion=c.mcBindKeyVersion)
            self.check(
                "dsmBindMC",
                self.lib.dsmBindMC(self.handle, ctypes.byref(name), c.stArchive, ctypes.byref(key)),
            )
            info_buf = ctypes.create_string_buffer(info, len(info))
            attr = abi.ObjAttr(
                stVersion=c.ObjAttrVersion,
                sizeEstimate=abi.from_int64(len(data)),
                objInfoLength=len(info),
                objInfo=ctypes.cast(info_buf, ctypes.c_void_p),
            )
            snd = abi.sndArchiveData(stVersion=c.sndArchiveDataVersion, descr=b"tssd")
            self.check(
                "dsmSendObj",
                self.lib.dsmSendObj(
                    self.handle,
                    c.stArchive,
                    ctypes.byref(snd),
                    ctypes.byref(name),
                    ctypes.byref(attr),
                    None,
                ),
            )
            for start in range(0, len(data), 65536):
                chunk = ctypes.create_string_buffer(data[start : start + 65536])
                blk = abi.DataBlk(
                    stVersion=c.DataBlkVersion,
                    bufferLen=len(chunk) - 1,
                    numBytes=len(chunk) - 1,
                    bufferPtr=ctypes.cast(chunk, ctypes.c_void_p),
                )
                self.check("dsmSendData", self.lib.dsmSendData(self.handle, ctypes.byref(blk)))
            end_in = abi.dsmEndSendObjExIn_t(
                stVersion=c.dsmEndSendObjExInVersion, dsmHandle=self.handle
            )
            end_out = abi.dsmEndSendObjExOut_t(stVersion=c.dsmEndSendObjExOutVersion)
            self.check(
                "dsmEndSendObjEx",
                self.lib.dsmEndSendObjEx(ctypes.byref(end_in), ctypes.byref(end_out)),
            )
            assert abi.to_int64(end_out.totalBytesSent) == len(data)
        self.end_txn(vote)

    def end_txn(self, vote: int = 1) -> int:
        txn_in = abi.dsmEndTxnExIn_t(
            stVersion=c.dsmEndTxnExInVersion, dsmHandle=self.handle, vote=vote
        )
        txn_out = abi.dsmEndTxnExOut_t(stVersion=c.dsmEndTxnExOutVersion)
        self.check("dsmEndTxnEx", self.lib.dsmEndTxnEx(ctypes.byref(txn_in), ctypes.byref(txn_out)))
        return int(txn_out.reason)

    def query(self, hl: str = "*", ll: str = "*") -> list[Archived]:
        name = self.name(hl, ll)
        qry = abi.qryArchiveData(
            stVersion=c.qryArchiveDataVersion, objName=ctypes.pointer(name), owner=b"", descr=b"*"
        )
        qry.insDateUpperBound.year = c.DATE_PLUS_INFINITE
        qry.expDateUpperBound.year = c.DATE_PLUS_INFINITE
        self.check(
            "dsmBeginQuery", self.lib.dsmBeginQuery(self.handle, c.qtArchive, ctypes.byref(qry))
        )
        found = []
        try:
            while True:
                resp = abi.qryRespArchiveData(stVersion=c.qryRespArchiveDataVersion)
                blk = abi.DataBlk(
                    stVersion=c.DataBlkVersion,
                    bufferLen=ctypes.sizeof(resp),
                    bufferPtr=ctypes.cast(ctypes.pointer(resp), ctypes.c_void_p),
                )
                rc = self.check(
                    "dsmGetNextQObj",
                    self.lib.dsmGetNextQObj(self.handle, ctypes.byref(blk)),
                    c.DSM_RC_MORE_DATA,
                    c.DSM_RC_FINISHED,
                    c.DSM_RC_ABORT_NO_MATCH,
                )
                if rc != c.DSM_RC_MORE_DATA:
                    break
                found.append(
                    Archived(
                        object_id=abi.to_int64(resp.objId),
                        hl=resp.objName.hl.decode(),
                        ll=resp.objName.ll.decode(),
                        size=abi.to_int64(resp.sizeEstimate),
                        volume=resp.restoreOrderExt.top,
                        order=abi.restore_order_key(resp.restoreOrderExt),
                        media_class=resp.mediaClass,
                        obj_info=bytes(resp.objInfo[: resp.objInfolen]),
                    )
                )
        finally:
            self.lib.dsmEndQuery(self.handle)
        return found

    def begin_get(self, ids: list[int], mount_wait: bool = True) -> None:
        array = (abi.ObjID * len(ids))(*(abi.from_int64(i) for i in ids))
        get_list = abi.dsmGetList(
            stVersion=c.dsmGetListVersion,
            numObjId=len(ids),
            objId=ctypes.cast(array, ctypes.POINTER(abi.ObjID)),
        )
        rc = self.lib.dsmBeginGetData(
            self.handle, int(mount_wait), c.gtArchive, ctypes.byref(get_list)
        )
        self.check("dsmBeginGetData", rc)

    def get_one(self, object_id: int, buffer_size: int = 65536) -> bytes:
        buf = ctypes.create_string_buffer(buffer_size)
        blk = abi.DataBlk(
            stVersion=c.DataBlkVersion,
            bufferLen=buffer_size,
            bufferPtr=ctypes.cast(buf, ctypes.c_void_p),
        )
        oid = abi.from_int64(object_id)
        ok = (c.DSM_RC_MORE_DATA, c.DSM_RC_FINISHED)
        rc = self.check(
            "dsmGetObj", self.lib.dsmGetObj(self.handle, ctypes.byref(oid), ctypes.byref(blk)), *ok
        )
        parts = [buf.raw[: blk.numBytes]]
        while rc == c.DSM_RC_MORE_DATA:
            rc = self.check("dsmGetData", self.lib.dsmGetData(self.handle, ctypes.byref(blk)), *ok)
            parts.append(buf.raw[: blk.numBytes])
        self.check("dsmEndGetObj", self.lib.dsmEndGetObj(self.handle))
        return b"".join(parts)

    def end_get(self) -> None:
        self.check("dsmEndGetData", self.lib.dsmEndGetData(self.handle))

    def retrieve(self, ids: list[int], mount_wait: bool = True) -> list[bytes]:
        self.begin_get(ids, mount_wait)
        data = [self.get_one(i) for i in ids]
        self.end_get()
        return data

    def delete(self, ids: list[int]) -> int:
        self.check("dsmBeginTxn", self.lib.dsmBeginTxn(self.handle))
        for object_id in ids:
            info = abi.dsmDelInfo()
            info.archInfo.stVersion = c.delArchVersion
            info.archInfo.objId = abi.from_int64(object_id)
            self.check("dsmDeleteObj", self.lib.dsmDeleteObj(self.handle, c.dtArchive, info))
        txn_in = abi.dsmEndTxnExIn_t(
            stVersion=c.dsmEndTxnExInVersion, dsmHandle=self.handle, vote=1
        )
        txn_out = abi.dsmEndTxnExOut_t(stVersion=c.dsmEndTxnExOutVersion)
        rc = self.lib.dsmEndTxnEx(ctypes.byref(txn_in), ctypes.byref(txn_out))
        self.check("dsmEndTxnEx", rc, c.DSM_RC_OK, c.DSM_RC_CHECK_REASON_CODE)
        return int(txn_out.reason)


@pytest.fixture
def sp_client(sp_build: Path) -> Iterator[Callable[[], ApiClient]]:
    """Open API sessions on the stand-in (after sp_server set DSMI_CONFIG); all are closed
    at the end."""
    opened: list[ApiClient] = []

    def open_session() -> ApiClient:
        client = ApiClient(sp_build / LIBRARY_NAME)
        opened.append(client)
        client.sign_on()
        return client

    yield open_session
    for client in opened:
        client.close()
