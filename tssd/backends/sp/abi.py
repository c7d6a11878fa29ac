"""The SP client API's binary interface, declared once: the structures tssd passes to
``libApiTSM64.so`` as ctypes types named as in IBM's headers, and the prototypes of the
functions tssd calls.

Layout facts (from IBM's "Using the Application Programming Interface", 8.x, and IBM's own
SDK binding of the 8.x API): Linux x86_64 lays the structures out with natural alignment,
no packing; ``dsStruct64_t`` is two 32-bit halves, ``hi`` first; ``dsmBool_t`` and every
enum are 4-byte ints; every function returns a ``dsInt16_t``. A structure's layout is that
of the ``stVersion`` its caller sets, so each structure here is the layout of the version
named in :mod:`tssd.backends.sp.abi_consts` (the SP 8.1 layouts), and the two move together.

``python -m tssd.backends.sp.abi`` prints every structure's size and field offsets and every
constant as JSON; the stand-in library (``tssd/backends/sp/standin``) prints the same from
its own C declarations, and a test compares the two.
"""

from __future__ import annotations

import ctypes
import json
import sys
from typing import Any, Final

from tssd.backends.sp import abi_consts as c

# --- Scalar types -------------------------------------------------------------------------
dsInt8_t = ctypes.c_int8
dsUint8_t = ctypes.c_uint8
dsInt16_t = ctypes.c_int16
dsUint16_t = ctypes.c_uint16
dsInt32_t = ctypes.c_int32
dsUint32_t = ctypes.c_uint32
#: A C enum: 4 bytes on Linux x86_64, as are dsmBool_t (and its older name dsBool_t).
dsmEnum_t = ctypes.c_int
dsmBool_t = ctypes.c_int
dsBool_t = dsmBool_t
dsmGetType = dsmEnum_t
dsmQueryType = dsmEnum_t
dsmSendType = dsmEnum_t
dsmDelType = dsmEnum_t


def _chars(length: int) -> type[ctypes.Array[ctypes.c_char]]:
    """A fixed char field of *length* characters plus its NUL, as the headers declare."""
    return ctypes.c_char * (length + 1)


# --- Building blocks ----------------------------------------------------------------------
class dsStruct64_t(ctypes.Structure):
    """A 64-bit number as two 32-bit halves (object ids, sizes, byte counts)."""

    _fields_ = [("hi", dsUint32_t), ("lo", dsUint32_t)]


ObjID = dsStruct64_t


class dsUint160_t(ctypes.Structure):
    """The restore order: five 32-bit words, most significant first; ``top`` names the
    serial medium (volume), the rest the place on it."""

    _fields_ = [
        ("top", dsUint32_t),
        ("hi_hi", dsUint32_t),
        ("hi_lo", dsUint32_t),
        ("lo_hi", dsUint32_t),
        ("lo_lo", dsUint32_t),
    ]


class dsmDate(ctypes.Structure):
    _fields_ = [
        ("year", dsUint16_t),
        ("month", dsUint8_t),
        ("day", dsUint8_t),
        ("hour", dsUint8_t),
        ("minute", dsUint8_t),
        ("second", dsUint8_t),
    ]


class dsmObjName(ctypes.Structure):
    """An object's name: filespace, high level and low level, and its type."""

    _fields_ = [
        ("fs", _chars(c.DSM_MAX_FSNAME_LENGTH)),
        ("hl", _chars(c.DSM_MAX_HL_LENGTH)),
        ("ll", _chars(c.DSM_MAX_LL_LENGTH)),
        ("objType", dsUint8_t),
    ]


class PartialObjData(ctypes.Structure):
    _fields_ = [
        ("stVersion", dsUint16_t),
        ("partialObjOffset", dsStruct64_t),
        ("partialObjLength", dsStruct64_t),
    ]


class DataBlk(ctypes.Structure):
    """A buffer handed to the library for data or a query answer (version 3)."""

    _fields_ = [
        ("stVersion", dsUint16_t),
        ("bufferLen", dsUint32_t),
        ("numBytes", dsUint32_t),
        ("bufferPtr", ctypes.c_void_p),
        ("numBytesCompressed", dsUint32_t),
        ("reserved", dsUint16_t),
    ]


