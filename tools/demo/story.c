/* story.c: what paged-demo tells: who made and shares the pool and its prefix, then how each worker did. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tools/demo/story.h"

#include <stdio.h>

#include "paged.h"
#include "tools/common/spawn.h"

/* Returns the name of a backend a worker reported. */
static const char *backend_name(int32_t backend)
{
    return backend == PAGED_BACKEND_CPU ? "cpu" : backend == PAGED_BACKEND_CUDA ? "cuda" : "unknown";
}

/* Returns the report of the worker that created the pool, or NULL. */
static const struct demo_result *creator(const struct demo_crew *c)
{
    for (uint32_t i = 0; i < c->n; i++)
        if (c->last[i].created)
            return &c->last[i];
    return NULL;
}

/* Prints what worker r did with the pool and the prefix by the time its prompts were built. */
static void story_worker(const struct demo_result *r, const char *pool, uint32_t seqs)
{
    if (r->pid == 0) {
        printf("worker %u: no report\n", (unsigned) r->index);
        return;
    }
    printf("worker %u (pid %ld, client %u): ", (unsigned) r->index, (long) r->pid,
           (unsigned) r->client_id);
    if (r->pool_id == 0) {
        printf("failed: %s\n", r->error);
        return;
    }
    printf("%s pool '%s'; ", r->created ? "created" : "attached to", pool);
    if (r->published > 0) {
        printf("published the prefix as %u blocks", (unsigned) r->published);
        if (seqs > 1)
            printf("; %u of its other %u sequences adopted them", (unsigned) r->adopted_seqs,
                   (unsigned) seqs - 1);
    } else
        printf("%u of its %u sequences adopted the prefix's blocks", (unsigned) r->adopted_seqs,
               (unsigned) seqs);
    if (r->status != PAGED_OK)
        printf("; then failed: %s", r->error);
    printf("\n");
}

/* Prints the pool, each worker's part and the shared prefix. */
void demo_story_pool(const struct demo_crew *c, const char *pool, const struct demo_model *m,
                     uint32_t prefix_len)
{
    const struct demo_result *made = creator(c);
    uint32_t seqs = 0, workers = 0, blocks = 0, publisher = 0;
    if (made != NULL)
        printf("\npool '%s' (id %u) on the %s backend: %u blocks of %u tokens, %.1f MiB "
               "(K and V of %u layers x %u heads x %u dims, %s)\n", pool,
               (unsigned) made->pool_id, backend_name(made->backend), (unsigned) made->pool_blocks,
               (unsigned) m->block_size, (double) made->pool_bytes / (1024.0 * 1024.0),
               (unsigned) m->num_layers, (unsigned) m->num_kv_heads, (unsigned) m->head_dim,
               paged_dtype_name(m->dtype));
    for (uint32_t i = 0; i < c->n; i++) {
        const struct demo_result *r = &c->last[i];
        story_worker(r, pool, c->progress.plan.seqs);
        seqs += r->adopted_seqs;
        workers += r->adopted_seqs > 0;
        if (r->published > 0) {
            blocks = r->published;
            publisher = i;
        }
    }
    if (blocks == 0)
        printf("shared prefix: none published\n\n");
    else if (seqs == 0)
        printf("shared prefix: %u tokens in %u blocks, published by worker %u; no other "
               "sequence adopted them\n\n", (unsigned) prefix_len, (unsigned) blocks,
               (unsigned) publisher);
    else
        printf("shared prefix: %u tokens in %u blocks, computed once by worker %u and adopted "
               "by %u sequence%s in %u worker%s\n\n", (unsigned) prefix_len, (unsigned) blocks,
               (unsigned) publisher, (unsigned) seqs, seqs == 1 ? "" : "s", (unsigned) workers,
               workers == 1 ? "" : "s");
}

/* Prints one finished worker's line. */
static void report_worker(const struct demo_result *r)
{
    double secs = (double) (r->end_ns - r->start_ns) / 1e9;
    double tps = secs > 0 ? (double) r->decode_tokens / secs : 0.0;
    printf("worker %u: %llu tokens in %.3f s (%.1f tokens/s); %llu outputs checked, "
           "%llu mismatches\n", (unsigned) r->index, (unsigned long long) r->decode_tokens,
           secs, tps, (unsigned long long) r->outputs, (unsigned long long) r->mismatches);
}

/* Prints how worker i failed: its error, and how its process ended. */
static void report_failure(const struct demo_crew *c, uint32_t i)
{
    char how[64];
    const struct demo_result *r = &c->last[i];
    printf("worker %u: FAILED: ", (unsigned) i);
    if (r->status != PAGED_OK)
        printf("%s; ", r->error);
    else if (!c->done[i])
        printf("no result; ");
    printf("%s\n", c->pids[i] < 0 ? "not started"
           : spawn_describe(how, sizeof how, c->reaped[i] ? c->status[i] : -1));
}

/* Prints the results and the total; returns 1 when all is well. */
int demo_story_results(const struct demo_crew *c)
{
    uint64_t tokens = 0, outputs = 0, mismatches = 0;
    int64_t first = 0, last = 0;
    uint32_t finished = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        const struct demo_result *r = &c->last[i];
        if (!demo_crew_finished(c, i)) {
            report_failure(c, i);
            continue;
        }
        report_worker(r);
        finished++;
        tokens += r->decode_tokens;
        outputs += r->outputs;
        mismatches += r->mismatches;
        if (first == 0 || r->start_ns < first)
            first = r->start_ns;
        if (r->end_ns > last)
            last = r->end_ns;
    }
    double secs = (double) (last - first) / 1e9;
    printf("total: %llu decode tokens in %.3f s: %.1f tokens/s over %u workers",
           (unsigned long long) tokens, secs, secs > 0 ? (double) tokens / secs : 0.0,
           (unsigned) finished);
    if (finished < c->n)
        printf(" (%u of %u failed)", (unsigned) (c->n - finished), (unsigned) c->n);
    printf("\n");
    int ok = finished == c->n && outputs > 0 && mismatches == 0;
    if (ok)
        printf("all %llu outputs match the CPU reference\n", (unsigned long long) outputs);
    else if (mismatches > 0)
        printf("%llu of %llu outputs differ from the CPU reference\n",
               (unsigned long long) mismatches, (unsigned long long) outputs);
    else if (outputs > 0)
        printf("the %llu outputs of the %u workers that finished match the CPU reference\n",
               (unsigned long long) outputs, (unsigned) finished);
    return ok;
}
