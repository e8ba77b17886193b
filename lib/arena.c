/* arena.c: the client's host and data arenas: bump allocation, marks, and mapping the device arena. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <unistd.h>

#include "lib/client.h"

/* Returns the arena of kind: on the cpu backend the data arena is the host arena. */
struct pc_arena *pc_arena_of(paged_client *c, paged_arena_kind kind)
{
    if (kind == PAGED_ARENA_HOST)
        return &c->host;
    if (kind == PAGED_ARENA_DATA)
        return c->backend == PAGED_BACKEND_CUDA ? &c->data : &c->host;
    return NULL;
}

/* Carves size bytes aligned to align; see client.h. */
int pc_arena_carve(struct pc_arena *a, uint64_t size, uint64_t align, uint64_t *off)
{
    if (a == NULL)
        return PAGED_E_INVAL;
    uint64_t start = (a->top + align - 1) & ~(align - 1);
    if (start < a->top || start > a->size || size > a->size - start)
        return PAGED_E_NOMEM;
    a->top = start + size;
    *off = start;
    return PAGED_OK;
}

/* Loads the CUDA driver for c on first need. */
int pc_cuda_need(paged_client *c)
{
    if (c->cuda != NULL)
        return PAGED_OK;
    return pc_cuda_load(&c->cuda, c->err, sizeof c->err);
}

/* Maps the device data arena on first need; see client.h. */
int pc_data_arena_map(paged_client *c)
{
    if (c->data_map.dptr != 0)
        return PAGED_OK;
    if (c->backend != PAGED_BACKEND_CUDA)
        return PAGED_E_INVAL;
    int rc = pc_cuda_need(c);
    int dev = 0;
    if (rc == PAGED_OK)
        rc = pc_cuda_find_device(c->cuda, c->device_uuid, &dev, c->err, sizeof c->err);
    if (rc < 0)
        return rc;
    if (c->data_kind == PCORE_MEM_CUDA_VMM)
        rc = pc_cuda_map_vmm(c->cuda, dev, c->data_fd, c->data_alloc, 1, &c->data_map, c->err,
                             sizeof c->err);
    else
        rc = pc_cuda_map_ipc(c->cuda, dev, c->data_ipc, &c->data_map, c->err, sizeof c->err);
    if (rc == PAGED_OK && c->data_fd >= 0) {
        /* Imported: the mapping keeps the memory, the descriptor is no longer needed. */
        close(c->data_fd);
        c->data_fd = -1;
    }
    return rc;
}

/* Returns an arena's base address (mapping the device arena first) and size. */
void *paged_arena_base(paged_client *c, paged_arena_kind kind, size_t *size)
{
    if (size != NULL)
        *size = 0;
    if (c == NULL)
        return NULL;
    struct pc_arena *a = pc_arena_of(c, kind);
    if (a == NULL)
        return NULL;
    void *base = a->base;
    if (a == &c->data) {
        if (pc_data_arena_map(c) < 0)
            return NULL;
        base = (void *) (uintptr_t) c->data_map.dptr;
    }
    if (size != NULL)
        *size = (size_t) a->size;
    return base;
}

/* Carves size bytes aligned to align (0: 64) from an arena. */
int paged_arena_alloc(paged_client *c, paged_arena_kind kind, size_t size, size_t align,
                      uint64_t *off)
{
    if (c == NULL || off == NULL)
        return PAGED_E_INVAL;
    if (align == 0)
        align = 64;
    if ((align & (align - 1)) != 0)
        return PAGED_E_INVAL;
    struct pc_arena *a = pc_arena_of(c, kind);
    if (a == NULL)
        return PAGED_E_INVAL;
    return pc_arena_carve(a, size, align, off);
}

/* Returns an arena's allocation mark. */
uint64_t paged_arena_mark(const paged_client *c, paged_arena_kind kind)
{
    if (c == NULL)
        return 0;
    const struct pc_arena *a = pc_arena_of((paged_client *) c, kind);
    return a != NULL ? a->top : 0;
}

/* Rewinds an arena to an earlier mark; a mark above the current one is ignored. */
void paged_arena_release(paged_client *c, paged_arena_kind kind, uint64_t mark)
{
    if (c == NULL)
        return;
    struct pc_arena *a = pc_arena_of(c, kind);
    if (a != NULL && mark <= a->top)
        a->top = mark;
}
