/* The archive query: dsmBeginQuery(qtArchive), dsmGetNextQObj, dsmEndQuery. */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "session.h"

static int matches(const char *pattern, const char *value)
{
    return pattern == NULL || *pattern == '\0' || fnmatch(pattern, value, 0) == 0;
}

static int wildcard(const char *part)
{
    return *part == '\0' || strpbrk(part, "*?[") != NULL;
}

API_EXPORT dsInt16_t dsmBeginQuery(dsUint32_t handle, dsmQueryType type, void *buff)
{
    SESSION_OR_RETURN(s, handle);
    if (s->in_query || s->in_get || s->in_txn)
        return DSM_RC_BAD_CALL_SEQUENCE;
    if (type != qtArchive)
        return DSM_RC_INVALID_PARAMETER;
    qryArchiveData *qd = buff;
    if (qd == NULL || qd->objName == NULL)
        return DSM_RC_NULL_OBJNAME;
    if (qd->stVersion != QRYARCHIVE_VER)
        return DSM_RC_WRONG_VERSION_PARM;
    int rc = injected(s);
    if (rc != 0)
        return (dsInt16_t)rc;
    obj_meta *all;
    size_t n;
    const dsmObjName *exact = wildcard(qd->objName->hl) || wildcard(qd->objName->ll) ? NULL
                                                                                 : qd->objName;
    if (meta_list(&s->conf, exact, &all, &n) != 0)
        return DSM_RC_ABORT_SYSTEM_ERROR;
    const dsmObjName *name = qd->objName;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        const obj_meta *m = &all[i];
        if (strcmp(name->fs, m->fs) == 0 && matches(name->hl, m->hl) && matches(name->ll, m->ll)
            && matches(qd->descr, m->descr))
            all[kept++] = all[i];
    }
    s->q = all;
    s->qn = kept;
    s->qi = 0;
    s->in_query = 1;
    return DSM_RC_OK;
}

static void to_date(long long epoch, dsmDate *d)
{
    time_t t = (time_t)epoch;
    struct tm tm;
    gmtime_r(&t, &tm);
    d->year = (dsUint16_t)(tm.tm_year + 1900);
    d->month = (dsUint8_t)(tm.tm_mon + 1);
    d->day = (dsUint8_t)tm.tm_mday;
    d->hour = (dsUint8_t)tm.tm_hour;
    d->minute = (dsUint8_t)tm.tm_min;
    d->second = (dsUint8_t)tm.tm_sec;
}

static void fill_answer(const obj_meta *m, qryRespArchiveData *r)
{
    dsUint16_t version = r->stVersion;
    memset(r, 0, sizeof *r);
    r->stVersion = version;
    snprintf(r->objName.fs, sizeof r->objName.fs, "%s", m->fs);
    snprintf(r->objName.hl, sizeof r->objName.hl, "%s", m->hl);
    snprintf(r->objName.ll, sizeof r->objName.ll, "%s", m->ll);
    r->objName.objType = (dsUint8_t)m->obj_type;
    r->copyGroup = 1;
    snprintf(r->mcName, sizeof r->mcName, "%s", m->mc);
    snprintf(r->owner, sizeof r->owner, "%s", m->owner);
    r->objId = s64(m->id);
    r->mediaClass = 0x20; /* library: every object sits on a tape volume */
    to_date(m->inserted, &r->insDate);
    r->expDate.year = 0xFFFF;
    snprintf(r->descr, sizeof r->descr, "%s", m->descr);
    r->objInfolen = (dsUint16_t)m->objinfo_len;
    memcpy(r->objInfo, m->objinfo, m->objinfo_len);
    r->restoreOrderExt.top = m->volume;
    r->restoreOrderExt.lo_hi = (dsUint32_t)(m->position >> 32);
    r->restoreOrderExt.lo_lo = (dsUint32_t)m->position;
    r->sizeEstimate = s64(m->size);
    r->retentionInitiated = 1;
    r->objHeld = 1;
}

API_EXPORT dsInt16_t dsmGetNextQObj(dsUint32_t handle, DataBlk *blk)
{
    SESSION_OR_RETURN(s, handle);
    if (!s->in_query)
        return DSM_RC_BAD_CALL_SEQUENCE;
    if (blk == NULL)
        return DSM_RC_NULL_DATABLKPTR;
    if (blk->stVersion != DATABLK_VER)
        return DSM_RC_WRONG_VERSION_PARM;
    if (blk->bufferPtr == NULL)
        return DSM_RC_NULL_BUFPTR;
    if (blk->bufferLen < sizeof(qryRespArchiveData))
        return DSM_RC_BUFF_TOO_SMALL;
    qryRespArchiveData *r = (qryRespArchiveData *)blk->bufferPtr;
    if (r->stVersion != QRYRESPARCHIVE_VER)
        return DSM_RC_WRONG_VERSION_PARM;
    blk->numBytes = 0;
    if (s->qn == 0)
        return DSM_RC_ABORT_NO_MATCH;
    if (s->qi >= s->qn)
        return DSM_RC_FINISHED;
    fill_answer(&s->q[s->qi++], r);
    blk->numBytes = sizeof *r;
    return DSM_RC_MORE_DATA;
}

API_EXPORT dsInt16_t dsmEndQuery(dsUint32_t handle)
{
    SESSION_OR_RETURN(s, handle);
    if (!s->in_query)
        return DSM_RC_BAD_CALL_SEQUENCE;
    free(s->q);
    s->q = NULL;
    s->qn = s->qi = 0;
    s->in_query = 0;
    return DSM_RC_OK;
}
