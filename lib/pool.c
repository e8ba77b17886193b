/* pool.c: pools: create, attach, detach, destroy, and mapping their memory into this process. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/client.h"
#include "lib/core/shm.h"
#include "lib/core/sock.h"

/* Copies a pool name into a wire field; returns PAGED_OK or PAGED_E_INVAL (explained). */
static int copy_name(paged_client *c, char dst[PCORE_NAME_MAX], const char *name)
{
    if (name == NULL || name[0] == '\0' || strlen(name) >= PCORE_NAME_MAX) {
        pc_set_err(c, "pool name must be 1 to %u bytes", PCORE_NAME_MAX - 1);
        return PAGED_E_INVAL;
    }
    memset(dst, 0, PCORE_NAME_MAX);
    memcpy(dst, name, strlen(name));
    return PAGED_OK;
}

/* Copies a group name (NULL or "": none) into a wire field; returns PAGED_OK or PAGED_E_INVAL
 * (explained). */
static int copy_group(paged_client *c, char dst[PCORE_NAME_MAX], const char *group)
{
    memset(dst, 0, PCORE_NAME_MAX);
    if (group == NULL)
        return PAGED_OK;
    if (strlen(group) >= PCORE_NAME_MAX) {
        pc_set_err(c, "group name must be at most %u bytes", PCORE_NAME_MAX - 1);
        return PAGED_E_INVAL;
    }
    memcpy(dst, group, strlen(group));
    return PAGED_OK;
}

/* Returns the layout size of a reply's geometry, or 0 if it overflows or is empty. */
static uint64_t layout_bytes(const struct pcore_msg_pool_reply *r)
{
    uint64_t n = paged_dtype_size((paged_dtype) r->dtype);
    uint32_t dims[] = { r->num_layers, 2, r->num_blocks, r->num_kv_heads, r->block_size,
                        r->head_dim };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (__builtin_mul_overflow(n, dims[i], &n))
            return 0;
    return n;
}

/*
 * Builds a pool handle from a POOL_REPLY and its descriptors (consumed either way); a sealed
 * pool's reply carries no memory (PCORE_MEM_NONE, no descriptor), an exported one's does.
 * Returns PAGED_OK or an error, explained in c->err.
 */
static int pool_from_reply(paged_client *c, const char *name, const struct pcore_msg_pool_reply *r,
                           int *fds, int nfds, paged_pool **out)
{
    int sealed = (r->mode & PAGED_POOL_SEALED) != 0;
    int want = r->mem_kind == PCORE_MEM_CUDA_IPC || sealed ? 0 : 1;
    uint64_t bytes = layout_bytes(r);
    int ok = nfds == want && r->num_fds == (uint32_t) nfds && bytes != 0 && r->bytes == bytes
             && r->shards >= 1 && r->shard < r->shards && r->kv_head_offset == r->shard * r->num_kv_heads;
    if (sealed)
        ok = ok && r->mem_kind == PCORE_MEM_NONE && (r->mode & PAGED_POOL_EXPORTED) == 0;
    else
        ok = ok && (r->mem_kind == PCORE_MEM_MEMFD || r->mem_kind == PCORE_MEM_CUDA_VMM
                    || r->mem_kind == PCORE_MEM_CUDA_IPC)
             && r->alloc_bytes >= bytes
             && (r->mem_kind == PCORE_MEM_MEMFD) == (c->backend == PAGED_BACKEND_CPU);
    if (!ok) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        pc_set_err(c, "pool '%s': the daemon's reply does not add up", name);
        return PAGED_E_PROTO;
    }
    paged_pool *p = calloc(1, sizeof *p);
    if (p == NULL) {
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        return PAGED_E_NOMEM;
    }
    p->c = c;
    snprintf(p->name, sizeof p->name, "%s", name);
    p->fd = nfds > 0 ? fds[0] : -1;
    p->mem_kind = r->mem_kind;
    p->alloc_bytes = r->alloc_bytes;
    memcpy(p->ipc, r->ipc_handle, sizeof p->ipc);
    memcpy(p->uuid, r->device_uuid, sizeof p->uuid);
    p->info = (paged_pool_info) {
        .id = r->pool_id,
        .num_layers = r->num_layers,
        .num_kv_heads = r->num_kv_heads,
        .head_dim = r->head_dim,
        .block_size = r->block_size,
        .num_blocks = r->num_blocks,
        .dtype = (paged_dtype) r->dtype,
        .k_scale = r->k_scale,
        .v_scale = r->v_scale,
        .writable = r->writable != 0,
        .owner_uid = r->owner_uid,
        .mode = r->mode,
        .bytes = r->bytes,
        .shards = r->shards,
        .shard = r->shard,
        .kv_head_offset = r->kv_head_offset,
        .device = r->device,
    };
    p->next = c->pools;
    c->pools = p;
    *out = p;
    return PAGED_OK;
}

