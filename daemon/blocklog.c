/* blocklog.c: a pool's prefix-block events waiting to reach subscribers. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/blocklog.h"

#include <stdlib.h>

#include "daemon/util/heap.h"

/* Records one event when enabled; see blocklog.h. */
void pd_blocklog_add(struct pd_blocklog *log, enum pd_block_action action, enum pd_block_tier tier,
                     uint32_t tenant, const paged_hash *hash)
{
    if (!log->enabled)
        return;
    if (log->n == log->cap) {
        uint32_t cap = log->cap == 0 ? 64 : log->cap * 2;
        void *ev = cap <= PD_BLOCKLOG_MAX ? pd_realloc(log->ev, (size_t) cap * sizeof *log->ev) : NULL;
        if (ev == NULL) {
            log->lost++;
            return;
        }
        log->ev = ev;
        log->cap = cap;
    }
    log->ev[log->n++] = (struct pd_block_event) {
        .action = (uint8_t) action, .tier = (uint8_t) tier, .tenant = tenant, .hash = *hash,
    };
}

/* Forgets the recorded events; see blocklog.h. */
void pd_blocklog_clear(struct pd_blocklog *log)
{
    log->n = 0;
    log->lost = 0;
}

/* Frees the log's memory; see blocklog.h. */
void pd_blocklog_free(struct pd_blocklog *log)
{
    free(log->ev);
    log->ev = NULL;
    log->n = log->cap = 0;
}
