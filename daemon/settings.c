/* settings.c: pagedd's settings: defaults, paged.conf, command-line options, live reload. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/settings.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/util/log.h"
#include "lib/core/proto.h"

/* How a key's value is stored in struct pd_config. */
enum key_type { T_STR, T_BOOL, T_U32, T_U64, T_OCTAL, T_LEVEL, T_BACKEND, T_MEMORY, T_WAITS, T_FD };

/* The internal table: the public part plus where and how the value is kept. */
struct key_slot {
    struct pd_config_key pub;
    enum key_type type;
    size_t off;
    size_t size;        /* T_STR: buffer size */
    uint64_t min, max;  /* numbers: accepted range */
};

#define STR(field) T_STR, offsetof(struct pd_config, field), sizeof(((struct pd_config *) 0)->field), 0, 0
#define NUM(t, field, lo, hi) t, offsetof(struct pd_config, field), 0, lo, hi

static const struct key_slot keys[] = {
    { { "socket", 1, 's', 1, 0, "PATH", "listen on PATH (default $PAGED_SOCKET, "
        "$XDG_RUNTIME_DIR/paged/pagedd.sock or /run/paged/pagedd.sock)" }, STR(socket) },
    { { "config", 1, 'c', 0, 0, "FILE", "read settings from FILE (default: the FILES line below)" }, STR(config) },
    { { "foreground", 0, 'f', 1, 0, NULL, "stay in the foreground and log to stderr" },
      NUM(T_BOOL, foreground, 0, 1) },
    { { "backend", 1, 'b', 1, 0, "cpu|cuda|auto", "where pool memory lives and kernels run" },
      NUM(T_BACKEND, backend, 0, 2) },
    { { "device", 1, 'd', 1, 0, "LIST", "the GPUs of the cuda backend: indexes or UUIDs separated by commas, "
        "or all (the default)" }, STR(device) },
    { { "log-level", 1, 'l', 1, 1, "LEVEL", "error, warning, info (default) or debug" },
      NUM(T_LEVEL, log_level, 0, 3) },
    { { "log-file", 1, 0, 1, 0, "FILE", "append the log to FILE instead of syslog or standard error" },
      STR(log_file) },
    { { "pid-file", 1, 'p', 1, 0, "FILE", "write the daemon's pid to FILE" }, STR(pid_file) },
    { { "socket-mode", 1, 0, 1, 0, "OCTAL", "permission bits of the socket (default 0660)" },
      NUM(T_OCTAL, socket_mode, 0, 0777) },
    { { "socket-group", 1, 0, 1, 0, "GROUP", "group of the socket (name or number)" },
      STR(socket_group) },
    { { "max-clients", 1, 0, 1, 1, "N", "most clients with a channel at once (default 256)" },
      NUM(T_U32, max_clients, 1, 65536) },
    { { "max-clients-per-uid", 1, 0, 1, 1, "N", "most clients of one user but root (default 64)" },
      NUM(T_U32, max_clients_per_uid, 1, 65536) },
    { { "max-control-per-uid", 1, 0, 1, 1, "N", "most control connections (pactl) of one user (default 8)" },
      NUM(T_U32, max_control_per_uid, 1, 65536) },
    { { "max-pending-per-uid", 1, 0, 1, 1, "N", "most connections of one user before HELLO (default 32)" },
      NUM(T_U32, max_pending_per_uid, 1, 65536) },
    { { "max-pools", 1, 0, 1, 1, "N", "most pools at once (default 64)" },
      NUM(T_U32, max_pools, 1, 65536) },
    { { "max-blocks-per-client", 1, 0, 1, 1, "N", "most block references per client (0: no limit)" },
      NUM(T_U64, max_blocks_per_client, 0, UINT32_MAX) },
    { { "pool-memory", 1, 0, 1, 1, "auto|sealed|exported", "how a new pool's memory reaches clients when "
        "its creator does not say (default auto: sealed if group or others may attach)" },
      NUM(T_MEMORY, pool_memory, 0, 2) },
    { { "threads", 1, 't', 1, 0, "N", "cpu backend worker threads (0: one per online CPU)" },
      NUM(T_U32, threads, 0, 1024) },
    { { "hello-timeout", 1, 0, 1, 1, "MS", "drop a connection silent for MS ms (default 5000)" },
      NUM(T_U32, hello_timeout_ms, 1, 3600000) },
    { { "control-idle-timeout", 1, 0, 1, 1, "MS", "close a control connection silent for MS ms, "
        "subscribers aside (default 60000; 0: never)" },
      NUM(T_U32, control_idle_timeout_ms, 0, 86400000) },
    { { "spin-us", 1, 0, 1, 1, "US", "poll rings US microseconds after work before sleeping (default 1000)" },
      NUM(T_U32, spin_us, 0, 100000) },
    { { "dependency-timeout", 1, 0, 1, 1, "MS", "fail a request whose wait word is not reached "
        "within MS ms (default 1000)" },
      NUM(T_U32, dependency_timeout_ms, 1, 3600000) },
    { { "dependency-waits", 1, 0, 1, 1, "isolated|inline", "cuda: where a request waits for its word (default "
        "isolated: off the GPU, holding up only its client; inline: on the daemon's stream, for trusted clients)" },
      NUM(T_WAITS, dependency_waits, 0, 1) },
    { { "dependency-strikes", 1, 0, 1, 1, "N", "refuse the waits of a user whose waits timed out N times in "
        "the last minute, unless already reached (default 3; 0: never)" },
      NUM(T_U32, dependency_strikes, 0, 1000) },
    { { "prefix-ttl", 1, 0, 1, 1, "MS", "a new pool drops a cached prefix block nobody pinned MS ms after its "
        "last use (default 0: never; pactl ttl changes a pool's)" },
      NUM(T_U32, prefix_ttl_ms, 0, PCORE_PREFIX_MAX_TTL_MS) },
    { { "pin-limit-uid", 1, 0, 1, 1, "PERCENT", "most of a pool's blocks one user but root may keep pinned "
        "(default 25)" },
      NUM(T_U32, pin_limit_uid, 0, 100) },
    { { "pin-limit-pool", 1, 0, 1, 1, "PERCENT", "most of a pool's blocks all users together may keep pinned "
        "(default 50)" },
      NUM(T_U32, pin_limit_pool, 0, 100) },
    { { "host-tier-mb", 1, 0, 1, 1, "MIB", "host memory behind a new pool for the published blocks it evicts, "
        "when its creator names none (default 0: none)" },
      NUM(T_U64, host_tier_mb, 0, UINT32_MAX) },
    { { "host-tier-max-mb", 1, 0, 1, 1, "MIB", "the largest host tier a pool's creator may ask for "
        "(default 4096)" },
      NUM(T_U64, host_tier_max_mb, 0, UINT32_MAX) },
    { { "file-tier", 1, 0, 1, 1, "DIR", "keep the units a pool's host tier pushes out in files under DIR, "
        "for later and for the next daemon (default: none)" }, STR(file_tier) },
    { { "file-tier-mb", 1, 0, 1, 1, "MIB", "most MiB of unit files one pool keeps (default 0: no bound)" },
      NUM(T_U64, file_tier_mb, 0, UINT32_MAX) },
    { { "shutdown-write-timeout", 1, 0, 1, 1, "MS", "the longest a shutdown spends writing the pools' blocks and "
        "host tiers to their file tiers (default 30000; 0: no bound)" },
      NUM(T_U32, shutdown_write_timeout_ms, 0, 86400000) },
    { { "peer-listen", 1, 0, 1, 0, "ADDR:PORT", "take peer daemons' connections on ADDR:PORT, over UCX "
        "(default: none)" }, STR(peer_listen) },
    { { "peers", 1, 0, 1, 0, "ADDR:PORT,...", "ask these peer daemons, in order, for the published prefixes "
        "a LOOKUP misses (default: none)" }, STR(peers) },
    { { "peer-key", 1, 0, 1, 0, "FILE", "the peers' shared secret, a file only the daemon's user may read "
        "(default: none)" }, STR(peer_key) },
    { { "peer-timeout", 1, 0, 1, 0, "MS", "the longest a LOOKUP waits for the peers (default 500)" },
      NUM(T_U32, peer_timeout_ms, 1, 60000) },
    { { "ready-fd", 1, 0, 0, 0, "FD", "write READY to descriptor FD once serving, then close it" },
      NUM(T_FD, ready_fd, 0, 65535) },
};