/* Sends a create or attach request and builds the handle from the reply. */
static int pool_open(paged_client *c, void *msg, size_t len, const char *name, paged_pool **out)
{
    struct pcore_msg_pool_reply r;
    int fds[PSOCK_MAX_FDS], nfds = 0;
    int rc = pc_ctl_call(c, msg, len, PCORE_MSG_POOL_REPLY, &r, sizeof r, fds, PSOCK_MAX_FDS,
                         &nfds);
    if (rc < 0)
        return rc;
    return pool_from_reply(c, name, &r, fds, nfds, out);
}

/* Creates a pool and attaches to it. */
int paged_pool_create(paged_client *c, const paged_pool_desc *d, paged_pool **out)
{
    if (out != NULL)
        *out = NULL;
    if (c == NULL || d == NULL || out == NULL)
        return PAGED_E_INVAL;
    c->err[0] = '\0';
    struct pcore_msg_pool_create m;
    memset(&m, 0, sizeof m);
    m.hdr.type = PCORE_MSG_POOL_CREATE;
    int rc = copy_name(c, m.name, d->name);
    if (rc < 0)
        return rc;
    m.num_layers = d->num_layers;
    m.num_kv_heads = d->num_kv_heads;
    m.head_dim = d->head_dim;
    m.block_size = d->block_size;
    m.dtype = (uint32_t) d->dtype;
    m.num_blocks = d->num_blocks;
    m.byte_budget = d->byte_budget;
    m.host_tier_bytes = d->host_tier_bytes;
    m.mode = d->mode != 0 ? d->mode : 0600;
    m.k_scale = d->k_scale != 0.0f ? d->k_scale : 1.0f;
    m.v_scale = d->v_scale != 0.0f ? d->v_scale : 1.0f;
    m.flags = PCORE_ATTACH_WRITE;
    m.shards = d->shards;
    m.as.shard = d->shard;
    m.device = d->device;
    rc = copy_group(c, m.as.group, d->group);
    if (rc < 0)
        return rc;
    return pool_open(c, &m, sizeof m, d->name, out);
}

/* Sends POOL_ATTACH for pool name, shard shard of group (NULL: none; an unsharded pool's
 * attach sends zeros) and builds the handle. Returns as paged_pool_attach. */
static int attach(paged_client *c, const char *name, uint32_t shard, const char *group, paged_pool **out)
{
    if (out != NULL)
        *out = NULL;
    if (c == NULL || out == NULL)
        return PAGED_E_INVAL;
    c->err[0] = '\0';
    struct pcore_msg_pool_attach m;
    memset(&m, 0, sizeof m);
    m.hdr.type = PCORE_MSG_POOL_ATTACH;
    int rc = copy_name(c, m.name, name);
    if (rc == PAGED_OK)
        rc = copy_group(c, m.as.group, group);
    if (rc < 0)
        return rc;
    m.flags = PCORE_ATTACH_WRITE;
    m.as.shard = shard;
    return pool_open(c, &m, sizeof m, name, out);
}

/* Attaches to an existing pool by name, writable where its mode allows. */
int paged_pool_attach(paged_client *c, const char *name, paged_pool **out)
{
    return attach(c, name, 0, NULL, out);
}

/* Attaches to one shard of a tensor-parallel pool, in a group of workers. */
int paged_pool_attach_shard(paged_client *c, const char *name, uint32_t shard, const char *group,
                            paged_pool **out)
{
    return attach(c, name, shard, group, out);
}

