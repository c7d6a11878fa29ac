/*
 * Prints the stand-in's own structure layouts and return codes as JSON, in the shape of
 * `python -m tssd.backends.sp.abi`, so that a test can compare the two declarations.
 */
#include <stddef.h>
#include <stdio.h>

#include "dsm_rc.h"
#include "dsm_types.h"

static int first_struct = 1, first_field;

static void open_struct(const char *name, size_t size)
{
    printf("%s\n  \"%s\": {\"size\": %zu, \"fields\": {", first_struct ? "" : ",", name, size);
    first_struct = 0;
    first_field = 1;
}

static void field(const char *name, size_t offset, size_t size)
{
    printf("%s\"%s\": {\"offset\": %zu, \"size\": %zu}", first_field ? "" : ", ", name, offset,
           size);
    first_field = 0;
}

#define BEGIN(T) open_struct(#T, sizeof(T))
#define F(T, f) field(#f, offsetof(T, f), sizeof(((T *)0)->f))
#define END() printf("}}")

static void structs(void)
{
    BEGIN(dsStruct64_t); F(dsStruct64_t, hi); F(dsStruct64_t, lo); END();
    BEGIN(dsUint160_t); F(dsUint160_t, top); F(dsUint160_t, hi_hi); F(dsUint160_t, hi_lo);
    F(dsUint160_t, lo_hi); F(dsUint160_t, lo_lo); END();
    BEGIN(dsmDate); F(dsmDate, year); F(dsmDate, month); F(dsmDate, day); F(dsmDate, hour);
    F(dsmDate, minute); F(dsmDate, second); END();
    BEGIN(dsmObjName); F(dsmObjName, fs); F(dsmObjName, hl); F(dsmObjName, ll);
    F(dsmObjName, objType); END();
    BEGIN(PartialObjData); F(PartialObjData, stVersion); F(PartialObjData, partialObjOffset);
    F(PartialObjData, partialObjLength); END();
    BEGIN(DataBlk); F(DataBlk, stVersion); F(DataBlk, bufferLen); F(DataBlk, numBytes);
    F(DataBlk, bufferPtr); F(DataBlk, numBytesCompressed); F(DataBlk, reserved); END();
    BEGIN(dsmApiVersionEx); F(dsmApiVersionEx, stVersion); F(dsmApiVersionEx, version);
    F(dsmApiVersionEx, release); F(dsmApiVersionEx, level); F(dsmApiVersionEx, subLevel);
    F(dsmApiVersionEx, unicode); END();
    BEGIN(dsmAppVersion); F(dsmAppVersion, stVersion); F(dsmAppVersion, applicationVersion);
    F(dsmAppVersion, applicationRelease); F(dsmAppVersion, applicationLevel);
    F(dsmAppVersion, applicationSubLevel); END();
    BEGIN(envSetUp); F(envSetUp, stVersion); F(envSetUp, dsmiDir); F(envSetUp, dsmiConfig);
    F(envSetUp, dsmiLog); F(envSetUp, argv); F(envSetUp, logName); F(envSetUp, reserved1);
    F(envSetUp, reserved2); END();
    BEGIN(dsmInitExIn_t); F(dsmInitExIn_t, stVersion); F(dsmInitExIn_t, apiVersionExP);
    F(dsmInitExIn_t, clientNodeNameP); F(dsmInitExIn_t, clientOwnerNameP);
    F(dsmInitExIn_t, clientPasswordP); F(dsmInitExIn_t, userNameP);
    F(dsmInitExIn_t, userPasswordP); F(dsmInitExIn_t, applicationTypeP);
    F(dsmInitExIn_t, configfile); F(dsmInitExIn_t, options); F(dsmInitExIn_t, dirDelimiter);
    F(dsmInitExIn_t, useUnicode); F(dsmInitExIn_t, bCrossPlatform); F(dsmInitExIn_t, bService);
    F(dsmInitExIn_t, bEncryptKeyEnabled); F(dsmInitExIn_t, encryptionPasswordP);
    F(dsmInitExIn_t, useTsmBuffers); F(dsmInitExIn_t, numTsmBuffers);
    F(dsmInitExIn_t, appVersionP); END();
    BEGIN(dsmInitExOut_t); F(dsmInitExOut_t, stVersion); F(dsmInitExOut_t, userNameAuthorities);
    F(dsmInitExOut_t, infoRC); F(dsmInitExOut_t, adsmServerName); F(dsmInitExOut_t, serverVer);
    F(dsmInitExOut_t, serverRel); F(dsmInitExOut_t, serverLev); F(dsmInitExOut_t, serverSubLev);
    F(dsmInitExOut_t, bIsFailOverMode); F(dsmInitExOut_t, replServerName);
    F(dsmInitExOut_t, homeServerName); END();
    BEGIN(dsmUnixFSAttrib); F(dsmUnixFSAttrib, fsInfoLength); F(dsmUnixFSAttrib, fsInfo); END();
    BEGIN(dsmDosFSAttrib); F(dsmDosFSAttrib, driveLetter); F(dsmDosFSAttrib, fsInfoLength);
    F(dsmDosFSAttrib, fsInfo); END();
    BEGIN(dsmFSAttr); F(dsmFSAttr, netwareFSAttr); F(dsmFSAttr, unixFSAttr);
    F(dsmFSAttr, dosFSAttr); END();
    BEGIN(regFSData); F(regFSData, stVersion); F(regFSData, fsName); F(regFSData, fsType);
    F(regFSData, occupancy); F(regFSData, capacity); F(regFSData, fsAttr); END();
    BEGIN(mcBindKey); F(mcBindKey, stVersion); F(mcBindKey, mcName);
    F(mcBindKey, backup_cg_exists); F(mcBindKey, archive_cg_exists);
    F(mcBindKey, backup_copy_dest); F(mcBindKey, archive_copy_dest); END();
    BEGIN(ObjAttr); F(ObjAttr, stVersion); F(ObjAttr, owner); F(ObjAttr, sizeEstimate);
    F(ObjAttr, objCompressed); F(ObjAttr, objInfoLength); F(ObjAttr, objInfo);
    F(ObjAttr, mcNameP); F(ObjAttr, disableDeduplication); F(ObjAttr, useExtObjInfo); END();
    BEGIN(sndArchiveData); F(sndArchiveData, stVersion); F(sndArchiveData, descr); END();
    BEGIN(dsmEndSendObjExIn_t); F(dsmEndSendObjExIn_t, stVersion);
    F(dsmEndSendObjExIn_t, dsmHandle); END();
    BEGIN(dsmEndSendObjExOut_t); F(dsmEndSendObjExOut_t, stVersion);
    F(dsmEndSendObjExOut_t, totalBytesSent); F(dsmEndSendObjExOut_t, objCompressed);
    F(dsmEndSendObjExOut_t, totalCompressSize); F(dsmEndSendObjExOut_t, totalLFBytesSent);
    F(dsmEndSendObjExOut_t, encryptionType); F(dsmEndSendObjExOut_t, objDeduplicated);
    F(dsmEndSendObjExOut_t, totalDedupSize); END();
    BEGIN(dsmEndTxnExIn_t); F(dsmEndTxnExIn_t, stVersion); F(dsmEndTxnExIn_t, dsmHandle);
    F(dsmEndTxnExIn_t, vote); END();
    BEGIN(dsmEndTxnExOut_t); F(dsmEndTxnExOut_t, stVersion); F(dsmEndTxnExOut_t, reason);
    F(dsmEndTxnExOut_t, groupLeaderObjId); F(dsmEndTxnExOut_t, reserved1);
    F(dsmEndTxnExOut_t, reserved2); END();
    BEGIN(qryArchiveData); F(qryArchiveData, stVersion); F(qryArchiveData, objName);
    F(qryArchiveData, owner); F(qryArchiveData, insDateLowerBound);
    F(qryArchiveData, insDateUpperBound); F(qryArchiveData, expDateLowerBound);
    F(qryArchiveData, expDateUpperBound); F(qryArchiveData, descr); END();
    BEGIN(qryRespArchiveData); F(qryRespArchiveData, stVersion); F(qryRespArchiveData, objName);
    F(qryRespArchiveData, copyGroup); F(qryRespArchiveData, mcName); F(qryRespArchiveData, owner);
    F(qryRespArchiveData, objId); F(qryRespArchiveData, reserved);
    F(qryRespArchiveData, mediaClass); F(qryRespArchiveData, insDate);
    F(qryRespArchiveData, expDate); F(qryRespArchiveData, descr);
    F(qryRespArchiveData, objInfolen); F(qryRespArchiveData, reservedObjInfo);
    F(qryRespArchiveData, restoreOrderExt); F(qryRespArchiveData, sizeEstimate);
    F(qryRespArchiveData, compressType); F(qryRespArchiveData, retentionInitiated);
    F(qryRespArchiveData, objHeld); F(qryRespArchiveData, encryptionType);
    F(qryRespArchiveData, clientDeduplicated); F(qryRespArchiveData, objInfo);
    F(qryRespArchiveData, compressAlg); END();
    BEGIN(dsmGetList); F(dsmGetList, stVersion); F(dsmGetList, numObjId); F(dsmGetList, objId);
    F(dsmGetList, partialObjData); END();
    BEGIN(delArch); F(delArch, stVersion); F(delArch, objId); END();
    BEGIN(delBack); F(delBack, stVersion); F(delBack, objNameP); F(delBack, copyGroup); END();
    BEGIN(delBackID); F(delBackID, stVersion); F(delBackID, objId); END();
    BEGIN(dsmDelInfo); F(dsmDelInfo, backInfo); F(dsmDelInfo, archInfo);
    F(dsmDelInfo, backIDInfo); END();
}

