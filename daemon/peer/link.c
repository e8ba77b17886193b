/* link.c: the peers' UCX context, worker, listener and endpoints: connecting, sending, receiving, failing. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "daemon/peer/internal.h"
#include "daemon/util/heap.h"
#include "daemon/util/knobs.h"
#include "daemon/util/log.h"

#define PD_PEER_QUEUE_MAX 1024u        /* messages queued at once; a peer that sends more fails */
#define PD_PEER_CLOSE_SPINS 100000u    /* progress calls a forced close may take */

/* Returns the monotonic clock in nanoseconds. */
uint64_t pd_peer_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

/* Returns whether cfg names peers or a peer listener. */
int pd_peers_wanted(const struct pd_config *cfg)
{
    return cfg->peers[0] != '\0' || cfg->peer_listen[0] != '\0';
}

/* Returns the peer whose endpoint is ep, or NULL. */
struct pd_peer *pd_peer_by_ep(struct pd_peers *ps, ucp_ep_h ep)
{
    if (ep == NULL)
        return NULL;
    for (uint32_t i = 0; i < ps->npeers; i++)
        if (ps->peers[i]->ep == ep)
            return ps->peers[i];
    return NULL;
}

/* Progresses the worker once; returns what ucp_worker_progress returned. */
unsigned pd_peer_progress(struct pd_peers *ps)
{
    return ucp_worker_progress(ps->worker);
}

/* Marks p failed for why, logs it, and has its endpoint closed at the next poll; returns nothing. */
void pd_peer_fail(struct pd_peers *ps, struct pd_peer *p, const char *fmt, ...)
{
    char why[sizeof p->why];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (p->state != PD_PEER_FAILED || strcmp(p->why, why) != 0)
        pd_log(PD_LOG_WARNING, "peer %s: %s", p->addr, why);
    p->state = PD_PEER_FAILED;
    snprintf(p->why, sizeof p->why, "%s", why);
    if (p->ep != NULL)
        p->ep_failed = 1;
    pd_peer_fetch_peer_failed(ps, p);
}

/* A send's completion (user_data: the copy of its data): frees both. Returns nothing. */
static void sent(void *request, ucs_status_t status, void *user_data)
{
    (void) status;
    free(user_data);
    ucp_request_free(request);
}

/* Sends message id to p; returns 0 or -1. */
int pd_peer_send(struct pd_peers *ps, struct pd_peer *p, unsigned id, const void *data, size_t len)
{
    if (p->ep == NULL || p->ep_failed)
        return -1;
    void *copy = pd_malloc(len);
    if (copy == NULL) {
        pd_log(PD_LOG_WARNING, "peer %s: out of memory for a message of %zu bytes", p->addr, len);
        return -1;
    }
    memcpy(copy, data, len);
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS,
        .flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER,
        .cb.send = sent,
        .user_data = copy,
    };
    ucs_status_ptr_t r = ucp_am_send_nbx(p->ep, id, NULL, 0, copy, len, &rp);
    if (r == NULL) {
        free(copy);
        return 0;
    }
    if (UCS_PTR_IS_ERR(r)) {
        free(copy);
        pd_peer_fail(ps, p, "sending: %s", ucs_status_string(UCS_PTR_STATUS(r)));
        return -1;
    }
    return 0;
}

/* The endpoints' error handler (arg: the peers): fails the peer of ep. Returns nothing. */
static void on_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    struct pd_peers *ps = arg;
    struct pd_peer *p = pd_peer_by_ep(ps, ep);
    if (p != NULL)
        pd_peer_fail(ps, p, "connection lost: %s", ucs_status_string(status));
}

/* Copies an Active Message into the queue (arg: its pd_peer_am_arg). Returns UCS_OK: the
 * data is not kept. */
