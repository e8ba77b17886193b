/* kvprompt.h: a prompt of fresh random keys and values for service tests: written, decoded, checked. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_TESTS_SERVICE_KVPROMPT_H
#define PAGED_TESTS_SERVICE_KVPROMPT_H

/*
 * The tiers' and the peers' tests move published blocks about (to host memory, files, another
 * daemon) and check that what comes back is what was published. Both use one small geometry:
 * 2 layers, 2 KV heads, head_dim 64, blocks of 16 tokens, f32, 4 blocks a prompt. A prompt is
 * written by a client, which records its blocks' bytes in the unit layout (every layer's K
 * then V, paged(7) TIERS) and one decode per layer over them; kp_check looks it up in another
 * client and compares, bit for bit. The records live in memory the test shares with its
 * child processes. On the cuda backend the tensors go through device memory (kp_on_cuda):
 * only children, which did not inherit CUDA, may call these then.
 */

#include <stdint.h>
#include <sys/types.h>

#include "paged.h"

#define KP_L 2
#define KP_H 2
#define KP_D 64
#define KP_B 16
#define KP_NB 4                           /* blocks of a prompt */
#define KP_PIECE (KP_H * KP_B * KP_D)     /* floats of one block of one layer's K or V */
#define KP_UNIT (KP_L * 2 * KP_PIECE)     /* floats of a unit */

/* A prompt: its tokens, its blocks' bytes as published, its query and decode per layer. */
struct kp_prompt {
    int32_t tokens[KP_NB * KP_B];
    float units[KP_NB][KP_UNIT];
    float q[KP_L][KP_H * KP_D];
    float out[KP_L][KP_H * KP_D];
};

/* What a look-up of a prompt found. */
struct kp_found {
    int found;                  /* LOOKUP's result */
    int same_bytes;             /* the blocks found hold the published bytes */
    int same_decode;            /* decodes over them (all found) equal the published ones */
    int status;                 /* the first failing call's status, else PAGED_OK */
    uint64_t lookup_ns;         /* how long the LOOKUP took */
};

/* Set by the test: the daemon runs the cuda backend, so tensors are device memory. */
extern int kp_on_cuda;

/* Returns a float of the sequence seeded by *s, in [-1, 1). */
float kp_rnd(uint64_t *s);

/* Writes prompt pr into KP_NB new blocks of p (a pool of num_blocks blocks of the geometry
 * above): tokens first_token, first_token + 1, ..., keys, values and queries from seed;
 * records what the blocks hold and what decoding over them gives, publishes them under salt
 * and frees them, leaving them cached. Returns PAGED_OK or the first failing status. */
int kp_publish(paged_pool *p, uint32_t num_blocks, struct kp_prompt *pr, int32_t first_token, uint64_t seed,
               uint64_t salt);

/* Looks pr up in p under salt and checks what it found against what was published, into
 * *out. The blocks found stay held by p's client. Returns nothing. */
void kp_check(paged_pool *p, uint32_t num_blocks, const struct kp_prompt *pr, uint64_t salt, struct kp_found *out);

/* Reports as tests what a look-up found (*r, of what): want blocks; where any, the published
 * bytes; where all KP_NB, the published decode, which decode says what it equals. Returns
 * nothing. */
void kp_expect_found(const struct kp_found *r, int want, const char *what, const char *decode);

/* Decodes pr's query over the KP_NB blocks ids at every layer into out; returns the first
 * failing status or PAGED_OK. */
int kp_decode(paged_pool *p, const struct kp_prompt *pr, const int32_t *ids, float out[KP_L][KP_H * KP_D]);

/* Copies block id of a pool of num_blocks blocks mapped at base (host or device memory) into
 * unit. Returns nothing. */
void kp_read_unit(const float *base, uint32_t num_blocks, int32_t id, float *unit);

/* In a child of kp_in_child: its own client. */
extern paged_client *kp_child_client;

/*
 * Runs fn(p, k) in a child process with a client of its own (named name) of the daemon at
 * socket, attached to pool p; a failure to connect or attach is written to *status (memory
 * the child shares with the caller). Returns the child's exit status (0: fn ran).
 */
int kp_in_child(const char *socket, const char *name, const char *pool, void (*fn)(paged_pool *p, int k), int k,
                int *status);

/*
 * Forks a child that connects to the daemon at socket as "holder", attaches pool, runs
 * work(p, ctx) (which takes blocks and returns PAGED_OK or an error) and then keeps what it
 * holds until the returned descriptor is closed; *pid gets the child. Returns the
 * descriptor once the child is there, having said in a diag when work failed.
 */
int kp_hold_in_child(const char *socket, const char *pool, int (*work)(paged_pool *p, void *ctx), void *ctx,
                     pid_t *pid);

#endif
