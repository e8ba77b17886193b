/* file.c: the file tier of one pool: a directory of unit files, their index in memory, LRU. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/tier/file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "daemon/tier/keymap.h"
#include "daemon/util/heap.h"

#define UNIT_MAGIC "PAGEDKV1"
#define UNIT_VERSION 1u
#define UNIT_SUFFIX ".unit"
#define TMP_TEMPLATE ".tmp-XXXXXX"
/* "TTTTTTTT-HHHHHHHHHHHHHHHHLLLLLLLLLLLLLLLL.unit": tenant, hash hi, hash lo in hex. */
#define UNIT_NAME_LEN (8 + 1 + 32 + sizeof UNIT_SUFFIX - 1)
/* The longest pool name: the directory "UID-NAME" must fit a file name (255 bytes). */
#define POOL_NAME_MAX 200
#define NONE PT_KEYMAP_EMPTY  /* no entry, in the index and in links alike */

/*
 * A unit file's header. Fixed-width fields in the machine's byte order, which is
 * little-endian on every machine paged runs on (a file written in the other order fails the
 * version check and is dropped). No padding: every field sits at a multiple of its size.
 */
typedef struct unit_header {
    char magic[8];             /* UNIT_MAGIC, no NUL */
    uint32_t version;          /* UNIT_VERSION */
    uint32_t header_bytes;     /* sizeof (unit_header) */
    uint32_t num_layers, num_kv_heads, head_dim, block_size;
    int32_t dtype;
    uint32_t k_scale_bits, v_scale_bits; /* the floats' bit patterns */
    uint32_t tenant;
    uint64_t unit_bytes;       /* the payload's length */
    uint64_t hash_lo, hash_hi;
    uint64_t payload_xxh3;     /* XXH3-64 of the payload */
    uint64_t header_xxh3;      /* XXH3-64 of every byte above */
} unit_header;
_Static_assert(sizeof (unit_header) == 88, "unit_header has no padding");
_Static_assert(offsetof(unit_header, header_xxh3) == 80, "header_xxh3 ends the header");

/* One indexed unit file: its key and its links (LRU, or the free list through next). */
typedef struct file_entry {
    paged_hash hash;
    uint32_t tenant;
    uint32_t prev, next;
} file_entry;

struct pt_file {
    int dirfd;                 /* the pool's directory */
    char *path;                /* DIR/UID-NAME, for messages and temporary names */
    pt_geom geom;
    uint64_t file_bytes;       /* a unit file's size: header and payload */
    uint64_t capacity_bytes;
    uint64_t bytes;
    pt_keymap index;           /* (tenant, hash) -> entry */
    file_entry *entries;
    uint32_t nalloc, count;
    uint32_t free_head;
    uint32_t lru_head, lru_tail; /* head: the least recently used */
};

/* Writes a message to why (when not NULL and not empty); returns nothing. */
__attribute__((format(printf, 3, 4)))
static void set_why(char *why, size_t whylen, const char *fmt, ...)
{
    if (why == NULL || whylen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

/* Returns a float's bit pattern. */
static uint32_t float_bits(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    return bits;
}

/* Writes the file name of (tenant, hash) to name (UNIT_NAME_LEN + 1 bytes); returns
 * nothing. */
static void unit_name(char *name, uint32_t tenant, const paged_hash *hash)
{
    snprintf(name, UNIT_NAME_LEN + 1, "%08" PRIx32 "-%016" PRIx64 "%016" PRIx64 UNIT_SUFFIX, tenant,
             hash->hi, hash->lo);
}

/* Parses n lowercase hex digits at s into *v; returns whether they were all such digits. */
static int parse_hex(const char *s, size_t n, uint64_t *v)
{
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned) (c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (unsigned) (c - 'a' + 10);
        else
            return 0;
        *v = *v << 4 | d;
    }
    return 1;
}

/* Parses a unit file's name into its key; returns whether name is one (exactly as
 * unit_name writes it). */
static int parse_unit_name(const char *name, uint32_t *tenant, paged_hash *hash)
{
    uint64_t t;
    if (strlen(name) != UNIT_NAME_LEN || name[8] != '-' || strcmp(name + 41, UNIT_SUFFIX) != 0)
        return 0;
    if (!parse_hex(name, 8, &t) || !parse_hex(name + 9, 16, &hash->hi) || !parse_hex(name + 25, 16, &hash->lo))
        return 0;
    *tenant = (uint32_t) t;
    return 1;
}

/* Returns whether a pool name is one the tier's directory can carry: 1 to POOL_NAME_MAX of
 * [A-Za-z0-9._-]. */
static int pool_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > POOL_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                 c == '_' || c == '-';
        if (!ok)
            return 0;
    }
    return 1;
}