static ucs_status_t on_am(void *arg, const void *header, size_t header_length, void *data, size_t length,
                          const ucp_am_recv_param_t *param)
{
    const struct pd_peer_am_arg *a = arg;
    struct pd_peers *ps = a->ps;
    (void) header;
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP))
        return UCS_OK;              /* no way to tell whose: dropped */
    struct pd_peer *p = pd_peer_by_ep(ps, param->reply_ep);
    if (p == NULL || p->ep_failed)
        return UCS_OK;
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) || header_length != 0 || length > PD_PEER_MSG_MAX) {
        pd_peer_fail(ps, p, "a message of %zu bytes, or not eager", length);
        return UCS_OK;
    }
    if (ps->queued >= PD_PEER_QUEUE_MAX) {
        pd_peer_fail(ps, p, "more than %u messages queued", PD_PEER_QUEUE_MAX);
        return UCS_OK;
    }
    struct pd_peer_msg *m = pd_malloc(sizeof *m + length);
    if (m == NULL) {
        pd_peer_fail(ps, p, "out of memory for a message of %zu bytes", length);
        return UCS_OK;
    }
    m->next = NULL;
    m->ep = param->reply_ep;
    m->id = a->id;
    m->len = length;
    memcpy(m->data, data, length);
    if (ps->tail != NULL)
        ps->tail->next = m;
    else
        ps->head = m;
    ps->tail = m;
    ps->queued++;
    return UCS_OK;
}

/* Parses "ADDR:PORT" (ADDR a name or a numeric address, [v6] allowed) into sa. Returns 0, or
 * -1 with why. */
static int parse_addr(const char *text, struct sockaddr_storage *sa, socklen_t *salen, char *why, size_t size)
{
    char host[256];
    const char *colon = strrchr(text, ':');
    if (colon == NULL || colon == text || colon[1] == '\0' || (size_t) (colon - text) >= sizeof host) {
        snprintf(why, size, "'%s' is not ADDR:PORT", text);
        return -1;
    }
    size_t hl = (size_t) (colon - text);
    if (text[0] == '[' && hl >= 2 && text[hl - 1] == ']') {
        memcpy(host, text + 1, hl - 2);
        host[hl - 2] = '\0';
    } else {
        memcpy(host, text, hl);
        host[hl] = '\0';
    }
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, colon + 1, &hints, &res);
    if (rc != 0 || res == NULL) {
        snprintf(why, size, "'%s': %s", text, rc != 0 ? gai_strerror(rc) : "no address");
        return -1;
    }
    memcpy(sa, res->ai_addr, res->ai_addrlen);
    *salen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

/* Formats sa as ADDR:PORT into out; returns nothing. */
static void format_addr(const struct sockaddr *sa, char *out, size_t size)
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *) sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
        snprintf(out, size, "%s:%u", host, port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        port = ntohs(in6->sin6_port);
        snprintf(out, size, "[%s]:%u", host, port);
    } else {
        snprintf(out, size, "(family %u)", (unsigned) sa->sa_family);
    }
}

/* Creates an endpoint for p (to p->sa when conn is NULL, else from conn) and starts the
 * handshake. Returns 0, or -1 with p failed. */
static int open_ep(struct pd_peers *ps, struct pd_peer *p, ucp_conn_request_h conn)
{
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = { .cb = on_ep_error, .arg = ps },
    };
    if (conn != NULL) {
        ep.field_mask |= UCP_EP_PARAM_FIELD_CONN_REQUEST;
        ep.conn_request = conn;
    } else {
        ep.field_mask |= UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
        ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
        ep.sockaddr.addr = (const struct sockaddr *) &p->sa;
        ep.sockaddr.addrlen = p->salen;
    }
    ucs_status_t st = ucp_ep_create(ps->worker, &ep, &p->ep);
    if (st != UCS_OK) {
        p->ep = NULL;
        pd_peer_fail(ps, p, "cannot connect: %s", ucs_status_string(st));
        p->retry_ns = pd_peer_now_ns() + PD_PEER_RETRY_NS;
        return -1;
    }
    p->ep_failed = 0;
    return pd_peer_auth_start(ps, p);
}

/* Closes ep at once, waiting (boundedly) for UCX to release it. Returns nothing. */
static void close_ep(struct pd_peers *ps, ucp_ep_h ep)
{
    ucp_request_param_t rp = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE };
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &rp);
    if (UCS_PTR_IS_ERR(r))
        pd_log(PD_LOG_DEBUG, "peers: ucp_ep_close_nbx: %s", ucs_status_string(UCS_PTR_STATUS(r)));
    if (r == NULL || UCS_PTR_IS_ERR(r))
        return;
    for (unsigned i = 0; i < PD_PEER_CLOSE_SPINS && ucp_request_check_status(r) == UCS_INPROGRESS; i++)
        ucp_worker_progress(ps->worker);
    if (ucp_request_check_status(r) == UCS_INPROGRESS)
        pd_log(PD_LOG_WARNING, "peers: an endpoint did not close within %u progress calls", PD_PEER_CLOSE_SPINS);
    else
        ucp_request_free(r);
}

