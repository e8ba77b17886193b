/* tiercache.c: the tiers benchmark's page cache: write back and drop a directory's files, tell what stayed. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/bench/tiers.h"

/* What one walk adds up: bytes of the files dropped, and of them still resident. */
static double walk_bytes, walk_resident;

/* Returns the fraction of fd's size bytes of pages resident (mincore), or 1 if unknown. */
double tb_resident(int fd, size_t size)
{
    if (size == 0)
        return 0.0;
    const size_t page = (size_t) sysconf(_SC_PAGESIZE);
    const size_t pages = (size + page - 1) / page;
    void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return 1.0;
    unsigned char *vec = malloc(pages);
    size_t resident = pages;
    if (vec != NULL && mincore(map, size, vec) == 0) {
        resident = 0;
        for (size_t i = 0; i < pages; i++)
            resident += vec[i] & 1u;
    }
    free(vec);
    munmap(map, size);
    return (double) resident / (double) pages;
}

/* nftw callback: writes back and drops one regular file, adding up its bytes. Returns 0. */
static int drop_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void) ftw;
    if (type != FTW_F || !S_ISREG(sb->st_mode) || sb->st_size == 0)
        return 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    const size_t size = (size_t) sb->st_size;
    (void) fdatasync(fd);
    (void) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    walk_bytes += (double) size;
    walk_resident += (double) size * tb_resident(fd, size);
    close(fd);
    return 0;
}

/* Drops a directory's files from the page cache; see tiers.h. */
double tb_drop_cache(const char *dir)
{
    walk_bytes = walk_resident = 0.0;
    if (nftw(dir, drop_one, 16, FTW_PHYS) != 0)
        return -1.0;
    return walk_bytes > 0.0 ? walk_resident / walk_bytes : 0.0;
}