#define NKEYS ((int) (sizeof keys / sizeof keys[0]))

/* The words of a setting that names one of a few choices, in the order of their values. */
struct choice {
    const char *names[3];
    const char *text;              /* for an error: what would do */
};

static const struct choice backend_choice = { { "auto", "cpu", "cuda" }, "cpu, cuda or auto" };
static const struct choice memory_choice = { { "auto", "sealed", "exported" }, "auto, sealed or exported" };
static const struct choice waits_choice = { { "isolated", "inline", NULL }, "isolated or inline" };

/* Returns the choices of a T_BACKEND, T_MEMORY or T_WAITS slot. */
static const struct choice *choice_of(enum key_type t)
{
    return t == T_BACKEND ? &backend_choice : t == T_MEMORY ? &memory_choice : &waits_choice;
}

/* Returns the value (index) of word among ch's names, or -1 when it is none of them. */
static int parse_choice(const struct choice *ch, const char *word)
{
    for (int i = 0; i < 3 && ch->names[i] != NULL; i++)
        if (strcmp(ch->names[i], word) == 0)
            return i;
    return -1;
}

/* Fills cfg with the defaults; returns nothing. */
void pd_config_defaults(struct pd_config *cfg, const char *default_config)
{
    memset(cfg, 0, sizeof *cfg);
    snprintf(cfg->config, sizeof cfg->config, "%s", default_config);
    cfg->backend = PD_BACKEND_AUTO;
    cfg->log_level = PD_LOG_INFO;
    cfg->socket_mode = 0660;
    cfg->max_clients = 256;
    cfg->max_clients_per_uid = 64;
    cfg->max_control_per_uid = 8;
    cfg->max_pending_per_uid = 32;
    cfg->control_idle_timeout_ms = 60000;
    cfg->max_pools = 64;
    cfg->hello_timeout_ms = 5000;
    cfg->spin_us = 1000;
    cfg->dependency_timeout_ms = 1000;
    cfg->dependency_strikes = 3;
    cfg->pin_limit_uid = 25;
    cfg->pin_limit_pool = 50;
    cfg->host_tier_max_mb = 4096;
    cfg->peer_timeout_ms = 500;
    cfg->shutdown_write_timeout_ms = 30000;
    cfg->ready_fd = -1;
}