/* Drops the queued messages of ep; returns nothing. */
static void drop_queued(struct pd_peers *ps, ucp_ep_h ep)
{
    struct pd_peer_msg **pp = &ps->head;
    ps->tail = NULL;
    while (*pp != NULL) {
        struct pd_peer_msg *m = *pp;
        if (m->ep == ep) {
            *pp = m->next;
            free(m);
            ps->queued--;
        } else {
            ps->tail = m;
            pp = &m->next;
        }
    }
}

/* Closes p's endpoint and forgets what hangs on it; returns nothing. */
static void disconnect(struct pd_peers *ps, struct pd_peer *p)
{
    if (p->ep == NULL)
        return;
    ucp_ep_h ep = p->ep;
    pd_peer_fetch_peer_failed(ps, p);
    pd_peer_stages_drop(ps, ep, 0, 0);
    drop_queued(ps, ep);
    close_ep(ps, ep);
    p->ep = NULL;
    p->ep_failed = 0;
    p->challenged = p->verified = 0;
}

/* Returns a new zeroed peer record added to ps, or NULL when ps is full of live peers (a failed
 * incoming one is replaced). */
static struct pd_peer *add_peer(struct pd_peers *ps)
{
    if (ps->npeers == PD_PEER_MAX) {
        for (uint32_t i = 0; i < ps->npeers; i++) {
            struct pd_peer *q = ps->peers[i];
            if (!q->outgoing && q->ep == NULL) {
                memset(q, 0, sizeof *q);
                return q;
            }
        }
        return NULL;
    }
    struct pd_peer *p = pd_calloc(1, sizeof *p);
    if (p != NULL)
        ps->peers[ps->npeers++] = p;
    return p;
}

/* The listener's connection handler (arg: the peers): takes a peer's connection. Returns nothing. */
static void on_conn(ucp_conn_request_h conn, void *arg)
{
    struct pd_peers *ps = arg;
    ucp_conn_request_attr_t attr = { .field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR };
    char addr[80] = "(unknown)";
    if (ucp_conn_request_query(conn, &attr) == UCS_OK)
        format_addr((const struct sockaddr *) &attr.client_address, addr, sizeof addr);
    struct pd_peer *p = add_peer(ps);
    if (p == NULL) {
        pd_log(PD_LOG_WARNING, "peers: refusing %s: %u peers already", addr, PD_PEER_MAX);
        ucs_status_t st = ucp_listener_reject(ps->listener, conn);
        if (st != UCS_OK)
            pd_log(PD_LOG_WARNING, "peers: ucp_listener_reject: %s", ucs_status_string(st));
        return;
    }
    snprintf(p->addr, sizeof p->addr, "%s", addr);
    pd_log(PD_LOG_INFO, "peer %s: connected to this daemon", p->addr);
    open_ep(ps, p, conn);
}

/* Runs one queued message m; returns 1 when a fetch kept m (its REPLY), else 0. */
static int run_msg(struct pd_peers *ps, struct pd_peer_msg *m)
{
    struct pd_peer *p = pd_peer_by_ep(ps, m->ep);
    if (p == NULL || p->ep_failed)
        return 0;
    if (m->id == PD_PEER_AM_CHALLENGE || m->id == PD_PEER_AM_RESPONSE) {
        pd_peer_auth_msg(ps, p, m);
        return 0;
    }
    if (p->state != PD_PEER_AUTHENTICATED) {
        p->auth_failures++;
        pd_peer_fail(ps, p, "message %u before the handshake ended", m->id);
        return 0;
    }
    struct pd_peer_release rel;
    switch (m->id) {
    case PD_PEER_AM_FETCH:
        pd_peer_serve_fetch(ps, p, m);
        break;
    case PD_PEER_AM_RELEASE:
        pd_peer_serve_release(ps, p, m);
        break;
    case PD_PEER_AM_REPLY:
        if (pd_peer_fetch_reply(ps, m))
            return 1;
        /* A reply that came after its fetch gave up: the staging is released at once. */
        if (m->len >= sizeof rel.req) {
            memcpy(&rel.req, m->data, sizeof rel.req);
            pd_peer_send(ps, p, PD_PEER_AM_RELEASE, &rel, sizeof rel);
        }
        break;
    default:
        pd_peer_fail(ps, p, "unknown message %u", m->id);
    }
    return 0;
}

