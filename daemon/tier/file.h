/* file.h: the file tier of one pool: a directory of unit files that outlives the daemon. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_TIER_FILE_H
#define PAGED_DAEMON_TIER_FILE_H

/*
 * One file per unit (one published block, every layer's keys then values gathered into
 * unit_bytes contiguous bytes), in DIR/POOLDIR/ where DIR is paged.conf's file-tier and
 * POOLDIR is the owner's uid and the pool's name ("1000-llama"; see pt_file_open). A file
 * is a fixed header (magic, format version, the pool's geometry, tenant, hash, the payload's
 * length and its XXH3-64 checksum, and the header's own checksum) followed by the payload.
 * It is written under a temporary name and renamed into place, so a file that has its final
 * name was complete when written; pt_file_get checks length and checksum anyway (a disk or
 * a person may damage it later) and drops a file that fails, never returning its bytes.
 * The index (which units exist, LRU by last write or read) lives in memory; pt_file_open
 * rebuilds it from the directory, oldest modification time first.
 *
 * No locks; the caller serializes. I/O is synchronous.
 */

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "paged.h"

typedef struct pt_file pt_file;

/* The pool geometry a unit file must match to be adopted. */
typedef struct pt_geom {
    uint32_t num_layers, num_kv_heads, head_dim, block_size;
    int32_t dtype;
    float k_scale, v_scale;
    uint64_t unit_bytes;        /* num_layers * 2 * num_kv_heads * block_size * head_dim * element size */
} pt_geom;

/* Called for each unit file removed to keep the tier within its capacity (pt_file_put) or
 * found damaged (pt_file_get, pt_file_open); it must not call back into this pt_file. */
typedef void pt_file_out_fn(void *ctx, uint32_t tenant, const paged_hash *hash);

/*
 * Opens the tier of pool name of owner uid under dir: creates DIR/UID-NAME (mode 0700; dir
 * itself must exist) or scans it, adopting each unit file whose header is whole, checks out
 * and matches g and whose size is the header's plus unit_bytes, and deleting every other
 * file there (counted in *dropped if not NULL; temporary files of an interrupted write among
 * them). capacity_bytes bounds the bytes of unit files kept (0: no bound); the oldest beyond
 * it are deleted (not counted in *dropped). Returns the tier, or NULL with why
 * (NUL-terminated, naming the path and the system's error) and errno set (EINVAL: a name
 * not of 1 to 200 of [A-Za-z0-9._-], or a unit_bytes of 0).
 */
pt_file *pt_file_open(const char *dir, uint32_t uid, const char *name, const pt_geom *g,
                      uint64_t capacity_bytes, uint32_t *dropped, char *why, size_t whylen);
/* Frees the index, keeping the files (a daemon that stops). NULL is ignored. */
void pt_file_close(pt_file *f);
/* Deletes every unit file and the pool's directory, then frees the index (a pool
 * destroyed). NULL is ignored. */
void pt_file_purge(pt_file *f);

/* Returns whether (tenant, hash) has a unit file. */
int pt_file_has(const pt_file *f, uint32_t tenant, const paged_hash *hash);

/*
 * Writes unit (unit_bytes) as the file of (tenant, hash), replacing one there, then deletes
 * the least recently used files while the tier is over its capacity (never the one just
 * written), calling out for each. Returns 0, or PAGED_E_SYSTEM (why: the path and error; the
 * tier as it was, no partial file left), PAGED_E_NOSPC (one unit exceeds the capacity) or
 * PAGED_E_NOMEM (the index cannot grow; nothing written).
 */
int pt_file_put(pt_file *f, uint32_t tenant, const paged_hash *hash, const void *unit,
                pt_file_out_fn *out, void *ctx, char *why, size_t whylen);

/*
 * As pt_file_put, the file's modification time set to mtime (NULL: the time of the write),
 * which places it in the LRU order that the next pt_file_open rebuilds (this tier's index puts
 * it at the most recent end either way). Returns as pt_file_put does.
 */
int pt_file_put_dated(pt_file *f, uint32_t tenant, const paged_hash *hash, const void *unit,
                      const struct timespec *mtime, pt_file_out_fn *out, void *ctx, char *why, size_t whylen);

/*
 * Reads the unit of (tenant, hash) into buf (unit_bytes), checking the header against the
 * geometry, tenant and hash, the length and the checksum, and marks it most recently used.
 * Returns 0, or PAGED_E_NOENT (no such unit); for a file that is
 * missing, short, or fails a check, deletes it, drops it from the index, calls out, and
 * returns PAGED_E_PROTO with why naming the file and what failed ("checksum mismatch",
 * "truncated: 1000 of 1064 bytes"). A file that cannot be opened for a reason of the
 * system's (EMFILE, EACCES) stays, and the call returns PAGED_E_SYSTEM with why. buf's
 * contents are unspecified after an error.
 */
int pt_file_get(pt_file *f, uint32_t tenant, const paged_hash *hash, void *buf,
                pt_file_out_fn *out, void *ctx, char *why, size_t whylen);

/* Deletes the unit file of (tenant, hash). Returns 1 if there was one, 0 if not. */
int pt_file_remove(pt_file *f, uint32_t tenant, const paged_hash *hash);

/* Counts. */
typedef struct pt_file_counts {
    uint32_t units;             /* unit files indexed */
    uint64_t bytes;             /* their size on disk, headers included */
    uint64_t capacity_bytes;    /* 0: no bound */
} pt_file_counts;
/* Fills *out. */
void pt_file_get_counts(const pt_file *f, pt_file_counts *out);

/* Returns the size of a unit file's header in bytes (a file is this plus unit_bytes). */
size_t pt_file_header_bytes(void);

#endif
