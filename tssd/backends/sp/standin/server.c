/* The stand-in's directory "server": settings, catalog, mount points and volumes. */
#define _GNU_SOURCE
#include "server.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dsm_rc.h"

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    size_t lead = strspn(s, " \t");
    memmove(s, s + lead, strlen(s + lead) + 1);
}

/* The SERVERDIR line of a dsm.opt-like options file. */
static int read_options(const char *path, char *dir, size_t len)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return DSM_RC_NO_API_CONFIGFILE;
    char line[PATH_MAX + 64];
    int found = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        trim(line);
        if (strncasecmp(line, "SERVERDIR", 9) == 0 && isspace((unsigned char)line[9])) {
            char *value = line + 10;
            trim(value);
            size_t n = strlen(value);
            if (n == 0 || n >= len)
                break;
            memcpy(dir, value, n + 1);
            found = 1;
        }
    }
    fclose(f);
    return found ? DSM_RC_OK : DSM_RC_NO_OPT_FILE;
}

static void parse_codes(server_conf *conf, char *value)
{
    conf->n_transient_codes = 0;
    char *save = NULL;
    for (char *tok = strtok_r(value, ", ", &save);
         tok != NULL && conf->n_transient_codes < MAX_TRANSIENT_CODES;
         tok = strtok_r(NULL, ", ", &save))
        conf->transient_codes[conf->n_transient_codes++] = atoi(tok);
}

static void set_key(server_conf *conf, const char *key, char *value)
{
    if (strcmp(key, "capacity_bytes") == 0)
        conf->capacity_bytes = strtoull(value, NULL, 10);
    else if (strcmp(key, "max_mount_points") == 0)
        conf->max_mount_points = (unsigned)strtoul(value, NULL, 10);
    else if (strcmp(key, "mount_s") == 0)
        conf->mount_s = strtod(value, NULL);
    else if (strcmp(key, "unmount_s") == 0)
        conf->unmount_s = strtod(value, NULL);
    else if (strcmp(key, "locate_base_s") == 0)
        conf->locate_base_s = strtod(value, NULL);
    else if (strcmp(key, "locate_full_s") == 0)
        conf->locate_full_s = strtod(value, NULL);
    else if (strcmp(key, "per_file_s") == 0)
        conf->per_file_s = strtod(value, NULL);
    else if (strcmp(key, "read_bytes_s") == 0)
        conf->read_bytes_s = strtod(value, NULL);
    else if (strcmp(key, "transient_rate") == 0)
        conf->transient_rate = strtod(value, NULL);
    else if (strcmp(key, "transient_codes") == 0)
        parse_codes(conf, value);
    else if (strcmp(key, "drop_after_objects") == 0)
        conf->drop_after_objects = strtol(value, NULL, 10);
    else if (strcmp(key, "drop_sessions") == 0)
        conf->drop_sessions = (unsigned)strtoul(value, NULL, 10);
    else if (strcmp(key, "seed") == 0)
        conf->seed = (unsigned)strtoul(value, NULL, 10);
}

int server_open(const char *options_path, server_conf *conf)
{
    memset(conf, 0, sizeof *conf);
    conf->capacity_bytes = 1ULL << 30;
    conf->max_mount_points = 1;
    conf->drop_after_objects = -1;
    conf->drop_sessions = 1;
    conf->transient_codes[0] = DSM_RC_ABORT_MOUNT_NOT_POSSIBLE;
    conf->n_transient_codes = 1;
    int rc = read_options(options_path, conf->dir, sizeof conf->dir);
    if (rc != DSM_RC_OK)
        return rc;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/server.conf", conf->dir);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return DSM_RC_NO_OPT_FILE;
    char line[512];
    while (fgets(line, sizeof line, f) != NULL) {
        char *eq = strchr(line, '=');
        if (line[0] == '#' || eq == NULL)
            continue;
        *eq = '\0';
        trim(line);
        trim(eq + 1);
        set_key(conf, line, eq + 1);
    }
    fclose(f);
    if (conf->max_mount_points == 0 || conf->capacity_bytes == 0)
        return DSM_RC_NO_OPT_FILE;
    static const char *subdirs[] = {"objects", "names", "mp", "vol", "faults"};
    for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", conf->dir, subdirs[i]);
        if (mkdir(path, 0700) != 0 && errno != EEXIST)
            return DSM_RC_NO_OPT_FILE;
    }
    return DSM_RC_OK;
}

static int open_in(const server_conf *conf, const char *name, int flags)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", conf->dir, name);
    return open(path, flags | O_CLOEXEC | O_NOFOLLOW, 0600);
}

