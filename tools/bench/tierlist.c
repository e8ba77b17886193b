/* tierlist.c: the tiers benchmark's view of a pool's counters: its LIST item, asked on a control connection. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tools/bench/tiers.h"
#include "tools/pactl_conn.h"
#include "tools/pactl_fetch.h"

/* Fetches LIST what (name: the pool filter, or NULL) from the daemon at socket into *list;
 * dies on failure. */
void tb_list(const char *socket, uint32_t what, const char *name, struct pactl_list *list)
{
    struct pactl_conn conn;
    char *cause = NULL;
    memset(&conn, 0, sizeof conn);
    if (pactl_conn_open(&conn, socket, &cause) < 0)
        bench_die("a control connection to %s: %s", socket, cause != NULL ? cause : "?");
    if (pactl_fetch_list(&conn, what, name, list, &cause) < 0)
        bench_die("LIST %u%s%s from %s: %s", what, name != NULL ? " of pool " : "", name != NULL ? name : "", socket,
                  cause != NULL ? cause : "?");
    pactl_conn_close(&conn);
}

/* Fills *it with a pool's LIST item or dies. */
void tb_pool_item(const char *socket, const char *name, struct pcore_pool_item *it)
{
    struct pactl_list list;
    tb_list(socket, PCORE_LIST_POOLS, name, &list);
    int found = 0;
    for (size_t i = 0; i < list.count && !found; i++) {
        const struct pcore_pool_item *p = (const struct pcore_pool_item *) list.items + i;
        if (strncmp(p->name, name, sizeof p->name) == 0) {
            *it = *p;
            found = 1;
        }
    }
    pactl_list_free(&list);
    if (!found)
        bench_die("tiers: LIST does not show pool %s", name);
}