/* Returns the public table of keys and its length. */
const struct pd_config_key *pd_config_keys(int *n)
{
    static struct pd_config_key pub[NKEYS];
    for (int i = 0; i < NKEYS; i++)
        pub[i] = keys[i].pub;
    *n = NKEYS;
    return pub;
}

/* Returns the slot for key, or NULL. */
static const struct key_slot *find_key(const char *key)
{
    for (int i = 0; i < NKEYS; i++)
        if (strcmp(keys[i].pub.name, key) == 0)
            return &keys[i];
    return NULL;
}

/* Parses an unsigned number in base (0: C rules) within [min, max]; returns 0 or -1. */
static int parse_num(const char *s, int base, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    if (*s == '\0' || *s == '-' || isspace((unsigned char) *s))
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, base);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* Parses a boolean word; returns 0 or 1, or -1 when it is not one. */
static int parse_bool(const char *s)
{
    static const char *const yes[] = { "yes", "true", "on", "1" };
    static const char *const no[] = { "no", "false", "off", "0" };
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0)
            return 1;
        if (strcasecmp(s, no[i]) == 0)
            return 0;
    }
    return -1;
}

/* Stores a value into cfg per its slot; returns 0 or -1 with *cause. */
static int store(struct pd_config *cfg, const struct key_slot *k, const char *value, char **cause)
{
    char *base = (char *) cfg + k->off;
    uint64_t v;
    switch (k->type) {
    case T_STR:
        if (strlen(value) >= k->size) {
            if (asprintf(cause, "%s: value too long (at most %zu bytes)", k->pub.name, k->size - 1) < 0)
                *cause = NULL;
            return -1;
        }
        memcpy(base, value, strlen(value) + 1);
        return 0;
    case T_BOOL: {
        int b = parse_bool(value);
        if (b < 0)
            break;
        *(int *) base = b;
        return 0;
    }
    case T_U32:
    case T_FD:
        if (parse_num(value, 10, k->min, k->max, &v) < 0) {
            if (asprintf(cause, "%s: '%s' is not a number from %llu to %llu", k->pub.name, value,
                         (unsigned long long) k->min, (unsigned long long) k->max) < 0)
                *cause = NULL;
            return -1;
        }
        if (k->type == T_FD)
            *(int *) base = (int) v;
        else
            *(uint32_t *) base = (uint32_t) v;
        return 0;
    case T_U64:
        if (parse_num(value, 10, k->min, k->max, &v) < 0) {
            if (asprintf(cause, "%s: '%s' is not a number from %llu to %llu", k->pub.name, value,
                         (unsigned long long) k->min, (unsigned long long) k->max) < 0)
                *cause = NULL;
            return -1;
        }
        *(uint64_t *) base = v;
        return 0;
    case T_OCTAL:
        if (parse_num(value, 8, k->min, k->max, &v) < 0) {
            if (asprintf(cause, "%s: '%s' is not an octal mode (0 to 0777)", k->pub.name, value) < 0)
                *cause = NULL;
            return -1;
        }
        *(uint32_t *) base = (uint32_t) v;
        return 0;
    case T_LEVEL: {
        enum pd_log_level lv;
        if (pd_log_level_parse(value, &lv) < 0) {
            if (asprintf(cause, "%s: '%s' is not error, warning, info or debug", k->pub.name, value) < 0)
                *cause = NULL;
            return -1;
        }
        *(enum pd_log_level *) base = lv;
        return 0;
    }
    case T_BACKEND:
    case T_MEMORY:
    case T_WAITS: {
        const struct choice *ch = choice_of(k->type);
        int i = parse_choice(ch, value);
        if (i < 0) {
            if (asprintf(cause, "%s: '%s' is not %s", k->pub.name, value, ch->text) < 0)
                *cause = NULL;
            return -1;
        }
        if (k->type == T_BACKEND)
            *(enum pd_backend_choice *) base = (enum pd_backend_choice) i;
        else
            *(uint32_t *) base = (uint32_t) i;
        return 0;
    }
    }
    if (asprintf(cause, "%s: '%s' is not yes or no", k->pub.name, value) < 0)
        *cause = NULL;
    return -1;
}

