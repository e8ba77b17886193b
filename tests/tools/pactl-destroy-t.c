/* pactl-destroy-t.c: pactl destroy: the owner and root may, another uid is refused, a missing pool named. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/tap/basic.h"
#include "tests/tap/pagedd.h"
#include "tests/tools/tpactl.h"

/* The second user: nobody. */
#define OTHER_UID 65534

static struct pagedd daemon_;

/* Returns pool name's object from a fresh "list pools" in JSON (to free with the returned
 * list through *list), or NULL when it is not listed. */
static const struct tj *listed(const char *name, struct tj **list)
{
    struct tp_run r;
    tp_run_pactl(&r, "-s", daemon_.socket, "-f", "json", "list", "pools", NULL);
    *list = r.status == 0 ? tp_run_json(&r) : NULL;
    tp_run_free(&r);
    const struct tj *pools = tj_get(*list, "pools");
    for (size_t i = 0; pools != NULL && i < pools->count; i++)
        if (tj_str(tj_at(pools, i), "name") != NULL && strcmp(tj_str(tj_at(pools, i), "name"), name) == 0)
            return tj_at(pools, i);
    return NULL;
}

/* Returns whether pool name is listed and not destroyed. */
static int pool_live(const char *name)
{
    struct tj *list;
    const struct tj *p = listed(name, &list);
    int live = p != NULL && tj_get(p, "destroyed") != NULL && !tj_get(p, "destroyed")->boolean;
    tj_free(list);
    return live;
}

/* Makes pool name owned by uid ((uid_t) -1: the test's) with nobody attached: a holder
 * creates it and goes; the pool stays. Returns nothing. */
static void make_pool(uid_t uid, const char *name)
{
    uint32_t id;
    struct tp_child h = tp_start_holder_as(uid, daemon_.socket, name, name, "0", "0", &id);
    tp_stop_holder(&h);
}

/* Runs pactl as uid with up to three arguments (NULL for none) on the test's daemon.
 * Returns nothing. */
static void pactl_as(struct tp_run *r, uid_t uid, const char *a0, const char *a1, const char *a2)
{
    char *argv[] = { tp_pactl, "-s", daemon_.socket, (char *) a0, (char *) a1, (char *) a2, NULL };
    tp_run_as(r, uid, argv);
}

/* Checks the permission rule with a second uid: another uid is refused, the owner may. */
static void test_other_uid(void)
{
    struct tp_run r;
    if (!tp_pactl_runs_as(OTHER_UID)) {
        skip(5, "cannot run pactl as uid %d here (the test needs root)", OTHER_UID);
        return;
    }
    make_pool((uid_t) -1, "mine");
    pactl_as(&r, OTHER_UID, "destroy", "mine", NULL);
    ok(r.status == 1 && tp_one_line(r.err) && r.out_len == 0
           && strstr(r.err, "pactl: pool 'mine' belongs to uid") != NULL
           && strstr(r.err, "uid 65534 may not destroy it") != NULL,
       "destroy by another uid: exit 1, one line naming the pool and why (%.*s)", (int) strcspn(r.err, "\n"),
       r.err);
    tp_run_free(&r);
    ok(pool_live("mine"), "the refused pool is still there");

    make_pool(OTHER_UID, "theirs");
    ok(pool_live("theirs"), "a pool uid %d made", OTHER_UID);
    pactl_as(&r, OTHER_UID, "destroy", "theirs", NULL);
    ok(r.status == 0 && strcmp(r.out, "destroyed pool 'theirs'\n") == 0 && r.err_len == 0,
       "destroy by its owner (not root): exit 0, 'destroyed pool'");
    tp_run_free(&r);
    ok(!pool_live("theirs"), "the owner's pool is gone");
}

/* Checks destroy by the owner: a pool nobody uses goes at once, one in use at its last detach. */
static void test_owner(void)
{
    struct tp_run r;
    make_pool((uid_t) -1, "idle");
    tp_run_pactl(&r, "-s", daemon_.socket, "destroy", "idle", NULL);
    ok(r.status == 0 && strcmp(r.out, "destroyed pool 'idle'\n") == 0 && r.err_len == 0,
       "destroy of an idle pool: exit 0, 'destroyed pool 'idle''");
    tp_run_free(&r);
    struct tj *list;
    ok(listed("idle", &list) == NULL, "the idle pool is no longer listed");
    tj_free(list);

    uint32_t id;
    struct tp_child h = tp_start_holder(daemon_.socket, "user", "busy", "3", "0", &id);
    tp_run_pactl(&r, "destroy", "busy", "-s", daemon_.socket, "-f", "json", NULL);
    struct tj *v = r.status == 0 ? tp_run_json(&r) : NULL;
    ok(v != NULL && tj_str(v, "pool") != NULL && strcmp(tj_str(v, "pool"), "busy") == 0
           && tj_num(v, "still_attached") == 1,
       "destroy -f json of a pool in use: {pool, still_attached: 1}");
    tj_free(v);
    tp_run_free(&r);
    const struct tj *p = listed("busy", &list);
    ok(p != NULL && tj_get(p, "destroyed") != NULL && tj_get(p, "destroyed")->boolean,
       "the pool in use is listed as destroyed until its client detaches");
    tj_free(list);
    tp_run_pactl(&r, "-s", daemon_.socket, "destroy", "busy", NULL);
    ok(r.status == 1 && strcmp(r.err, "pactl: no such pool 'busy'\n") == 0,
       "its name is gone at once: a second destroy finds no such pool");
    tp_run_free(&r);
    is_int(0, tp_stop_holder(&h), "its client detaches and exits 0");
    ok(listed("busy", &list) == NULL, "after the last detach the pool is gone");
    tj_free(list);

    make_pool((uid_t) -1, "text");
    h = tp_start_holder(daemon_.socket, "user2", "text", "1", "0", &id);
    tp_run_pactl(&r, "-s", daemon_.socket, "destroy", "text", NULL);
    is_string("destroyed pool 'text': its memory is freed when the last of its 1 attached client detaches\n",
              r.out, "destroy text of a pool in use says its memory waits for the client");
    tp_run_free(&r);
    tp_stop_holder(&h);

    tp_run_pactl(&r, "-s", daemon_.socket, "destroy", "nosuch", NULL);
    ok(r.status == 1 && r.out_len == 0 && strcmp(r.err, "pactl: no such pool 'nosuch'\n") == 0,
       "destroy of an unknown pool: exit 1, 'no such pool'");
    tp_run_free(&r);
}

/* Runs the checks against one daemon whose socket every user may open. */
int main(void)
{
    tp_init(&daemon_);
    /* The second user reaches the socket: the directory searchable, the socket writable. */
    if (chmod(daemon_.dir, 0755) != 0)
        sysbail("chmod %s", daemon_.dir);
    const char *const args[] = { "--threads", "1", "--log-level", "warning", "--socket-mode=0666", NULL };
    tp_start_daemon(&daemon_, args);

    test_owner();
    test_other_uid();

    tp_stop_daemon(&daemon_);
    return 0;
}
