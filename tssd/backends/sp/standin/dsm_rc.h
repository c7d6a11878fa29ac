/*
 * The return codes the stand-in gives, with the text its dsmRCMsg returns: one list, used
 * for the enum, the messages and abi_dump's "constants".
 */
#ifndef TSSD_STANDIN_DSM_RC_H
#define TSSD_STANDIN_DSM_RC_H

#define DSM_RC_LIST(RC) \
    RC(DSM_RC_OK, 0, "completed successfully") \
    RC(DSM_RC_UNSUCCESSFUL, -1, "unsuccessful") \
    RC(DSM_RC_ABORT_SYSTEM_ERROR, 1, "the server has a system error") \
    RC(DSM_RC_ABORT_NO_MATCH, 2, "no objects on the server match the query") \
    RC(DSM_RC_ABORT_NODE_IN_USE, 7, "the node is in use by another session") \
    RC(DSM_RC_ABORT_DATA_OFFLINE, 9, "the data is on an offline volume") \
    RC(DSM_RC_ABORT_MOUNT_NOT_POSSIBLE, 12, "the volume cannot be mounted now") \
    RC(DSM_RC_ABORT_DATA_UNAVAILABLE, 14, "the data is not available now") \
    RC(DSM_RC_ABORT_RETRY, 15, "the server asks to retry the operation") \
    RC(DSM_RC_ABORT_WAIT_FOR_SPACE, 26, "the server is waiting for storage space") \
    RC(DSM_RC_ABORT_RESTORE_IN_PROGRESS, 38, "a restore of this object is in progress") \
    RC(DSM_RC_ABORT_EXCEED_MAX_MP, 41, "the node has no free mount point (MAXNUMMP)") \
    RC(DSM_RC_ABORT_ITEM_IN_USE, 232, "the object is in use") \
    RC(DSM_RC_ABORT_LOCK_CONFLICT, 233, "a lock conflict on the server") \
    RC(DSM_RC_REJECT_NO_RESOURCES, 51, "the server has no resources for a session") \
    RC(DSM_RC_REJECT_VERIFIER_EXPIRED, 52, "the password has expired") \
    RC(DSM_RC_REJECT_ID_UNKNOWN, 53, "the node is not registered") \
    RC(DSM_RC_REJECT_SERVER_DISABLED, 55, "the server does not accept sessions now") \
    RC(DSM_RC_REJECT_ID_IN_USE, 59, "the node name is in use") \
    RC(DSM_RC_REJECT_NO_MEMORY, 63, "the server is out of memory") \
    RC(DSM_RC_NO_MEMORY, 102, "the client is out of memory") \
    RC(DSM_RC_INVALID_PARM, 109, "an invalid parameter") \
    RC(DSM_RC_FINISHED, 121, "finished") \
    RC(DSM_RC_FILE_SPACE_NOT_FOUND, 124, "the file space is not known to the server") \
    RC(DSM_RC_RETRY, 143, "retry the operation") \
    RC(DSM_RC_NO_OPT_FILE, 406, "the options file cannot be read") \
    RC(DSM_RC_TCPIP_FAILURE, -50, "the session with the server was lost (communication failure)") \
    RC(DSM_RC_CONN_TIMEDOUT, -51, "the connection to the server timed out") \
    RC(DSM_RC_CONN_REFUSED, -52, "the server refused the connection") \
    RC(DSM_RC_NULL_OBJNAME, 2000, "the object name pointer is NULL") \
    RC(DSM_RC_NULL_DATABLKPTR, 2001, "the data block pointer is NULL") \
    RC(DSM_RC_NULL_MSG, 2002, "the message buffer is NULL") \
    RC(DSM_RC_NULL_OBJATTRPTR, 2004, "the object attribute pointer is NULL") \
    RC(DSM_RC_ZERO_BUFLEN, 2008, "the buffer length is zero") \
    RC(DSM_RC_NULL_BUFPTR, 2009, "the buffer pointer is NULL") \
    RC(DSM_RC_INVALID_OBJTYPE, 2010, "an invalid object type") \
    RC(DSM_RC_INVALID_VOTE, 2011, "an invalid vote") \
    RC(DSM_RC_INVALID_DS_HANDLE, 2014, "an invalid session handle") \
    RC(DSM_RC_INVALID_FSNAME, 2016, "the file space name must start with the delimiter") \
    RC(DSM_RC_INVALID_LLNAME, 2018, "the low level name must start with the delimiter") \
    RC(DSM_RC_INVALID_SENDTYPE, 2022, "an invalid send type") \
    RC(DSM_RC_INVALID_PARAMETER, 2023, "an invalid parameter") \
    RC(DSM_RC_INVALID_HLNAME, 2028, "the high level name must start with the delimiter") \
    RC(DSM_RC_NUMOBJ_EXCEED, 2029, "too many objects for one dsmBeginGetData") \
    RC(DSM_RC_BAD_CALL_SEQUENCE, 2041, "the call is not allowed at this point") \
    RC(DSM_RC_FS_ALREADY_REGED, 2062, "the file space is already registered") \
    RC(DSM_RC_OBJID_NOTFOUND, 2063, "no object with this id") \
    RC(DSM_RC_WRONG_VERSION_PARM, 2065, "a structure has a version this library does not know") \
    RC(DSM_RC_OBJINFO_TOOLONG, 2101, "the object info is too long") \
    RC(DSM_RC_MORE_DATA, 2200, "more data") \
    RC(DSM_RC_BUFF_TOO_SMALL, 2210, "the buffer is too small for the answer") \
    RC(DSM_RC_NO_API_CONFIGFILE, 2228, "the API options file was not found") \
    RC(DSM_RC_NEEDTO_CALL_BINDMC, 2301, "dsmBindMC must be called first") \
    RC(DSM_RC_CHECK_REASON_CODE, 2302, "the transaction was aborted: check the reason code")

#define RC_ENUM(name, value, text) name = value,
enum { DSM_RC_LIST(RC_ENUM) };
#undef RC_ENUM

#endif
