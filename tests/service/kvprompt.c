/* kvprompt.c: a prompt of fresh random keys and values for service tests: written, decoded, checked. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "tests/service/kvprompt.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/client/daemon_harness.h"
#include "tests/tap/basic.h"

int kp_on_cuda;

/* Returns a float of the sequence seeded by *s; see kvprompt.h. */
float kp_rnd(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float) ((double) (*s >> 40) / (double) (1ull << 24) * 2.0 - 1.0);
}

/* Returns the monotonic clock in nanoseconds. */
static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

/* Returns data, or a device copy of it on cuda (harness_arg_in). */
static void *arg_in(const void *data, size_t bytes)
{
    return harness_arg_in(kp_on_cuda, data, bytes);
}

/* Copies arg to dst and frees arg when owned, on cuda (harness_arg_out). Returns nothing. */
static void arg_out(void *dst, const void *arg, size_t bytes, int owned)
{
    harness_arg_out(kp_on_cuda, dst, arg, bytes, owned);
}

/* Copies a block of a mapped pool into a unit; see kvprompt.h. */
void kp_read_unit(const float *base, uint32_t num_blocks, int32_t id, float *unit)
{
    for (int pl = 0; pl < KP_L * 2; pl++)
        arg_out(unit + (size_t) pl * KP_PIECE, base + ((size_t) pl * num_blocks + (size_t) id) * KP_PIECE,
                KP_PIECE * sizeof *unit, 0);
}

/* Decodes a prompt's query over its blocks at every layer; see kvprompt.h. */
int kp_decode(paged_pool *p, const struct kp_prompt *pr, const int32_t *ids, float out[KP_L][KP_H * KP_D])
{
    const int32_t len = KP_NB * KP_B;
    for (int l = 0; l < KP_L; l++) {
        void *q = arg_in(pr->q[l], sizeof pr->q[l]), *o = kp_on_cuda ? arg_in(NULL, sizeof out[l]) : out[l];
        paged_attn_args a = {
            .num_seqs = 1, .num_q_heads = KP_H, .dtype = PAGED_DTYPE_F32, .q = q, .out = o,
            .block_tables = ids, .bt_stride = KP_NB, .seq_lens = &len, .sm_scale = 0.125f,
        };
        int rc = paged_decode(p, l, &a);
        arg_out(NULL, q, sizeof pr->q[l], q != pr->q[l]);
        arg_out(out[l], o, sizeof out[l], o != out[l]);
        if (rc != PAGED_OK)
            return rc;
    }
    return PAGED_OK;
}

/* Writes, records, publishes and frees a prompt; see kvprompt.h. */
int kp_publish(paged_pool *p, uint32_t num_blocks, struct kp_prompt *pr, int32_t first_token, uint64_t seed,
               uint64_t salt)
{
    uint64_t s = seed;
    for (int i = 0; i < KP_NB * KP_B; i++)
        pr->tokens[i] = first_token + i;
    int32_t ids[KP_NB], slots[KP_NB * KP_B];
    int rc = paged_alloc(p, KP_NB, ids);
    if (rc != PAGED_OK)
        return rc;
    for (int i = 0; i < KP_NB * KP_B; i++)
        slots[i] = ids[i / KP_B] * KP_B + i % KP_B;
    static float kv[2][KP_NB * KP_B * KP_H * KP_D];
    for (int l = 0; l < KP_L && rc == PAGED_OK; l++) {
        for (size_t i = 0; i < KP_NB * KP_B * KP_H * KP_D; i++) {
            kv[0][i] = kp_rnd(&s);
            kv[1][i] = kp_rnd(&s);
        }
        for (int i = 0; i < KP_H * KP_D; i++)
            pr->q[l][i] = kp_rnd(&s);
        void *dk = arg_in(kv[0], sizeof kv[0]), *dv = arg_in(kv[1], sizeof kv[1]);
        rc = paged_append(p, l, KP_NB * KP_B, PAGED_DTYPE_F32, dk, dv, slots);
        arg_out(NULL, dk, sizeof kv[0], dk != kv[0]);
        arg_out(NULL, dv, sizeof kv[1], dv != kv[1]);
    }
    void *base = NULL;
    if (rc == PAGED_OK)
        rc = paged_pool_map(p, &base);
    if (rc == PAGED_OK) {
        for (int b = 0; b < KP_NB; b++)
            kp_read_unit(base, num_blocks, ids[b], pr->units[b]);
        rc = kp_decode(p, pr, ids, pr->out);
    }
    if (rc == PAGED_OK && paged_publish(p, NULL, salt, KP_NB, pr->tokens, ids) != KP_NB)
        rc = PAGED_E_INVAL;
    int frc = paged_free(p, KP_NB, ids);
    return rc != PAGED_OK ? rc : frc;
}

