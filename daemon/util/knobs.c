/* knobs.c: pagedd's environment knobs: the table, its parsers, and the values read at start. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/util/knobs.h"
#include "daemon/util/log.h"

/*
 * One row per knob: its name, kind, what it takes, its default and one sentence of doc;
 * pagedd(8)'s ENVIRONMENT shows the same (tests/daemon/knobs-t.c compares them).
 *
 * A value is refused when it is malformed or out of range, and pagedd then exits 1 at start
 * with a message naming the knob and what it takes: a misspelt tuning value silently
 * ignored would measure the default while the operator believes otherwise, and a test aid
 * ignored would let a test pass without testing. Unset and empty both mean the default,
 * as they always did. Numbers are decimal digits only. The values are read once, before
 * the backend and the engine are made; a reload (SIGHUP) reads the configuration file, not
 * the environment.
 */

/* How a knob's text is read. */
enum knob_form {
    FORM_NUMBER,               /* decimal digits, from min to max */
    FORM_WORD,                 /* one of words; the value is its index */
    FORM_PAIR,                 /* two numbers with a comma, by the row's parser */
};

/* One row of the table. */
struct knob_row {
    const char *name;
    enum pd_knob_kind kind;
    enum knob_form form;
    uint64_t min, max;                     /* FORM_NUMBER: the range */
    const char *const *words;              /* FORM_WORD: the values, NULL-terminated */
    int (*parse)(const char *text, uint64_t part[2]);   /* FORM_PAIR: returns 0 or -1 */
    const char *takes;                     /* FORM_PAIR: the format and its ranges */
    uint64_t def[2];                       /* the default */
    const char *def_text;                  /* the default, where worked out at run time */
    const char *doc;
};

/* The longest value kept; every value the table accepts is shorter. */
#define KNOB_TEXT_MAX 63

static const char *const flag_words[] = { "0", "1", NULL };
static const char *const dep_words[] = { "0", "1", "2", NULL };
static const char *const export_words[] = { "auto", "ipc", NULL };
static const char *const staging_words[] = { "auto", "host", NULL };

/* Reads decimal digits at *s into *out, leaving *s after them; returns 0, or -1 when there
 * are none or they overflow 64 bits. */
static int read_number(const char **s, uint64_t *out)
{
    const char *p = *s;
    uint64_t n = 0;
    if (*p < '0' || *p > '9')
        return -1;
    for (; *p >= '0' && *p <= '9'; p++) {
        const uint64_t digit = (uint64_t) (*p - '0');
        if (n > (UINT64_MAX - digit) / 10)
            return -1;
        n = n * 10 + digit;
    }
    *s = p;
    *out = n;
    return 0;
}

/* Parses PAGEDD_GATHER's SHARE,MAX_US: SHARE from 1 (a 32-bit count), MAX_US 0 to 1000.
 * Returns 0 with part filled, or -1. */
static int parse_gather(const char *text, uint64_t part[2])
{
    uint64_t share, max_us;
    if (read_number(&text, &share) < 0 || *text++ != ',' || read_number(&text, &max_us) < 0 || *text != '\0'
        || share < 1 || share > UINT32_MAX || max_us > 1000)
        return -1;
    part[0] = share;
    part[1] = max_us;
    return 0;
}

/* Parses PAGEDD_SPLIT's CLIENTS[,AFTER], each a 32-bit count; AFTER 0 counts as 1 and a
 * missing AFTER is PD_SPLIT_AFTER. Returns 0 with part filled, or -1. */
static int parse_split(const char *text, uint64_t part[2])
{
    uint64_t clients, after = PD_SPLIT_AFTER;
    if (read_number(&text, &clients) < 0 || clients > UINT32_MAX)
        return -1;
    if (*text == ',') {
        text++;
        if (read_number(&text, &after) < 0 || after > UINT32_MAX)
            return -1;
    }
    if (*text != '\0')
        return -1;
    part[0] = clients;
    part[1] = after != 0 ? after : 1;
    return 0;
}