/* Runs the queued messages, closes failed endpoints and reconnects outgoing peers when due.
 * Returns nothing. */
static void run_queue(struct pd_peers *ps)
{
    while (ps->head != NULL) {
        struct pd_peer_msg *m = ps->head;
        ps->head = m->next;
        if (ps->head == NULL)
            ps->tail = NULL;
        ps->queued--;
        if (!run_msg(ps, m))
            free(m);
    }
    const uint64_t now = pd_peer_now_ns();
    for (uint32_t i = 0; i < ps->npeers; i++) {
        struct pd_peer *p = ps->peers[i];
        if (p->ep != NULL && p->ep_failed) {
            disconnect(ps, p);
            p->retry_ns = now + PD_PEER_RETRY_NS;
        }
        if (p->outgoing && p->ep == NULL && now >= p->retry_ns)
            open_ep(ps, p, NULL);
    }
    pd_peer_stages_drop(ps, NULL, 0, now);
    pd_peer_fetch_step(ps);
    pd_peer_buf_trim(ps, now, 0);
}

/* Progresses, runs what came and arms the worker's descriptor; returns 1 when armed. */
int pd_peers_poll(struct pd_peers *ps)
{
    for (int round = 0; round < 64; round++) {
        for (int i = 0; i < 1000 && ucp_worker_progress(ps->worker) != 0; i++)
            continue;
        run_queue(ps);
        ucs_status_t st = ucp_worker_arm(ps->worker);
        if (st == UCS_OK)
            return 1;
        if (st != UCS_ERR_BUSY) {
            pd_log(PD_LOG_ERROR, "peers: ucp_worker_arm: %s", ucs_status_string(st));
            return 0;
        }
    }
    return 0;
}

/* Returns the longest sleep before timed peer work, in ms, or -1. */
int pd_peers_timeout_ms(const struct pd_peers *ps)
{
    const int fetch_ms = pd_peer_fetch_timeout_ms(ps);
    if (fetch_ms >= 0)
        return fetch_ms < 100 ? fetch_ms : 100;
    for (uint32_t i = 0; i < PD_PEER_MAX_STAGES; i++)
        if (ps->stages[i].b.buf != NULL)
            return 100;
    for (uint32_t i = 0; i < ps->npeers; i++)
        if (ps->peers[i]->outgoing && ps->peers[i]->ep == NULL)
            return 100;
    if (pd_peer_buf_spares(ps))
        return 1000;              /* spares idle too long are freed */
    return -1;
}

/* Returns how many peers are known. */
uint32_t pd_peers_count(const struct pd_peers *ps)
{
    return ps->npeers;
}

/* Fills peer i's LIST row; returns nothing. */
void pd_peers_item(const struct pd_peers *ps, uint32_t i, struct pcore_peer_item *out)
{
    const struct pd_peer *p = ps->peers[i];
    memset(out, 0, sizeof *out);
    snprintf(out->addr, sizeof out->addr, "%s", p->addr);
    out->state = p->state == PD_PEER_AUTHENTICATED ? PCORE_PEER_AUTHENTICATED
                 : p->state == PD_PEER_FAILED ? PCORE_PEER_FAILED : PCORE_PEER_CONNECTING;
    out->outgoing = (uint32_t) p->outgoing;
    snprintf(out->why, sizeof out->why, "%s", p->state == PD_PEER_FAILED ? p->why : "");
    out->blocks = p->blocks;
    out->bytes = p->bytes;
    out->fetch_ns = p->fetch_ns;
    out->fetches = p->fetches;
    out->failures = p->failures;
    out->auth_failures = p->auth_failures;
    out->served_blocks = p->served_blocks;
    snprintf(out->transports, sizeof out->transports, "%s", p->transports);
    out->tcp_only = (uint32_t) p->tcp_only;
}

/* Returns the worker's event descriptor. */
int pd_peers_fd(const struct pd_peers *ps)
{
    return ps->efd;
}

/* Sets *cause to "peers: what: status" and returns PAGED_E_INVAL. */
static int ucx_cause(char **cause, const char *what, ucs_status_t st)
{
    if (asprintf(cause, "peers: %s: %s", what, ucs_status_string(st)) < 0)
        *cause = NULL;
    return PAGED_E_INVAL;
}

