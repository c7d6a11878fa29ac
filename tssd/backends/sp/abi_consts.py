"""Numbers of the SP client API ABI: return codes, enum values, flags, field lengths and
the structure versions tssd declares (see :mod:`tssd.backends.sp.abi` for the layouts).

Every value is a documented fact of IBM's API (the book "Using the Application Programming
Interface", 8.x, which prints dsmapitd.h, dsmapips.h and dsmrc.h); the names are IBM's so
that a reader can look each one up there.
"""

from __future__ import annotations

from typing import Final

# --- Field lengths (each char array in a structure is one longer, for the NUL) -------------
DSM_MAX_CG_DEST_LENGTH: Final = 30
DSM_MAX_DESCR_LENGTH: Final = 255
DSM_MAX_FSNAME_LENGTH: Final = 1024
DSM_MAX_FSINFO_LENGTH: Final = 500
DSM_MAX_HL_LENGTH: Final = 1024
DSM_MAX_LL_LENGTH: Final = 256
DSM_MAX_ID_LENGTH: Final = 64
DSM_MAX_MC_NAME_LENGTH: Final = 30
DSM_MAX_OBJINFO_LENGTH: Final = 255
DSM_MAX_EXT_OBJINFO_LENGTH: Final = 1500
DSM_MAX_COMPRESSTYPE_LENGTH: Final = 32
DSM_MAX_OWNER_LENGTH: Final = 64
DSM_MAX_SERVERNAME_LENGTH: Final = DSM_MAX_ID_LENGTH
DSM_MAX_RC_MSG_LENGTH: Final = 1024
DSM_PATH_MAX: Final = 1024
DSM_NAME_MAX: Final = 255
#: Most objects one dsmBeginGetData may name.
DSM_MAX_GET_OBJ: Final = 4080

# --- Booleans (dsmBool_t is a 4-byte enum) and dsmSetUp's mtFlag ---------------------------
bFalse: Final = 0
bTrue: Final = 1
DSM_MULTITHREAD: Final = bTrue
DSM_SINGLETHREAD: Final = bFalse

# --- dsmObjName.objType ---------------------------------------------------------------------
DSM_OBJ_FILE: Final = 0x01
DSM_OBJ_DIRECTORY: Final = 0x02
DSM_OBJ_WILDCARD: Final = 0xFE
DSM_OBJ_ANY_TYPE: Final = 0xFF

# --- qryArchiveData date bounds (dsmDate.year) ------------------------------------------------
DATE_MINUS_INFINITE: Final = 0x0000
DATE_PLUS_INFINITE: Final = 0xFFFF

# --- The vote of dsmEndTxn / dsmEndTxnExIn_t.vote ---------------------------------------------
DSM_VOTE_COMMIT: Final = 1
DSM_VOTE_ABORT: Final = 2

# --- mediaClass in a query answer: lower is faster access --------------------------------------
MEDIA_FIXED: Final = 0x10
MEDIA_LIBRARY: Final = 0x20

# --- Enums (4-byte ints as arguments and fields) ----------------------------------------------
# dsmGetType (dsmBeginGetData)
gtBackup: Final = 0
gtArchive: Final = 1
# dsmQueryType (dsmBeginQuery)
qtArchive: Final = 0
qtBackup: Final = 1
qtFilespace: Final = 3
qtMC: Final = 4
# dsmSendType (dsmBindMC, dsmSendObj)
stBackup: Final = 0
stArchive: Final = 1
stBackupMountWait: Final = 2
stArchiveMountWait: Final = 3
# dsmDelType (dsmDeleteObj)
dtArchive: Final = 0
dtBackup: Final = 1
dtBackupID: Final = 2

# --- Structure versions tssd sets: the SP 8.1 client API layouts ------------------------------
# A library reads and writes a structure in the layout of the stVersion its caller set, so
# these numbers and the field lists in abi.py must change together.
apiVersionExVer: Final = 2
appVersionVer: Final = 1
envSetUpVersion: Final = 4
dsmInitExInVersion: Final = 5
dsmInitExOutVersion: Final = 3
regFSDataVersion: Final = 1
ObjAttrVersion: Final = 4
mcBindKeyVersion: Final = 1
sndArchiveDataVersion: Final = 1
DataBlkVersion: Final = 3
qryArchiveDataVersion: Final = 1
qryRespArchiveDataVersion: Final = 7
dsmGetListVersion: Final = 2
delArchVersion: Final = 1
dsmEndSendObjExInVersion: Final = 1
dsmEndSendObjExOutVersion: Final = 3
dsmEndTxnExInVersion: Final = 1
dsmEndTxnExOutVersion: Final = 1