# --- Session set-up -----------------------------------------------------------------------
class dsmApiVersionEx(ctypes.Structure):
    _fields_ = [
        ("stVersion", dsUint16_t),
        ("version", dsUint16_t),
        ("release", dsUint16_t),
        ("level", dsUint16_t),
        ("subLevel", dsUint16_t),
        ("unicode", dsmBool_t),
    ]


class dsmAppVersion(ctypes.Structure):
    _fields_ = [
        ("stVersion", dsUint16_t),
        ("applicationVersion", dsUint16_t),
        ("applicationRelease", dsUint16_t),
        ("applicationLevel", dsUint16_t),
        ("applicationSubLevel", dsUint16_t),
    ]


class envSetUp(ctypes.Structure):
    """dsmSetUp's optional environment (version 4); tssd passes NULL and sets DSMI_*."""

    _fields_ = [
        ("stVersion", dsUint16_t),
        ("dsmiDir", ctypes.c_char * (c.DSM_PATH_MAX + c.DSM_NAME_MAX + 1)),
        ("dsmiConfig", ctypes.c_char * (c.DSM_PATH_MAX + c.DSM_NAME_MAX + 1)),
        ("dsmiLog", ctypes.c_char * (c.DSM_PATH_MAX + c.DSM_NAME_MAX + 1)),
        ("argv", ctypes.POINTER(ctypes.c_char_p)),
        ("logName", ctypes.c_char * (c.DSM_NAME_MAX + 1)),
        ("reserved1", dsmBool_t),
        ("reserved2", dsmBool_t),
    ]


class dsmInitExIn_t(ctypes.Structure):
    """dsmInitEx's input (version 5: the 8.x layout, ending in appVersionP)."""

    _fields_ = [
        ("stVersion", dsUint16_t),
        ("apiVersionExP", ctypes.POINTER(dsmApiVersionEx)),
        ("clientNodeNameP", ctypes.c_char_p),
        ("clientOwnerNameP", ctypes.c_char_p),
        ("clientPasswordP", ctypes.c_char_p),
        ("userNameP", ctypes.c_char_p),
        ("userPasswordP", ctypes.c_char_p),
        ("applicationTypeP", ctypes.c_char_p),
        ("configfile", ctypes.c_char_p),
        ("options", ctypes.c_char_p),
        ("dirDelimiter", ctypes.c_char),
        ("useUnicode", dsmBool_t),
        ("bCrossPlatform", dsmBool_t),
        ("bService", dsmBool_t),
        ("bEncryptKeyEnabled", dsmBool_t),
        ("encryptionPasswordP", ctypes.c_char_p),
        ("useTsmBuffers", dsmBool_t),
        ("numTsmBuffers", dsUint8_t),
        ("appVersionP", ctypes.POINTER(dsmAppVersion)),
    ]


class dsmInitExOut_t(ctypes.Structure):
    """dsmInitEx's output (version 3: with the fail-over fields)."""

    _fields_ = [
        ("stVersion", dsUint16_t),
        ("userNameAuthorities", dsInt16_t),
        ("infoRC", dsInt16_t),
        ("adsmServerName", _chars(c.DSM_MAX_SERVERNAME_LENGTH)),
        ("serverVer", dsUint16_t),
        ("serverRel", dsUint16_t),
        ("serverLev", dsUint16_t),
        ("serverSubLev", dsUint16_t),
        ("bIsFailOverMode", dsmBool_t),
        ("replServerName", _chars(c.DSM_MAX_SERVERNAME_LENGTH)),
        ("homeServerName", _chars(c.DSM_MAX_SERVERNAME_LENGTH)),
    ]


class dsmUnixFSAttrib(ctypes.Structure):
    _fields_ = [("fsInfoLength", dsUint16_t), ("fsInfo", ctypes.c_char * c.DSM_MAX_FSINFO_LENGTH)]


class dsmDosFSAttrib(ctypes.Structure):
    _fields_ = [
        ("driveLetter", ctypes.c_char),
        ("fsInfoLength", dsUint16_t),
        ("fsInfo", ctypes.c_char * c.DSM_MAX_FSINFO_LENGTH),
    ]


class dsmFSAttr(ctypes.Union):
    _fields_ = [
        ("netwareFSAttr", dsmUnixFSAttrib),
        ("unixFSAttr", dsmUnixFSAttrib),
        ("dosFSAttr", dsmDosFSAttrib),
    ]