/* Creates the context and the worker, with the Active Message handlers; returns PAGED_OK or an error. */
static int open_worker(struct pd_peers *ps, char **cause)
{
    ucp_config_t *config = NULL;
    ucs_status_t st = ucp_config_read(NULL, NULL, &config);
    if (st != UCS_OK)
        return ucx_cause(cause, "ucp_config_read", st);
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP,
    };
    st = ucp_init(&params, config, &ps->ctx);
    ucp_config_release(config);
    if (st != UCS_OK) {
        ps->ctx = NULL;
        return ucx_cause(cause, "ucp_init", st);
    }
    ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                               .thread_mode = UCS_THREAD_MODE_SINGLE };
    st = ucp_worker_create(ps->ctx, &wp, &ps->worker);
    if (st != UCS_OK) {
        ps->worker = NULL;
        return ucx_cause(cause, "ucp_worker_create", st);
    }
    st = ucp_worker_get_efd(ps->worker, &ps->efd);
    if (st != UCS_OK)
        return ucx_cause(cause, "ucp_worker_get_efd", st);
    for (unsigned id = PD_PEER_AM_CHALLENGE; id <= PD_PEER_AM_LAST_; id++) {
        ps->am_args[id] = (struct pd_peer_am_arg) { .ps = ps, .id = id };
        ucp_am_handler_param_t hp = {
            .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB
                          | UCP_AM_HANDLER_PARAM_FIELD_ARG,
            .id = id, .cb = on_am, .arg = &ps->am_args[id],
        };
        st = ucp_worker_set_am_recv_handler(ps->worker, &hp);
        if (st != UCS_OK)
            return ucx_cause(cause, "ucp_worker_set_am_recv_handler", st);
    }
    return PAGED_OK;
}

/* Listens on cfg's peer-listen; returns PAGED_OK or an error. */
static int open_listener(struct pd_peers *ps, const char *text, char **cause)
{
    struct sockaddr_storage sa;
    socklen_t salen;
    char why[300];
    if (parse_addr(text, &sa, &salen, why, sizeof why) < 0) {
        if (asprintf(cause, "peer-listen: %s", why) < 0)
            *cause = NULL;
        return PAGED_E_INVAL;
    }
    ucp_listener_params_t lp = {
        .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
        .sockaddr = { .addr = (const struct sockaddr *) &sa, .addrlen = salen },
        .conn_handler = { .cb = on_conn, .arg = ps },
    };
    ucs_status_t st = ucp_listener_create(ps->worker, &lp, &ps->listener);
    if (st != UCS_OK) {
        ps->listener = NULL;
        return ucx_cause(cause, "listening on peer-listen", st);
    }
    ucp_listener_attr_t attr = { .field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR };
    st = ucp_listener_query(ps->listener, &attr);
    if (st != UCS_OK)
        return ucx_cause(cause, "ucp_listener_query", st);
    char addr[80];
    format_addr((const struct sockaddr *) &attr.sockaddr, addr, sizeof addr);
    pd_log(PD_LOG_INFO, "listening for peers on %s", addr);
    return PAGED_OK;
}

/* Adds an outgoing peer for each ADDR:PORT of list and starts connecting; returns PAGED_OK or an error. */
static int open_peers(struct pd_peers *ps, const char *list, char **cause)
{
    char buf[sizeof ((struct pd_config *) 0)->peers];
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ' || *tok == '\t')
            tok++;
        size_t len = strlen(tok);
        while (len > 0 && (tok[len - 1] == ' ' || tok[len - 1] == '\t'))
            tok[--len] = '\0';
        if (len == 0)
            continue;
        struct pd_peer *p = ps->npeers < PD_PEER_MAX ? add_peer(ps) : NULL;
        char why[300];
        if (p == NULL) {
            if (asprintf(cause, "peers: more than %u, or out of memory", PD_PEER_MAX) < 0)
                *cause = NULL;
            return PAGED_E_INVAL;
        }
        if (parse_addr(tok, &p->sa, &p->salen, why, sizeof why) < 0) {
            if (asprintf(cause, "peers: %s", why) < 0)
                *cause = NULL;
            return PAGED_E_INVAL;
        }
        snprintf(p->addr, sizeof p->addr, "%s", tok);
        p->outgoing = 1;
        open_ep(ps, p, NULL);
    }
    return PAGED_OK;
}

/* Decides where ps stages the blocks it moves (ps->device_staging) and logs it: in device
 * memory where the backend has it, UCX registers it (its transports for GPU memory are built
 * in) and PAGEDD_PEER_STAGING does not say host; else in host memory. Returns nothing. */
