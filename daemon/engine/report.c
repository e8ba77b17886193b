/* report.c: what the engine reports: its activity lines when the daemon goes idle, and its counters. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/engine/internal.h"

/* Logs what the engine did since it was last idle and starts counting afresh; see engine.h. */
void pd_engine_idle(struct pd_engine *e)
{
    if (e->total.batches == e->mark.batches)
        return;
    /* Figures for whoever tunes the engine, not for an operator: debug unless asked for. */
    const enum pd_log_level level = pd_knob(PD_KNOB_ACTIVITY_LOG) != 0 ? PD_LOG_INFO : PD_LOG_DEBUG;
    const struct pcore_engine_stats *t = &e->total, *m = &e->mark;
    double b = (double) (t->batches - m->batches);
    uint64_t db = t->decode_batches - m->decode_batches;
    double dp = db != 0 ? (double) db : 1.0;
    pd_log(level, "engine: %llu batches, %llu launches, %.1f us each in the backend "
           "(%.1f waiting for the device); "
           "%llu with a DECODE: %.2f DECODE requests of %.2f clients each, %.1f us gathering; "
           "%llu APPENDs, %llu of them in %llu merged launches; %llu batches completed when queued",
           (unsigned long long) (t->batches - m->batches), (unsigned long long) (t->launches - m->launches),
           (double) (t->backend_ns - m->backend_ns) / 1e3 / b,
           (double) (t->device_wait_ns - m->device_wait_ns) / 1e3 / b, (unsigned long long) db,
           (double) (t->decode_requests - m->decode_requests) / dp,
           (double) (t->decode_clients - m->decode_clients) / dp,
           (double) (t->gather_ns - m->gather_ns) / 1e3 / dp,
           (unsigned long long) (t->append_requests - m->append_requests),
           (unsigned long long) (t->merged_append_requests - m->merged_append_requests),
           (unsigned long long) (t->merged_append_launches - m->merged_append_launches),
           (unsigned long long) (t->early_batches - m->early_batches));
    const struct pass_stats *w = &e->host, *wm = &e->host_mark;
    uint64_t nb = w->betweens - wm->betweens;
    pd_log(level, "engine: %.2f completion wake-ups per batch taking %.1f us; %.1f us from a batch's "
           "wake-ups to the next one's backend work; per batch %.1f us taking and checking requests, "
           "in the backend %.1f us staging, %.1f us issuing the upload (skipped in %.0f%%: the device had "
           "the metadata, in %.0f%% the launch carried it), %.1f us queueing the launches; "
           "%llu APPENDs fused into their DECODEs' launch; "
           "%llu batches deferred, %.2f wake-ups per batch taking %.1f us when their completions were posted; "
           "%llu passes split in two",
           (double) (w->wakes - wm->wakes) / b, (double) (w->wake_ns - wm->wake_ns) / 1e3 / b,
           nb != 0 ? (double) (w->between_ns - wm->between_ns) / 1e3 / (double) nb : 0.0,
           (double) (w->collect_ns - wm->collect_ns) / 1e3 / b, (double) (w->stage_ns - wm->stage_ns) / 1e3 / b,
           (double) (w->upload_ns - wm->upload_ns) / 1e3 / b,
           100.0 * (double) (w->uploads_skipped - wm->uploads_skipped) / b,
           100.0 * (double) (w->meta_inline - wm->meta_inline) / b,
           (double) (w->queue_ns - wm->queue_ns) / 1e3 / b,
           (unsigned long long) (w->fused_appends - wm->fused_appends),
           (unsigned long long) (w->deferred - wm->deferred),
           (double) (w->retire_wakes - wm->retire_wakes) / b,
           (double) (w->retire_wake_ns - wm->retire_wake_ns) / 1e3 / b,
           (unsigned long long) (w->splits - wm->splits));
    pd_backend *bk = e->env->backend;
    if (bk->ops->report != NULL)
        bk->ops->report(bk, level);
    e->host_mark = e->host;
    e->woke_at = 0;
    e->mark = e->total;
}

/* Copies the engine's counters since it was made into out; returns nothing. */
void pd_engine_stats(const struct pd_engine *e, struct pcore_engine_stats *out)
{
    *out = e->total;
}