/* Fills *h for the unit of (tenant, hash) whose payload is unit; returns nothing. */
static void fill_header(unit_header *h, const pt_file *f, uint32_t tenant, const paged_hash *hash, const void *unit)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, UNIT_MAGIC, sizeof h->magic);
    h->version = UNIT_VERSION;
    h->header_bytes = sizeof *h;
    h->num_layers = f->geom.num_layers;
    h->num_kv_heads = f->geom.num_kv_heads;
    h->head_dim = f->geom.head_dim;
    h->block_size = f->geom.block_size;
    h->dtype = f->geom.dtype;
    h->k_scale_bits = float_bits(f->geom.k_scale);
    h->v_scale_bits = float_bits(f->geom.v_scale);
    h->tenant = tenant;
    h->unit_bytes = f->geom.unit_bytes;
    h->hash_lo = hash->lo;
    h->hash_hi = hash->hi;
    h->payload_xxh3 = XXH3_64bits(unit, (size_t) f->geom.unit_bytes);
    h->header_xxh3 = XXH3_64bits(h, offsetof(unit_header, header_xxh3));
}

/* Checks a header read from the file of (tenant, hash) against f's geometry and that key;
 * returns NULL or what failed. */
static const char *check_header(const unit_header *h, const pt_file *f, uint32_t tenant, const paged_hash *hash)
{
    if (memcmp(h->magic, UNIT_MAGIC, sizeof h->magic) != 0)
        return "not a unit file (bad magic)";
    if (h->version != UNIT_VERSION)
        return "unknown format version";
    if (h->header_bytes != sizeof *h)
        return "header size mismatch";
    if (h->header_xxh3 != XXH3_64bits(h, offsetof(unit_header, header_xxh3)))
        return "header checksum mismatch";
    const pt_geom *g = &f->geom;
    if (h->num_layers != g->num_layers || h->num_kv_heads != g->num_kv_heads || h->head_dim != g->head_dim ||
        h->block_size != g->block_size || h->dtype != g->dtype || h->k_scale_bits != float_bits(g->k_scale) ||
        h->v_scale_bits != float_bits(g->v_scale) || h->unit_bytes != g->unit_bytes)
        return "geometry mismatch";
    if (h->tenant != tenant || h->hash_lo != hash->lo || h->hash_hi != hash->hi)
        return "tenant or hash does not match the file's name";
    return NULL;
}

/* Reads up to len bytes at off, through short reads and interruptions; returns the bytes
 * read (fewer at end of file) or -1 with errno. */
static ssize_t read_full(int fd, void *buf, size_t len, off_t off)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, (char *) buf + done, len - done, off + (off_t) done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (n == 0)
            break;
        done += (size_t) n;
    }
    return (ssize_t) done;
}

/* Writes len bytes at off, through short writes and interruptions; returns 0 or -1 with
 * errno. */
static int write_full(int fd, const void *buf, size_t len, off_t off)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pwrite(fd, (const char *) buf + done, len - done, off + (off_t) done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        done += (size_t) n;
    }
    return 0;
}

/* Makes sure one more unit can be indexed without allocating; returns 0 or
 * PAGED_E_NOMEM. */
