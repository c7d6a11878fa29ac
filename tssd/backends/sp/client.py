"""The SP client API, called through ctypes: the library once per process, and sessions.

Everything here blocks and runs on a session's own thread (:mod:`.worker`); a failing
call raises :class:`~.rc.SpCallFailed` with the library's text for its return code, which
the backend translates (:mod:`.rc`). The call sequences are IBM's (its book "Using the
Application Programming Interface", and GSI-HPC/ltsm ``src/lib/ltsmapi.c`` for a public
caller).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from dataclasses import dataclass
from datetime import UTC, datetime

from tssd.backends.sp import abi
from tssd.backends.sp import abi_consts as c
from tssd.backends.sp.naming import ObjectName
from tssd.backends.sp.rc import SpCallFailed

APPLICATION_TYPE = b"TSSD"


@dataclass(frozen=True, slots=True)
class SignOn:
    node: str = ""
    owner: str = ""
    password: str = ""


@dataclass(frozen=True, slots=True)
class ArchivedObject:
    """One object of a query answer, in tssd's terms."""

    object_id: int
    high: str
    low: str
    management_class: str
    media_class: int
    size_estimate: int
    inserted: datetime
    restore_order: tuple[int, int, int, int, int]
    objinfo: bytes


class Library:
    """``libApiTSM64.so`` loaded once; ``dsmSetUp(DSM_MULTITHREAD)`` once per process."""

    _setup_lock = threading.Lock()

    def __init__(self, path: str, env: dict[str, str]) -> None:
        self.path = path
        self._env = env
        self.lib: ctypes.CDLL | None = None

    def open(self) -> ctypes.CDLL:
        with self._setup_lock:
            if self.lib is None:
                # The library reads DSMI_* once, at set-up: they must be there before.
                os.environ.update(self._env)
                lib = abi.load(self.path)
                rc = lib.dsmSetUp(c.DSM_MULTITHREAD, None)
                if rc != c.DSM_RC_OK:
                    raise SpCallFailed("dsmSetUp", rc, abi.rc_message(lib, 0, rc))
                self.lib = lib
            return self.lib

    def close(self) -> None:
        with self._setup_lock:
            if self.lib is not None:
                self.lib.dsmCleanUp(c.DSM_MULTITHREAD)
                self.lib = None


def _date(value: abi.dsmDate) -> datetime:
    try:
        return datetime(
            value.year, value.month, value.day, value.hour, value.minute, value.second, tzinfo=UTC
        )
    except ValueError:
        return datetime(1970, 1, 1, tzinfo=UTC)


def _obj_name(name: ObjectName) -> abi.dsmObjName:
    obj = abi.dsmObjName()
    obj.fs = name.filespace.encode()
    obj.hl = name.high.encode()
    obj.ll = name.low.encode()
    obj.objType = c.DSM_OBJ_FILE
    return obj