/* The table, in enum pd_knob's order. */
static const struct knob_row rows[PD_KNOB_COUNT_] = {
    [PD_KNOB_GATHER] = {
        .name = "PAGEDD_GATHER", .kind = PD_KNOB_TUNING, .form = FORM_PAIR, .parse = parse_gather,
        .takes = "SHARE,MAX_US with SHARE from 1 and MAX_US from 0 to 1000",
        .def = { PD_GATHER_SHARE, PD_GATHER_MAX_NS / 1000u },
        .doc = "How long a pass holding a DECODE waits for the clients that decoded in the previous one: "
               "1/SHARE of that pass's time in the backend, at most MAX_US microseconds.",
    },
    [PD_KNOB_SPLIT] = {
        .name = "PAGEDD_SPLIT", .kind = PD_KNOB_TUNING, .form = FORM_PAIR, .parse = parse_split,
        .takes = "CLIENTS[,AFTER] with each from 0 and AFTER 0 counting as 1",
        .def = { PD_SPLIT_CLIENTS, PD_SPLIT_AFTER },
        .doc = "The AFTERth pass in a row that finds the GPU idle with the DECODEs of at least CLIENTS "
               "clients is queued as two batches, half of those clients each (CLIENTS 0: never).",
    },
    [PD_KNOB_DEFER] = {
        .name = "PAGEDD_DEFER", .kind = PD_KNOB_TUNING, .form = FORM_WORD, .words = flag_words,
        .def = { 1 },
        .doc = "When 0, every pass waits for its work on the device before the daemon goes on.",
    },
    [PD_KNOB_SPINNERS] = {
        .name = "PAGEDD_SPINNERS", .kind = PD_KNOB_TUNING, .form = FORM_NUMBER, .max = UINT32_MAX,
        .def_text = "the CPUs the daemon may run on, less two",
        .doc = "How many clients (the oldest) may spin in their waits for completions; the others are told "
               "to sleep at once.",
    },
    [PD_KNOB_INFLIGHT] = {
        .name = "PAGEDD_INFLIGHT", .kind = PD_KNOB_TUNING, .form = FORM_NUMBER, .min = 1, .max = PD_CU_SLOTS,
        .def = { PD_CU_DEPTH },
        .doc = "How many batches the cuda backend keeps queued on the GPU at once.",
    },
    [PD_KNOB_POLL_GAP_US] = {
        .name = "PAGEDD_POLL_GAP_US", .kind = PD_KNOB_TUNING, .form = FORM_NUMBER, .max = 1000,
        .def = { PD_CU_POLL_GAP_NS / 1000u },
        .doc = "The least time, in microseconds, between two queries of the same unfinished batch's event "
               "by the cuda backend (0: every look queries).",
    },
    [PD_KNOB_DEP_KERNELS] = {
        .name = "PAGEDD_DEP_KERNELS", .kind = PD_KNOB_TUNING, .form = FORM_WORD, .words = dep_words,
        .def_text = "1 under MPS, else 0",
        .doc = "How the cuda backend waits for a pass's dependency words (under inline waits) and writes its "
               "signal words: 0 by stream memory operations, 2 by kernels, 1 by kernels for some passes.",
    },
    [PD_KNOB_FUSE] = {
        .name = "PAGEDD_FUSE", .kind = PD_KNOB_TUNING, .form = FORM_WORD, .words = flag_words,
        .def = { 1 },
        .doc = "When 0, the cuda backend never runs a pass's APPENDs of the newest tokens inside its "
               "DECODEs' launch.",
    },
    [PD_KNOB_META_INLINE] = {
        .name = "PAGEDD_META_INLINE", .kind = PD_KNOB_TUNING, .form = FORM_WORD, .words = flag_words,
        .def = { 1 },
        .doc = "When 0, the cuda backend always copies a pass's metadata to the device before its launches.",
    },
    [PD_KNOB_DEVICE_TIMING] = {
        .name = "PAGEDD_DEVICE_TIMING", .kind = PD_KNOB_TUNING, .form = FORM_WORD, .words = flag_words,
        .def = { 0 },
        .doc = "When 1, the cuda backend times every batch on the GPU with events, and the engine's "
               "activity lines add the batches' mean time and idle gap.",
    },
    [PD_KNOB_ACTIVITY_LOG] = {
        .name = "PAGEDD_ACTIVITY_LOG", .kind = PD_KNOB_TUNING, .form = FORM_WORD, .words = flag_words,
        .def = { 0 },
        .doc = "When 1, the engine's activity lines, written when the last decoding client leaves, are "
               "logged at info instead of debug.",
    },
    [PD_KNOB_PEER_STAGING] = {
        .name = "PAGEDD_PEER_STAGING", .kind = PD_KNOB_TUNING, .form = FORM_WORD, .words = staging_words,
        .def = { PD_KNOB_STAGING_AUTO },
        .doc = "With host, the blocks moved between peers are staged in host memory even where UCX could "
               "move the device's memory itself.",
    },
    [PD_KNOB_PEER_PARTS] = {
        .name = "PAGEDD_PEER_PARTS", .kind = PD_KNOB_TUNING, .form = FORM_NUMBER, .min = 1, .max = 8,
        .def = { 4 },
        .doc = "The most parts (of up to 256 blocks) one LOOKUP's fetch from a peer keeps in flight: asked, "
               "staged by the peer, pulled, or being checked and published here.",
    },
    [PD_KNOB_CPU_DONE_US] = {
        .name = "PAGEDD_CPU_DONE_US", .kind = PD_KNOB_TEST_AID, .form = FORM_NUMBER, .max = 1000000,
        .def = { 0 },
        .doc = "The cpu backend reports each deferred batch done N microseconds after it ran, as the cuda "
               "backend's batches finish after they are queued (0: at once).",
    },
    [PD_KNOB_CPU_DEVICES] = {
        .name = "PAGEDD_CPU_DEVICES", .kind = PD_KNOB_TEST_AID, .form = FORM_NUMBER, .min = 1, .max = 16,
        .def = { 1 },
        .doc = "The cpu backend serves N devices, each with its own pool memory and worker threads, so that "
               "pools on several devices, tensor-parallel shards on distinct devices and a COPY between "
               "devices run without GPUs.",
    },
    [PD_KNOB_REFUSE_MERGED] = {
        .name = "PAGEDD_REFUSE_MERGED", .kind = PD_KNOB_TEST_AID, .form = FORM_WORD, .words = flag_words,
        .def = { 0 },
        .doc = "When 1, the backend takes every launch of several requests as refused by the kernels and "
               "runs its requests one by one.",
    },
    [PD_KNOB_FAULT_AFTER] = {
        .name = "PAGEDD_FAULT_AFTER", .kind = PD_KNOB_TEST_AID, .form = FORM_NUMBER, .max = UINT64_MAX,
        .def = { 0 },
        .doc = "The cuda backend's Nth batch queues a kernel that traps, losing the device context as a "
               "hardware fault would (0: none).",
    },
    [PD_KNOB_FAIL_UPLOAD_AT] = {
        .name = "PAGEDD_FAIL_UPLOAD_AT", .kind = PD_KNOB_TEST_AID, .form = FORM_NUMBER, .max = UINT64_MAX,
        .def = { 0 },
        .doc = "The cuda backend's Nth metadata upload fails as a CUDA call refused without losing the "
               "context would (0: none).",
    },
    [PD_KNOB_FAIL_EVENT_AT] = {
        .name = "PAGEDD_FAIL_EVENT_AT", .kind = PD_KNOB_TEST_AID, .form = FORM_NUMBER, .max = UINT64_MAX,
        .def = { 0 },
        .doc = "The event that marks the end of the cuda backend's Nth batch is not recorded, failing "
               "likewise (0: none).",
    },
    [PD_KNOB_FAIL_ALLOC_AT] = {
        .name = "PAGEDD_FAIL_ALLOC_AT", .kind = PD_KNOB_TEST_AID, .form = FORM_NUMBER, .max = UINT64_MAX,
        .def = { 0 },
        .doc = "Counting from when the daemon is ready, its Nth heap allocation fails as if memory had run "
               "out (0: none).",
    },
    [PD_KNOB_REAP_DELAY_MS] = {
        .name = "PAGEDD_REAP_DELAY_MS", .kind = PD_KNOB_TEST_AID, .form = FORM_NUMBER, .max = 60000,
        .def = { 0 },
        .doc = "The cuda backend frees a departed client's arenas N milliseconds late (0: at once).",
    },
    [PD_KNOB_CUDA_EXPORT] = {
        .name = "PAGEDD_CUDA_EXPORT", .kind = PD_KNOB_TEST_AID, .form = FORM_WORD, .words = export_words,
        .def = { PD_KNOB_EXPORT_AUTO },
        .doc = "With ipc, the cuda backend exports memory with cudaIpcGetMemHandle even where the device "
               "supports file-descriptor export.",
    },
    [PD_KNOB_PEER_CORRUPT] = {
        .name = "PAGEDD_PEER_CORRUPT", .kind = PD_KNOB_TEST_AID, .form = FORM_WORD, .words = flag_words,
        .def = { 0 },
        .doc = "With 1, the blocks this daemon serves to a peer have a byte changed after their checksums "
               "were computed.",
    },
    [PD_KNOB_PEER_STALL] = {
        .name = "PAGEDD_PEER_STALL", .kind = PD_KNOB_TEST_AID, .form = FORM_WORD, .words = flag_words,
        .def = { 0 },
        .doc = "With 1, this daemon never answers a peer's request for blocks.",
    },
};