static int reserve_entry(pt_file *f)
{
    if (pt_keymap_reserve(&f->index, 1) < 0)
        return PAGED_E_NOMEM;
    if (f->free_head != NONE)
        return 0;
    uint32_t grown = f->nalloc == 0 ? 16 : f->nalloc * 2;
    if (grown <= f->nalloc || grown == NONE)
        return PAGED_E_NOMEM;
    file_entry *e = pd_realloc(f->entries, (size_t) grown * sizeof *e);
    if (e == NULL)
        return PAGED_E_NOMEM;
    for (uint32_t i = grown; i > f->nalloc; i--) {
        e[i - 1].next = f->free_head;
        f->free_head = i - 1;
    }
    f->entries = e;
    f->nalloc = grown;
    return 0;
}

/* Appends entry i at the most recently used end; returns nothing. */
static void lru_append(pt_file *f, uint32_t i)
{
    f->entries[i].prev = f->lru_tail;
    f->entries[i].next = NONE;
    if (f->lru_tail != NONE)
        f->entries[f->lru_tail].next = i;
    else
        f->lru_head = i;
    f->lru_tail = i;
}

/* Unlinks entry i from the LRU list; returns nothing. */
static void lru_unlink(pt_file *f, uint32_t i)
{
    file_entry *e = &f->entries[i];
    if (e->prev != NONE)
        f->entries[e->prev].next = e->next;
    else
        f->lru_head = e->next;
    if (e->next != NONE)
        f->entries[e->next].prev = e->prev;
    else
        f->lru_tail = e->prev;
}

/* Indexes (tenant, hash) as the most recently used unit, in room reserve_entry made;
 * returns nothing. */
static void index_add(pt_file *f, uint32_t tenant, const paged_hash *hash)
{
    uint32_t i = f->free_head;
    f->free_head = f->entries[i].next;
    f->entries[i].tenant = tenant;
    f->entries[i].hash = *hash;
    pt_keymap_put(&f->index, tenant, hash, i);
    lru_append(f, i);
    f->count++;
    f->bytes += f->file_bytes;
}

/* Drops entry i from the index, its entry to the free list; returns nothing. */
static void index_drop(pt_file *f, uint32_t i)
{
    file_entry *e = &f->entries[i];
    pt_keymap_del(&f->index, e->tenant, &e->hash);
    lru_unlink(f, i);
    e->next = f->free_head;
    f->free_head = i;
    f->count--;
    f->bytes -= f->file_bytes;
}

/* Deletes entry i's file and drops it from the index, then tells out (when not NULL);
 * returns nothing. A file that cannot be deleted is forgotten all the same (the next
 * pt_file_open deletes or adopts it). */
static void delete_entry(pt_file *f, uint32_t i, pt_file_out_fn *out, void *ctx)
{
    char name[UNIT_NAME_LEN + 1];
    uint32_t tenant = f->entries[i].tenant;
    paged_hash hash = f->entries[i].hash;
    unit_name(name, tenant, &hash);
    unlinkat(f->dirfd, name, 0);
    index_drop(f, i);
    if (out != NULL)
        out(ctx, tenant, &hash);
}

/* Deletes the least recently used files while the tier is over its capacity, keeping entry
 * keep (NONE: none kept); returns nothing. */
static void trim_to_capacity(pt_file *f, uint32_t keep, pt_file_out_fn *out, void *ctx)
{
    while (f->capacity_bytes != 0 && f->bytes > f->capacity_bytes && f->lru_head != NONE &&
           f->lru_head != keep)
        delete_entry(f, f->lru_head, out, ctx);
}

/* Frees the index and closes the directory; returns nothing. */
static void free_tier(pt_file *f)
{
    if (f->dirfd >= 0)
        close(f->dirfd);
    pt_keymap_free(&f->index);
    free(f->entries);
    free(f->path);
    free(f);
}

/* A unit file found by the scan, to be adopted in order of modification time. */
typedef struct found_unit {
    struct timespec mtime;
    paged_hash hash;
    uint32_t tenant;
} found_unit;

