/*
 * Retrieve: dsmBeginGetData takes a mount point (MAXNUMMP, shared by every process on the
 * server directory) and mounts the first object's volume; dsmGetObj mounts the next volume
 * when the list moves on, positions (a locate unless the object follows the last one read)
 * and logs the position; dsmGetData streams the bytes.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "session.h"

static unsigned long get_counter;

static int mount(session *s, unsigned volume, int wait)
{
    if (s->vol_fd >= 0 && s->volume == volume)
        return 0;
    if (s->vol_fd >= 0) {
        pause_s(s->conf.unmount_s);
        release(s->vol_fd);
        s->vol_fd = -1;
    }
    s->vol_fd = acquire_volume(&s->conf, volume, wait);
    if (s->vol_fd < 0)
        return -1;
    s->volume = volume;
    s->head = 0;
    pause_s(s->conf.mount_s);
    char line[96];
    snprintf(line, sizeof line, "mount %d.%lu %u\n", (int)getpid(), s->get_seq, volume);
    log_line(&s->conf, "mounts.log", line);
    return 0;
}

API_EXPORT dsInt16_t dsmBeginGetData(dsUint32_t handle, dsBool_t mountWait, dsmGetType type,
                                     dsmGetList *list)
{
    SESSION_OR_RETURN(s, handle);
    if (s->in_get || s->in_query || s->in_txn)
        return DSM_RC_BAD_CALL_SEQUENCE;
    if (type != gtArchive || list == NULL || list->objId == NULL || list->numObjId == 0)
        return DSM_RC_INVALID_PARM;
    if (list->stVersion != GETLIST_VER)
        return DSM_RC_WRONG_VERSION_PARM;
    if (list->numObjId > MAX_GET_OBJ)
        return DSM_RC_NUMOBJ_EXCEED;
    int rc = injected(s);
    if (rc != 0)
        return (dsInt16_t)rc;
    obj_meta first;
    for (dsUint32_t i = list->numObjId; i-- > 0;) {
        if (meta_read(&s->conf, u64(list->objId[i]), &first) != 0)
            return DSM_RC_OBJID_NOTFOUND;
    }
    s->ids = malloc(list->numObjId * sizeof *s->ids);
    if (s->ids == NULL)
        return DSM_RC_NO_MEMORY;
    memcpy(s->ids, list->objId, list->numObjId * sizeof *s->ids);
    s->nids = list->numObjId;
    s->next = 0;
    s->reads = 0;
    s->in_get = 1;
    s->mount_wait = mountWait != bFalse;
    s->drop_checked = 0;
    s->get_seq = __atomic_add_fetch(&get_counter, 1, __ATOMIC_SEQ_CST);
    s->mp_fd = acquire_mount_point(&s->conf, s->mount_wait);
    if (s->mp_fd < 0) {
        end_get(s);
        return DSM_RC_ABORT_EXCEED_MAX_MP;
    }
    if (mount(s, first.volume, s->mount_wait) != 0) {
        end_get(s);
        return DSM_RC_ABORT_MOUNT_NOT_POSSIBLE;
    }
    return DSM_RC_OK;
}

/* The injected lost session: once this retrieve has read drop_after_objects objects. */
static int dropped(session *s)
{
    if (s->conf.drop_after_objects < 0 || s->reads < s->conf.drop_after_objects
        || s->drop_checked)
        return 0;
    s->drop_checked = 1;
    if (!claim_drop(&s->conf))
        return 0;
    end_get(s);
    s->dead = 1;
    return 1;
}