/* A knob's parsed state. */
struct knob_value {
    int set;                               /* the environment set it, and it was taken */
    uint64_t part[2];
    char text[KNOB_TEXT_MAX + 1];          /* what the environment said, for the log */
};

/* Written by pd_knobs_load before the threads start, read-only afterwards. */
static struct knob_value values[PD_KNOB_COUNT_];
static int loaded;

/* Parses text as row's value into part; returns 0, or -1 when row refuses it. */
static int parse_value(const struct knob_row *row, const char *text, uint64_t part[2])
{
    switch (row->form) {
    case FORM_NUMBER: {
        uint64_t n;
        if (read_number(&text, &n) < 0 || *text != '\0' || n < row->min || n > row->max)
            return -1;
        part[0] = n;
        return 0;
    }
    case FORM_WORD:
        for (uint64_t i = 0; row->words[i] != NULL; i++)
            if (strcmp(text, row->words[i]) == 0) {
                part[0] = i;
                return 0;
            }
        return -1;
    case FORM_PAIR:
        return row->parse(text, part);
    }
    return -1;
}

/* Appends "NAME=TEXT is refused: it takes ..." for knob id to *msg (NULL at first, "; "
 * between refusals); returns nothing, leaving *msg as it was when out of memory. */
static void add_refusal(char **msg, enum pd_knob id, const char *text)
{
    struct pd_knob_text t;
    pd_knob_describe(id, &t);
    char *joined = NULL;
    if (asprintf(&joined, "%s%s%s=%.*s is refused: it takes %s", *msg != NULL ? *msg : "",
                 *msg != NULL ? "; " : "", t.name, KNOB_TEXT_MAX, text, t.takes) < 0)
        return;
    free(*msg);
    *msg = joined;
}