/* Orders found units oldest first (ties by key, for a stable order); returns <0, 0, >0. */
static int found_older(const void *a, const void *b)
{
    const found_unit *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    if (x->tenant != y->tenant)
        return x->tenant < y->tenant ? -1 : 1;
    if (x->hash.hi != y->hash.hi)
        return x->hash.hi < y->hash.hi ? -1 : 1;
    if (x->hash.lo != y->hash.lo)
        return x->hash.lo < y->hash.lo ? -1 : 1;
    return 0;
}

/* Returns whether the directory entry name is a unit file f adopts: its name parses, it is
 * a regular file of the right size and its header checks out; fills *u when it is. */
static int adoptable(const pt_file *f, const char *name, found_unit *u)
{
    struct stat st;
    if (!parse_unit_name(name, &u->tenant, &u->hash))
        return 0;
    int fd = openat(f->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    unit_header h;
    int good = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t) st.st_size == f->file_bytes &&
               read_full(fd, &h, sizeof h, 0) == (ssize_t) sizeof h && check_header(&h, f, u->tenant, &u->hash) == NULL;
    close(fd);
    if (good)
        u->mtime = st.st_mtim;
    return good;
}

/* Deletes the directory entry name (a directory only if empty); returns whether it is
 * gone. */
static int delete_stray(const pt_file *f, const char *name)
{
    if (unlinkat(f->dirfd, name, 0) == 0 || errno == ENOENT)
        return 1;
    return (errno == EISDIR || errno == EPERM) && unlinkat(f->dirfd, name, AT_REMOVEDIR) == 0;
}

/* Opens a stream over f's directory from its start; returns it, or NULL with errno. */
static DIR *open_listing(const pt_file *f)
{
    int fd = dup(f->dirfd);
    if (fd < 0)
        return NULL;
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        int err = errno;
        close(fd);
        errno = err;
        return NULL;
    }
    rewinddir(d);
    return d;
}

/* Scans f's directory: adopts the unit files into the index oldest first and deletes every
 * other entry, counting them in *dropped. Returns 0, or PAGED_E_SYSTEM or PAGED_E_NOMEM
 * with why. */
static int scan(pt_file *f, uint32_t *dropped, char *why, size_t whylen)
{
    DIR *d = open_listing(f);
    if (d == NULL) {
        set_why(why, whylen, "%s: cannot list: %s", f->path, strerror(errno));
        return PAGED_E_SYSTEM;
    }
    found_unit *found = NULL;
    size_t nfound = 0, cap = 0;
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (de == NULL) {
            if (errno != 0) {
                set_why(why, whylen, "%s: cannot list: %s", f->path, strerror(errno));
                rc = PAGED_E_SYSTEM;
            }
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        found_unit u;
        if (!adoptable(f, de->d_name, &u)) {
            delete_stray(f, de->d_name);
            (*dropped)++;
            continue;
        }
        if (nfound == cap) {
            size_t grown = cap == 0 ? 64 : cap * 2;
            found_unit *bigger = pd_realloc(found, grown * sizeof *found);
            if (bigger == NULL) {
                set_why(why, whylen, "%s: out of memory indexing unit files", f->path);
                rc = PAGED_E_NOMEM;
                break;
            }
            found = bigger;
            cap = grown;
        }
        found[nfound++] = u;
    }
    closedir(d);
    if (rc == 0 && nfound > 0)
        qsort(found, nfound, sizeof *found, found_older);
    for (size_t i = 0; rc == 0 && i < nfound; i++) {
        if (reserve_entry(f) < 0) {
            set_why(why, whylen, "%s: out of memory indexing unit files", f->path);
            rc = PAGED_E_NOMEM;
            break;
        }
        index_add(f, found[i].tenant, &found[i].hash);
    }
    free(found);
    return rc;
}

/* Creates (mode 0700) or opens the pool's directory sub under dir; returns its descriptor,
 * or -1 with why. */