class regFSData(ctypes.Structure):
    """dsmRegisterFS's filespace (version 1)."""

    _fields_ = [
        ("stVersion", dsUint16_t),
        ("fsName", ctypes.c_char_p),
        ("fsType", ctypes.c_char_p),
        ("occupancy", dsStruct64_t),
        ("capacity", dsStruct64_t),
        ("fsAttr", dsmFSAttr),
    ]


# --- Store --------------------------------------------------------------------------------
class mcBindKey(ctypes.Structure):
    """dsmBindMC's answer: the management class bound and its copy destinations."""

    _fields_ = [
        ("stVersion", dsUint16_t),
        ("mcName", _chars(c.DSM_MAX_MC_NAME_LENGTH)),
        ("backup_cg_exists", dsmBool_t),
        ("archive_cg_exists", dsmBool_t),
        ("backup_copy_dest", _chars(c.DSM_MAX_CG_DEST_LENGTH)),
        ("archive_copy_dest", _chars(c.DSM_MAX_CG_DEST_LENGTH)),
    ]


class ObjAttr(ctypes.Structure):
    """An object's attributes on dsmSendObj (version 4: with useExtObjInfo)."""

    _fields_ = [
        ("stVersion", dsUint16_t),
        ("owner", _chars(c.DSM_MAX_OWNER_LENGTH)),
        ("sizeEstimate", dsStruct64_t),
        ("objCompressed", dsmBool_t),
        ("objInfoLength", dsUint16_t),
        ("objInfo", ctypes.c_void_p),
        ("mcNameP", ctypes.c_char_p),
        ("disableDeduplication", dsmBool_t),
        ("useExtObjInfo", dsmBool_t),
    ]


class sndArchiveData(ctypes.Structure):
    """dsmSendObj's sendBuff for an archive (stArchive): the archive description."""

    _fields_ = [("stVersion", dsUint16_t), ("descr", ctypes.c_char_p)]


class dsmEndSendObjExIn_t(ctypes.Structure):
    _fields_ = [("stVersion", dsUint16_t), ("dsmHandle", dsUint32_t)]


class dsmEndSendObjExOut_t(ctypes.Structure):
    """What the library counted of the object just sent (version 3)."""

    _fields_ = [
        ("stVersion", dsUint16_t),
        ("totalBytesSent", dsStruct64_t),
        ("objCompressed", dsmBool_t),
        ("totalCompressSize", dsStruct64_t),
        ("totalLFBytesSent", dsStruct64_t),
        ("encryptionType", dsUint8_t),
        ("objDeduplicated", dsmBool_t),
        ("totalDedupSize", dsStruct64_t),
    ]


class dsmEndTxnExIn_t(ctypes.Structure):
    _fields_ = [("stVersion", dsUint16_t), ("dsmHandle", dsUint32_t), ("vote", dsUint8_t)]


class dsmEndTxnExOut_t(ctypes.Structure):
    """The transaction's outcome: ``reason`` tells why the server aborted it."""

    _fields_ = [
        ("stVersion", dsUint16_t),
        ("reason", dsUint16_t),
        ("groupLeaderObjId", dsStruct64_t),
        ("reserved1", dsUint8_t),
        ("reserved2", dsUint16_t),
    ]


# --- Query --------------------------------------------------------------------------------
class qryArchiveData(ctypes.Structure):
    """dsmBeginQuery(qtArchive)'s selection: name pattern, owner, dates, description."""

    _fields_ = [
        ("stVersion", dsUint16_t),
        ("objName", ctypes.POINTER(dsmObjName)),
        ("owner", ctypes.c_char_p),
        ("insDateLowerBound", dsmDate),
        ("insDateUpperBound", dsmDate),
        ("expDateLowerBound", dsmDate),
        ("expDateUpperBound", dsmDate),
        ("descr", ctypes.c_char_p),
    ]