/* Reads every knob from the environment; see knobs.h. */
int pd_knobs_load(char **cause)
{
    char *refused = NULL;
    int bad = 0;
    for (int id = 0; id < PD_KNOB_COUNT_; id++) {
        const struct knob_row *row = &rows[id];
        struct knob_value *v = &values[id];
        *v = (struct knob_value) { .part = { row->def[0], row->def[1] } };
        const char *text = getenv(row->name);
        if (text == NULL || text[0] == '\0')
            continue;
        uint64_t part[2] = { row->def[0], row->def[1] };
        if (strlen(text) > KNOB_TEXT_MAX || parse_value(row, text, part) < 0) {
            add_refusal(&refused, (enum pd_knob) id, text);
            bad = 1;
            continue;
        }
        *v = (struct knob_value) { .set = 1, .part = { part[0], part[1] } };
        memcpy(v->text, text, strlen(text) + 1);
    }
    loaded = 1;
    if (!bad)
        return 0;
    *cause = refused;
    return -1;
}

/* Logs the knobs the environment set; returns nothing. */
void pd_knobs_log(void)
{
    for (int id = 0; id < PD_KNOB_COUNT_; id++)
        if (values[id].set)
            pd_log(PD_LOG_INFO, "environment: %s=%s (%s)", rows[id].name, values[id].text,
                   rows[id].kind == PD_KNOB_TUNING ? "tuning" : "test aid");
}

