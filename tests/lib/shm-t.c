/* shm-t.c: tests of sealed shared memory, read-only reopening and checked mapping. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/core/shm.h"
#include "tests/tap/basic.h"

/* Returns the size fstat reports for fd, or -1. */
static long long fd_size(int fd)
{
    struct stat st;
    return fstat(fd, &st) < 0 ? -1 : (long long) st.st_size;
}

/* Returns whether ftruncate(fd, size) failed with EPERM. */
static int truncate_eperm(int fd, long long size)
{
    return ftruncate(fd, (off_t) size) < 0 && errno == EPERM;
}

/* Checks what every object gets: size, close-on-exec, shared contents, checked mapping. */
static void test_common(const char *kind, int fd, uint64_t size, tap_rng *rng)
{
    is_int((long long) size, fd_size(fd), "%s: object has the size asked for", kind);
    ok((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0, "%s: descriptor is close-on-exec", kind);

    void *a = NULL, *b = NULL;
    is_int(PAGED_OK, pcore_shm_map(fd, size, 1, &a), "%s: mapped read-write", kind);
    is_int(PAGED_OK, pcore_shm_map(fd, size, 0, &b), "%s: mapped again read-only", kind);
    if (a == NULL || b == NULL)
        bail("%s: cannot map", kind);
    unsigned char *pa = a;
    for (uint64_t i = 0; i < size; i++)
        pa[i] = (unsigned char) (tap_rng_u64(rng) | 1);
    ok(memcmp(a, b, (size_t) size) == 0, "%s: the two mappings share their contents", kind);
    is_int(PAGED_E_PROTO, pcore_shm_map(fd, size + 1, 0, &b), "%s: mapping 1 byte more than the object refused", kind);
    is_int(PAGED_E_INVAL, pcore_shm_map(fd, 0, 0, &b), "%s: mapping 0 bytes refused", kind);

    int ro = pcore_shm_reopen_ro(fd);
    ok(ro >= 0, "%s: reopened read-only (%d)", kind, ro);
    if (ro < 0)
        bail("%s: cannot reopen read-only", kind);
    ok((fcntl(ro, F_GETFL) & O_ACCMODE) == O_RDONLY && (fcntl(ro, F_GETFD) & FD_CLOEXEC),
       "%s: reopened descriptor is O_RDONLY and close-on-exec", kind);
    void *w = mmap(NULL, (size_t) size, PROT_READ | PROT_WRITE, MAP_SHARED, ro, 0);
    ok(w == MAP_FAILED && errno == EACCES, "%s: read-only descriptor cannot be mapped PROT_WRITE|MAP_SHARED", kind);
    if (w != MAP_FAILED)
        munmap(w, (size_t) size);
    void *c = NULL;
    is_int(PAGED_E_PERM, pcore_shm_map(ro, size, 1, &c), "%s: pcore_shm_map read-write of it is PAGED_E_PERM", kind);
    is_int(PAGED_OK, pcore_shm_map(ro, size, 0, &c), "%s: pcore_shm_map read-only of it works", kind);
    if (c == NULL)
        bail("%s: cannot map read-only", kind);
    ok(memcmp(a, c, (size_t) size) == 0, "%s: read-only mapping sees the writer's data", kind);
    ok(mprotect(c, (size_t) size, PROT_READ | PROT_WRITE) < 0 && errno == EACCES,
       "%s: mprotect cannot make the read-only mapping writable", kind);
    ok(ftruncate(ro, 1) < 0, "%s: read-only descriptor cannot truncate", kind);
    pcore_shm_unmap(c, size);
    close(ro);
    pcore_shm_unmap(b, size);
    pcore_shm_unmap(a, size);
}

/* Checks pcore_shm_create's object: sealed against shrinking, growing and further seals. */
static void test_create(tap_rng *rng)
{
    uint64_t size = 3 * 4096 + 100;
    int fd = pcore_shm_create("paged-shm-test", size);
    ok(fd >= 0, "create: %llu bytes (%d)", (unsigned long long) size, fd);
    if (fd < 0)
        bail("cannot create shared memory");
#ifdef HAVE_MEMFD_CREATE
    is_int(1, pcore_shm_sealed(fd), "create: size is sealed");
    ok(truncate_eperm(fd, (long long) size - 4096), "create: shrinking fails with EPERM");
    ok(truncate_eperm(fd, (long long) size + 4096), "create: growing fails with EPERM");
    ok(truncate_eperm(fd, 0), "create: truncating to 0 fails with EPERM");
#ifdef F_SEAL_FUTURE_WRITE
    ok(fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) < 0 && errno == EPERM,
       "create: no further seal can be added (F_SEAL_SEAL)");
#else
    skip(1, "no F_SEAL_FUTURE_WRITE in this system's headers");
#endif
#else
    skip(5, "no memfd_create: objects cannot be sealed");
#endif
    is_int((long long) size, fd_size(fd), "create: size unchanged after the attempts");
    test_common("memfd", fd, size, rng);
    close(fd);
}

/* Checks the shm_open fallback: unlinked at once, the right size, not sealed. */
static void test_posix(tap_rng *rng)
{
    uint64_t size = 2 * 4096;
    int fd = pcore_shm_create_posix(size);
    if (fd < 0) {
        skip(1, "posix: shm_open does not work here (%s)", paged_strerror(fd));
        return;
    }
    ok(fd >= 0, "posix: created %llu bytes", (unsigned long long) size);
    char path[64], target[256];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, target, sizeof target - 1);
    target[n > 0 ? n : 0] = '\0';
    ok(n > 0 && strstr(target, "(deleted)") != NULL, "posix: name already unlinked (%s)", target);
    is_int(0, pcore_shm_sealed(fd), "posix: object reports no seals");
    test_common("posix", fd, size, rng);
    close(fd);
}

/* Checks argument and descriptor-type refusals. */
static void test_refusals(void)
{
    void *p = NULL;
    int fds[2];
    is_int(PAGED_E_INVAL, pcore_shm_create(NULL, 0), "refuse: creating 0 bytes");
    is_int(PAGED_E_INVAL, pcore_shm_create(NULL, UINT64_MAX), "refuse: creating 2^64-1 bytes");
    is_int(PAGED_E_INVAL, pcore_shm_create_posix(0), "refuse: posix, creating 0 bytes");
    if (pipe(fds) < 0)
        sysbail("pipe");
    is_int(PAGED_E_PROTO, pcore_shm_map(fds[0], 4096, 0, &p), "refuse: mapping a pipe");
    close(fds[0]);
    close(fds[1]);
    is_int(PAGED_E_SYSTEM, pcore_shm_map(fds[0], 4096, 0, &p), "refuse: mapping a closed descriptor");
    int fd = pcore_shm_create(NULL, 4096);
    is_int(PAGED_E_PROTO, pcore_shm_map(fd, 1u << 20, 1, &p), "refuse: mapping 1 MiB of a 4 KiB object");
    is_int(PAGED_E_INVAL, pcore_shm_map(fd, 4096, 1, NULL), "refuse: NULL address out-parameter");
    close(fd);
}

/* Runs the shared-memory tests; returns 0 (the TAP library reports failures). */
int main(void)
{
    plan_lazy();
    tap_rng rng;
    tap_rng_seed(&rng, tap_seed());
    test_create(&rng);
    test_refusals();
    test_posix(&rng);
    return 0;
}