/* Sets one key; returns 0 or -1 with *cause. */
int pd_config_set(struct pd_config *cfg, const char *key, const char *value, int from_file,
                  char **cause)
{
    const struct key_slot *k = find_key(key);
    if (k == NULL) {
        if (asprintf(cause, "unknown key '%s'", key) < 0)
            *cause = NULL;
        return -1;
    }
    if (from_file && !k->pub.file_ok) {
        if (asprintf(cause, "%s: only allowed on the command line", key) < 0)
            *cause = NULL;
        return -1;
    }
    if (store(cfg, k, value, cause) < 0)
        return -1;
    if (strcmp(key, "config") == 0)
        cfg->config_explicit = 1;
    return 0;
}

/* Returns s with leading and trailing white space cut (in place). */
static char *trim(char *s)
{
    while (isspace((unsigned char) *s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char) s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* Reads a config file into cfg; returns 0 or -1 with *cause naming file:line. */
int pd_config_load_file(struct pd_config *cfg, const char *path, int must_exist, char **cause)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        if (errno == ENOENT && !must_exist)
            return 0;
        if (asprintf(cause, "%s: %s", path, strerror(errno)) < 0)
            *cause = NULL;
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0;
    int rc = 0;
    while (getline(&line, &cap, f) >= 0) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash != NULL)
            *hash = '\0';
        char *s = trim(line);
        if (*s == '\0')
            continue;
        char *eq = strchr(s, '=');
        char *why = NULL;
        if (eq == NULL) {
            if (asprintf(&why, "expected 'key = value', got '%s'", s) < 0)
                why = NULL;
        } else {
            *eq = '\0';
            char *key = trim(s), *value = trim(eq + 1);
            if (*key == '\0') {
                if (asprintf(&why, "missing key before '='") < 0)
                    why = NULL;
            } else if (pd_config_set(cfg, key, value, 1, &why) == 0)
                continue;
        }
        if (asprintf(cause, "%s:%u: %s", path, lineno, why != NULL ? why : "bad line") < 0)
            *cause = NULL;
        free(why);
        rc = -1;
        break;
    }
    if (rc == 0 && ferror(f)) {
        if (asprintf(cause, "%s: read error", path) < 0)
            *cause = NULL;
        rc = -1;
    }
    free(line);
    fclose(f);
    return rc;
}