class qryRespArchiveData(ctypes.Structure):
    """One archive object of a query answer (version 7: the 8.1 layout, where the
    object-dependent info moved to a 1,500-byte field at the end)."""

    _fields_ = [
        ("stVersion", dsUint16_t),
        ("objName", dsmObjName),
        ("copyGroup", dsUint32_t),
        ("mcName", _chars(c.DSM_MAX_MC_NAME_LENGTH)),
        ("owner", _chars(c.DSM_MAX_OWNER_LENGTH)),
        ("objId", dsStruct64_t),
        ("reserved", dsStruct64_t),
        ("mediaClass", dsUint8_t),
        ("insDate", dsmDate),
        ("expDate", dsmDate),
        ("descr", _chars(c.DSM_MAX_DESCR_LENGTH)),
        ("objInfolen", dsUint16_t),
        ("reservedObjInfo", ctypes.c_char * c.DSM_MAX_OBJINFO_LENGTH),
        ("restoreOrderExt", dsUint160_t),
        ("sizeEstimate", dsStruct64_t),
        ("compressType", dsUint8_t),
        ("retentionInitiated", dsUint8_t),
        ("objHeld", dsUint8_t),
        ("encryptionType", dsUint8_t),
        ("clientDeduplicated", dsmBool_t),
        ("objInfo", ctypes.c_char * c.DSM_MAX_EXT_OBJINFO_LENGTH),
        ("compressAlg", _chars(c.DSM_MAX_COMPRESSTYPE_LENGTH)),
    ]


# --- Retrieve and delete ------------------------------------------------------------------
class dsmGetList(ctypes.Structure):
    """dsmBeginGetData's list: object ids in the order they are to be read."""

    _fields_ = [
        ("stVersion", dsUint16_t),
        ("numObjId", dsUint32_t),
        ("objId", ctypes.POINTER(ObjID)),
        ("partialObjData", ctypes.POINTER(PartialObjData)),
    ]


class delArch(ctypes.Structure):
    _fields_ = [("stVersion", dsUint16_t), ("objId", dsStruct64_t)]


class delBack(ctypes.Structure):
    _fields_ = [
        ("stVersion", dsUint16_t),
        ("objNameP", ctypes.POINTER(dsmObjName)),
        ("copyGroup", dsUint32_t),
    ]


class delBackID(ctypes.Structure):
    _fields_ = [("stVersion", dsUint16_t), ("objId", dsStruct64_t)]


class dsmDelInfo(ctypes.Union):
    """dsmDeleteObj's third argument, passed BY VALUE: its size is the union's (delBack's
    pointer makes it 24 bytes), not delArch's."""

    _fields_ = [("backInfo", delBack), ("archInfo", delArch), ("backIDInfo", delBackID)]


#: Every structure above, by its header name, for the JSON dump and the ABI test.
STRUCTS: Final[dict[str, type[ctypes.Structure] | type[ctypes.Union]]] = {
    cls.__name__: cls
    for cls in (
        dsStruct64_t,
        dsUint160_t,
        dsmDate,
        dsmObjName,
        PartialObjData,
        DataBlk,
        dsmApiVersionEx,
        dsmAppVersion,
        envSetUp,
        dsmInitExIn_t,
        dsmInitExOut_t,
        dsmUnixFSAttrib,
        dsmDosFSAttrib,
        dsmFSAttr,
        regFSData,
        mcBindKey,
        ObjAttr,
        sndArchiveData,
        dsmEndSendObjExIn_t,
        dsmEndSendObjExOut_t,
        dsmEndTxnExIn_t,
        dsmEndTxnExOut_t,
        qryArchiveData,
        qryRespArchiveData,
        dsmGetList,
        delArch,
        delBack,
        delBackID,
        dsmDelInfo,
    )
}

# --- Prototypes ---------------------------------------------------------------------------
_P = ctypes.POINTER
_HANDLE = dsUint32_t