static int open_pool_dir(const char *dir, const char *sub, const char *path, char *why, size_t whylen)
{
    int parent = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (parent < 0) {
        set_why(why, whylen, "%s: %s", dir, strerror(errno));
        return -1;
    }
    int fd = -1;
    if (mkdirat(parent, sub, 0700) < 0 && errno != EEXIST)
        set_why(why, whylen, "cannot create %s: %s", path, strerror(errno));
    else if ((fd = openat(parent, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        set_why(why, whylen, "%s: %s", path, strerror(errno));
    else if (faccessat(parent, sub, W_OK | X_OK, AT_EACCESS) < 0) {
        set_why(why, whylen, "%s: not writable: %s", path, strerror(errno));
        close(fd);
        fd = -1;
    }
    int err = errno;
    close(parent);
    errno = err;
    return fd;
}

/* Opens the tier of pool name of uid under dir; see file.h. */
pt_file *pt_file_open(const char *dir, uint32_t uid, const char *name, const pt_geom *g,
                      uint64_t capacity_bytes, uint32_t *dropped, char *why, size_t whylen)
{
    uint32_t ignored = 0;
    if (dropped == NULL)
        dropped = &ignored;
    *dropped = 0;
    if (!pool_name_ok(name)) {
        set_why(why, whylen, "pool name \"%.*s\" is not 1 to %d of [A-Za-z0-9._-]", POOL_NAME_MAX, name,
                POOL_NAME_MAX);
        errno = EINVAL;
        return NULL;
    }
    if (g->unit_bytes == 0 || g->unit_bytes > (uint64_t) INT64_MAX - sizeof (unit_header) ||
        g->unit_bytes > SIZE_MAX) {
        set_why(why, whylen, "unit_bytes %" PRIu64 " is not a unit file's payload size", g->unit_bytes);
        errno = EINVAL;
        return NULL;
    }
    char sub[16 + POOL_NAME_MAX];
    snprintf(sub, sizeof sub, "%" PRIu32 "-%s", uid, name);
    pt_file *f = pd_calloc(1, sizeof *f);
    size_t pathlen = strlen(dir) + 1 + strlen(sub) + 1;
    char *path = pd_malloc(pathlen);
    if (f == NULL || path == NULL || pt_keymap_init(&f->index, 16) < 0) {
        set_why(why, whylen, "%s/%s: out of memory", dir, sub);
        free(path);
        free(f);
        errno = ENOMEM;
        return NULL;
    }
    snprintf(path, pathlen, "%s/%s", dir, sub);
    f->path = path;
    f->geom = *g;
    f->file_bytes = sizeof (unit_header) + g->unit_bytes;
    f->capacity_bytes = capacity_bytes;
    f->free_head = f->lru_head = f->lru_tail = NONE;
    f->dirfd = open_pool_dir(dir, sub, path, why, whylen);
    if (f->dirfd < 0) {
        int err = errno;
        free_tier(f);
        errno = err;
        return NULL;
    }
    int rc = scan(f, dropped, why, whylen);
    if (rc < 0) {
        free_tier(f);
        errno = rc == PAGED_E_NOMEM ? ENOMEM : EIO;
        return NULL;
    }
    trim_to_capacity(f, NONE, NULL, NULL);
    return f;
}

/* Frees the index, keeping the files; see file.h. */
void pt_file_close(pt_file *f)
{
    if (f != NULL)
        free_tier(f);
}

/* Deletes the files and the directory, then frees the index; see file.h. */
void pt_file_purge(pt_file *f)
{
    if (f == NULL)
        return;
    while (f->lru_head != NONE)
        delete_entry(f, f->lru_head, NULL, NULL);
    DIR *d = open_listing(f);
    if (d != NULL) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL)
            if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                delete_stray(f, de->d_name);
        closedir(d);
    }
    close(f->dirfd);
    f->dirfd = -1;
    rmdir(f->path);
    free_tier(f);
}

/* Returns the entry of (tenant, hash), or NONE. */
static uint32_t entry_of(const pt_file *f, uint32_t tenant, const paged_hash *hash)
{
    return pt_keymap_get(&f->index, tenant, hash);
}

/* Returns whether (tenant, hash) has a file; see file.h. */
int pt_file_has(const pt_file *f, uint32_t tenant, const paged_hash *hash)
{
    return entry_of(f, tenant, hash) != NONE;
}

/* Writes header and payload to a new temporary file in f's directory and renames it to
 * name; returns 0, or PAGED_E_SYSTEM or PAGED_E_NOMEM with why (and no temporary file
 * left). */
static int write_unit_file(pt_file *f, const char *name, const unit_header *h, const void *unit,
                           const struct timespec *mtime, char *why, size_t whylen)
{
    size_t tmplen = strlen(f->path) + 1 + sizeof TMP_TEMPLATE;
    char *tmp = pd_malloc(tmplen);
    if (tmp == NULL) {
        set_why(why, whylen, "%s/%s: out of memory", f->path, name);
        return PAGED_E_NOMEM;
    }
    snprintf(tmp, tmplen, "%s/%s", f->path, TMP_TEMPLATE);
    const char *tmpname = tmp + strlen(f->path) + 1;
    int rc = 0;
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        set_why(why, whylen, "cannot create %s: %s", tmp, strerror(errno));
        free(tmp);
        return PAGED_E_SYSTEM;
    }
    if (write_full(fd, h, sizeof *h, 0) < 0 || write_full(fd, unit, (size_t) f->geom.unit_bytes, sizeof *h) < 0) {
        set_why(why, whylen, "cannot write %s: %s", tmp, strerror(errno));
        rc = PAGED_E_SYSTEM;
    }
    struct timespec times[2] = { { .tv_sec = 0, .tv_nsec = UTIME_OMIT }, { .tv_sec = 0, .tv_nsec = UTIME_OMIT } };
    if (mtime != NULL)
        times[1] = *mtime;     /* the access time stays */
    if (rc == 0 && mtime != NULL && futimens(fd, times) < 0) {
        set_why(why, whylen, "cannot date %s: %s", tmp, strerror(errno));
        rc = PAGED_E_SYSTEM;
    }
    if (close(fd) < 0 && rc == 0) {
        set_why(why, whylen, "cannot write %s: %s", tmp, strerror(errno));
        rc = PAGED_E_SYSTEM;
    }
    if (rc == 0 && renameat(f->dirfd, tmpname, f->dirfd, name) < 0) {
        set_why(why, whylen, "cannot rename %s to %s/%s: %s", tmp, f->path, name, strerror(errno));
        rc = PAGED_E_SYSTEM;
    }
    if (rc < 0)
        unlinkat(f->dirfd, tmpname, 0);
    free(tmp);
    return rc;
}