/* Formats a slot's value of cfg into buf; returns buf. */
static const char *format(const struct pd_config *cfg, const struct key_slot *k, char *buf, size_t size)
{
    const char *base = (const char *) cfg + k->off;
    switch (k->type) {
    case T_STR: snprintf(buf, size, "%s", base); break;
    case T_BOOL: snprintf(buf, size, "%s", *(const int *) base ? "yes" : "no"); break;
    case T_FD: snprintf(buf, size, "%d", *(const int *) base); break;
    case T_U32: snprintf(buf, size, "%u", *(const uint32_t *) base); break;
    case T_U64: snprintf(buf, size, "%llu", (unsigned long long) *(const uint64_t *) base); break;
    case T_OCTAL: snprintf(buf, size, "%04o", *(const uint32_t *) base); break;
    case T_LEVEL: snprintf(buf, size, "%s", pd_log_level_name(*(const enum pd_log_level *) base)); break;
    case T_BACKEND: snprintf(buf, size, "%s", backend_choice.names[*(const enum pd_backend_choice *) base]); break;
    case T_MEMORY: snprintf(buf, size, "%s", memory_choice.names[*(const uint32_t *) base]); break;
    case T_WAITS: snprintf(buf, size, "%s", waits_choice.names[*(const uint32_t *) base]); break;
    }
    return buf;
}

/* Writes the file's keys with cfg's values; returns 0 or -1 when writing failed. */
int pd_config_write(const struct pd_config *cfg, FILE *f)
{
    for (int i = 0; i < NKEYS; i++) {
        if (!keys[i].pub.file_ok)
            continue;
        char v[PD_PATH_MAX];
        format(cfg, &keys[i], v, sizeof v);
        if (fprintf(f, "%s =%s%s\n", keys[i].pub.name, v[0] != '\0' ? " " : "", v) < 0)
            return -1;
    }
    return fflush(f) == 0 ? 0 : -1;
}

/* Reports each differing key to fn; returns the count. */
int pd_config_diff(const struct pd_config *a, const struct pd_config *b,
                   void (*fn)(void *ctx, const char *key, const char *oldv, const char *newv,
                              int live),
                   void *ctx)
{
    int n = 0;
    for (int i = 0; i < NKEYS; i++) {
        char x[PD_PATH_MAX], y[PD_PATH_MAX];
        format(a, &keys[i], x, sizeof x);
        format(b, &keys[i], y, sizeof y);
        if (strcmp(x, y) != 0) {
            fn(ctx, keys[i].pub.name, x, y, keys[i].pub.live);
            n++;
        }
    }
    return n;
}