/* Frees a pool handle, its sequences and mappings, without telling the daemon. */
void pc_pool_free(paged_pool *p)
{
    paged_client *c = p->c;
    for (paged_pool **pp = &c->pools; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    while (p->seqs != NULL)
        pc_seq_free(p->seqs);
    if (p->host_map != NULL)
        pcore_shm_unmap(p->host_map, p->alloc_bytes);
    pc_cuda_unmap(c->cuda, &p->dev_map);
    if (p->fd >= 0)
        close(p->fd);
    free(p);
}

/* Detaches from a pool; the handle is freed whatever the daemon says. */
int paged_pool_detach(paged_pool *p)
{
    if (p == NULL)
        return PAGED_E_INVAL;
    paged_client *c = p->c;
    c->err[0] = '\0';
    struct pcore_msg_pool_ref m;
    memset(&m, 0, sizeof m);
    m.hdr.type = PCORE_MSG_POOL_DETACH;
    m.pool_id = p->info.id;
    memcpy(m.name, p->name, sizeof m.name);
    struct pcore_msg_hdr r;
    int fds[PSOCK_MAX_FDS], nfds = 0;
    int rc = pc_ctl_call(c, &m, sizeof m, PCORE_MSG_OK, &r, sizeof r, fds, 0, &nfds);
    pc_pool_free(p);
    return rc;
}

/* Removes a pool's name. */
int paged_pool_destroy(paged_client *c, const char *name)
{
    if (c == NULL)
        return PAGED_E_INVAL;
    c->err[0] = '\0';
    struct pcore_msg_pool_ref m;
    memset(&m, 0, sizeof m);
    m.hdr.type = PCORE_MSG_POOL_DESTROY;
    int rc = copy_name(c, m.name, name);
    if (rc < 0)
        return rc;
    struct pcore_msg_hdr r;
    int fds[PSOCK_MAX_FDS], nfds = 0;
    return pc_ctl_call(c, &m, sizeof m, PCORE_MSG_OK, &r, sizeof r, fds, 0, &nfds);
}

/* Fills *info for an attached pool. */
void paged_pool_get_info(const paged_pool *p, paged_pool_info *info)
{
    if (p == NULL || info == NULL)
        return;
    *info = p->info;
}

/* Maps a cuda pool's memory on its device; returns PAGED_OK or an error (explained). */
static int map_device_pool(paged_pool *p)
{
    paged_client *c = p->c;
    int rc = pc_cuda_need(c);
    int dev = 0;
    if (rc == PAGED_OK)
        rc = pc_cuda_find_device(c->cuda, p->uuid, &dev, c->err, sizeof c->err);
    if (rc < 0)
        return rc;
    if (p->mem_kind == PCORE_MEM_CUDA_VMM)
        rc = pc_cuda_map_vmm(c->cuda, dev, p->fd, p->alloc_bytes, p->info.writable, &p->dev_map,
                             c->err, sizeof c->err);
    else
        rc = pc_cuda_map_ipc(c->cuda, dev, p->ipc, &p->dev_map, c->err, sizeof c->err);
    return rc;
}

/* Returns a pointer to the pool's memory, mapping it on first use; a sealed pool has none to map. */
int paged_pool_map(paged_pool *p, void **base)
{
    if (base != NULL)
        *base = NULL;
    if (p == NULL || base == NULL)
        return PAGED_E_INVAL;
    paged_client *c = p->c;
    if (p->mem_kind == PCORE_MEM_NONE) {
        pc_set_err(c, "pool '%s' is sealed: its memory is not exported; requests through the daemon "
                   "reach it", p->name);
        return PAGED_E_PERM;
    }
    if (p->host_map != NULL) {
        *base = p->host_map;
        return PAGED_OK;
    }
    if (p->dev_map.dptr != 0) {
        *base = (void *) (uintptr_t) p->dev_map.dptr;
        return PAGED_OK;
    }
    int rc;
    if (p->mem_kind == PCORE_MEM_MEMFD) {
        rc = pcore_shm_map(p->fd, p->alloc_bytes, p->info.writable, &p->host_map);
        if (rc == PAGED_E_PERM && p->info.writable) {
            /* A read-only descriptor after all: the daemon is the judge of access. */
            rc = pcore_shm_map(p->fd, p->alloc_bytes, 0, &p->host_map);
        }
        if (rc < 0) {
            p->host_map = NULL;
            pc_set_err(c, "pool '%s': cannot map its memory: %s", p->name, paged_strerror(rc));
            return rc;
        }
        *base = p->host_map;
    } else {
        rc = map_device_pool(p);
        if (rc < 0)
            return rc;
        *base = (void *) (uintptr_t) p->dev_map.dptr;
    }
    /* Mapped: the mapping holds the memory (VMM import is done; memfd mapped). */
    if (p->fd >= 0) {
        close(p->fd);
        p->fd = -1;
    }
    return PAGED_OK;
}