/* Writes the unit file of (tenant, hash), then keeps the tier within capacity; see
 * file.h. */
int pt_file_put(pt_file *f, uint32_t tenant, const paged_hash *hash, const void *unit,
                pt_file_out_fn *out, void *ctx, char *why, size_t whylen)
{
    return pt_file_put_dated(f, tenant, hash, unit, NULL, out, ctx, why, whylen);
}

/* Writes the unit file of (tenant, hash) dated mtime, then keeps the tier within capacity;
 * see file.h. */
int pt_file_put_dated(pt_file *f, uint32_t tenant, const paged_hash *hash, const void *unit,
                      const struct timespec *mtime, pt_file_out_fn *out, void *ctx, char *why, size_t whylen)
{
    char name[UNIT_NAME_LEN + 1];
    unit_name(name, tenant, hash);
    if (f->capacity_bytes != 0 && f->file_bytes > f->capacity_bytes) {
        set_why(why, whylen, "%s/%s: a unit file of %" PRIu64 " bytes exceeds the capacity of %" PRIu64 " bytes",
                f->path, name, f->file_bytes, f->capacity_bytes);
        return PAGED_E_NOSPC;
    }
    if (reserve_entry(f) < 0) {
        set_why(why, whylen, "%s/%s: out of memory", f->path, name);
        return PAGED_E_NOMEM;
    }
    unit_header h;
    fill_header(&h, f, tenant, hash, unit);
    int rc = write_unit_file(f, name, &h, unit, mtime, why, whylen);
    if (rc < 0)
        return rc;
    uint32_t i = entry_of(f, tenant, hash);
    if (i != NONE) {
        lru_unlink(f, i);
        lru_append(f, i);
    } else {
        index_add(f, tenant, hash);
        i = f->lru_tail;
    }
    trim_to_capacity(f, i, out, ctx);
    return 0;
}