static void choose_staging(struct pd_peers *ps, const pd_backend *b)
{
    if (b->ops->dev_alloc == NULL || b->ops->units_sums == NULL)
        return;
    ucp_context_attr_t attr = { .field_mask = UCP_ATTR_FIELD_MEMORY_TYPES };
    const int ucx_cuda = ucp_context_query(ps->ctx, &attr) == UCS_OK
                         && (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
    const int forced_host = pd_knob(PD_KNOB_PEER_STAGING) == PD_KNOB_STAGING_HOST;
    ps->device_staging = ucx_cuda && !forced_host;
    if (ps->device_staging)
        pd_log(PD_LOG_INFO, "peers: the %s backend's blocks move in device memory: staged and checked on the GPU, "
               "read by UCX (cuda_ipc between GPUs of this host, GPUDirect RDMA between hosts)", b->ops->name);
    else
        pd_log(PD_LOG_INFO, "peers: the %s backend's blocks move through host staging buffers: %s", b->ops->name,
               forced_host ? "PAGEDD_PEER_STAGING=host" : "this UCX does not register GPU memory (built without CUDA)");
}

/* Opens the peer module; returns PAGED_OK and *out, or an error with *cause. */
int pd_peers_open(const struct pd_config *cfg, pd_backend *b, struct pd_pool *const *pools,
                  struct pd_peers **out, char **cause)
{
    *out = NULL;
    if (sodium_init() < 0) {
        *cause = strdup("peers: libsodium did not initialize");
        return PAGED_E_INVAL;
    }
    struct pd_peers *ps = pd_calloc(1, sizeof *ps);
    if (ps == NULL) {
        *cause = strdup("out of memory");
        return PAGED_E_NOMEM;
    }
    ps->efd = -1;
    ps->backend = b;
    ps->pools = pools;
    ps->timeout_ms = cfg->peer_timeout_ms;
    ps->next_req = 1;
    ps->corrupt = pd_knob(PD_KNOB_PEER_CORRUPT) != 0;
    ps->parts = (uint32_t) pd_knob(PD_KNOB_PEER_PARTS);
    ps->stall = pd_knob(PD_KNOB_PEER_STALL) != 0;
    randombytes_buf(ps->id, sizeof ps->id);
    int rc = pd_peer_key_load(cfg->peer_key, ps->key, cause) < 0 ? PAGED_E_INVAL : PAGED_OK;
    if (rc == PAGED_OK)
        rc = open_worker(ps, cause);
    if (rc == PAGED_OK && cfg->peer_listen[0] != '\0')
        rc = open_listener(ps, cfg->peer_listen, cause);
    if (rc == PAGED_OK)
        rc = open_peers(ps, cfg->peers, cause);
    if (rc != PAGED_OK) {
        pd_peers_close(ps);
        return rc;
    }
    choose_staging(ps, b);
    if (ps->corrupt)
        pd_log(PD_LOG_WARNING, "peers: the blocks served to peers are corrupted on purpose (PAGEDD_PEER_CORRUPT)");
    if (ps->stall)
        pd_log(PD_LOG_WARNING, "peers: requests of peers are never answered (PAGEDD_PEER_STALL)");
    *out = ps;
    return PAGED_OK;
}

/* Closes every endpoint and frees the module; returns nothing. */
void pd_peers_close(struct pd_peers *ps)
{
    if (ps == NULL)
        return;
    ps->done_fn = NULL;         /* nobody is told any more */
    if (ps->worker != NULL)
        pd_peer_fetch_drop_all(ps);
    for (uint32_t i = 0; i < ps->npeers; i++) {
        if (ps->worker != NULL)
            disconnect(ps, ps->peers[i]);
        free(ps->peers[i]);
    }
    pd_peer_stages_drop(ps, NULL, 1, 0);
    pd_peer_buf_trim(ps, 0, 1);
    while (ps->head != NULL) {
        struct pd_peer_msg *m = ps->head;
        ps->head = m->next;
        free(m);
    }
    if (ps->listener != NULL)
        ucp_listener_destroy(ps->listener);
    if (ps->worker != NULL)
        ucp_worker_destroy(ps->worker);
    if (ps->ctx != NULL)
        ucp_cleanup(ps->ctx);
    sodium_memzero(ps->key, sizeof ps->key);
    free(ps);
}