static dsInt16_t read_some(session *s, DataBlk *blk)
{
    if (blk == NULL)
        return DSM_RC_NULL_DATABLKPTR;
    if (blk->bufferPtr == NULL)
        return DSM_RC_NULL_BUFPTR;
    if (blk->bufferLen == 0)
        return DSM_RC_ZERO_BUFLEN;
    uint64_t want = s->left < blk->bufferLen ? s->left : blk->bufferLen;
    uint64_t got = 0;
    while (got < want) {
        ssize_t n = read(s->obj_fd, blk->bufferPtr + got, want - got);
        if (n <= 0)
            return DSM_RC_ABORT_SYSTEM_ERROR;
        got += (uint64_t)n;
    }
    blk->numBytes = (dsUint32_t)got;
    s->left -= got;
    if (s->conf.read_bytes_s > 0)
        pause_s((double)got / s->conf.read_bytes_s);
    return s->left == 0 ? DSM_RC_FINISHED : DSM_RC_MORE_DATA;
}

static void locate(session *s, const obj_meta *m)
{
    if (m->position != s->head) {
        uint64_t distance = m->position > s->head ? m->position - s->head : s->head - m->position;
        pause_s(s->conf.locate_base_s
                + s->conf.locate_full_s * (double)distance / (double)s->conf.capacity_bytes);
    }
    pause_s(s->conf.per_file_s);
    char line[128];
    snprintf(line, sizeof line, "read %d.%lu %u %llu %llu\n", (int)getpid(), s->get_seq,
             m->volume, (unsigned long long)m->position, (unsigned long long)m->id);
    log_line(&s->conf, "positions.log", line);
}

API_EXPORT dsInt16_t dsmGetObj(dsUint32_t handle, ObjID *objId, DataBlk *blk)
{
    SESSION_OR_RETURN(s, handle);
    if (!s->in_get || s->obj_fd >= 0)
        return DSM_RC_BAD_CALL_SEQUENCE;
    if (objId == NULL)
        return DSM_RC_INVALID_PARM;
    if (blk == NULL)
        return DSM_RC_NULL_DATABLKPTR;
    if (blk->stVersion != DATABLK_VER)
        return DSM_RC_WRONG_VERSION_PARM;
    /* Objects come in the order of the list; the caller may skip some, never go back. */
    size_t at = s->next;
    while (at < s->nids && u64(s->ids[at]) != u64(*objId))
        at++;
    if (at == s->nids)
        return DSM_RC_OBJID_NOTFOUND;
    if (dropped(s))
        return DSM_RC_TCPIP_FAILURE;
    if (meta_read(&s->conf, u64(*objId), &s->cur) != 0)
        return DSM_RC_OBJID_NOTFOUND;
    if (mount(s, s->cur.volume, s->mount_wait) != 0)
        return DSM_RC_ABORT_MOUNT_NOT_POSSIBLE;
    char path[PATH_MAX + 64];
    object_path(&s->conf, s->cur.id, "data", path, sizeof path);
    s->obj_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (s->obj_fd < 0)
        return DSM_RC_ABORT_SYSTEM_ERROR;
    locate(s, &s->cur);
    s->next = at + 1;
    s->left = s->cur.size;
    s->reads++;
    return read_some(s, blk);
}

API_EXPORT dsInt16_t dsmGetData(dsUint32_t handle, DataBlk *blk)
{
    SESSION_OR_RETURN(s, handle);
    if (s->obj_fd < 0)
        return DSM_RC_BAD_CALL_SEQUENCE;
    if (s->left == 0) {
        blk->numBytes = 0;
        return DSM_RC_FINISHED;
    }
    return read_some(s, blk);
}

API_EXPORT dsInt16_t dsmEndGetObj(dsUint32_t handle)
{
    SESSION_OR_RETURN(s, handle);
    if (s->obj_fd < 0)
        return DSM_RC_BAD_CALL_SEQUENCE;
    close(s->obj_fd);
    s->obj_fd = -1;
    s->head = s->cur.position + (s->cur.size > 0 ? s->cur.size : 1);
    return DSM_RC_OK;
}

API_EXPORT dsInt16_t dsmEndGetData(dsUint32_t handle)
{
    SESSION_OR_RETURN(s, handle);
    if (!s->in_get)
        return DSM_RC_BAD_CALL_SEQUENCE;
    end_get(s);
    return DSM_RC_OK;
}