int server_lock(const server_conf *conf)
{
    int fd = open_in(conf, "lock", O_RDWR | O_CREAT);
    if (fd >= 0 && flock(fd, LOCK_EX) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void server_unlock(int fd)
{
    if (fd >= 0)
        close(fd);
}

typedef struct {
    uint64_t next_id;
    unsigned volume;
    uint64_t used;
} fill_state;

static void state_read(const server_conf *conf, fill_state *st)
{
    st->next_id = 1;
    st->volume = 1;
    st->used = 0;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/state", conf->dir);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return;
    unsigned long long id, used;
    unsigned vol;
    if (fscanf(f, "%llu %u %llu", &id, &vol, &used) == 3) {
        st->next_id = id;
        st->volume = vol;
        st->used = used;
    }
    fclose(f);
}

static int state_write(const server_conf *conf, const fill_state *st)
{
    char tmp[PATH_MAX + 16], path[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s/state.tmp", conf->dir);
    snprintf(path, sizeof path, "%s/state", conf->dir);
    FILE *f = fopen(tmp, "we");
    if (f == NULL)
        return -1;
    fprintf(f, "%llu %u %llu\n", (unsigned long long)st->next_id, st->volume,
            (unsigned long long)st->used);
    if (fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

int server_place(const server_conf *conf, obj_meta *meta)
{
    fill_state st;
    state_read(conf, &st);
    if (st.used > 0 && st.used + meta->size > conf->capacity_bytes) {
        st.volume++;
        st.used = 0;
    }
    meta->id = st.next_id++;
    meta->volume = st.volume;
    meta->position = st.used;
    /* Every object takes at least a byte, so positions on a volume are distinct. */
    st.used += meta->size > 0 ? meta->size : 1;
    return state_write(conf, &st);
}

void object_path(const server_conf *conf, uint64_t id, const char *ext, char *buf, size_t len)
{
    snprintf(buf, len, "%s/objects/%llu.%s", conf->dir, (unsigned long long)id, ext);
}

static void put_text(FILE *f, const char *key, const char *value)
{
    fprintf(f, "%s=", key);
    for (const char *p = value; *p; p++)
        fputc(*p == '\n' ? ' ' : *p, f);
    fputc('\n', f);
}

int meta_write(const server_conf *conf, const obj_meta *m)
{
    char tmp[PATH_MAX + 64], path[PATH_MAX + 64];
    object_path(conf, m->id, "meta.tmp", tmp, sizeof tmp);
    object_path(conf, m->id, "meta", path, sizeof path);
    FILE *f = fopen(tmp, "we");
    if (f == NULL)
        return -1;
    put_text(f, "fs", m->fs);
    put_text(f, "hl", m->hl);
    put_text(f, "ll", m->ll);
    put_text(f, "node", m->node);
    put_text(f, "owner", m->owner);
    put_text(f, "mc", m->mc);
    put_text(f, "descr", m->descr);
    fprintf(f, "type=%u\nsize=%llu\nvolume=%u\nposition=%llu\ninserted=%lld\nobjinfo=",
            m->obj_type, (unsigned long long)m->size, m->volume,
            (unsigned long long)m->position, m->inserted);
    for (unsigned i = 0; i < m->objinfo_len; i++)
        fprintf(f, "%02x", m->objinfo[i]);
    fputc('\n', f);
    if (fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

static void copy_field(char *dst, size_t len, const char *value)
{
    snprintf(dst, len, "%s", value);
}

static void meta_set(obj_meta *m, const char *key, const char *value)
{
    if (strcmp(key, "fs") == 0)
        copy_field(m->fs, sizeof m->fs, value);
    else if (strcmp(key, "hl") == 0)
        copy_field(m->hl, sizeof m->hl, value);
    else if (strcmp(key, "ll") == 0)
        copy_field(m->ll, sizeof m->ll, value);
    else if (strcmp(key, "node") == 0)
        copy_field(m->node, sizeof m->node, value);
    else if (strcmp(key, "owner") == 0)
        copy_field(m->owner, sizeof m->owner, value);
    else if (strcmp(key, "mc") == 0)
        copy_field(m->mc, sizeof m->mc, value);
    else if (strcmp(key, "descr") == 0)
        copy_field(m->descr, sizeof m->descr, value);
    else if (strcmp(key, "type") == 0)
        m->obj_type = (unsigned)strtoul(value, NULL, 10);
    else if (strcmp(key, "size") == 0)
        m->size = strtoull(value, NULL, 10);
    else if (strcmp(key, "volume") == 0)
        m->volume = (unsigned)strtoul(value, NULL, 10);
    else if (strcmp(key, "position") == 0)
        m->position = strtoull(value, NULL, 10);
    else if (strcmp(key, "inserted") == 0)
        m->inserted = strtoll(value, NULL, 10);
    else if (strcmp(key, "objinfo") == 0) {
        size_t n = strlen(value) / 2;
        if (n > MAX_EXT_OBJINFO)
            n = MAX_EXT_OBJINFO;
        for (size_t i = 0; i < n; i++) {
            unsigned byte;
            if (sscanf(value + 2 * i, "%2x", &byte) != 1)
                break;
            m->objinfo[i] = (unsigned char)byte;
        }
        m->objinfo_len = (unsigned)n;
    }
}

int meta_read(const server_conf *conf, uint64_t id, obj_meta *m)
{
    char path[PATH_MAX + 64];
    object_path(conf, id, "meta", path, sizeof path);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    memset(m, 0, sizeof *m);
    m->id = id;
    /* A line holds at most the hex of the extended object info. */
    char line[2 * MAX_EXT_OBJINFO + 64];
    while (fgets(line, sizeof line, f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *eq = strchr(line, '=');
        if (eq == NULL)
            continue;
        *eq = '\0';
        meta_set(m, line, eq + 1);
    }
    fclose(f);
    return 0;
}

static int by_id(const void *a, const void *b)
{
    uint64_t x = ((const obj_meta *)a)->id, y = ((const obj_meta *)b)->id;
    return (x > y) - (x < y);
}

static uint64_t name_hash(const char *fs, const char *hl, const char *ll)
{
    /* FNV-1a over the three parts, each ended by a NUL so "/a" "/b" differs from "/a/b". */
    uint64_t h = 1469598103934665603ULL;
    const char *parts[] = {fs, hl, ll};
    for (size_t i = 0; i < 3; i++) {
        const char *p = parts[i];
        do {
            h ^= (unsigned char)*p;
            h *= 1099511628211ULL;
        } while (*p++ != '\0');
    }
    return h;
}

static void index_path(const server_conf *conf, const obj_meta *m, char *buf, size_t len)
{
    snprintf(buf, len, "%s/names/%016llx.%llu", conf->dir,
             (unsigned long long)name_hash(m->fs, m->hl, m->ll), (unsigned long long)m->id);
}

int name_index_add(const server_conf *conf, const obj_meta *meta)
{
    char path[PATH_MAX + 64];
    index_path(conf, meta, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

void name_index_remove(const server_conf *conf, const obj_meta *meta)
{
    char path[PATH_MAX + 64];
    index_path(conf, meta, path, sizeof path);
    unlink(path);
}

int meta_list(const server_conf *conf, const dsmObjName *exact, obj_meta **out, size_t *count)
{
    char path[PATH_MAX + 16];
    char prefix[24] = "";
    if (exact != NULL)
        snprintf(prefix, sizeof prefix, "%016llx.",
                 (unsigned long long)name_hash(exact->fs, exact->hl, exact->ll));
    snprintf(path, sizeof path, "%s/%s", conf->dir, exact != NULL ? "names" : "objects");
    DIR *d = opendir(path);
    *out = NULL;
    *count = 0;
    if (d == NULL)
        return -1;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *dot = strchr(e->d_name, '.');
        uint64_t id;
        if (exact != NULL) {
            if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
                continue;
            id = strtoull(e->d_name + strlen(prefix), NULL, 10);
        } else {
            if (dot == NULL || strcmp(dot, ".meta") != 0)
                continue;
            id = strtoull(e->d_name, NULL, 10);
        }
        if (*count == cap) {
            cap = cap ? cap * 2 : 64;
            obj_meta *grown = realloc(*out, cap * sizeof **out);
            if (grown == NULL) {
                closedir(d);
                return -1;
            }
            *out = grown;
        }
        obj_meta *m = &(*out)[*count];
        if (meta_read(conf, id, m) != 0)
            continue;
        if (exact == NULL || (strcmp(m->fs, exact->fs) == 0 && strcmp(m->hl, exact->hl) == 0
                              && strcmp(m->ll, exact->ll) == 0))
            (*count)++;
    }
    closedir(d);
    qsort(*out, *count, sizeof **out, by_id);
    return 0;
}

static int try_lock(const server_conf *conf, const char *name)
{
    int fd = open_in(conf, name, O_RDWR | O_CREAT);
    if (fd < 0)
        return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
        return fd;
    close(fd);
    return -1;
}

int acquire_mount_point(const server_conf *conf, int wait)
{
    char name[32];
    for (;;) {
        for (unsigned i = 0; i < conf->max_mount_points; i++) {
            snprintf(name, sizeof name, "mp/%u", i);
            int fd = try_lock(conf, name);
            if (fd >= 0)
                return fd;
        }
        if (!wait)
            return -1;
        pause_s(0.01);
    }
}

int acquire_volume(const server_conf *conf, unsigned volume, int wait)
{
    char name[32];
    snprintf(name, sizeof name, "vol/%u.lock", volume);
    for (;;) {
        int fd = try_lock(conf, name);
        if (fd >= 0 || !wait)
            return fd;
        pause_s(0.01);
    }
}

void release(int fd)
{
    if (fd >= 0)
        close(fd);
}

int claim_drop(const server_conf *conf)
{
    char name[32];
    for (unsigned i = 0; i < conf->drop_sessions; i++) {
        snprintf(name, sizeof name, "faults/drop.%u", i);
        int fd = open_in(conf, name, O_WRONLY | O_CREAT | O_EXCL);
        if (fd >= 0) {
            close(fd);
            return 1;
        }
    }
    return 0;
}

void log_line(const server_conf *conf, const char *file, const char *line)
{
    int fd = open_in(conf, file, O_WRONLY | O_CREAT | O_APPEND);
    if (fd < 0)
        return;
    /* One write per line: O_APPEND keeps lines of concurrent sessions whole. */
    ssize_t ignored = write(fd, line, strlen(line));
    (void)ignored;
    close(fd);
}

void pause_s(double seconds)
{
    if (seconds <= 0)
        return;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}
