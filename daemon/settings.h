/* settings.h: pagedd's settings: defaults, paged.conf, command-line options, live reload. */
/* SPDX-License-Identifier: MIT */
#ifndef PAGED_DAEMON_SETTINGS_H
#define PAGED_DAEMON_SETTINGS_H

#include <stdint.h>
#include <stdio.h>

#include "daemon/util/log.h"

/* Which backend the daemon runs. */
enum pd_backend_choice {
    PD_BACKEND_AUTO = 0, /* cuda when built with it and a device is present, else cpu */
    PD_BACKEND_CPU = 1,
    PD_BACKEND_CUDA = 2,
};

#define PD_PATH_MAX 4096

/* The longest device list (16 UUIDs and their commas). */
#define PD_DEVICE_LIST_MAX 640

/*
 * Every setting, each one a key of paged.conf and a long option of the same name. Numbers
 * of 0 mean "no limit" for the limits and "the default" elsewhere, as each comment says.
 */
struct pd_config {
    char socket[108];              /* "" until resolved: pcore_sock_default_path */
    char config[PD_PATH_MAX];      /* the file read at start and on SIGHUP */
    int config_explicit;           /* --config given: a missing file is an error */
    int foreground;
    enum pd_backend_choice backend;
    char device[PD_DEVICE_LIST_MAX]; /* cuda: indexes or UUIDs separated by commas; "" or "all": every GPU */
    enum pd_log_level log_level;
    char log_file[PD_PATH_MAX];    /* "" = syslog once detached, stderr in the foreground */
    char pid_file[PD_PATH_MAX];    /* "" = none */
    uint32_t socket_mode;          /* permission bits of the socket file */
    char socket_group[64];         /* "" = the daemon's group */
    uint32_t max_clients;          /* connected clients with a channel */
    uint32_t max_clients_per_uid;  /* of them, one unprivileged uid's (daemon/tally.h) */
    uint32_t max_control_per_uid;  /* control connections of one unprivileged uid */
    uint32_t max_pending_per_uid;  /* connections before HELLO of one unprivileged uid */
    uint32_t max_pools;            /* pools alive, destroyed ones still attached included */
    uint64_t max_blocks_per_client;/* block references one client may hold; 0 = no limit */
    uint32_t pool_memory;          /* enum pd_pool_memory (daemon/pool.h): 0 auto, 1 sealed, 2 exported */
    uint32_t threads;              /* cpu backend workers; 0 = online CPUs */
    uint32_t hello_timeout_ms;     /* a new connection must say HELLO within this */
    uint32_t control_idle_timeout_ms;/* a control connection silent this long is closed; 0 = never */
    uint32_t spin_us;              /* engine's adaptive spin ceiling before it sleeps */
    uint32_t dependency_timeout_ms;/* longest a request waits for its dep.wait_off word */
    uint32_t dependency_waits;     /* 0 isolated (the engine looks at the word), 1 inline (cuda: the
                                    * daemon's stream waits for it) */
    uint32_t dependency_strikes;   /* timed-out waits in a minute that get a user's waits refused */
    uint32_t prefix_ttl_ms;        /* a new pool's time to live of cached blocks; 0 = none */
    uint32_t pin_limit_uid;        /* percent of a pool's blocks one uid but root may keep pinned */
    uint32_t pin_limit_pool;       /* percent of a pool's blocks all uids together may keep pinned */
    uint64_t host_tier_mb;         /* a new pool's host tier when its creator names none; 0 = none */
    uint64_t host_tier_max_mb;     /* the largest host tier a pool's creator may ask for */
    char file_tier[PD_PATH_MAX];   /* the file tier's directory; "" = none */
    uint64_t file_tier_mb;         /* most MiB of unit files per pool; 0 = no bound */
    uint32_t shutdown_write_timeout_ms;/* longest a shutdown writes to the file tiers; 0 = no bound */
    char peer_listen[128];         /* ADDR:PORT where peers connect; "" = none (daemon/peer/) */
    char peers[1024];              /* ADDR:PORT[,ADDR:PORT...] asked in order; "" = none */
    char peer_key[PD_PATH_MAX];    /* the peers' shared secret; "" = none */
    uint32_t peer_timeout_ms;      /* longest a remote lookup may take */
    int ready_fd;                  /* command line only: write "READY\n" here when serving */
};

/* Fills cfg with the defaults; default_config is the path --config defaults to. */
void pd_config_defaults(struct pd_config *cfg, const char *default_config);

/*
 * Sets key to value as paged.conf and the long options spell them (from_file says which,
 * as a few keys are command line only). Returns 0, or -1 with *cause (malloc'd) naming the
 * key and the bad value.
 */
int pd_config_set(struct pd_config *cfg, const char *key, const char *value, int from_file,
                  char **cause);

/*
 * Reads key = value lines from path into cfg ('#' starts a comment, blank lines are
 * skipped). A file that does not exist is fine unless must_exist. Returns 0, or -1 with
 * *cause ("FILE:LINE: what") for the first bad line or an unreadable file.
 */
int pd_config_load_file(struct pd_config *cfg, const char *path, int must_exist, char **cause);

/*
 * Compares two configurations key by key and calls fn(ctx, key, old, new, live) for each
 * key whose value differs (values formatted as text). Returns the number of differences.
 */
int pd_config_diff(const struct pd_config *a, const struct pd_config *b,
                   void (*fn)(void *ctx, const char *key, const char *oldv, const char *newv,
                              int live),
                   void *ctx);

/*
 * Writes every key paged.conf accepts as "key = value" lines with cfg's values, in the
 * order of the table: text pagedd reads back as a configuration file. Returns 0, or -1 when
 * writing to f failed.
 */
int pd_config_write(const struct pd_config *cfg, FILE *f);

/* One entry of the option table, for getopt_long and --help. */
struct pd_config_key {
    const char *name;
    int has_arg;                   /* as getopt_long's has_arg */
    int short_opt;                 /* 0 if none */
    int file_ok;                   /* may appear in paged.conf */
    int live;                      /* applied on SIGHUP */
    const char *arg_name;          /* for --help */
    const char *help;
};

/* Returns the table of keys and stores its length in *n. */
const struct pd_config_key *pd_config_keys(int *n);

#endif