/* Runs pd_knobs_load unless it ran, logging what it refuses; returns nothing. */
static void load_once(void)
{
    if (loaded)
        return;
    char *cause = NULL;
    if (pd_knobs_load(&cause) < 0) {
        pd_log(PD_LOG_ERROR, "environment: %s: those knobs keep their defaults",
               cause != NULL ? cause : "a knob is refused");
        free(cause);
    }
}

/* Returns part of knob id's value; see knobs.h. */
uint64_t pd_knob_part(enum pd_knob id, unsigned part)
{
    load_once();
    return id < PD_KNOB_COUNT_ && part < 2 ? values[id].part[part] : 0;
}

/* Returns knob id's value; see knobs.h. */
uint64_t pd_knob(enum pd_knob id)
{
    return pd_knob_part(id, 0);
}

/* Returns whether the environment set knob id; see knobs.h. */
int pd_knob_is_set(enum pd_knob id)
{
    load_once();
    return id < PD_KNOB_COUNT_ && values[id].set;
}

/* Returns knob id's name, or "?" for no knob. */
const char *pd_knob_name(enum pd_knob id)
{
    return id < PD_KNOB_COUNT_ ? rows[id].name : "?";
}

/* Writes what row takes into buf (size bytes): the range of a number, the words of a word
 * ("a, b or c"), or a pair's format. Returns nothing. */
static void format_takes(const struct knob_row *row, char *buf, size_t size)
{
    switch (row->form) {
    case FORM_NUMBER:
        if (row->max == UINT64_MAX)
            snprintf(buf, size, "N from %llu", (unsigned long long) row->min);
        else
            snprintf(buf, size, "N from %llu to %llu", (unsigned long long) row->min,
                     (unsigned long long) row->max);
        return;
    case FORM_WORD: {
        size_t len = 0;
        buf[0] = '\0';
        for (int i = 0; row->words[i] != NULL && len < size; i++) {
            const char *sep = i == 0 ? "" : row->words[i + 1] == NULL ? " or " : ", ";
            int n = snprintf(buf + len, size - len, "%s%s", sep, row->words[i]);
            len += n > 0 ? (size_t) n : 0;
        }
        return;
    }
    case FORM_PAIR:
        snprintf(buf, size, "%s", row->takes);
        return;
    }
}

/* Fills *out with knob id's row as text; see knobs.h. */
void pd_knob_describe(enum pd_knob id, struct pd_knob_text *out)
{
    const struct knob_row *row = &rows[id];
    out->name = row->name;
    out->kind = row->kind == PD_KNOB_TUNING ? "tuning" : "test aid";
    out->doc = row->doc;
    format_takes(row, out->takes, sizeof out->takes);
    if (row->def_text != NULL)
        snprintf(out->def, sizeof out->def, "%s", row->def_text);
    else if (row->form == FORM_PAIR)
        snprintf(out->def, sizeof out->def, "%llu,%llu", (unsigned long long) row->def[0],
                 (unsigned long long) row->def[1]);
    else if (row->form == FORM_WORD)
        snprintf(out->def, sizeof out->def, "%s", row->words[row->def[0]]);
    else
        snprintf(out->def, sizeof out->def, "%llu", (unsigned long long) row->def[0]);
}
