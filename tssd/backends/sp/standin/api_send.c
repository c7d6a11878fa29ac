/*
 * Store and delete, in transactions: dsmBeginTxn, dsmBindMC, dsmSendObj, dsmSendData,
 * dsmEndSendObj(Ex), dsmDeleteObj, dsmEndTxn(Ex). Sent bytes wait in a temporary file; the
 * commit places each object at the end of the volume being filled, under the catalog lock,
 * so a crash before the commit leaves no object behind.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "session.h"

#define DEFAULT_MC "STANDARD"

API_EXPORT dsInt16_t dsmBeginTxn(dsUint32_t handle)
{
    SESSION_OR_RETURN(s, handle);
    if (s->in_txn || s->in_get || s->in_query)
        return DSM_RC_BAD_CALL_SEQUENCE;
    s->in_txn = 1;
    s->nstaged = s->ndels = 0;
    return DSM_RC_OK;
}

static int valid_name(const dsmObjName *n)
{
    if (n->fs[0] != '/')
        return DSM_RC_INVALID_FSNAME;
    if (n->hl[0] != '/')
        return DSM_RC_INVALID_HLNAME;
    if (n->ll[0] != '/')
        return DSM_RC_INVALID_LLNAME;
    return DSM_RC_OK;
}

API_EXPORT dsInt16_t dsmBindMC(dsUint32_t handle, dsmObjName *name, dsmSendType type,
                               mcBindKey *key)
{
    SESSION_OR_RETURN(s, handle);
    if (name == NULL)
        return DSM_RC_NULL_OBJNAME;
    if (key == NULL)
        return DSM_RC_INVALID_PARM;
    if (key->stVersion != MCBINDKEY_VER)
        return DSM_RC_WRONG_VERSION_PARM;
    if (type != stArchive && type != stArchiveMountWait)
        return DSM_RC_INVALID_SENDTYPE;
    int rc = valid_name(name);
    if (rc != DSM_RC_OK)
        return (dsInt16_t)rc;
    snprintf(key->mcName, sizeof key->mcName, DEFAULT_MC);
    key->backup_cg_exists = bFalse;
    key->archive_cg_exists = bTrue;
    key->backup_copy_dest[0] = '\0';
    snprintf(key->archive_copy_dest, sizeof key->archive_copy_dest, "TAPEPOOL");
    snprintf(s->mc, sizeof s->mc, DEFAULT_MC);
    s->bound = 1;
    return DSM_RC_OK;
}

static int check_attr(const ObjAttr *attr)
{
    if (attr->stVersion != OBJATTR_VER)
        return DSM_RC_WRONG_VERSION_PARM;
    unsigned limit = attr->useExtObjInfo ? MAX_EXT_OBJINFO : MAX_OBJINFO;
    if (attr->objInfoLength > limit)
        return DSM_RC_OBJINFO_TOOLONG;
    if (attr->objInfoLength > 0 && attr->objInfo == NULL)
        return DSM_RC_INVALID_PARM;
    return DSM_RC_OK;
}

static int write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w <= 0)
            return -1;
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

static void describe(obj_meta *m, const session *s, const dsmObjName *name, const ObjAttr *attr,
                     const sndArchiveData *snd)
{
    memset(m, 0, sizeof *m);
    snprintf(m->fs, sizeof m->fs, "%s", name->fs);
    snprintf(m->hl, sizeof m->hl, "%s", name->hl);
    snprintf(m->ll, sizeof m->ll, "%s", name->ll);
    m->obj_type = name->objType;
    snprintf(m->node, sizeof m->node, "%s", s->node);
    snprintf(m->owner, sizeof m->owner, "%s", attr->owner);
    snprintf(m->mc, sizeof m->mc, "%s", attr->mcNameP && *attr->mcNameP ? attr->mcNameP : s->mc);
    if (snd != NULL && snd->descr != NULL)
        snprintf(m->descr, sizeof m->descr, "%s", snd->descr);
    m->objinfo_len = attr->objInfoLength;
    memcpy(m->objinfo, attr->objInfo, attr->objInfoLength);
    m->inserted = (long long)time(NULL);
}

API_EXPORT dsInt16_t dsmSendObj(dsUint32_t handle, dsmSendType type, void *sendBuff,
                                dsmObjName *name, ObjAttr *attr, DataBlk *blk)
{
    SESSION_OR_RETURN(s, handle);
    if (!s->in_txn || s->sending)
        return DSM_RC_BAD_CALL_SEQUENCE;
    if (!s->bound)
        return DSM_RC_NEEDTO_CALL_BINDMC;
    if (type != stArchive && type != stArchiveMountWait)
        return DSM_RC_INVALID_SENDTYPE;
    if (name == NULL)
        return DSM_RC_NULL_OBJNAME;
    if (attr == NULL)
        return DSM_RC_NULL_OBJATTRPTR;
    const sndArchiveData *snd = sendBuff;
    int rc = valid_name(name);
    if (rc == DSM_RC_OK)
        rc = check_attr(attr);
    if (rc == DSM_RC_OK && snd != NULL && snd->stVersion != SNDARCHIVE_VER)
        rc = DSM_RC_WRONG_VERSION_PARM;
    if (rc == DSM_RC_OK && s->nstaged >= MAX_STAGED)
        rc = DSM_RC_INVALID_PARM;
    if (rc == DSM_RC_OK)
        rc = injected(s);
    if (rc != DSM_RC_OK)
        return (dsInt16_t)rc;
    if (s->staged == NULL && (s->staged = calloc(MAX_STAGED, sizeof *s->staged)) == NULL)
        return DSM_RC_NO_MEMORY;
    staged_obj *st = &s->staged[s->nstaged];
    describe(&st->meta, s, name, attr, snd);
    snprintf(st->tmp, sizeof st->tmp, "%s/objects/tmp.%d.%u.%zu", s->conf.dir, (int)getpid(),
             handle, s->nstaged);
    s->send_fd = open(st->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (s->send_fd < 0)
        return DSM_RC_ABORT_SYSTEM_ERROR;
    s->nstaged++;
    s->sending = 1;
    if (blk != NULL && blk->numBytes > 0 && write_all(s->send_fd, blk->bufferPtr, blk->numBytes))
        return DSM_RC_ABORT_SYSTEM_ERROR;
    return DSM_RC_OK;
}

API_EXPORT dsInt16_t dsmSendData(dsUint32_t handle, DataBlk *blk)
{
    SESSION_OR_RETURN(s, handle);
    if (!s->sending)
        return DSM_RC_BAD_CALL_SEQUENCE;
    if (blk == NULL)
        return DSM_RC_NULL_DATABLKPTR;
    if (blk->numBytes > 0 && blk->bufferPtr == NULL)
        return DSM_RC_NULL_BUFPTR;
    if (write_all(s->send_fd, blk->bufferPtr, blk->numBytes) != 0)
        return DSM_RC_ABORT_SYSTEM_ERROR;
    return DSM_RC_OK;
}

static int finish_send(session *s, uint64_t *bytes)
{
    if (!s->sending)
        return DSM_RC_BAD_CALL_SEQUENCE;
    struct stat st;
    int failed = fstat(s->send_fd, &st) != 0;
    failed |= close(s->send_fd) != 0;
    s->send_fd = -1;
    s->sending = 0;
    s->bound = 0;
    if (failed)
        return DSM_RC_ABORT_SYSTEM_ERROR;
    s->staged[s->nstaged - 1].meta.size = (uint64_t)st.st_size;
    *bytes = (uint64_t)st.st_size;
    return DSM_RC_OK;
}

API_EXPORT dsInt16_t dsmEndSendObj(dsUint32_t handle)
{
    SESSION_OR_RETURN(s, handle);
    uint64_t bytes;
    return (dsInt16_t)finish_send(s, &bytes);
}

API_EXPORT dsInt16_t dsmEndSendObjEx(dsmEndSendObjExIn_t *in, dsmEndSendObjExOut_t *out)
{
    if (in == NULL || out == NULL)
        return DSM_RC_INVALID_PARM;
    if (in->stVersion != ENDSENDOBJEXIN_VER || out->stVersion != ENDSENDOBJEXOUT_VER)
        return DSM_RC_WRONG_VERSION_PARM;
    SESSION_OR_RETURN(s, in->dsmHandle);
    uint64_t bytes = 0;
    int rc = finish_send(s, &bytes);
    if (rc != DSM_RC_OK)
        return (dsInt16_t)rc;
    out->totalBytesSent = s64(bytes);
    out->objCompressed = bFalse;
    out->totalCompressSize = s64(0);
    out->totalLFBytesSent = s64(0);
    out->encryptionType = 0;
    out->objDeduplicated = bFalse;
    out->totalDedupSize = s64(0);
    return DSM_RC_OK;
}

API_EXPORT dsInt16_t dsmDeleteObj(dsUint32_t handle, dsmDelType type, dsmDelInfo info)
{
    SESSION_OR_RETURN(s, handle);
    if (!s->in_txn || s->sending)
        return DSM_RC_BAD_CALL_SEQUENCE;
    if (type != dtArchive)
        return DSM_RC_INVALID_PARAMETER;
    if (info.archInfo.stVersion != DELARCH_VER)
        return DSM_RC_WRONG_VERSION_PARM;
    if (s->ndels >= MAX_STAGED)
        return DSM_RC_INVALID_PARM;
    int rc = injected(s);
    if (rc != 0)
        return (dsInt16_t)rc;
    if (s->dels == NULL && (s->dels = calloc(MAX_STAGED, sizeof *s->dels)) == NULL)
        return DSM_RC_NO_MEMORY;
    s->dels[s->ndels++] = u64(info.archInfo.objId);
    return DSM_RC_OK;
}

/* The commit, under the catalog lock; *reason is the server's reason on an abort. */
static int commit(session *s, dsUint16_t *reason)
{
    int lock = server_lock(&s->conf);
    if (lock < 0)
        return DSM_RC_ABORT_SYSTEM_ERROR;
    char path[PATH_MAX + 64];
    for (size_t i = 0; i < s->ndels; i++) {
        object_path(&s->conf, s->dels[i], "meta", path, sizeof path);
        if (access(path, F_OK) != 0) {
            server_unlock(lock);
            abort_txn(s);
            *reason = DSM_RC_ABORT_NO_MATCH;
            return DSM_RC_CHECK_REASON_CODE;
        }
    }
    int rc = DSM_RC_OK;
    for (size_t i = 0; i < s->nstaged && rc == DSM_RC_OK; i++) {
        staged_obj *st = &s->staged[i];
        if (server_place(&s->conf, &st->meta) != 0)
            rc = DSM_RC_ABORT_SYSTEM_ERROR;
        object_path(&s->conf, st->meta.id, "data", path, sizeof path);
        if (rc == DSM_RC_OK && (rename(st->tmp, path) != 0 || meta_write(&s->conf, &st->meta)
                                || name_index_add(&s->conf, &st->meta) != 0))
            rc = DSM_RC_ABORT_SYSTEM_ERROR;
    }
    for (size_t i = 0; i < s->ndels && rc == DSM_RC_OK; i++) {
        obj_meta gone;
        if (meta_read(&s->conf, s->dels[i], &gone) == 0)
            name_index_remove(&s->conf, &gone);
        object_path(&s->conf, s->dels[i], "meta", path, sizeof path);
        unlink(path);
        object_path(&s->conf, s->dels[i], "data", path, sizeof path);
        unlink(path);
    }
    server_unlock(lock);
    s->nstaged = s->ndels = 0;
    s->in_txn = 0;
    return rc;
}