#: name -> (restype, argtypes) of every function tssd calls.
PROTOTYPES: Final[dict[str, tuple[Any, list[Any]]]] = {
    "dsmQueryApiVersionEx": (None, [_P(dsmApiVersionEx)]),
    "dsmSetUp": (dsInt16_t, [dsBool_t, _P(envSetUp)]),
    "dsmCleanUp": (dsInt16_t, [dsBool_t]),
    "dsmInitEx": (dsInt16_t, [_P(dsUint32_t), _P(dsmInitExIn_t), _P(dsmInitExOut_t)]),
    "dsmTerminate": (dsInt16_t, [_HANDLE]),
    "dsmRegisterFS": (dsInt16_t, [_HANDLE, _P(regFSData)]),
    "dsmRCMsg": (dsInt16_t, [_HANDLE, dsInt16_t, ctypes.c_char_p]),
    "dsmBeginQuery": (dsInt16_t, [_HANDLE, dsmQueryType, ctypes.c_void_p]),
    "dsmGetNextQObj": (dsInt16_t, [_HANDLE, _P(DataBlk)]),
    "dsmEndQuery": (dsInt16_t, [_HANDLE]),
    "dsmBeginGetData": (dsInt16_t, [_HANDLE, dsBool_t, dsmGetType, _P(dsmGetList)]),
    "dsmGetObj": (dsInt16_t, [_HANDLE, _P(ObjID), _P(DataBlk)]),
    "dsmGetData": (dsInt16_t, [_HANDLE, _P(DataBlk)]),
    "dsmEndGetObj": (dsInt16_t, [_HANDLE]),
    "dsmEndGetData": (dsInt16_t, [_HANDLE]),
    "dsmBeginTxn": (dsInt16_t, [_HANDLE]),
    "dsmBindMC": (dsInt16_t, [_HANDLE, _P(dsmObjName), dsmSendType, _P(mcBindKey)]),
    "dsmSendObj": (
        dsInt16_t,
        [_HANDLE, dsmSendType, ctypes.c_void_p, _P(dsmObjName), _P(ObjAttr), _P(DataBlk)],
    ),
    "dsmSendData": (dsInt16_t, [_HANDLE, _P(DataBlk)]),
    "dsmEndSendObj": (dsInt16_t, [_HANDLE]),
    "dsmEndSendObjEx": (dsInt16_t, [_P(dsmEndSendObjExIn_t), _P(dsmEndSendObjExOut_t)]),
    "dsmEndTxn": (dsInt16_t, [_HANDLE, dsUint8_t, _P(dsUint16_t)]),
    "dsmEndTxnEx": (dsInt16_t, [_P(dsmEndTxnExIn_t), _P(dsmEndTxnExOut_t)]),
    "dsmDeleteObj": (dsInt16_t, [_HANDLE, dsmDelType, dsmDelInfo]),
}


def load(path: str) -> ctypes.CDLL:
    """Open the API library at *path* with every prototype of :data:`PROTOTYPES` set.

    Raises OSError when the library cannot be opened and AttributeError when it lacks one
    of the functions (the caller translates both into its own error).
    """
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    for name, (restype, argtypes) in PROTOTYPES.items():
        func = getattr(lib, name)
        func.restype = restype
        func.argtypes = argtypes
    return lib


def rc_message(lib: ctypes.CDLL, handle: int, rc: int) -> str:
    """The library's text for return code *rc* (dsmRCMsg), or a plain one if it has none."""
    buf = ctypes.create_string_buffer(c.DSM_MAX_RC_MSG_LENGTH + 1)
    if lib.dsmRCMsg(handle, rc, buf) != c.DSM_RC_OK or not buf.value:
        return f"return code {rc}"
    return buf.value.decode("utf-8", "replace").strip()


def to_int64(value: dsStruct64_t) -> int:
    """The number a dsStruct64_t carries."""
    return (int(value.hi) << 32) | int(value.lo)


def from_int64(number: int) -> dsStruct64_t:
    """A dsStruct64_t carrying *number* (0 <= number < 2**64)."""
    if not 0 <= number < 1 << 64:
        raise ValueError(f"{number} does not fit a dsStruct64_t")
    return dsStruct64_t(hi=number >> 32, lo=number & 0xFFFFFFFF)


def restore_order_key(order: dsUint160_t) -> tuple[int, int, int, int, int]:
    """The restore order as a sort key: ascending on all five words, ``top`` first."""
    return (order.top, order.hi_hi, order.hi_lo, order.lo_hi, order.lo_lo)


def layout() -> dict[str, Any]:
    """Every structure's size and field offsets and every constant, for the JSON dump."""
    structs: dict[str, Any] = {}
    for name, cls in STRUCTS.items():
        fields = {}
        for field_name, *_ in cls._fields_:
            descriptor = getattr(cls, field_name)
            fields[field_name] = {"offset": descriptor.offset, "size": descriptor.size}
        structs[name] = {"size": ctypes.sizeof(cls), "fields": fields}
    return {"structs": structs, "constants": c.constants()}


def main() -> int:
    json.dump(layout(), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
