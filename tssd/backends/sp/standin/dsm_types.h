/*
 * The stand-in's own declarations of the SP client API types, written from the documented
 * facts (IBM's API book, 8.x): Linux x86_64, natural alignment, no packing; dsStruct64_t
 * is two 32-bit halves, hi first; dsmBool_t and the enums are 4-byte ints; functions
 * return dsInt16_t. Each structure is the layout of the stVersion in the *_VER macros:
 * the stand-in refuses other versions with DSM_RC_WRONG_VERSION_PARM.
 *
 * These are kept apart from tssd's ctypes module on purpose: abi_dump.c prints their sizes
 * and offsets, and a test compares them with `python -m tssd.backends.sp.abi`.
 */
#ifndef TSSD_STANDIN_DSM_TYPES_H
#define TSSD_STANDIN_DSM_TYPES_H

#include <stdint.h>

typedef int8_t dsInt8_t;
typedef uint8_t dsUint8_t;
typedef int16_t dsInt16_t;
typedef uint16_t dsUint16_t;
typedef int32_t dsInt32_t;
typedef uint32_t dsUint32_t;

typedef enum { bFalse = 0, bTrue = 1 } dsmBool_t;
typedef dsmBool_t dsBool_t;

typedef enum { gtBackup = 0, gtArchive = 1 } dsmGetType;
typedef enum { qtArchive = 0, qtBackup = 1 } dsmQueryType;
typedef enum { stBackup = 0, stArchive = 1, stBackupMountWait = 2, stArchiveMountWait = 3 } dsmSendType;
typedef enum { dtArchive = 0, dtBackup = 1, dtBackupID = 2 } dsmDelType;

#define MAX_FS 1024
#define MAX_HL 1024
#define MAX_LL 256
#define MAX_OWNER 64
#define MAX_MC 30
#define MAX_CGDEST 30
#define MAX_DESCR 255
#define MAX_OBJINFO 255
#define MAX_EXT_OBJINFO 1500
#define MAX_COMPRESSTYPE 32
#define MAX_SERVERNAME 64
#define MAX_FSINFO 500
#define MAX_RC_MSG 1024
#define PATH_AND_NAME (1024 + 255 + 1)
#define MAX_GET_OBJ 4080

#define APIVERSIONEX_VER 2
#define INITEXIN_VER 5
#define INITEXOUT_VER 3
#define REGFS_VER 1
#define OBJATTR_VER 4
#define MCBINDKEY_VER 1
#define SNDARCHIVE_VER 1
#define DATABLK_VER 3
#define QRYARCHIVE_VER 1
#define QRYRESPARCHIVE_VER 7
#define GETLIST_VER 2
#define DELARCH_VER 1
#define ENDSENDOBJEXIN_VER 1
#define ENDSENDOBJEXOUT_VER 3
#define ENDTXNEXIN_VER 1
#define ENDTXNEXOUT_VER 1

typedef struct { dsUint32_t hi; dsUint32_t lo; } dsStruct64_t;
typedef dsStruct64_t ObjID;

typedef struct {
    dsUint32_t top;   /* the volume */
    dsUint32_t hi_hi;
    dsUint32_t hi_lo;
    dsUint32_t lo_hi; /* the byte position on it, high half */
    dsUint32_t lo_lo; /* and low half */
} dsUint160_t;

typedef struct {
    dsUint16_t year;
    dsUint8_t month, day, hour, minute, second;
} dsmDate;

typedef struct {
    char fs[MAX_FS + 1];
    char hl[MAX_HL + 1];
    char ll[MAX_LL + 1];
    dsUint8_t objType;
} dsmObjName;

typedef struct {
    dsUint16_t stVersion;
    dsStruct64_t partialObjOffset;
    dsStruct64_t partialObjLength;
} PartialObjData;

typedef struct {
    dsUint16_t stVersion;
    dsUint32_t bufferLen;
    dsUint32_t numBytes;
    char *bufferPtr;
    dsUint32_t numBytesCompressed;
    dsUint16_t reserved;
} DataBlk;

typedef struct {
    dsUint16_t stVersion, version, release, level, subLevel;
    dsmBool_t unicode;
} dsmApiVersionEx;

typedef struct {
    dsUint16_t stVersion;
    dsUint16_t applicationVersion, applicationRelease, applicationLevel, applicationSubLevel;
} dsmAppVersion;

typedef struct {
    dsUint16_t stVersion;
    char dsmiDir[PATH_AND_NAME];
    char dsmiConfig[PATH_AND_NAME];
    char dsmiLog[PATH_AND_NAME];
    char **argv;
    char logName[255 + 1];
    dsmBool_t reserved1;
    dsmBool_t reserved2;
} envSetUp;

typedef struct {
    dsUint16_t stVersion;
    dsmApiVersionEx *apiVersionExP;
    char *clientNodeNameP;
    char *clientOwnerNameP;
    char *clientPasswordP;
    char *userNameP;
    char *userPasswordP;
    char *applicationTypeP;
    char *configfile;
    char *options;
    char dirDelimiter;
    dsmBool_t useUnicode;
    dsmBool_t bCrossPlatform;
    dsmBool_t bService;
    dsmBool_t bEncryptKeyEnabled;
    char *encryptionPasswordP;
    dsmBool_t useTsmBuffers;
    dsUint8_t numTsmBuffers;
    dsmAppVersion *appVersionP;
} dsmInitExIn_t;