static int end_txn(session *s, unsigned vote, dsUint16_t *reason)
{
    *reason = 0;
    if (!s->in_txn)
        return DSM_RC_BAD_CALL_SEQUENCE;
    if (vote != 1 && vote != 2)
        return DSM_RC_INVALID_VOTE;
    if (vote == 2 || s->sending) {
        abort_txn(s);
        *reason = 3; /* aborted by the client */
        return DSM_RC_CHECK_REASON_CODE;
    }
    return commit(s, reason);
}

API_EXPORT dsInt16_t dsmEndTxn(dsUint32_t handle, dsUint8_t vote, dsUint16_t *reason)
{
    SESSION_OR_RETURN(s, handle);
    dsUint16_t ignored;
    return (dsInt16_t)end_txn(s, vote, reason != NULL ? reason : &ignored);
}

API_EXPORT dsInt16_t dsmEndTxnEx(dsmEndTxnExIn_t *in, dsmEndTxnExOut_t *out)
{
    if (in == NULL || out == NULL)
        return DSM_RC_INVALID_PARM;
    if (in->stVersion != ENDTXNEXIN_VER || out->stVersion != ENDTXNEXOUT_VER)
        return DSM_RC_WRONG_VERSION_PARM;
    SESSION_OR_RETURN(s, in->dsmHandle);
    out->groupLeaderObjId = s64(0);
    return (dsInt16_t)end_txn(s, in->vote, &out->reason);
}