# --- Return codes (dsInt16_t) ------------------------------------------------------------------
DSM_RC_SUCCESSFUL: Final = 0
DSM_RC_OK: Final = 0
DSM_RC_UNSUCCESSFUL: Final = -1
# The "abort" codes share their numbers with the reason codes of dsmEndTxn.
DSM_RC_ABORT_SYSTEM_ERROR: Final = 1
DSM_RC_ABORT_NO_MATCH: Final = 2
DSM_RC_ABORT_BY_CLIENT: Final = 3
DSM_RC_ABORT_NO_DATA: Final = 5
DSM_RC_ABORT_BAD_VERIFIER: Final = 6
DSM_RC_ABORT_NODE_IN_USE: Final = 7
DSM_RC_ABORT_DATA_OFFLINE: Final = 9
DSM_RC_ABORT_NO_STO_SPACE_SKIP: Final = 11
DSM_RC_ABORT_MOUNT_NOT_POSSIBLE: Final = 12
DSM_RC_ABORT_SIZESTIMATE_EXCEED: Final = 13
DSM_RC_ABORT_DATA_UNAVAILABLE: Final = 14
DSM_RC_ABORT_RETRY: Final = 15
DSM_RC_ABORT_FS_NOT_DEFINED: Final = 20
DSM_RC_ABORT_WAIT_FOR_SPACE: Final = 26
DSM_RC_ABORT_NOT_AUTHORIZED: Final = 27
DSM_RC_ABORT_NO_STOR_SPACE_STOP: Final = 29
DSM_RC_ABORT_DUPLICATE_OBJECT: Final = 32
DSM_RC_ABORT_RESTORE_IN_PROGRESS: Final = 38
DSM_RC_ABORT_EXCEED_MAX_MP: Final = 41
DSM_RC_ABORT_ITEM_IN_USE: Final = 232
DSM_RC_ABORT_LOCK_CONFLICT: Final = 233
DSM_RC_ABORT_CRC_FAILED: Final = 236
DSM_RC_ABORT_DELETE_NOT_ALLOWED: Final = 248
# Sign-on rejects, 51 to 99.
DSM_RC_REJECT_NO_RESOURCES: Final = 51
DSM_RC_REJECT_VERIFIER_EXPIRED: Final = 52
DSM_RC_REJECT_ID_UNKNOWN: Final = 53
DSM_RC_REJECT_SERVER_DISABLED: Final = 55
DSM_RC_REJECT_ID_IN_USE: Final = 59
DSM_RC_REJECT_ID_LOCKED: Final = 61
DSM_RC_REJECT_NO_MEMORY: Final = 63
# Client-side codes.
DSM_RC_NO_MEMORY: Final = 102
DSM_RC_FILE_NOT_FOUND: Final = 104
DSM_RC_ACCESS_DENIED: Final = 106
DSM_RC_INVALID_PARM: Final = 109
DSM_RC_PROTOCOL_VIOLATION: Final = 113
DSM_RC_FINISHED: Final = 121
DSM_RC_FILE_SPACE_NOT_FOUND: Final = 124
DSM_RC_TXN_ABORTED: Final = 125
DSM_RC_AUTH_FAILURE: Final = 137
DSM_RC_RETRY: Final = 143
DSM_RC_WILL_ABORT: Final = 157
DSM_RC_NO_OPT_FILE: Final = 406
# Communication failures: the session is gone.
DSM_RC_TCPIP_FAILURE: Final = -50
DSM_RC_CONN_TIMEDOUT: Final = -51
DSM_RC_CONN_REFUSED: Final = -52
DSM_RC_TSM_ABORT: Final = -72
# API usage errors, 2000 and up.
DSM_RC_NULL_OBJNAME: Final = 2000
DSM_RC_NULL_DATABLKPTR: Final = 2001
DSM_RC_NULL_MSG: Final = 2002
DSM_RC_NULL_OBJATTRPTR: Final = 2004
DSM_RC_NO_SESS_BLK: Final = 2006
DSM_RC_ZERO_BUFLEN: Final = 2008
DSM_RC_NULL_BUFPTR: Final = 2009
DSM_RC_INVALID_OBJTYPE: Final = 2010
DSM_RC_INVALID_VOTE: Final = 2011
DSM_RC_INVALID_DS_HANDLE: Final = 2014
DSM_RC_INVALID_FSNAME: Final = 2016
DSM_RC_INVALID_OBJNAME: Final = 2017
DSM_RC_INVALID_LLNAME: Final = 2018
DSM_RC_INVALID_SENDTYPE: Final = 2022
DSM_RC_INVALID_PARAMETER: Final = 2023
DSM_RC_INVALID_MCNAME: Final = 2025
DSM_RC_INVALID_HLNAME: Final = 2028
DSM_RC_NUMOBJ_EXCEED: Final = 2029
DSM_RC_BAD_CALL_SEQUENCE: Final = 2041
DSM_RC_FSNAME_NOTFOUND: Final = 2060
DSM_RC_FS_NOT_REGISTERED: Final = 2061
DSM_RC_FS_ALREADY_REGED: Final = 2062
DSM_RC_OBJID_NOTFOUND: Final = 2063
DSM_RC_WRONG_VERSION: Final = 2064
DSM_RC_WRONG_VERSION_PARM: Final = 2065
DSM_RC_NEEDTO_ENDTXN: Final = 2070
DSM_RC_OBJ_NOACG: Final = 2082
DSM_RC_DESC_TOOLONG: Final = 2100
DSM_RC_OBJINFO_TOOLONG: Final = 2101
DSM_RC_HL_TOOLONG: Final = 2102
DSM_RC_FILESPACE_TOOLONG: Final = 2104
DSM_RC_LL_TOOLONG: Final = 2105
DSM_RC_MORE_DATA: Final = 2200
DSM_RC_BUFF_TOO_SMALL: Final = 2210
DSM_RC_NO_API_CONFIGFILE: Final = 2228
DSM_RC_NEEDTO_CALL_BINDMC: Final = 2301
DSM_RC_CHECK_REASON_CODE: Final = 2302

