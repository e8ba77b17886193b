/* tier-file-t.c: the file tier: round trips, restarts, damaged and foreign files, capacity, purge, bad names. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/tier/file.h"
#include "tests/tap/basic.h"

#define UID 1000u
#define TEN 0x3e8u
#define UB 512u                /* 2 layers * 2 (K, V) * 2 heads * 4 tokens * 8 dims * 2 bytes */
#define MAXOUT 16

static const pt_geom geom = { 2, 2, 8, 4, 1, 1.0f, 1.0f, UB };
static char top[1024];         /* the test's directory, DIR of the tiers */
static tap_rng rng;

/* What out heard, in order. */
typedef struct heard {
    uint32_t n;
    uint32_t tenant[MAXOUT];
    paged_hash hash[MAXOUT];
} heard;

/* Records one out call in the heard ctx; returns nothing. */
static void record_out(void *ctx, uint32_t tenant, const paged_hash *hash)
{
    heard *hd = ctx;
    if (hd->n < MAXOUT) {
        hd->tenant[hd->n] = tenant;
        hd->hash[hd->n] = *hash;
    }
    hd->n++;
}

/* Returns whether out's call i named (TEN, k). */
static int heard_is(const heard *hd, uint32_t i, const paged_hash *k)
{
    return i < hd->n && hd->tenant[i] == TEN && hd->hash[i].lo == k->lo && hd->hash[i].hi == k->hi;
}

/* Returns the i-th test key. */
static paged_hash key(uint64_t i)
{
    return (paged_hash) { 0x1111222233334444ull + i, 0xaaaabbbbccccdd00ull + i };
}

/* Fills a unit with fresh random bytes; returns nothing. */
static void random_unit(unsigned char *u)
{
    for (size_t i = 0; i < UB; i += 8) {
        uint64_t r = tap_rng_u64(&rng);
        memcpy(u + i, &r, 8);
    }
}

/* Writes the path of pool name's directory to out; returns out. */
static char *pool_dir(char *out, const char *name)
{
    snprintf(out, PATH_MAX, "%s/%u-%s", top, UID, name);
    return out;
}

/* Writes the expected path of (TEN, k)'s file in pool name to out; returns out. */
static char *unit_path(char *out, const char *name, const paged_hash *k)
{
    snprintf(out, PATH_MAX, "%s/%u-%s/%08x-%016" PRIx64 "%016" PRIx64 ".unit", top, UID, name, TEN, k->hi,
             k->lo);
    return out;
}

/* Returns a path's size, or -1 when it does not exist. */
static long long path_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long) st.st_size : -1;
}