typedef struct {
    dsUint16_t stVersion;
    dsInt16_t userNameAuthorities;
    dsInt16_t infoRC;
    char adsmServerName[MAX_SERVERNAME + 1];
    dsUint16_t serverVer, serverRel, serverLev, serverSubLev;
    dsmBool_t bIsFailOverMode;
    char replServerName[MAX_SERVERNAME + 1];
    char homeServerName[MAX_SERVERNAME + 1];
} dsmInitExOut_t;

typedef struct { dsUint16_t fsInfoLength; char fsInfo[MAX_FSINFO]; } dsmUnixFSAttrib;
typedef struct { char driveLetter; dsUint16_t fsInfoLength; char fsInfo[MAX_FSINFO]; } dsmDosFSAttrib;
typedef union {
    dsmUnixFSAttrib netwareFSAttr;
    dsmUnixFSAttrib unixFSAttr;
    dsmDosFSAttrib dosFSAttr;
} dsmFSAttr;

typedef struct {
    dsUint16_t stVersion;
    char *fsName;
    char *fsType;
    dsStruct64_t occupancy;
    dsStruct64_t capacity;
    dsmFSAttr fsAttr;
} regFSData;

typedef struct {
    dsUint16_t stVersion;
    char mcName[MAX_MC + 1];
    dsmBool_t backup_cg_exists;
    dsmBool_t archive_cg_exists;
    char backup_copy_dest[MAX_CGDEST + 1];
    char archive_copy_dest[MAX_CGDEST + 1];
} mcBindKey;

typedef struct {
    dsUint16_t stVersion;
    char owner[MAX_OWNER + 1];
    dsStruct64_t sizeEstimate;
    dsmBool_t objCompressed;
    dsUint16_t objInfoLength;
    char *objInfo;
    char *mcNameP;
    dsmBool_t disableDeduplication;
    dsmBool_t useExtObjInfo;
} ObjAttr;

typedef struct { dsUint16_t stVersion; char *descr; } sndArchiveData;

typedef struct { dsUint16_t stVersion; dsUint32_t dsmHandle; } dsmEndSendObjExIn_t;

typedef struct {
    dsUint16_t stVersion;
    dsStruct64_t totalBytesSent;
    dsmBool_t objCompressed;
    dsStruct64_t totalCompressSize;
    dsStruct64_t totalLFBytesSent;
    dsUint8_t encryptionType;
    dsmBool_t objDeduplicated;
    dsStruct64_t totalDedupSize;
} dsmEndSendObjExOut_t;

typedef struct { dsUint16_t stVersion; dsUint32_t dsmHandle; dsUint8_t vote; } dsmEndTxnExIn_t;

typedef struct {
    dsUint16_t stVersion;
    dsUint16_t reason;
    dsStruct64_t groupLeaderObjId;
    dsUint8_t reserved1;
    dsUint16_t reserved2;
} dsmEndTxnExOut_t;

typedef struct {
    dsUint16_t stVersion;
    dsmObjName *objName;
    char *owner;
    dsmDate insDateLowerBound, insDateUpperBound;
    dsmDate expDateLowerBound, expDateUpperBound;
    char *descr;
} qryArchiveData;

typedef struct {
    dsUint16_t stVersion;
    dsmObjName objName;
    dsUint32_t copyGroup;
    char mcName[MAX_MC + 1];
    char owner[MAX_OWNER + 1];
    dsStruct64_t objId;
    dsStruct64_t reserved;
    dsUint8_t mediaClass;
    dsmDate insDate;
    dsmDate expDate;
    char descr[MAX_DESCR + 1];
    dsUint16_t objInfolen;
    char reservedObjInfo[MAX_OBJINFO];
    dsUint160_t restoreOrderExt;
    dsStruct64_t sizeEstimate;
    dsUint8_t compressType;
    dsUint8_t retentionInitiated;
    dsUint8_t objHeld;
    dsUint8_t encryptionType;
    dsmBool_t clientDeduplicated;
    char objInfo[MAX_EXT_OBJINFO];
    char compressAlg[MAX_COMPRESSTYPE + 1];
} qryRespArchiveData;

typedef struct {
    dsUint16_t stVersion;
    dsUint32_t numObjId;
    ObjID *objId;
    PartialObjData *partialObjData;
} dsmGetList;

typedef struct { dsUint16_t stVersion; dsStruct64_t objId; } delArch;
typedef struct { dsUint16_t stVersion; dsmObjName *objNameP; dsUint32_t copyGroup; } delBack;
typedef struct { dsUint16_t stVersion; dsStruct64_t objId; } delBackID;
typedef union { delBack backInfo; delArch archInfo; delBackID backIDInfo; } dsmDelInfo;

#endif