#: Codes after which the same call may succeed later: a tape busy or not mountable now,
#: mount points exhausted, the server short of space or resources, the session lost.
TRANSIENT_RCS: Final = frozenset(
    {
        DSM_RC_ABORT_NODE_IN_USE,
        DSM_RC_ABORT_DATA_OFFLINE,
        DSM_RC_ABORT_MOUNT_NOT_POSSIBLE,
        DSM_RC_ABORT_DATA_UNAVAILABLE,
        DSM_RC_ABORT_RETRY,
        DSM_RC_ABORT_WAIT_FOR_SPACE,
        DSM_RC_ABORT_RESTORE_IN_PROGRESS,
        DSM_RC_ABORT_EXCEED_MAX_MP,
        DSM_RC_ABORT_ITEM_IN_USE,
        DSM_RC_ABORT_LOCK_CONFLICT,
        DSM_RC_REJECT_NO_RESOURCES,
        DSM_RC_REJECT_SERVER_DISABLED,
        DSM_RC_REJECT_ID_IN_USE,
        DSM_RC_REJECT_NO_MEMORY,
        DSM_RC_TCPIP_FAILURE,
        DSM_RC_CONN_TIMEDOUT,
        DSM_RC_CONN_REFUSED,
        DSM_RC_TSM_ABORT,
        DSM_RC_RETRY,
    }
)

#: Codes after which the session is unusable: the caller must dsmTerminate and sign on
#: again (a subset of TRANSIENT_RCS).
SESSION_LOST_RCS: Final = frozenset(
    {DSM_RC_TCPIP_FAILURE, DSM_RC_CONN_TIMEDOUT, DSM_RC_CONN_REFUSED, DSM_RC_TSM_ABORT}
)


def return_codes() -> dict[str, int]:
    """Every ``DSM_RC_*`` name of this module with its value."""
    return {
        name: value
        for name, value in globals().items()
        if name.startswith("DSM_RC_") and isinstance(value, int)
    }


def constants() -> dict[str, int]:
    """Every integer constant of this module (return codes, enums, flags, versions)."""
    return {
        name: value
        for name, value in globals().items()
        if not name.startswith("_") and type(value) is int
    }