class Session:
    """One signed-on session (dsmInitEx .. dsmTerminate); used from one thread only."""

    def __init__(self, library: ctypes.CDLL, buffer_size: int) -> None:
        self._lib = library
        self.handle = 0
        self._buffer = ctypes.create_string_buffer(buffer_size)
        self._block = abi.DataBlk(stVersion=c.DataBlkVersion)

    def _failure(self, call: str, rc: int) -> SpCallFailed:
        return SpCallFailed(call, rc, abi.rc_message(self._lib, self.handle, rc))

    def _check(self, call: str, rc: int, *ok: int) -> int:
        if rc != c.DSM_RC_OK and rc not in ok:
            raise self._failure(call, rc)
        return rc

    # -- sign-on ---------------------------------------------------------------------

    def sign_on(self, who: SignOn) -> None:
        api = abi.dsmApiVersionEx(stVersion=c.apiVersionExVer)
        self._lib.dsmQueryApiVersionEx(ctypes.byref(api))
        app = abi.dsmAppVersion(stVersion=c.appVersionVer, applicationVersion=1)
        init = abi.dsmInitExIn_t(stVersion=c.dsmInitExInVersion)
        init.apiVersionExP = ctypes.pointer(api)
        init.clientNodeNameP = who.node.encode() or None
        init.clientOwnerNameP = who.owner.encode() or None
        init.clientPasswordP = who.password.encode() or None
        init.applicationTypeP = APPLICATION_TYPE
        init.dirDelimiter = b"/"
        init.appVersionP = ctypes.pointer(app)
        out = abi.dsmInitExOut_t(stVersion=c.dsmInitExOutVersion)
        handle = abi.dsUint32_t(0)
        rc = self._lib.dsmInitEx(ctypes.byref(handle), ctypes.byref(init), ctypes.byref(out))
        self.handle = int(handle.value)
        if rc != c.DSM_RC_OK:
            failure = self._failure("dsmInitEx", rc)
            self.terminate()
            raise failure

    def register(self, filespace: str) -> None:
        data = abi.regFSData(stVersion=c.regFSDataVersion)
        data.fsName = filespace.encode()
        data.fsType = APPLICATION_TYPE
        rc = self._lib.dsmRegisterFS(self.handle, ctypes.byref(data))
        self._check("dsmRegisterFS", rc, c.DSM_RC_FS_ALREADY_REGED)

    def terminate(self) -> None:
        """End the session; never raises (a lost session has nothing left to end)."""
        if self.handle:
            self._lib.dsmTerminate(self.handle)
            self.handle = 0

    # -- query -----------------------------------------------------------------------

    def query(self, name: ObjectName) -> list[ArchivedObject]:
        """Every archive object matching *name* (``*`` wildcards), in the server's order."""
        pattern = _obj_name(name)
        pattern.objType = c.DSM_OBJ_ANY_TYPE
        select = abi.qryArchiveData(stVersion=c.qryArchiveDataVersion)
        select.objName = ctypes.pointer(pattern)
        select.insDateLowerBound.year = c.DATE_MINUS_INFINITE
        select.insDateUpperBound.year = c.DATE_PLUS_INFINITE
        select.expDateLowerBound.year = c.DATE_MINUS_INFINITE
        select.expDateUpperBound.year = c.DATE_PLUS_INFINITE
        select.descr = b"*"
        rc = self._lib.dsmBeginQuery(self.handle, c.qtArchive, ctypes.byref(select))
        self._check("dsmBeginQuery", rc)
        found: list[ArchivedObject] = []
        answer = abi.qryRespArchiveData(stVersion=c.qryRespArchiveDataVersion)
        block = abi.DataBlk(stVersion=c.DataBlkVersion, bufferLen=ctypes.sizeof(answer))
        block.bufferPtr = ctypes.cast(ctypes.pointer(answer), ctypes.c_void_p)
        try:
            while True:
                rc = self._lib.dsmGetNextQObj(self.handle, ctypes.byref(block))
                if rc != c.DSM_RC_MORE_DATA:
                    break
                found.append(_archived(answer))
        finally:
            end = self._lib.dsmEndQuery(self.handle)
        if rc not in (c.DSM_RC_FINISHED, c.DSM_RC_ABORT_NO_MATCH):
            self._check("dsmGetNextQObj", rc)
        self._check("dsmEndQuery", end)
        return found

    # -- retrieve --------------------------------------------------------------------

    def begin_get(self, object_ids: list[int], mount_wait: bool) -> None:
        ids = (abi.ObjID * len(object_ids))(*(abi.from_int64(i) for i in object_ids))
        wanted = abi.dsmGetList(stVersion=c.dsmGetListVersion, numObjId=len(object_ids))
        wanted.objId = ctypes.cast(ids, ctypes.POINTER(abi.ObjID))
        rc = self._lib.dsmBeginGetData(
            self.handle, c.bTrue if mount_wait else c.bFalse, c.gtArchive, ctypes.byref(wanted)
        )
        self._check("dsmBeginGetData", rc)

    def _chunk(self, call: str, rc: int) -> tuple[bytes, bool]:
        """The bytes the last call put in the buffer, and whether the object is done."""
        self._check(call, rc, c.DSM_RC_MORE_DATA, c.DSM_RC_FINISHED)
        data = ctypes.string_at(self._buffer, self._block.numBytes)
        return data, rc == c.DSM_RC_FINISHED

    def _fresh_block(self) -> ctypes._Pointer[abi.DataBlk]:
        self._block.bufferLen = len(self._buffer)
        self._block.numBytes = 0
        self._block.bufferPtr = ctypes.cast(self._buffer, ctypes.c_void_p)
        return ctypes.pointer(self._block)

    def get_object(self, object_id: int) -> tuple[bytes, bool]:
        oid = abi.from_int64(object_id)
        rc = self._lib.dsmGetObj(self.handle, ctypes.byref(oid), self._fresh_block())
        return self._chunk("dsmGetObj", rc)

    def get_data(self) -> tuple[bytes, bool]:
        rc = self._lib.dsmGetData(self.handle, self._fresh_block())
        return self._chunk("dsmGetData", rc)

    def end_get_object(self) -> None:
        self._check("dsmEndGetObj", self._lib.dsmEndGetObj(self.handle))

    def end_get(self) -> None:
        self._check("dsmEndGetData", self._lib.dsmEndGetData(self.handle))

    # -- store -----------------------------------------------------------------------

    def begin_send(
        self, name: ObjectName, management_class: str, size: int, objinfo: bytes
    ) -> None:
        """dsmBeginTxn, dsmBindMC and dsmSendObj(stArchive) of one object of *size* bytes."""
        self._check("dsmBeginTxn", self._lib.dsmBeginTxn(self.handle))
        try:
            obj = _obj_name(name)
            bound = abi.mcBindKey(stVersion=c.mcBindKeyVersion)
            rc = self._lib.dsmBindMC(
                self.handle, ctypes.byref(obj), c.stArchive, ctypes.byref(bound)
            )
            self._check("dsmBindMC", rc)
            info = ctypes.create_string_buffer(objinfo, len(objinfo))
            attr = abi.ObjAttr(stVersion=c.ObjAttrVersion, objInfoLength=len(objinfo))
            attr.owner = b""
            attr.sizeEstimate = abi.from_int64(size)
            attr.objInfo = ctypes.cast(info, ctypes.c_void_p)
            attr.mcNameP = management_class.encode() or None
            archive = abi.sndArchiveData(stVersion=c.sndArchiveDataVersion, descr=b"tssd")
            rc = self._lib.dsmSendObj(
                self.handle, c.stArchive, ctypes.byref(archive), ctypes.byref(obj),
                ctypes.byref(attr), None,
            )  # fmt: skip
            self._check("dsmSendObj", rc)
        except SpCallFailed:
            self.abort_txn()
            raise

    def send_data(self, data: bytes) -> None:
        buffer = ctypes.create_string_buffer(data, len(data))
        block = abi.DataBlk(stVersion=c.DataBlkVersion, bufferLen=len(data), numBytes=len(data))
        block.bufferPtr = ctypes.cast(buffer, ctypes.c_void_p)
        self._check("dsmSendData", self._lib.dsmSendData(self.handle, ctypes.byref(block)))

    def end_send(self, vote_commit: bool) -> int:
        """dsmEndSendObjEx then dsmEndTxnEx with the vote; the bytes the library sent."""
        sent_in = abi.dsmEndSendObjExIn_t(
            stVersion=c.dsmEndSendObjExInVersion, dsmHandle=self.handle
        )
        sent = abi.dsmEndSendObjExOut_t(stVersion=c.dsmEndSendObjExOutVersion)
        rc = self._lib.dsmEndSendObjEx(ctypes.byref(sent_in), ctypes.byref(sent))
        if rc != c.DSM_RC_OK:
            failure = SpCallFailed(
                "dsmEndSendObjEx", rc, abi.rc_message(self._lib, self.handle, rc)
            )
            self.abort_txn()
            raise failure
        self.end_txn(vote_commit)
        return abi.to_int64(sent.totalBytesSent)

    def end_txn(self, vote_commit: bool) -> None:
        vote = c.DSM_VOTE_COMMIT if vote_commit else c.DSM_VOTE_ABORT
        txn_in = abi.dsmEndTxnExIn_t(
            stVersion=c.dsmEndTxnExInVersion, dsmHandle=self.handle, vote=vote
        )
        txn = abi.dsmEndTxnExOut_t(stVersion=c.dsmEndTxnExOutVersion)
        rc = self._lib.dsmEndTxnEx(ctypes.byref(txn_in), ctypes.byref(txn))
        if rc == c.DSM_RC_CHECK_REASON_CODE or (rc == c.DSM_RC_OK and vote_commit and txn.reason):
            rc = int(txn.reason) or rc
        self._check("dsmEndTxnEx", rc)

    def abort_txn(self) -> None:
        """End the open transaction voting abort; never raises (the session may be gone)."""
        with contextlib.suppress(SpCallFailed):
            self.end_txn(vote_commit=False)

    # -- delete ----------------------------------------------------------------------

    def delete(self, object_id: int) -> None:
        self._check("dsmBeginTxn", self._lib.dsmBeginTxn(self.handle))
        info = abi.dsmDelInfo()
        info.archInfo.stVersion = c.delArchVersion
        info.archInfo.objId = abi.from_int64(object_id)
        rc = self._lib.dsmDeleteObj(self.handle, c.dtArchive, info)
        if rc != c.DSM_RC_OK:
            failure = self._failure("dsmDeleteObj", rc)
            self.abort_txn()
            raise failure
        self.end_txn(vote_commit=True)


def _archived(answer: abi.qryRespArchiveData) -> ArchivedObject:
    length = min(int(answer.objInfolen), len(answer.objInfo))
    return ArchivedObject(
        object_id=abi.to_int64(answer.objId),
        high=answer.objName.hl.decode("utf-8", "replace"),
        low=answer.objName.ll.decode("utf-8", "replace"),
        management_class=answer.mcName.decode("utf-8", "replace"),
        media_class=int(answer.mediaClass),
        size_estimate=abi.to_int64(answer.sizeEstimate),
        inserted=_date(answer.insDate),
        restore_order=abi.restore_order_key(answer.restoreOrderExt),
        objinfo=bytes(answer.objInfo[:length]),
    )