static int first_constant = 1;

static void constant(const char *name, long value)
{
    printf("%s\n  \"%s\": %ld", first_constant ? "" : ",", name, value);
    first_constant = 0;
}

int main(void)
{
    printf("{\"structs\": {");
    structs();
    printf("\n}, \"constants\": {");
#define RC_CONSTANT(name, value, text) constant(#name, value);
    DSM_RC_LIST(RC_CONSTANT)
#undef RC_CONSTANT
    constant("DSM_MAX_GET_OBJ", MAX_GET_OBJ);
    constant("dsmInitExInVersion", INITEXIN_VER);
    constant("dsmInitExOutVersion", INITEXOUT_VER);
    constant("ObjAttrVersion", OBJATTR_VER);
    constant("DataBlkVersion", DATABLK_VER);
    constant("qryRespArchiveDataVersion", QRYRESPARCHIVE_VER);
    constant("qryArchiveDataVersion", QRYARCHIVE_VER);
    constant("dsmGetListVersion", GETLIST_VER);
    constant("delArchVersion", DELARCH_VER);
    constant("mcBindKeyVersion", MCBINDKEY_VER);
    constant("sndArchiveDataVersion", SNDARCHIVE_VER);
    constant("regFSDataVersion", REGFS_VER);
    constant("dsmEndSendObjExInVersion", ENDSENDOBJEXIN_VER);
    constant("dsmEndSendObjExOutVersion", ENDSENDOBJEXOUT_VER);
    constant("dsmEndTxnExInVersion", ENDTXNEXIN_VER);
    constant("dsmEndTxnExOutVersion", ENDTXNEXOUT_VER);
    constant("gtArchive", gtArchive);
    constant("qtArchive", qtArchive);
    constant("stArchive", stArchive);
    constant("dtArchive", dtArchive);
    constant("bTrue", bTrue);
    printf("\n}}\n");
    return 0;
}
