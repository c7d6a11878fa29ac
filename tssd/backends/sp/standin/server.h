/*
 * The stand-in's "server": a directory shared by every process and thread that opens the
 * library on it.
 *
 *   server.conf        settings (written by `python -m tssd.backends.sp.standin server`)
 *   lock               flock'ed while the catalog changes
 *   state              next object id, the volume being filled and its fill level
 *   objects/ID.data    an archive object's bytes; objects/ID.meta its attributes
 *   names/HASH.ID      one empty file per object: the index of exact names
 *   mp/N               mount point N (0 <= N < max_mount_points), flock'ed while held
 *   vol/V.lock         volume V, flock'ed by the one session that has it mounted
 *   faults/            one-shot markers of injected faults already spent
 *   positions.log      "read SESSION VOLUME POSITION OBJID" per object read
 *   mounts.log         "mount SESSION VOLUME" per mount
 */
#ifndef TSSD_STANDIN_SERVER_H
#define TSSD_STANDIN_SERVER_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "dsm_types.h"

#define MAX_TRANSIENT_CODES 16

typedef struct {
    char dir[PATH_MAX];
    uint64_t capacity_bytes;  /* per volume; volumes fill one after the other */
    unsigned max_mount_points;
    double mount_s;           /* robot, load and thread, already scaled */
    double unmount_s;         /* rewind and unload */
    double locate_base_s;     /* fixed part of any locate */
    double locate_full_s;     /* travel over a whole volume */
    double per_file_s;        /* per object read */
    double read_bytes_s;      /* 0: as fast as the disk */
    double transient_rate;    /* share of calls that fail with a transient code */
    int transient_codes[MAX_TRANSIENT_CODES];
    int n_transient_codes;
    long drop_after_objects;  /* a retrieve session is lost before its next object; -1: never */
    unsigned drop_sessions;   /* how many sessions are lost that way, over the server's life */
    unsigned seed;
} server_conf;

typedef struct {
    uint64_t id;
    char fs[MAX_FS + 1];
    char hl[MAX_HL + 1];
    char ll[MAX_LL + 1];
    unsigned obj_type;
    char node[MAX_OWNER + 1];
    char owner[MAX_OWNER + 1];
    char mc[MAX_MC + 1];
    char descr[MAX_DESCR + 1];
    uint64_t size;
    unsigned volume;
    uint64_t position;
    long long inserted;       /* seconds since the epoch */
    unsigned objinfo_len;
    unsigned char objinfo[MAX_EXT_OBJINFO];
} obj_meta;

/* Read the options file (SERVERDIR line) and the server's settings. */
int server_open(const char *options_path, server_conf *conf);

/* The catalog lock: every change of state, objects and volumes happens under it. */
int server_lock(const server_conf *conf);
void server_unlock(int fd);

/* Place an object of *size* bytes on the volume being filled: sets id, volume, position. */
int server_place(const server_conf *conf, obj_meta *meta);

int meta_write(const server_conf *conf, const obj_meta *meta);
int meta_read(const server_conf *conf, uint64_t id, obj_meta *meta);
/* All objects, sorted by id; *out is malloc'ed. With a name (no wildcards), only the
   objects of that name, found through the name index. */
int meta_list(const server_conf *conf, const dsmObjName *exact, obj_meta **out, size_t *count);
/* The name index: names/HASH.ID per object, so an exact query opens only its objects. */
int name_index_add(const server_conf *conf, const obj_meta *meta);
void name_index_remove(const server_conf *conf, const obj_meta *meta);
void object_path(const server_conf *conf, uint64_t id, const char *ext, char *buf, size_t len);

/* A mount point or volume lock: a held flock; -1 if none is free and wait is false. */
int acquire_mount_point(const server_conf *conf, int wait);
int acquire_volume(const server_conf *conf, unsigned volume, int wait);
void release(int fd);

/* Spend one of the server's lost-session faults; 1 if this session is to be dropped. */
int claim_drop(const server_conf *conf);

void log_line(const server_conf *conf, const char *file, const char *line);
void pause_s(double seconds);

#endif
