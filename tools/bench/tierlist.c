/* tierlist.c: the tiers benchmark's view of a pool's counters: its LIST item, asked on a control connection. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tools/bench/tiers.h"
#include "tools/pactl_conn.h"
#include "tools/pactl_fetch.h"

/* Fills *it with a pool's LIST item or dies. */
void tb_pool_item(const char *socket, const char *name, struct pcore_pool_item *it)
{
    struct pactl_conn conn;
    struct pactl_list list;
    char *cause = NULL;
    memset(&conn, 0, sizeof conn);
    if (pactl_conn_open(&conn, socket, &cause) < 0)
        bench_die("tiers: a control connection to %s: %s", socket, cause != NULL ? cause : "?");
    if (pactl_fetch_list(&conn, PCORE_LIST_POOLS, name, &list, &cause) < 0)
        bench_die("tiers: LIST of pool %s: %s", name, cause != NULL ? cause : "?");
    int found = 0;
    for (size_t i = 0; i < list.count && !found; i++) {
        const struct pcore_pool_item *p = (const struct pcore_pool_item *) list.items + i;
        if (strncmp(p->name, name, sizeof p->name) == 0) {
            *it = *p;
            found = 1;
        }
    }
    pactl_list_free(&list);
    pactl_conn_close(&conn);
    if (!found)
        bench_die("tiers: LIST does not show pool %s", name);
}
