/*
 * The stand-in's sessions: set-up, sign-on and sign-off, dsmRegisterFS and dsmRCMsg (the
 * query, retrieve and store calls are in api_query.c, api_get.c and api_send.c). One
 * session per thread (DSM_MULTITHREAD); the session table itself is shared and guarded.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dsm_rc.h"
#include "dsm_types.h"
#include "server.h"
#include "session.h"

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static session *table[MAX_SESSIONS];

session *lookup(dsUint32_t handle)
{
    if (handle == 0 || handle > MAX_SESSIONS)
        return NULL;
    pthread_mutex_lock(&table_lock);
    session *s = table[handle - 1];
    pthread_mutex_unlock(&table_lock);
    return s;
}

/* A transient fault at the configured rate, drawn from the configured codes. */
int injected(session *s)
{
    if (s->conf.transient_rate <= 0 || s->conf.n_transient_codes == 0)
        return 0;
    double draw = (double)rand_r(&s->rng) / ((double)RAND_MAX + 1.0);
    if (draw >= s->conf.transient_rate)
        return 0;
    return s->conf.transient_codes[rand_r(&s->rng) % (unsigned)s->conf.n_transient_codes];
}

void end_get(session *s)
{
    if (s->obj_fd >= 0)
        close(s->obj_fd);
    if (s->vol_fd >= 0)
        pause_s(s->conf.unmount_s);
    release(s->vol_fd);
    release(s->mp_fd);
    s->obj_fd = s->vol_fd = s->mp_fd = -1;
    s->volume = 0;
    free(s->ids);
    s->ids = NULL;
    s->in_get = 0;
}

void abort_txn(session *s)
{
    if (s->send_fd >= 0)
        close(s->send_fd);
    s->send_fd = -1;
    for (size_t i = 0; i < s->nstaged; i++)
        unlink(s->staged[i].tmp);
    s->nstaged = s->ndels = 0;
    s->in_txn = s->bound = s->sending = 0;
}

API_EXPORT void dsmQueryApiVersionEx(dsmApiVersionEx *v)
{
    if (v == NULL)
        return;
    v->version = 8;
    v->release = 1;
    v->level = 0;
    v->subLevel = 0;
    v->unicode = bFalse;
}

API_EXPORT dsInt16_t dsmSetUp(dsBool_t mtFlag, envSetUp *env)
{
    (void)mtFlag;
    (void)env;
    return DSM_RC_OK;
}

API_EXPORT dsInt16_t dsmCleanUp(dsBool_t mtFlag)
{
    (void)mtFlag;
    return DSM_RC_OK;
}

static int new_session(session **out, dsUint32_t *handle)
{
    session *s = calloc(1, sizeof *s);
    if (s == NULL)
        return DSM_RC_NO_MEMORY;
    s->mp_fd = s->vol_fd = s->obj_fd = s->send_fd = -1;
    pthread_mutex_lock(&table_lock);
    for (dsUint32_t i = 0; i < MAX_SESSIONS; i++) {
        if (table[i] == NULL) {
            table[i] = s;
            *handle = i + 1;
            pthread_mutex_unlock(&table_lock);
            *out = s;
            return DSM_RC_OK;
        }
    }
    pthread_mutex_unlock(&table_lock);
    free(s);
    return DSM_RC_REJECT_NO_RESOURCES;
}

API_EXPORT dsInt16_t dsmInitEx(dsUint32_t *handleP, dsmInitExIn_t *in, dsmInitExOut_t *out)
{
    if (handleP == NULL || in == NULL || out == NULL)
        return DSM_RC_INVALID_PARM;
    *handleP = 0;
    if (in->stVersion != INITEXIN_VER || out->stVersion != INITEXOUT_VER)
        return DSM_RC_WRONG_VERSION_PARM;
    const char *options = in->configfile && *in->configfile ? in->configfile : getenv("DSMI_CONFIG");
    if (options == NULL)
        return DSM_RC_NO_API_CONFIGFILE;
    session *s;
    dsUint32_t handle;
    int rc = new_session(&s, &handle);
    if (rc != DSM_RC_OK)
        return rc;
    const char *node = in->clientNodeNameP && *in->clientNodeNameP ? in->clientNodeNameP : "TSSD";
    size_t i = 0;
    for (; node[i] != '\0' && i < sizeof s->node - 1; i++)
        s->node[i] = (char)toupper((unsigned char)node[i]);
    s->node[i] = '\0';
    rc = server_open(options, &s->conf);
    /* Handles are reused: the count of sign-ons keeps a reconnecting client's draws new. */
    static unsigned sign_ons;
    unsigned nth = __atomic_add_fetch(&sign_ons, 1, __ATOMIC_SEQ_CST);
    s->rng = s->conf.seed ^ ((unsigned)getpid() << 8) ^ handle ^ (nth * 2654435761u);
    if (rc == DSM_RC_OK)
        rc = injected(s);
    out->userNameAuthorities = 0;
    out->infoRC = 0;
    snprintf(out->adsmServerName, sizeof out->adsmServerName, "STANDIN");
    out->serverVer = 8;
    out->serverRel = 1;
    out->serverLev = 0;
    out->serverSubLev = 0;
    out->bIsFailOverMode = bFalse;
    *handleP = handle;
    /* As the real library: a failed sign-on still gives a handle to dsmTerminate. */
    return (dsInt16_t)rc;
}

API_EXPORT dsInt16_t dsmTerminate(dsUint32_t handle)
{
    session *s = lookup(handle);
    if (s == NULL)
        return DSM_RC_INVALID_DS_HANDLE;
    end_get(s);
    abort_txn(s);
    free(s->q);
    free(s->staged);
    free(s->dels);
    pthread_mutex_lock(&table_lock);
    table[handle - 1] = NULL;
    pthread_mutex_unlock(&table_lock);
    free(s);
    return DSM_RC_OK;
}

API_EXPORT dsInt16_t dsmRegisterFS(dsUint32_t handle, regFSData *fs)
{
    SESSION_OR_RETURN(s, handle);
    if (fs == NULL || fs->fsName == NULL)
        return DSM_RC_INVALID_PARM;
    if (fs->stVersion != REGFS_VER)
        return DSM_RC_WRONG_VERSION_PARM;
    if (fs->fsName[0] != '/')
        return DSM_RC_INVALID_FSNAME;
    /* Filespaces exist as soon as an object names them; registering again is the
       documented "already registered", which callers treat as success. */
    return DSM_RC_OK;
}

static const struct { int rc; const char *text; } messages[] = {
#define RC_TEXT(name, value, text) {value, text},
    DSM_RC_LIST(RC_TEXT)
#undef RC_TEXT
};

API_EXPORT dsInt16_t dsmRCMsg(dsUint32_t handle, dsInt16_t rc, char *msg)
{
    (void)handle;
    if (msg == NULL)
        return DSM_RC_NULL_MSG;
    for (size_t i = 0; i < sizeof messages / sizeof messages[0]; i++) {
        if (messages[i].rc == rc) {
            snprintf(msg, MAX_RC_MSG, "ANS%04dE (RC%d) stand-in: %s", rc < 0 ? -rc : rc, rc,
                     messages[i].text);
            return DSM_RC_OK;
        }
    }
    snprintf(msg, MAX_RC_MSG, "ANS0999E (RC%d) stand-in: unknown return code", rc);
    return DSM_RC_OK;
}

