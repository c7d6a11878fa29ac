/* A stand-in session: the state of one dsmInitEx handle, used by one thread at a time. */
#ifndef TSSD_STANDIN_SESSION_H
#define TSSD_STANDIN_SESSION_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "dsm_rc.h"
#include "dsm_types.h"
#include "server.h"

#define API_EXPORT __attribute__((visibility("default")))
#define MAX_SESSIONS 256
#define MAX_STAGED 4096

typedef struct {
    obj_meta meta;
    char tmp[PATH_MAX + 64];
} staged_obj;

typedef struct {
    int dead;                 /* lost: every call but dsmTerminate fails */
    server_conf conf;
    char node[MAX_OWNER + 1]; /* the signed-on node, upper case as SP keeps it */
    unsigned rng;
    /* query */
    obj_meta *q;
    size_t qn, qi;
    int in_query;
    /* transaction */
    int in_txn, bound, sending, send_fd;
    char mc[MAX_MC + 1];
    staged_obj *staged;
    size_t nstaged;
    uint64_t *dels;
    size_t ndels;
    /* retrieve */
    int in_get;
    ObjID *ids;
    size_t nids, next;
    int mp_fd, vol_fd, obj_fd;
    unsigned volume;
    uint64_t head, left;
    obj_meta cur;
    unsigned long get_seq;
    long reads;
    int mount_wait, drop_checked;
} session;

static inline uint64_t u64(dsStruct64_t v) { return ((uint64_t)v.hi << 32) | v.lo; }
static inline dsStruct64_t s64(uint64_t v) { return (dsStruct64_t){(dsUint32_t)(v >> 32), (dsUint32_t)v}; }

/* Resolve a handle for an API call: unknown handles and lost sessions fail here. */
#define SESSION_OR_RETURN(s, handle)                  \
    session *s = lookup(handle);                      \
    if (s == NULL)                                    \
        return DSM_RC_INVALID_DS_HANDLE;              \
    if (s->dead)                                      \
        return DSM_RC_TCPIP_FAILURE;

session *lookup(dsUint32_t handle);
/* A transient fault at the configured rate (0: none), drawn from the configured codes. */
int injected(session *s);
void end_get(session *s);
void abort_txn(session *s);

#endif
