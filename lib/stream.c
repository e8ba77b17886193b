/* stream.c: paged_stream_wait, paged_stream_signal: a worker's CUDA stream waiting for or writing a data arena word. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>

#include "lib/client.h"

/*
 * Checks the call, maps the data arena on first need and queues the word's wait (wait) or
 * write on stream; a failure's reason goes to paged_client_error, naming the function.
 * Returns as paged_stream_wait.
 */
static int stream_word(paged_client *c, void *stream, uint64_t off, uint32_t value, unsigned flags, int wait)
{
    if (c == NULL)
        return PAGED_E_INVAL;
    const char *fn = wait ? "paged_stream_wait" : "paged_stream_signal";
    if (c->backend != PAGED_BACKEND_CUDA) {
        pc_set_err(c, "%s: the daemon runs the cpu backend, whose dependency words are host memory: "
                   "wait for and write them from the CPU", fn);
        return PAGED_E_NOTSUP;
    }
    const unsigned how = flags & ~(unsigned) PAGED_STREAM_HOST;
    if ((how & ~(PAGED_STREAM_KERNEL | PAGED_STREAM_MEMOP)) != 0 || how == (PAGED_STREAM_KERNEL | PAGED_STREAM_MEMOP)) {
        pc_set_err(c, "%s: flags 0x%x: give PAGED_STREAM_AUTO, PAGED_STREAM_KERNEL or PAGED_STREAM_MEMOP, "
                   "with PAGED_STREAM_HOST or without", fn, flags);
        return PAGED_E_INVAL;
    }
    if (off % 4 != 0) {
        pc_set_err(c, "%s: word offset %llu is not 4-byte aligned", fn, (unsigned long long) off);
        return PAGED_E_INVAL;
    }
    const int host = (flags & PAGED_STREAM_HOST) != 0;
    const struct pc_arena *arena = host ? &c->host : &c->data;
    if (off > arena->size || arena->size - off < 4) {
        pc_set_err(c, "%s: word offset %llu is beyond the %s arena (%llu bytes)", fn, (unsigned long long) off,
                   host ? "host" : "data", (unsigned long long) arena->size);
        return PAGED_E_INVAL;
    }
    int rc = pc_data_arena_map(c);
    if (rc < 0)
        return rc;
    char why[PC_ERR_MAX - 32] = "";
    if (host && c->host_dptr == 0) {
        rc = pc_cuda_host_map(c->cuda, c->data_map.device, c->host.base, c->host.size, &c->host_dptr, why,
                              sizeof why);
        if (rc < 0) {
            pc_set_err(c, "%s: %s", fn, why);
            return rc;
        }
    }
    const uint64_t addr = (host ? c->host_dptr : c->data_map.dptr) + off;
    rc = pc_cuda_word(c->cuda, c->data_map.device, stream, addr, value, wait, how, why, sizeof why);
    if (rc < 0)
        pc_set_err(c, "%s: %s", fn, why);
    return rc;
}

/* Queues a wait for a word on a stream; see paged.h. */
int paged_stream_wait(paged_client *c, void *stream, uint64_t off, uint32_t value, unsigned flags)
{
    return stream_word(c, stream, off, value, flags, 1);
}

/* Queues a write of a word on a stream; see paged.h. */
int paged_stream_signal(paged_client *c, void *stream, uint64_t off, uint32_t value, unsigned flags)
{
    return stream_word(c, stream, off, value, flags, 0);
}
