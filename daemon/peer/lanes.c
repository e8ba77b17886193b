/* lanes.c: which UCX transports a peer's endpoint moves blocks over, read from UCX's own description of it. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/peer/internal.h"
#include "daemon/util/log.h"

/*
 * UCX 1.13, Debian's, has no query for an endpoint's transports (ucp_ep_query learned
 * UCP_EP_ATTR_FIELD_TRANSPORTS later), but ucp_ep_print_info describes its lanes, one line
 * each, as "lane[1]:  1:tcp/lo.0 md[1] -> md[1]/tcp/sysdev[255] rma_bw#0 am am_bw#0 wireup".
 * The transport of a lane is the word after "N:"; a lane that carries rma_bw carries the gets
 * of blocks. The connection-manager lane ("cm rdmacm") moves no data and is skipped.
 */

/* Adds word (len bytes) to out (size bytes, space-separated) unless it is there. Returns
 * nothing. */
static void add_word(char *out, size_t size, const char *word, size_t len)
{
    for (const char *s = out; *s != '\0';) {
        const char *e = strchr(s, ' ');
        size_t n = e != NULL ? (size_t) (e - s) : strlen(s);
        if (n == len && memcmp(s, word, len) == 0)
            return;
        s += n + (e != NULL);
    }
    size_t used = strlen(out);
    if (used + (used != 0) + len + 1 > size)
        return;
    if (used != 0)
        out[used++] = ' ';
    memcpy(out + used, word, len);
    out[used + len] = '\0';
}

/* Collects into out the transports of the lanes of info that carry RMA (rma 1) or AM (rma 0).
 * Returns how many lanes matched. */
static int collect(const char *info, int rma, char *out, size_t size)
{
    int found = 0;
    for (const char *line = info; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        size_t len = end != NULL ? (size_t) (end - line) : strlen(line);
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s", (int) (len < sizeof buf ? len : sizeof buf - 1), line);
        line = end != NULL ? end + 1 : NULL;
        char *lane = strstr(buf, "lane[");
        char *colon = lane != NULL ? strstr(lane, "]:") : NULL;
        if (colon == NULL)
            continue;
        char *w = colon + 2;
        while (*w == ' ')
            w++;
        char *sep = strchr(w, ':');
        char *space = strchr(w, ' ');
        if (sep == NULL || (space != NULL && space < sep))
            continue;             /* "cm rdmacm": no "N:transport" word */
        const char *name = sep + 1;
        size_t n = strcspn(name, " \t");
        const int carries = rma ? strstr(name + n, "rma_bw") != NULL : strstr(name + n, " am") != NULL;
        if (n == 0 || !carries)
            continue;
        add_word(out, size, name, n);
        found++;
    }
    return found;
}

/* Parses ucp_ep_print_info's text; see internal.h. */
int pd_peer_parse_lanes(const char *info, char *out, size_t size)
{
    out[0] = '\0';
    if (collect(info, 1, out, size) == 0)
        collect(info, 0, out, size);
    if (out[0] == '\0')
        return 0;
    for (const char *s = out; *s != '\0';) {
        if (strncmp(s, "tcp/", 4) != 0)
            return 0;
        const char *e = strchr(s, ' ');
        if (e == NULL)
            break;
        s = e + 1;
    }
    return 1;
}

/* Reads and logs p's transports; see internal.h. */
void pd_peer_note_transports(struct pd_peers *ps, struct pd_peer *p)
{
    p->transports[0] = '\0';
    p->tcp_only = 0;
    char *text = NULL;
    size_t len = 0;
    FILE *f = p->ep != NULL ? open_memstream(&text, &len) : NULL;
    if (f == NULL)
        return;
    ucp_ep_print_info(p->ep, f);
    if (fclose(f) == 0 && text != NULL)
        p->tcp_only = pd_peer_parse_lanes(text, p->transports, sizeof p->transports);
    free(text);
    pd_log(PD_LOG_INFO, "peer %s: blocks move over %s", p->addr, p->transports[0] != '\0' ? p->transports : "?");
    if (p->tcp_only)
        pd_log(strcmp(ps->backend->ops->name, "cpu") != 0 ? PD_LOG_WARNING : PD_LOG_INFO,
               "peer %s: only TCP is left between the daemons (no RDMA, shared memory or cuda_ipc transport): "
               "expect the rate of a socket, not of the device", p->addr);
}