/* Returns the number of entries in directory path other than . and .., or -1. */
static int count_entries(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* XORs the byte at off of path with 0x01; returns whether it could. */
static int flip_byte(const char *path, off_t off)
{
    int fd = open(path, O_RDWR);
    unsigned char b;
    int done = fd >= 0 && pread(fd, &b, 1, off) == 1 && (b ^= 1, pwrite(fd, &b, 1, off) == 1);
    if (fd >= 0)
        close(fd);
    return done;
}

/* Writes len bytes of junk to path; returns whether it could. */
static int write_junk(const char *path, size_t len)
{
    FILE *fp = fopen(path, "w");
    if (fp == NULL)
        return 0;
    for (size_t i = 0; i < len; i++)
        fputc('j', fp);
    return fclose(fp) == 0;
}

/* Sets path's modification time to sec seconds; returns whether it could. */
static int set_mtime(const char *path, time_t sec)
{
    struct timespec t[2] = { { sec, 0 }, { sec, 0 } };
    return utimensat(AT_FDCWD, path, t, 0) == 0;
}

/* Writes unit as (TEN, k)'s file of another geometry (k_scale changed) into pool name's
 * directory, through a scratch pool's tier (whose scan would drop name's files); returns
 * whether it could. */
static int plant_other_geometry(const char *name, const paged_hash *k, const unsigned char *unit)
{
    pt_geom other = geom;
    other.k_scale = 0.5f;
    char why[512] = "", from[PATH_MAX], to[PATH_MAX];
    pt_file *g = pt_file_open(top, UID, "scratch", &other, 0, NULL, why, sizeof why);
    int done = g != NULL && pt_file_put(g, TEN, k, unit, NULL, NULL, why, sizeof why) == 0 &&
               rename(unit_path(from, "scratch", k), unit_path(to, name, k)) == 0;
    pt_file_purge(g);
    return done;
}

/* Opens pool name's tier with capacity cap; returns it (NULL reported as a failure). */
static pt_file *open_tier(const char *name, const pt_geom *g, uint64_t cap, uint32_t *dropped)
{
    char why[512] = "";
    pt_file *f = pt_file_open(top, UID, name, g, cap, dropped, why, sizeof why);
    if (f == NULL)
        diag("pt_file_open %s: %s", name, why);
    return f;
}

/* Returns whether the tier's counts are units units of their full size. */
static int units_are(const pt_file *f, uint32_t units)
{
    pt_file_counts c;
    pt_file_get_counts(f, &c);
    return c.units == units && c.bytes == (uint64_t) units * (pt_file_header_bytes() + UB);
}

/* Put and get, bit for bit; replacing a unit; remove; a restart finds the same bytes. */
static void test_round_trip(void)
{
    uint32_t dropped = 99;
    pt_file *f = open_tier("pool", &geom, 0, &dropped);
    ok(f != NULL && dropped == 0, "open: a fresh pool directory, nothing dropped");
    if (f == NULL)
        return;
    char path[PATH_MAX], why[512];
    struct stat st;
    ok(stat(pool_dir(path, "pool"), &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700,
       "open: %s made, mode 0700", path);
    static unsigned char unit[3][UB], buf[UB];
    paged_hash k[3] = { key(0), key(1), key(2) };
    int all = 1;
    for (int i = 0; i < 3; i++) {
        random_unit(unit[i]);
        all &= pt_file_put(f, TEN, &k[i], unit[i], NULL, NULL, why, sizeof why) == 0;
    }
    ok(all, "put: three units written");
    ok(units_are(f, 3), "put: counts 3 units of header + payload bytes");
    is_int((long long) (pt_file_header_bytes() + UB), path_size(unit_path(path, "pool", &k[1])),
           "put: the file has the expected name and size");
    ok(pt_file_has(f, TEN, &k[2]) && !pt_file_has(f, TEN + 1, &k[2]), "has: the key, not another tenant's");
    all = 1;
    for (int i = 0; i < 3; i++) {
        memset(buf, 0, sizeof buf);
        all &= pt_file_get(f, TEN, &k[i], buf, NULL, NULL, why, sizeof why) == 0 && memcmp(buf, unit[i], UB) == 0;
    }
    ok(all, "get: each unit comes back bit for bit");
    paged_hash k9 = key(9);
    is_int(PAGED_E_NOENT, pt_file_get(f, TEN, &k9, buf, NULL, NULL, why, sizeof why), "get: an unknown key");

    random_unit(unit[1]);
    is_int(0, pt_file_put(f, TEN, &k[1], unit[1], NULL, NULL, why, sizeof why), "put again: replaces the unit");
    ok(pt_file_get(f, TEN, &k[1], buf, NULL, NULL, why, sizeof why) == 0 && memcmp(buf, unit[1], UB) == 0,
       "put again: get returns the new bytes");
    ok(units_are(f, 3), "put again: still 3 units");
    is_int(3, count_entries(pool_dir(path, "pool")), "put again: 3 files, no temporary left");
    pt_file_close(f);

    f = open_tier("pool", &geom, 0, &dropped);
    ok(f != NULL && dropped == 0 && units_are(f, 3), "restart: 3 units adopted, nothing dropped");
    if (f == NULL)
        return;
    all = 1;
    for (int i = 0; i < 3; i++)
        all &= pt_file_get(f, TEN, &k[i], buf, NULL, NULL, why, sizeof why) == 0 && memcmp(buf, unit[i], UB) == 0;
    ok(all, "restart: each unit comes back bit for bit");

    is_int(1, pt_file_remove(f, TEN, &k[0]), "remove: a unit");
    is_int(0, pt_file_remove(f, TEN, &k[0]), "remove: again, nothing");
    ok(path_size(unit_path(path, "pool", &k[0])) < 0 && units_are(f, 2), "remove: the file is gone");
    pt_file_purge(f);
    ok(path_size(pool_dir(path, "pool")) < 0 && errno == ENOENT, "purge: %s is gone", path);
}

/* Expects pt_file_get of (TEN, k) to fail with PAGED_E_PROTO and a why naming the file and
 * word, the file deleted, the unit forgotten and out told; returns nothing. */
static void expect_dropped_at_get(pt_file *f, const char *name, const paged_hash *k, const char *word,
                                  const char *what)
{
    static unsigned char buf[UB];
    char why[512] = "", path[PATH_MAX];
    heard hd = { 0 };
    unit_path(path, name, k);
    is_int(PAGED_E_PROTO, pt_file_get(f, TEN, k, buf, record_out, &hd, why, sizeof why), "%s: get refuses", what);
    ok(strstr(why, word) != NULL && strstr(why, strrchr(path, '/') + 1) != NULL,
       "%s: why names the file and says \"%s\"", what, word);
    diag("%s: %s", what, why);
    ok(hd.n == 1 && heard_is(&hd, 0, k), "%s: out hears the key", what);
    ok(!pt_file_has(f, TEN, k) && path_size(path) < 0, "%s: forgotten and deleted", what);
}

/* Damage found at get: truncated, a payload byte flipped, a header byte flipped, another
 * geometry, a file gone. */
static void test_damage_at_get(void)
{
    uint32_t dropped;
    pt_file *f = open_tier("dmg", &geom, 0, &dropped);
    if (f == NULL)
        return;
    static unsigned char unit[UB];
    char why[512], path[PATH_MAX];
    paged_hash k[5] = { key(10), key(11), key(12), key(13), key(14) };
    for (int i = 0; i < 5; i++) {
        random_unit(unit);
        pt_file_put(f, TEN, &k[i], unit, NULL, NULL, why, sizeof why);
    }
    off_t hb = (off_t) pt_file_header_bytes();

    ok(truncate(unit_path(path, "dmg", &k[0]), hb + UB - 10) == 0, "truncated: file cut by 10 bytes");
    expect_dropped_at_get(f, "dmg", &k[0], "truncated", "truncated");
    ok(flip_byte(unit_path(path, "dmg", &k[1]), hb + 100), "payload: one byte flipped");
    expect_dropped_at_get(f, "dmg", &k[1], "checksum mismatch", "payload");
    ok(flip_byte(unit_path(path, "dmg", &k[2]), 20), "header: one byte flipped");
    expect_dropped_at_get(f, "dmg", &k[2], "header checksum", "header");

    ok(plant_other_geometry("dmg", &k[3], unit), "geometry: replaced by another geometry's file of the same key");
    expect_dropped_at_get(f, "dmg", &k[3], "geometry", "geometry");
    ok(unlink(unit_path(path, "dmg", &k[4])) == 0, "missing: file deleted behind the tier's back");
    expect_dropped_at_get(f, "dmg", &k[4], "missing", "missing");
    ok(units_are(f, 0), "damage: no unit left indexed");
    pt_file_purge(f);
}

/* Damage found at open: a truncated file, a flipped header byte, another geometry, a
 * temporary file, junk, a directory; a flipped payload byte passes the scan and fails at
 * get. */
static void test_damage_at_open(void)
{
    uint32_t dropped = 0;
    pt_file *f = open_tier("scan", &geom, 0, &dropped);
    if (f == NULL)
        return;
    static unsigned char unit[UB];
    char why[512], path[PATH_MAX + 32], dir[PATH_MAX];
    paged_hash k[5] = { key(20), key(21), key(22), key(23), key(24) };
    for (int i = 0; i < 5; i++) {
        random_unit(unit);
        pt_file_put(f, TEN, &k[i], unit, NULL, NULL, why, sizeof why);
    }
    pt_file_close(f);
    off_t hb = (off_t) pt_file_header_bytes();
    pool_dir(dir, "scan");
    int made = truncate(unit_path(path, "scan", &k[0]), hb + UB - 1) == 0;
    made &= flip_byte(unit_path(path, "scan", &k[1]), 8);
    made &= flip_byte(unit_path(path, "scan", &k[2]), hb + 5);
    made &= plant_other_geometry("scan", &k[3], unit);
    snprintf(path, sizeof path, "%s/.tmp-AbC123", dir);
    made &= write_junk(path, hb + UB);
    snprintf(path, sizeof path, "%s/junk", dir);
    made &= write_junk(path, 3);
    snprintf(path, sizeof path, "%s/subdir", dir);
    made &= mkdir(path, 0700) == 0;
    ok(made, "scan: damaged, foreign and stray entries planted");

    f = open_tier("scan", &geom, 0, &dropped);
    if (f == NULL)
        return;
    is_int(6, dropped, "scan: truncated, header, geometry, temporary, junk, directory dropped");
    ok(units_are(f, 2) && pt_file_has(f, TEN, &k[2]) && pt_file_has(f, TEN, &k[4]),
       "scan: the whole file and the one with a flipped payload byte adopted");
    is_int(2, count_entries(dir), "scan: only their 2 files left in the directory");
    ok(!pt_file_has(f, TEN, &k[0]) && !pt_file_has(f, TEN, &k[1]) && !pt_file_has(f, TEN, &k[3]),
       "scan: the dropped ones are not indexed");
    expect_dropped_at_get(f, "scan", &k[2], "checksum mismatch", "scan, payload");
    pt_file_purge(f);
}

/* Capacity: LRU deletion on put with out told, a read bumps, NOSPC for a unit too large,
 * a restart orders by modification time and trims to a smaller capacity. */
static void test_capacity(void)
{
    uint64_t fb = pt_file_header_bytes() + UB;
    pt_file *f = open_tier("cap", &geom, 3 * fb, NULL);
    if (f == NULL)
        return;
    static unsigned char unit[UB], buf[UB];
    char why[512] = "", path[PATH_MAX];
    paged_hash k[6] = { key(30), key(31), key(32), key(33), key(34), key(35) };
    heard hd = { 0 };
    for (int i = 0; i < 4; i++) {
        random_unit(unit);
        pt_file_put(f, TEN, &k[i], unit, record_out, &hd, why, sizeof why);
    }
    ok(hd.n == 1 && heard_is(&hd, 0, &k[0]), "capacity: the 4th put deletes the 1st, out told");
    ok(units_are(f, 3) && !pt_file_has(f, TEN, &k[0]) && path_size(unit_path(path, "cap", &k[0])) < 0,
       "capacity: 3 units kept, the 1st's file gone");
    is_int(0, pt_file_get(f, TEN, &k[1], buf, NULL, NULL, why, sizeof why), "capacity: get of the 2nd bumps it");
    hd.n = 0;
    pt_file_put(f, TEN, &k[4], unit, record_out, &hd, why, sizeof why);
    ok(hd.n == 1 && heard_is(&hd, 0, &k[2]), "capacity: the next put deletes the 3rd, not the read 2nd");
    pt_file_close(f);

    /* Modification times: 4 oldest, then 1, then 3. */
    int set = set_mtime(unit_path(path, "cap", &k[4]), 1000000000);
    set &= set_mtime(unit_path(path, "cap", &k[1]), 1000000100);
    set &= set_mtime(unit_path(path, "cap", &k[3]), 1000000200);
    ok(set, "restart: modification times set");
    f = open_tier("cap", &geom, 3 * fb, NULL);
    if (f == NULL)
        return;
    hd.n = 0;
    pt_file_put(f, TEN, &k[5], unit, record_out, &hd, why, sizeof why);
    ok(hd.n == 1 && heard_is(&hd, 0, &k[4]), "restart: the oldest modified goes first");
    pt_file_close(f);

    uint32_t dropped = 99;
    f = open_tier("cap", &geom, 2 * fb, &dropped);
    if (f == NULL)
        return;
    ok(units_are(f, 2) && pt_file_has(f, TEN, &k[3]) && pt_file_has(f, TEN, &k[5]) && dropped == 0,
       "restart with less capacity: the 2 newest kept, trims not counted as dropped");
    is_int(2, count_entries(pool_dir(path, "cap")), "restart with less capacity: the oldest's file deleted");
    pt_file_close(f);

    /* Dated puts: written newest first, each dated before the last; the next open's order is
     * the dates', not the writes'. */
    f = open_tier("cap", &geom, 3 * fb, NULL);
    if (f == NULL)
        return;
    const struct timespec dates[3] = { { 1500000000, 300 }, { 1500000000, 200 }, { 1500000000, 100 } };
    paged_hash d[3] = { key(40), key(41), key(42) };
    int put = 1;
    for (int i = 0; i < 3; i++)
        put &= pt_file_put_dated(f, TEN, &d[i], unit, &dates[i], NULL, NULL, why, sizeof why) == 0;
    struct stat st;
    ok(put && stat(unit_path(path, "cap", &d[2]), &st) == 0 && st.st_mtim.tv_sec == 1500000000
           && st.st_mtim.tv_nsec == 100,
       "dated put: the file carries the date given (%s)", why);
    pt_file_close(f);
    f = open_tier("cap", &geom, 3 * fb, NULL);
    if (f == NULL)
        return;
    hd.n = 0;
    pt_file_put(f, TEN, &k[0], unit, record_out, &hd, why, sizeof why);
    ok(hd.n == 1 && heard_is(&hd, 0, &d[2]), "dated put: after a restart the oldest dated goes first, not the last "
       "written");
    pt_file_close(f);

    f = open_tier("cap", &geom, fb - 1, NULL);
    if (f == NULL)
        return;
    ok(units_are(f, 0), "capacity below one unit: nothing kept");
    is_int(PAGED_E_NOSPC, pt_file_put(f, TEN, &k[0], unit, NULL, NULL, why, sizeof why),
           "capacity below one unit: put gives PAGED_E_NOSPC");
    is_int(0, count_entries(pool_dir(path, "cap")), "capacity below one unit: no file written");
    pt_file_purge(f);
}

/* Pool names: "." and ".." stay inside DIR; names with a slash or empty are refused. */
static void test_names(void)
{
    static unsigned char unit[UB];
    char why[512] = "", path[PATH_MAX], real_top[PATH_MAX], real_pool[PATH_MAX];
    paged_hash k = key(40);
    for (int i = 0; i < 2; i++) {
        const char *name = i == 0 ? ".." : ".";
        uint32_t before = (uint32_t) count_entries(top);
        pt_file *f = open_tier(name, &geom, 0, NULL);
        ok(f != NULL && pt_file_put(f, TEN, &k, unit, NULL, NULL, why, sizeof why) == 0,
           "name \"%s\": opened, a unit written", name);
        pool_dir(path, name);
        char *slash = realpath(path, real_pool) != NULL ? strrchr(real_pool, '/') : NULL;
        ok(slash != NULL && realpath(top, real_top) != NULL && (*slash = '\0', strcmp(real_pool, real_top) == 0) &&
               count_entries(top) == (int) before + 1 && path_size(unit_path(path, name, &k)) > 0,
           "name \"%s\": its directory %u-%s and its file are inside DIR", name, UID, name);
        pt_file_purge(f);
        is_int(before, count_entries(top), "name \"%s\": purge leaves DIR as it was", name);
    }
    const char *bad[] = { "", "a/b", "../x", "sp ace", "x:y" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        errno = 0;
        pt_file *f = pt_file_open(top, UID, bad[i], &geom, 0, NULL, why, sizeof why);
        ok(f == NULL && errno == EINVAL && strstr(why, "pool name") != NULL, "name #%zu refused: %s", i, why);
        pt_file_close(f);
    }
}

/* A DIR that does not exist, and one the daemon may not write. */
static void test_bad_dir(void)
{
    char why[512] = "", path[PATH_MAX];
    snprintf(path, sizeof path, "%s/absent", top);
    pt_file *f = pt_file_open(path, UID, "p", &geom, 0, NULL, why, sizeof why);
    ok(f == NULL && strstr(why, path) != NULL && strstr(why, strerror(ENOENT)) != NULL,
       "absent DIR: refused, why names it: %s", why);
    pt_file_close(f);
    if (geteuid() == 0) {
        skip(1, "running as root");
        return;
    }
    snprintf(path, sizeof path, "%s/ro", top);
    mkdir(path, 0500);
    errno = 0;
    f = pt_file_open(path, UID, "p", &geom, 0, NULL, why, sizeof why);
    int err = errno;
    ok(f == NULL && err == EACCES && strstr(why, path) != NULL && strstr(why, strerror(EACCES)) != NULL,
       "unwritable DIR: refused with EACCES, why names the path: %s", why);
    pt_file_close(f);
    rmdir(path);
}

/* Runs the cases in a directory of their own. */
int main(void)
{
    const char *tmpdir = getenv("TMPDIR");
    snprintf(top, sizeof top, "%s/paged-tier-file-XXXXXX", tmpdir != NULL && *tmpdir != '\0' ? tmpdir : "/tmp");
    if (mkdtemp(top) == NULL) {
        plan(1);
        ok(0, "mkdtemp %s: %s", top, strerror(errno));
        return 1;
    }
    tap_rng_seed(&rng, tap_seed());
    plan_lazy();
    test_round_trip();
    test_damage_at_get();
    test_damage_at_open();
    test_capacity();
    test_names();
    test_bad_dir();
    is_int(0, count_entries(top), "every pool's directory purged");
    rmdir(top);
    return 0;
}
