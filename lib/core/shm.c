/* shm.c: sealed shared-memory objects passed by descriptor, and mapping them safely. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "paged.h"
#include "lib/core/shm.h"

/* Seals that keep an object's size fixed for good. F_SEAL_SEAL also stops a holder from
 * adding F_SEAL_FUTURE_WRITE, which would break everyone's later writable mappings. */
#define SIZE_SEALS (F_SEAL_SHRINK | F_SEAL_GROW)

/* Not in older headers; the kernel's value, rejected with EINVAL by kernels before 6.3. */
#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL 0x0008u
#endif

/* How many random names pcore_shm_create_posix tries before it gives up. */
#define SHM_NAME_TRIES 32

/* Closes fd keeping errno; returns err so callers can return through it. */
static int close_keep_errno(int fd, int err)
{
    int saved = errno;
    close(fd);
    errno = saved;
    return err;
}

/* Returns the paged_error for the errno of a failed allocation-like call. */
static int errno_code(void)
{
    return errno == ENOMEM || errno == ENOSPC ? PAGED_E_NOMEM : PAGED_E_SYSTEM;
}

/* Sets fd's size to size; returns PAGED_OK or a negative error, fd left open. */
static int set_size(int fd, uint64_t size)
{
    int r;
    do
        r = ftruncate(fd, (off_t) size);
    while (r < 0 && errno == EINTR);
    return r < 0 ? errno_code() : PAGED_OK;
}

/* Returns 64 bits that differ between calls, processes and runs, for names only. */
static uint64_t name_bits(void)
{
    static _Thread_local uint64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t) ts.tv_nsec ^ ((uint64_t) ts.tv_sec << 30) ^ ((uint64_t) getpid() << 40)
                 ^ ((uint64_t) (uintptr_t) &counter) ^ (++counter * 0x9e3779b97f4a7c15u);
    /* splitmix64's finalizer spreads the bits so names do not share prefixes. */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/* Creates an unlinked POSIX shared-memory object of size bytes. */
int pcore_shm_create_posix(uint64_t size)
{
    if (size == 0 || size > (uint64_t) INT64_MAX)
        return PAGED_E_INVAL;
    int fd = -1;
    for (int i = 0; i < SHM_NAME_TRIES && fd < 0; i++) {
        char name[64];
        snprintf(name, sizeof name, "/paged-%016llx", (unsigned long long) name_bits());
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) {
            /* Nobody may open it by name from here on; the descriptor is the only way in. */
            if (shm_unlink(name) < 0)
                return close_keep_errno(fd, PAGED_E_SYSTEM);
        } else if (errno != EEXIST && errno != EINTR) {
            return errno_code();
        }
    }
    if (fd < 0)
        return PAGED_E_SYSTEM; /* errno is EEXIST: every name was taken */
    int err = set_size(fd, size);
    if (err < 0)
        return close_keep_errno(fd, err);
    return fd;
}

#ifdef HAVE_MEMFD_CREATE
/* Creates a memfd, sealed against execution where the kernel can do that; returns the fd
 * or a negative error. */
static int memfd_new(const char *name)
{
    unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
    int fd = memfd_create(name, flags | MFD_NOEXEC_SEAL);
    if (fd < 0 && errno == EINVAL)
        fd = memfd_create(name, flags); /* a kernel before 6.3 */
    return fd < 0 ? errno_code() : fd;
}
#endif

/* Creates a sealed memfd, else falls back to an unlinked POSIX object. */
int pcore_shm_create(const char *name, uint64_t size)
{
    if (size == 0 || size > (uint64_t) INT64_MAX)
        return PAGED_E_INVAL;
#ifdef HAVE_MEMFD_CREATE
    int fd = memfd_new(name != NULL ? name : "paged");
    if (fd == PAGED_E_SYSTEM && errno == ENOSYS)
        return pcore_shm_create_posix(size);
    if (fd < 0)
        return fd;
    int err = set_size(fd, size);
    if (err < 0)
        return close_keep_errno(fd, err);
    if (fcntl(fd, F_ADD_SEALS, SIZE_SEALS | F_SEAL_SEAL) < 0)
        return close_keep_errno(fd, PAGED_E_SYSTEM);
    return fd;
#else
    (void) name;
    return pcore_shm_create_posix(size);
#endif
}

/* Reports whether fd's size is sealed. */
int pcore_shm_sealed(int fd)
{
#ifdef F_GET_SEALS
    int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0)
        return errno == EINVAL ? 0 : PAGED_E_SYSTEM; /* EINVAL: cannot carry seals */
    return (seals & SIZE_SEALS) == SIZE_SEALS;
#else
    (void) fd;
    return 0;
#endif
}

/* Opens the object behind fd again, read only. */
int pcore_shm_reopen_ro(int fd)
{
    char path[64];
    struct stat before, after;
    if (fstat(fd, &before) < 0)
        return PAGED_E_SYSTEM;
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int ro;
    do
        ro = open(path, O_RDONLY | O_CLOEXEC);
    while (ro < 0 && errno == EINTR);
    if (ro < 0)
        return errno == ENOENT ? PAGED_E_NOTSUP : PAGED_E_SYSTEM;
    /* Make sure /proc really gave us the same object and not something mounted over it. */
    if (fstat(ro, &after) < 0)
        return close_keep_errno(ro, PAGED_E_SYSTEM);
    if (after.st_dev != before.st_dev || after.st_ino != before.st_ino) {
        close(ro);
        return PAGED_E_NOTSUP;
    }
    return ro;
}

/* Maps an object after checking its type and size. */
int pcore_shm_map(int fd, uint64_t size, int writable, void **addr)
{
    if (addr == NULL || size == 0 || size > SIZE_MAX)
        return PAGED_E_INVAL;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return PAGED_E_SYSTEM;
    if (!S_ISREG(st.st_mode) || st.st_size < 0 || (uint64_t) st.st_size < size)
        return PAGED_E_PROTO;
    int prot = PROT_READ | (writable ? PROT_WRITE : 0);
    void *p = mmap(NULL, (size_t) size, prot, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return errno == EACCES ? PAGED_E_PERM : errno_code();
    *addr = p;
    return PAGED_OK;
}

/* Unmaps a mapping made by pcore_shm_map. */
int pcore_shm_unmap(void *addr, uint64_t size)
{
    return munmap(addr, (size_t) size) < 0 ? PAGED_E_SYSTEM : PAGED_OK;
}