/* Reads and checks the open unit file fd of (tenant, hash) into buf; returns NULL, or what
 * failed (in what, or a static string). */
static const char *read_unit_file(const pt_file *f, int fd, uint32_t tenant, const paged_hash *hash, void *buf,
                                  char *what, size_t whatlen)
{
    struct stat st;
    if (fstat(fd, &st) < 0) {
        snprintf(what, whatlen, "fstat: %s", strerror(errno));
        return what;
    }
    if (!S_ISREG(st.st_mode))
        return "not a regular file";
    if ((uint64_t) st.st_size != f->file_bytes) {
        snprintf(what, whatlen, "%s: %jd of %" PRIu64 " bytes",
                 (uint64_t) st.st_size < f->file_bytes ? "truncated" : "too long", (intmax_t) st.st_size,
                 f->file_bytes);
        return what;
    }
    unit_header h;
    ssize_t n = read_full(fd, &h, sizeof h, 0);
    if (n == (ssize_t) sizeof h) {
        const char *bad = check_header(&h, f, tenant, hash);
        if (bad != NULL)
            return bad;
        n = read_full(fd, buf, (size_t) f->geom.unit_bytes, sizeof h);
        if (n == (ssize_t) f->geom.unit_bytes)
            n += (ssize_t) sizeof h;
        else if (n >= 0)
            n = 0;
    }
    if (n < 0) {
        snprintf(what, whatlen, "read: %s", strerror(errno));
        return what;
    }
    if ((uint64_t) n != f->file_bytes) {
        snprintf(what, whatlen, "truncated while read (%" PRIu64 " bytes expected)", f->file_bytes);
        return what;
    }
    if (XXH3_64bits(buf, (size_t) f->geom.unit_bytes) != h.payload_xxh3)
        return "checksum mismatch";
    return NULL;
}

/* Reads and checks the unit of (tenant, hash), dropping a damaged file; see file.h. */
int pt_file_get(pt_file *f, uint32_t tenant, const paged_hash *hash, void *buf,
                pt_file_out_fn *out, void *ctx, char *why, size_t whylen)
{
    uint32_t i = entry_of(f, tenant, hash);
    if (i == NONE)
        return PAGED_E_NOENT;
    char name[UNIT_NAME_LEN + 1];
    unit_name(name, tenant, hash);
    char what[128];
    const char *bad;
    int fd = openat(f->dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        bad = "missing";
    } else if (fd < 0 && errno == ELOOP) {
        bad = "not a regular file";
    } else if (fd < 0) {
        set_why(why, whylen, "%s/%s: %s", f->path, name, strerror(errno));
        return PAGED_E_SYSTEM;
    } else {
        bad = read_unit_file(f, fd, tenant, hash, buf, what, sizeof what);
        /* The modification time carries this use across a restart; best effort. */
        if (bad == NULL)
            futimens(fd, NULL);
        close(fd);
    }
    if (bad != NULL) {
        set_why(why, whylen, "%s/%s: %s", f->path, name, bad);
        delete_entry(f, i, out, ctx);
        return PAGED_E_PROTO;
    }
    lru_unlink(f, i);
    lru_append(f, i);
    return 0;
}

/* Deletes the unit file of (tenant, hash); see file.h. */
int pt_file_remove(pt_file *f, uint32_t tenant, const paged_hash *hash)
{
    uint32_t i = entry_of(f, tenant, hash);
    if (i == NONE)
        return 0;
    delete_entry(f, i, NULL, NULL);
    return 1;
}

/* Fills *out with the counts; see file.h. */
void pt_file_get_counts(const pt_file *f, pt_file_counts *out)
{
    out->units = f->count;
    out->bytes = f->bytes;
    out->capacity_bytes = f->capacity_bytes;
}

/* Returns the header's size; see file.h. */
size_t pt_file_header_bytes(void)
{
    return sizeof (unit_header);
}
