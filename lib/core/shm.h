/* shm.h: sealed shared-memory objects passed by descriptor, and mapping them safely. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_CORE_SHM_H
#define PAGED_CORE_SHM_H

/*
 * Shared memory always travels as a file descriptor, never as a name someone else could
 * open. The creator makes it with pcore_shm_create: a memfd where the system has one,
 * sealed so that nobody holding the descriptor can shrink it (which would make every other
 * mapper take SIGBUS on the lost pages) or grow it; else a POSIX shared-memory object whose
 * name is unlinked before the call returns (no seals then: see pcore_shm_sealed).
 *
 * A receiver maps with pcore_shm_map, which checks the object's size first, so a short
 * object is refused up front instead of faulting later. A read-only attacher is given a
 * descriptor from pcore_shm_reopen_ro: a new open file description, read only, which the
 * kernel will not map writable and shared, not even after mprotect.
 *
 * Errors are negative paged_error codes; for PAGED_E_SYSTEM errno says more.
 */

#include <stdint.h>

#include "paged.h"

/*
 * Creates an object of size bytes (zero-filled) and returns its descriptor, close-on-exec
 * and read-write. name (may be NULL) only labels a memfd in /proc; it opens nothing.
 * Returns the descriptor, PAGED_E_INVAL for a size of 0 or beyond off_t, PAGED_E_NOMEM, or
 * PAGED_E_SYSTEM.
 */
int pcore_shm_create(const char *name, uint64_t size);

/*
 * The fallback pcore_shm_create uses where there is no memfd_create: shm_open under a fresh
 * random name with O_EXCL and mode 0600, shm_unlink at once, then ftruncate. Exposed so the
 * tests cover it on systems that never need it. Same results as pcore_shm_create.
 */
int pcore_shm_create_posix(uint64_t size);

/*
 * Returns 1 when fd's size is sealed (it can neither shrink nor grow), 0 when it is not
 * (an object that cannot take seals included), or PAGED_E_SYSTEM.
 */
int pcore_shm_sealed(int fd);

/*
 * Opens the object behind fd again, read only, through /proc/self/fd, and returns the new
 * close-on-exec descriptor: unlike dup, it does not share fd's read-write access. Returns
 * the descriptor, PAGED_E_NOTSUP when /proc is missing or gives another object, or
 * PAGED_E_SYSTEM.
 */
int pcore_shm_reopen_ro(int fd);

/*
 * Maps the first size bytes of the object fd, shared, readable and, if writable is
 * nonzero, writable; stores the address in *addr. Refuses, before mapping, an fd that is not
 * a regular file or is smaller than size (PAGED_E_PROTO). Returns PAGED_OK, PAGED_E_INVAL
 * for a size of 0 or beyond the address space, PAGED_E_PERM when a writable mapping is
 * asked of a read-only descriptor, PAGED_E_NOMEM, or PAGED_E_SYSTEM.
 */
int pcore_shm_map(int fd, uint64_t size, int writable, void **addr);

/* Unmaps what pcore_shm_map mapped. Returns PAGED_OK or PAGED_E_SYSTEM. */
int pcore_shm_unmap(void *addr, uint64_t size);

#endif