/* Looks a prompt up and checks what came back; see kvprompt.h. */
void kp_check(paged_pool *p, uint32_t num_blocks, const struct kp_prompt *pr, uint64_t salt, struct kp_found *out)
{
    memset(out, 0, sizeof *out);
    int32_t ids[KP_NB];
    const uint64_t t0 = now_ns();
    out->found = paged_lookup(p, NULL, salt, KP_NB, pr->tokens, ids);
    out->lookup_ns = now_ns() - t0;
    if (out->found <= 0)
        return;
    void *base = NULL;
    out->status = paged_pool_map(p, &base);
    if (out->status != PAGED_OK)
        return;
    static float unit[KP_UNIT];
    out->same_bytes = 1;
    for (int b = 0; b < out->found; b++) {
        kp_read_unit(base, num_blocks, ids[b], unit);
        if (memcmp(unit, pr->units[b], sizeof unit) != 0)
            out->same_bytes = 0;
    }
    if (out->found == KP_NB) {
        float got[KP_L][KP_H * KP_D];
        out->status = kp_decode(p, pr, ids, got);
        out->same_decode = out->status == PAGED_OK && memcmp(got, pr->out, sizeof got) == 0;
    }
}

/* Forks a holder child; see kvprompt.h. */
int kp_hold_in_child(const char *socket, const char *pool, int (*work)(paged_pool *p, void *ctx), void *ctx,
                     pid_t *pid)
{
    int ready[2], release[2];
    if (pipe(ready) != 0 || pipe(release) != 0)
        sysbail("pipe");
    fflush(stdout);
    *pid = fork();
    if (*pid < 0)
        sysbail("fork");
    if (*pid == 0) {
        close(ready[0]);
        close(release[1]);
        paged_connect_opts o = { .socket_path = socket, .name = "holder", .timeout_ms = 10000 };
        paged_client *c = NULL;
        paged_pool *p = NULL;
        int rc = paged_client_connect(&o, &c);
        if (rc == PAGED_OK)
            rc = paged_pool_attach(c, pool, &p);
        if (rc == PAGED_OK)
            rc = work(p, ctx);
        char status = rc == PAGED_OK ? 'y' : 'n', byte;
        if (write(ready[1], &status, 1) == 1)
            (void) read(release[0], &byte, 1);   /* until the parent closes its end */
        paged_client_close(c);
        _exit(0);
    }
    close(ready[1]);
    close(release[0]);
    char status = 'n';
    if (read(ready[0], &status, 1) != 1 || status != 'y')
        diag("the holder child could not take its blocks in pool %s", pool);
    close(ready[0]);
    return release[1];
}

paged_client *kp_child_client;

/* Runs fn in a child with a client of its own; see kvprompt.h. */
int kp_in_child(const char *socket, const char *name, const char *pool, void (*fn)(paged_pool *p, int k), int k,
                int *status)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        sysbail("fork");
    if (pid == 0) {
        paged_connect_opts o = { .socket_path = socket, .name = name, .timeout_ms = 10000 };
        paged_client *c = NULL;
        paged_pool *p = NULL;
        int rc = paged_client_connect(&o, &c);
        kp_child_client = c;
        if (rc == PAGED_OK)
            rc = paged_pool_attach(c, pool, &p);
        if (rc == PAGED_OK)
            fn(p, k);
        else
            *status = rc;
        paged_client_close(c);
        _exit(rc == PAGED_OK ? 0 : 1);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

/* Reports a look-up's findings as tests; see kvprompt.h. */
void kp_expect_found(const struct kp_found *r, int want, const char *what, const char *decode)
{
    is_int(want, r->found, "%s: LOOKUP finds %d blocks", what, want);
    if (want > 0)
        ok(r->same_bytes, "%s: they hold the published bytes, bit for bit", what);
    if (want == KP_NB)
        ok(r->same_decode, "%s: %s (status %d)", what, decode, r->status);
}
