/* api-t.c: libpaged's API against a real pagedd: connect, pools, arenas, the async rings, mapping, errors. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "paged.h"
#include "lib/core/proto.h"
#include "tests/client/daemon_harness.h"
#include "tests/tap/basic.h"

/* The main pool's geometry. */
#define PL 2u
#define PH 2u
#define PD 64u
#define PB 16u
#define PN 64u

static tap_rng rng;

/* Returns CLOCK_MONOTONIC in milliseconds. */
static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Returns a pool description of the main geometry named name. */
static paged_pool_desc desc_of(const char *name, uint32_t num_blocks)
{
    return (paged_pool_desc) {
        .name = name, .num_layers = PL, .num_kv_heads = PH, .head_dim = PD, .block_size = PB,
        .dtype = PAGED_DTYPE_F32, .num_blocks = num_blocks,
    };
}

/* Reports whether s contains needle (s may be NULL). */
static int contains(const char *s, const char *needle)
{
    return s != NULL && strstr(s, needle) != NULL;
}

/* ---- A fake daemon, to see how the library takes refusals and silence. */

enum fake_mode { FAKE_REFUSE_SEQ0, FAKE_REFUSE_ECHO, FAKE_SILENT, FAKE_BAD_WELCOME };

/* Serves one connection on path as mode says, in a child; returns its pid once listening. */
static pid_t fake_daemon(const char *path, enum fake_mode mode)
{
    int ls = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    if (ls < 0)
        sysbail("socket");
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    unlink(path);
    if (bind(ls, (struct sockaddr *) &sa, sizeof sa) != 0 || listen(ls, 4) != 0)
        sysbail("fake daemon: bind %s", path);
    pid_t pid = bfork();
    if (pid > 0) {
        close(ls);
        return pid;
    }
    int fd = accept(ls, NULL, NULL);
    if (fd < 0)
        _exit(1);
    unsigned char buf[PCORE_MSG_MAX];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    struct pcore_msg_hello hello;
    if (n != (ssize_t) sizeof hello)
        _exit(2);
    memcpy(&hello, buf, sizeof hello);
    if (mode == FAKE_REFUSE_SEQ0 || mode == FAKE_REFUSE_ECHO) {
        struct pcore_msg_error e;
        memset(&e, 0, sizeof e);
        e.hdr = (struct pcore_msg_hdr) { PCORE_MSG_ERROR, mode == FAKE_REFUSE_ECHO ? hello.hdr.seq : 0,
                                         PAGED_E_VERSION, sizeof e };
        snprintf(e.message, sizeof e.message, "client speaks protocol version %u, this fake speaks 99",
                 hello.version);
        send(fd, &e, sizeof e, MSG_NOSIGNAL);
        close(fd); /* as pagedd does after a refusal */
        _exit(0);
    } else if (mode == FAKE_BAD_WELCOME) {
        struct pcore_msg_welcome w;
        memset(&w, 0, sizeof w);
        w.hdr = (struct pcore_msg_hdr) { PCORE_MSG_WELCOME, hello.hdr.seq, 0, sizeof w };
        w.version = PCORE_PROTO_VERSION;
        w.backend = PAGED_BACKEND_CPU;
        w.num_fds = 3; /* but none attached */
        send(fd, &w, sizeof w, MSG_NOSIGNAL);
    }
    /* Hold the connection until the client goes (bounded: the client times out). */
    struct pollfd p = { .fd = fd, .events = POLLIN };
    poll(&p, 1, 10000);
    _exit(0);
}

/* A regular file where the socket should be: the reason says it is not a socket. */
static void test_connect_not_socket(const struct pagedd *h)
{
    char path[320], why[256];
    snprintf(path, sizeof path, "%s/plain-file", h->dir);
    int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0)
        sysbail("creating %s", path);
    close(fd);
    paged_client *c = NULL;
    paged_connect_opts o = { .socket_path = path, .timeout_ms = 2000 };
    is_int(PAGED_E_NOTCONN, paged_client_connect_err(&o, &c, why, sizeof why),
           "connect to a regular file: PAGED_E_NOTCONN");
    ok(contains(why, path) && contains(why, "is not a socket"), "connect: the reason names the file, not a socket (%s)",
       why);
    unlink(path);
}

/* Runs fn(ctx, res) in a child that dropped to uid and gid 65534 (closing its copy of the
 * parent's client inherited first, when there is one), and copies the size bytes of res it
 * filled back into res. Returns 0, or -1 when the child could not drop or report. */
static int as_nobody(void (*fn)(const void *ctx, void *res), const void *ctx, void *res, size_t size,
                     paged_client *inherited)
{
    int fds[2];
    if (pipe(fds) != 0)
        sysbail("a pipe from a child of uid 65534");
    const pid_t pid = bfork();
    if (pid == 0) {
        paged_client_close(inherited); /* the parent's: not ours to use */
        close(fds[0]);
        const int dropped = setgid(65534) == 0 && setuid(65534) == 0;
        if (dropped)
            fn(ctx, res);
        _exit(dropped && write(fds[1], res, size) == (ssize_t) size ? 0 : 1);
    }
    close(fds[1]);
    const ssize_t got = read(fds[0], res, size);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    return got == (ssize_t) size ? 0 : -1;
}

/* What a connection as another uid gave: its code and reason. */
struct perm_try {
    int rc;
    char why[256];
};

/* Connects to the socket at ctx with paged_client_connect_err into the perm_try at res;
 * returns nothing. */
static void perm_child(const void *ctx, void *res)
{
    struct perm_try *r = res;
    paged_connect_opts o = { .socket_path = ctx, .timeout_ms = 2000 };
    paged_client *c = NULL;
    r->rc = paged_client_connect_err(&o, &c, r->why, sizeof r->why);
    paged_client_close(c);
}

/* A socket of mode 0600 owned by root, opened by a child that became uid 65534: PAGED_E_PERM,
 * with a reason naming the socket and the permission, not the pool text. Root only. */
static void test_connect_perm(const struct pagedd *h)
{
    if (geteuid() != 0) {
        skip(2, "not root: no other uid to connect as");
        return;
    }
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    const int len = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/root-only.sock", h->dir);
    if (len < 0 || (size_t) len >= sizeof sa.sun_path)
        bail("%s/root-only.sock is too long for a Unix socket", h->dir);
    const char *path = sa.sun_path;
    int ls = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (ls < 0 || bind(ls, (struct sockaddr *) &sa, sizeof sa) != 0 || chmod(path, 0600) != 0 || listen(ls, 4) != 0)
        sysbail("listening on %s", path);
    struct perm_try r = { .rc = 1 };
    if (as_nobody(perm_child, path, &r, sizeof r, NULL) < 0)
        r.rc = -999;
    r.why[sizeof r.why - 1] = '\0';
    is_int(PAGED_E_PERM, r.rc, "connect as uid 65534 to a root-only socket: PAGED_E_PERM");
    char want[400];
    snprintf(want, sizeof want, "permission denied opening socket %s", path);
    ok(contains(r.why, want) && !contains(r.why, "pool"), "connect: the reason says '%s' (%s)", want, r.why);
    close(ls);
    unlink(path);
}

/* Leaves a socket file at path that nobody listens on (bound, then closed), as a daemon that
 * died leaves it; bails out when it cannot. Returns nothing. */
static void stale_socket(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    if (fd < 0 || strlen(path) >= sizeof sa.sun_path)
        sysbail("socket for %s", path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0)
        sysbail("bind %s", path);
    close(fd);
}

/* Connections that fail: nobody listening, bad options, refusals, silence. */
static void test_connect_failures(const struct pagedd *h)
{
    char path[320], why[256];
    paged_client *c = (paged_client *) &rng; /* not NULL, to see it cleared */
    snprintf(path, sizeof path, "%s/nobody.sock", h->dir);
    paged_connect_opts o = { .socket_path = path, .timeout_ms = 2000 };
    is_int(PAGED_E_NOTCONN, paged_client_connect_err(&o, &c, why, sizeof why),
           "connect: a socket nobody listens on gives PAGED_E_NOTCONN");
    ok(c == NULL, "connect: *out is NULL after a failure");
    ok(contains(why, "no daemon listening on") && contains(why, "nobody.sock"),
       "connect: the reason says nobody listens and names the socket (%s)", why);
    test_connect_not_socket(h);
    test_connect_perm(h);

    o.socket_path = h->socket;
    o.sq_entries = 3;
    is_int(PAGED_E_INVAL, paged_client_connect(&o, &c), "connect: sq_entries 3 is refused");
    o.sq_entries = 64;
    o.cq_entries = 32;
    is_int(PAGED_E_INVAL, paged_client_connect(&o, &c), "connect: cq_entries below sq_entries is refused");
    o.sq_entries = o.cq_entries = 0;
    o.spin_us = -2;
    is_int(PAGED_E_INVAL, paged_client_connect_err(&o, &c, why, sizeof why), "connect: spin_us -2 is refused");
    ok(contains(why, "spin_us"), "connect: the reason names spin_us (%s)", why);
    o.spin_us = 1000001;
    is_int(PAGED_E_INVAL, paged_client_connect(&o, &c), "connect: spin_us 1000001 is refused");
    /* Never spinning and spinning long both still complete requests. */
    static const int spins[] = { -1, 500 };
    for (size_t i = 0; i < sizeof spins / sizeof spins[0]; i++) {
        o.spin_us = spins[i];
        int rc = paged_client_connect_err(&o, &c, why, sizeof why);
        is_int(PAGED_OK, rc, "connect: spin_us %d is accepted (%s)", spins[i], why);
        if (rc == PAGED_OK) {
            for (int k = 0; k < 3; k++)
                is_int(PAGED_OK, paged_nop(c), "spin_us %d: NOP %d completes", spins[i], k);
            paged_client_close(c);
        }
    }
    o.spin_us = 0;

    /* No socket_path: $PAGED_SOCKET names it; without it $XDG_RUNTIME_DIR/paged/pagedd.sock,
     * where nobody listens here, and the reason names that path. */
    const char *old_env = getenv("PAGED_SOCKET"), *old_xdg = getenv("XDG_RUNTIME_DIR");
    char *saved = old_env != NULL ? strdup(old_env) : NULL, *saved_xdg = old_xdg != NULL ? strdup(old_xdg) : NULL;
    paged_connect_opts dflt = { .socket_path = NULL, .timeout_ms = 2000 };
    setenv("PAGED_SOCKET", h->socket, 1);
    int rc = paged_client_connect_err(&dflt, &c, why, sizeof why);
    is_int(PAGED_OK, rc, "connect: without socket_path, $PAGED_SOCKET is the daemon's socket (%s)", why);
    if (rc == PAGED_OK) {
        is_int(PAGED_OK, paged_nop(c), "connect: and that client is served");
        paged_client_close(c);
    }
    unsetenv("PAGED_SOCKET");
    setenv("XDG_RUNTIME_DIR", h->dir, 1);
    snprintf(path, sizeof path, "%s/paged", h->dir);
    if (mkdir(path, 0700) < 0)
        sysbail("mkdir %s", path);
    snprintf(path, sizeof path, "%s/paged/pagedd.sock", h->dir);
    stale_socket(path);
    is_int(PAGED_E_NOTCONN, paged_client_connect_err(&dflt, &c, why, sizeof why),
           "connect: without either, $XDG_RUNTIME_DIR/paged/pagedd.sock, where nobody listens");
    ok(contains(why, path), "connect: the reason names that path (%s)", why);
    unlink(path);
    if (saved != NULL)
        setenv("PAGED_SOCKET", saved, 1);
    if (saved_xdg != NULL)
        setenv("XDG_RUNTIME_DIR", saved_xdg, 1);
    else
        unsetenv("XDG_RUNTIME_DIR");
    free(saved);
    free(saved_xdg);

    static const struct { enum fake_mode mode; int want; const char *what; } cases[] = {
        { FAKE_REFUSE_SEQ0, PAGED_E_VERSION, "a refusal answering no request" },
        { FAKE_REFUSE_ECHO, PAGED_E_VERSION, "a refusal echoing HELLO's number" },
        { FAKE_SILENT, PAGED_E_TIMEOUT, "a daemon that never answers" },
        { FAKE_BAD_WELCOME, PAGED_E_PROTO, "a WELCOME without its descriptors" },
    };
    snprintf(path, sizeof path, "%s/fake.sock", h->dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pid_t pid = fake_daemon(path, cases[i].mode);
        /* Only the silent one should time out: the others answer, however slowly the
         * machine runs the fake. */
        paged_connect_opts f = { .socket_path = path,
                                 .timeout_ms = cases[i].mode == FAKE_SILENT ? 300 : 10000 };
        double t0 = now_ms();
        rc = paged_client_connect_err(&f, &c, why, sizeof why);
        double dt = now_ms() - t0;
        is_int(cases[i].want, rc, "connect to %s: %s", cases[i].what, paged_strerror(cases[i].want));
        ok(c == NULL && dt < 9000, "connect to %s: no client, ended in %.0f ms", cases[i].what, dt);
        if (cases[i].want == PAGED_E_VERSION)
            ok(contains(why, "this fake speaks 99"), "connect to %s: the daemon's message is kept (%s)",
               cases[i].what, why);
        int status;
        waitpid(pid, &status, 0);
    }
    unlink(path);
}

/* A working connection and its accessors. */
static void test_connect(paged_client *c)
{
    ok(paged_client_backend(c) == PAGED_BACKEND_CPU, "client: the daemon reports the cpu backend");
    ok(paged_client_fd(c) >= 0, "client: paged_client_fd gives a descriptor");
    is_string("", paged_client_error(c), "client: no error text after connecting");
    is_string("0.1.0", paged_version(), "paged_version is 0.1.0");
    is_int(PAGED_OK, paged_nop(c), "nop: a synchronous round trip");
    is_string("block_tables", paged_field_name(PCORE_FIELD_BLOCK_TABLE), "field name: block_tables");
    is_string("seq_lens", paged_field_name(PCORE_FIELD_SEQ_LENS), "field name: seq_lens");
    is_string("qo_indptr", paged_field_name(PCORE_FIELD_QO_INDPTR), "field name: qo_indptr");
    is_string("none", paged_field_name(PCORE_FIELD_NONE), "field name: none");
    is_string("none", paged_field_name(9999), "field name: an unknown field is none");
    is_string("num_q_heads", paged_field_name(PCORE_FIELD_HEADS),
              "field name: num_q_heads, as paged_request names it");
    is_string("decode", paged_op_name(PAGED_OP_DECODE), "op name: decode");
    is_string("nop", paged_op_name(PAGED_OP_NOP), "op name: nop, the first op");
    is_string("lookup", paged_op_name(PAGED_OP_LOOKUP), "op name: lookup, the last op");
    ok(paged_op_name((paged_op) PCORE_OP_COUNT_) == NULL, "op name: one past the last op is NULL");
    ok(paged_op_name((paged_op) -1) == NULL, "op name: a negative op is NULL");
}

/* Pool creation: geometry errors named, the created pool's description, names. */
static void test_pool_create(paged_client *c1, paged_client *c2, paged_pool **main_pool)
{
    static const struct { const char *field; uint32_t value; int want; } bad[] = {
        { "head_dim", 100, PAGED_E_GEOMETRY },
        { "block_size", 7, PAGED_E_GEOMETRY },
        { "num_layers", 0, PAGED_E_GEOMETRY },
        { "num_kv_heads", 0, PAGED_E_GEOMETRY },
        { "dtype", 42, PAGED_E_DTYPE },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        paged_pool_desc d = desc_of("api-bad", PN);
        if (strcmp(bad[i].field, "head_dim") == 0) d.head_dim = bad[i].value;
        if (strcmp(bad[i].field, "block_size") == 0) d.block_size = bad[i].value;
        if (strcmp(bad[i].field, "num_layers") == 0) d.num_layers = bad[i].value;
        if (strcmp(bad[i].field, "num_kv_heads") == 0) d.num_kv_heads = bad[i].value;
        if (strcmp(bad[i].field, "dtype") == 0) d.dtype = (paged_dtype) bad[i].value;
        paged_pool *p = (paged_pool *) &rng;
        int rc = paged_pool_create(c1, &d, &p);
        ok(rc == bad[i].want || (rc == PAGED_E_GEOMETRY && bad[i].want == PAGED_E_DTYPE),
           "create: %s %u refused (%s)", bad[i].field, bad[i].value, paged_strerror(rc));
        ok(p == NULL, "create: %s %u leaves no handle", bad[i].field, bad[i].value);
        ok(contains(paged_client_error(c1), bad[i].field), "create: the error names %s (%s)",
           bad[i].field, paged_client_error(c1));
    }
    paged_pool_desc d = desc_of("a-name-that-is-far-too-long-for-a-pool-because-it-has-more-than-63-bytes", PN);
    paged_pool *p = NULL;
    is_int(PAGED_E_INVAL, paged_pool_create(c1, &d, &p), "create: a 70-byte name is refused");

    d = desc_of("api", PN);
    is_int(PAGED_OK, paged_pool_create(c1, &d, &p), "create: pool 'api' created");
    if (p == NULL)
        bail("no pool to go on with");
    paged_pool_info info;
    paged_pool_get_info(p, &info);
    ok(info.num_layers == PL && info.num_kv_heads == PH && info.head_dim == PD
       && info.block_size == PB && info.num_blocks == PN && info.dtype == PAGED_DTYPE_F32,
       "create: the pool has the geometry asked for");
    is_int((long long) PL * 2 * PN * PH * PB * PD * 4, (long long) info.bytes,
           "create: bytes is L * 2 * N * H * B * D * element size");
    ok(info.writable, "create: the creator may write (mode 0600 by default)");
    is_int(0600 | PAGED_POOL_EXPORTED, info.mode, "create: the default mode is 0600, exported (owner only)");

    paged_pool *dup = NULL;
    is_int(PAGED_E_EXIST, paged_pool_create(c2, &d, &dup), "create: a second pool 'api' is PAGED_E_EXIST");
    paged_pool *other = NULL;
    is_int(PAGED_OK, paged_pool_attach(c2, "api", &other), "attach: another client attaches 'api'");
    paged_pool_info oinfo;
    paged_pool_get_info(other, &oinfo);
    ok(oinfo.id == info.id && oinfo.bytes == info.bytes, "attach: same pool id and size");
    is_int(PAGED_E_NOENT, paged_pool_attach(c2, "no-such-pool", &dup), "attach: an unknown name is PAGED_E_NOENT");
    is_int(PAGED_OK, paged_pool_detach(other), "detach: the second client detaches");
    *main_pool = p;
}

/* Destroy: the name goes at once, the memory stays for those attached. */
static void test_pool_destroy(const struct pagedd *h, paged_client *c1, paged_client *c2)
{
    paged_pool_desc d = desc_of("api-destroy", 8);
    paged_pool *p1 = NULL, *p2 = NULL, *p3 = NULL;
    is_int(PAGED_OK, paged_pool_create(c1, &d, &p1), "destroy: pool created");
    is_int(PAGED_OK, paged_pool_attach(c2, "api-destroy", &p2), "destroy: a second client attached");
    int32_t ids[2];
    is_int(PAGED_OK, paged_alloc(p2, 2, ids), "destroy: the second client holds 2 blocks");
    is_int(PAGED_OK, paged_pool_destroy(c1, "api-destroy"), "destroy: the owner destroys it");
    paged_client *c3 = harness_client(h);
    is_int(PAGED_E_NOENT, paged_pool_attach(c3, "api-destroy", &p3), "destroy: its name is gone for new attaches");
    is_int(PAGED_OK, paged_free(p2, 2, ids), "destroy: the attached client still frees its blocks");
    is_int(PAGED_OK, paged_alloc(p2, 1, ids), "destroy: and still allocates");
    is_int(PAGED_OK, paged_pool_create(c3, &d, &p3), "destroy: the name can be used again");
    paged_pool_info i1, i3;
    paged_pool_get_info(p1, &i1);
    paged_pool_get_info(p3, &i3);
    ok(i1.id != i3.id, "destroy: the new pool has a new id");
    is_int(PAGED_E_NOENT, paged_pool_destroy(c1, "nothing-here"), "destroy: an unknown name is PAGED_E_NOENT");
    is_int(PAGED_OK, paged_pool_detach(p1), "destroy: the owner detaches");
    is_int(PAGED_OK, paged_pool_detach(p2), "destroy: the last client detaches");
    is_int(PAGED_OK, paged_pool_destroy(c3, "api-destroy"), "destroy: the new pool is destroyed too");
    paged_pool_detach(p3);
    paged_client_close(c3);
}

/* Results a read-only child reports through a pipe. */
struct ro_result {
    int connect, attach, writable, alloc, append, map, decode;
};

/* Tries to write through a read-only attachment of pool name; fills *r. */
static void ro_try(paged_client *c, const char *name, struct ro_result *r)
{
    paged_pool *p = NULL;
    r->attach = paged_pool_attach(c, name, &p);
    if (r->attach != PAGED_OK)
        return;
    paged_pool_info info;
    paged_pool_get_info(p, &info);
    r->writable = info.writable;
    int32_t ids[1];
    r->alloc = paged_alloc(p, 1, ids);
    float kv[PH * PD] = { 0.5f };
    int32_t slot = 0;
    r->append = paged_append(p, 0, 1, PAGED_DTYPE_F32, kv, kv, &slot);
    void *base = NULL;
    r->map = paged_pool_map(p, &base);
    paged_pool_detach(p);
}

/* Connects to the socket at ctx and tries pool "api-ro" into the ro_result at res; returns
 * nothing. */
static void ro_child(const void *ctx, void *res)
{
    struct ro_result *r = res;
    paged_connect_opts o = { .socket_path = ctx };
    paged_client *c = NULL;
    r->connect = paged_client_connect(&o, &c);
    if (c != NULL)
        ro_try(c, "api-ro", r);
    paged_client_close(c);
}

/* A read-only attachment cannot write: as another uid when we are root (root may write
 * anything), else through a mode without write bits for the owner. */
static void test_read_only(const struct pagedd *h, paged_client *c1)
{
    paged_pool_desc d = desc_of("api-ro", 8);
    d.mode = (geteuid() == 0 ? 0644 : 0444) | PAGED_POOL_EXPORTED; /* its mapping is tried */
    paged_pool *p = NULL;
    is_int(PAGED_OK, paged_pool_create(c1, &d, &p), "read-only: pool created with mode %04o, exported",
           d.mode & 0777);
    struct ro_result r = { 0 };
    if (geteuid() != 0) {
        paged_client *c = harness_client(h);
        ro_try(c, "api-ro", &r);
        paged_client_close(c);
    } else {
        if (as_nobody(ro_child, h->socket, &r, sizeof r, c1) < 0)
            r.connect = r.attach = -999;
        is_int(PAGED_OK, r.connect, "read-only: a client of uid 65534 connects");
    }
    is_int(PAGED_OK, r.attach, "read-only: attach succeeds (the mode lets it read)");
    is_int(0, r.writable, "read-only: the attachment is not writable");
    ok(r.alloc == PAGED_E_READONLY || r.alloc == PAGED_E_PERM, "read-only: ALLOC refused (%s)",
       paged_strerror(r.alloc));
    ok(r.append == PAGED_E_READONLY || r.append == PAGED_E_PERM, "read-only: APPEND refused (%s)",
       paged_strerror(r.append));
    is_int(PAGED_OK, r.map, "read-only: the pool maps read-only");
    paged_pool_detach(p);
    paged_pool_destroy(c1, "api-ro");
}

/* The arenas: bases, alignment, marks, limits. */
static void test_arenas(paged_client *c)
{
    size_t hs = 0, ds = 0;
    unsigned char *hb = paged_arena_base(c, PAGED_ARENA_HOST, &hs);
    unsigned char *db = paged_arena_base(c, PAGED_ARENA_DATA, &ds);
    ok(hb != NULL && hs >= (1u << 20), "arena: host arena mapped, %zu bytes", hs);
    ok(db == hb && ds == hs, "arena: on the cpu backend the data arena is the host arena");
    uint64_t m0 = paged_arena_mark(c, PAGED_ARENA_HOST), off = 0, off2 = 0;
    is_int(PAGED_OK, paged_arena_alloc(c, PAGED_ARENA_HOST, 100, 4096, &off), "arena: 100 bytes aligned to 4096");
    ok(off % 4096 == 0 && off >= m0, "arena: the offset %llu is aligned and past the mark",
       (unsigned long long) off);
    is_int(PAGED_OK, paged_arena_alloc(c, PAGED_ARENA_DATA, 10, 0, &off2), "arena: 10 data bytes, default alignment");
    ok(off2 >= off + 100 && off2 % 64 == 0, "arena: data and host share one bump pointer on cpu");
    memset(hb + off, 0xab, 100);
    ok(hb[off + 99] == 0xab, "arena: carved memory is writable");
    paged_arena_release(c, PAGED_ARENA_HOST, m0);
    is_int((long long) m0, (long long) paged_arena_mark(c, PAGED_ARENA_HOST), "arena: release rewinds to the mark");
    is_int(PAGED_E_NOMEM, paged_arena_alloc(c, PAGED_ARENA_HOST, hs + 1, 0, &off),
           "arena: more than its size is PAGED_E_NOMEM");
    is_int(PAGED_E_INVAL, paged_arena_alloc(c, PAGED_ARENA_HOST, 8, 3, &off), "arena: alignment 3 is PAGED_E_INVAL");
    is_int((long long) m0, (long long) paged_arena_mark(c, PAGED_ARENA_HOST), "arena: failed carves leave the mark");
}

/* The stream calls on the cpu backend: refused, saying why; a NULL client is refused too. */
static void test_stream_words(paged_client *c)
{
    is_int(PAGED_E_NOTSUP, paged_stream_wait(c, NULL, 0, 1, PAGED_STREAM_AUTO),
           "stream: paged_stream_wait on the cpu backend is PAGED_E_NOTSUP");
    ok(strstr(paged_client_error(c), "paged_stream_wait") != NULL
       && strstr(paged_client_error(c), "cpu backend") != NULL,
       "stream: the error names the call and the cpu backend (%s)", paged_client_error(c));
    is_int(PAGED_E_NOTSUP, paged_stream_signal(c, NULL, 0, 1, PAGED_STREAM_MEMOP),
           "stream: paged_stream_signal on the cpu backend is PAGED_E_NOTSUP");
    ok(strstr(paged_client_error(c), "paged_stream_signal") != NULL, "stream: its error names it (%s)",
       paged_client_error(c));
    is_int(PAGED_E_INVAL, paged_stream_wait(NULL, NULL, 0, 1, 0), "stream: a NULL client is PAGED_E_INVAL");
    is_int(PAGED_E_INVAL, paged_stream_signal(NULL, NULL, 0, 1, 0), "stream: for the signal too");
}

/* Collects want completions of c into got, waiting at most a few seconds in all. */
static int collect(paged_client *c, paged_completion *got, int want)
{
    int n = 0;
    for (int i = 0; i < 10000 && n < want; i++) {
        int r = paged_wait(c, got + n, (unsigned) (want - n), 5000);
        if (r < 0) {
            diag("paged_wait: %s", paged_strerror(r));
            break;
        }
        n += r;
    }
    return n;
}

/* Compares two tags for qsort. */
static int cmp_tag(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? -1 : x > y;
}

/* Checks that the completions' tags are exactly tags (each once). */
static int tags_once(const paged_completion *got, int n, const uint64_t *tags, int want)
{
    if (n != want)
        return 0;
    uint64_t *a = bcalloc((size_t) n, sizeof *a), *b = bcalloc((size_t) n, sizeof *b);
    for (int i = 0; i < n; i++) {
        a[i] = got[i].tag;
        b[i] = tags[i];
    }
    qsort(a, (size_t) n, sizeof *a, cmp_tag);
    qsort(b, (size_t) n, sizeof *b, cmp_tag);
    int same = memcmp(a, b, sizeof *a * (size_t) n) == 0;
    free(a);
    free(b);
    return same;
}

/* Many requests in flight: every tag comes back once, with its op and result. */
static void test_async(paged_client *c, paged_pool *p)
{
    enum { NREQ = 200, NALLOC = 50 };
    uint64_t tags[NREQ];
    paged_completion got[NREQ];
    uint64_t mark = paged_arena_mark(c, PAGED_ARENA_HOST);
    int32_t *host = paged_arena_base(c, PAGED_ARENA_HOST, NULL);
    uint64_t ids_off;
    if (paged_arena_alloc(c, PAGED_ARENA_HOST, NALLOC * sizeof(int32_t), 4, &ids_off) != PAGED_OK)
        bail("arena");
    int prep_ok = 1;
    for (int i = 0; i < NREQ; i++) {
        /* Random tags, the high bits too: the library must not care what they are. */
        tags[i] = tap_rng_u64(&rng) ^ (uint64_t) i;
        paged_request r = { .op = PAGED_OP_NOP, .tag = tags[i] };
        if (i < NALLOC) {
            r.op = PAGED_OP_ALLOC;
            r.pool = p;
            r.u.blocks.count = 1;
            r.u.blocks.ids_off = ids_off + (uint64_t) i * sizeof(int32_t);
        }
        prep_ok &= paged_prep(c, &r) == PAGED_OK;
    }
    ok(prep_ok, "async: %d requests prepared", NREQ);
    is_int(0, paged_inflight(c), "async: prepared requests are not in flight yet");
    is_int(NREQ, paged_submit(c), "async: submit publishes all %d", NREQ);
    int n = collect(c, got, NREQ);
    ok(tags_once(got, n, tags, NREQ), "async: %d completions, every tag exactly once", n);
    int good = 1, allocs = 0;
    for (int i = 0; i < n; i++) {
        good &= got[i].status == PAGED_OK;
        if (got[i].op == PAGED_OP_ALLOC)
            allocs += got[i].count == 1;
    }
    ok(good, "async: every completion succeeded");
    is_int(NALLOC, allocs, "async: each ALLOC completion reports one block");
    is_int(0, paged_inflight(c), "async: nothing left in flight");
    int distinct = 1;
    for (int i = 0; i < NALLOC; i++)
        for (int j = 0; j < i; j++)
            distinct &= host[ids_off / 4 + (uint64_t) i] != host[ids_off / 4 + (uint64_t) j];
    ok(distinct, "async: the %d allocated blocks are distinct", NALLOC);

    paged_request fr = { .op = PAGED_OP_FREE, .pool = p, .tag = 77,
                         .u.blocks = { .count = NALLOC, .ids_off = ids_off } };
    is_int(PAGED_OK, paged_prep(c, &fr), "async: FREE of all of them prepared");
    is_int(1, paged_submit(c), "async: FREE submitted");
    n = collect(c, got, 1);
    ok(n == 1 && got[0].tag == 77 && got[0].status == PAGED_OK && got[0].count == NALLOC,
       "async: FREE freed %d blocks", NALLOC);

    /* A bad request: its completion names the field and element. */
    int32_t *bt = host + ids_off / 4;
    bt[0] = (int32_t) PN - 1; /* not held */
    uint64_t lens_off, q_off, out_off;
    paged_arena_alloc(c, PAGED_ARENA_HOST, 4, 4, &lens_off);
    host[lens_off / 4] = 3;
    paged_arena_alloc(c, PAGED_ARENA_DATA, PH * PD * 4, 0, &q_off);
    paged_arena_alloc(c, PAGED_ARENA_DATA, PH * PD * 4, 0, &out_off);
    paged_request dr = { .op = PAGED_OP_DECODE, .pool = p, .layer = 0, .tag = 5,
                         .u.attn = { .num_seqs = 1, .num_q_heads = PH, .dtype = PAGED_DTYPE_F32,
                                     .q_off = q_off, .out_off = out_off, .block_tables_off = ids_off,
                                     .bt_stride = 1, .seq_lens_off = lens_off } };
    paged_prep(c, &dr);
    paged_submit(c);
    n = collect(c, got, 1);
    ok(n == 1 && got[0].status == PAGED_E_NOTHELD && got[0].err_field == PCORE_FIELD_BLOCK_TABLE
       && got[0].err_index == 0, "async: DECODE of an unheld block: NOTHELD, block_tables[0]");
    paged_arena_release(c, PAGED_ARENA_HOST, mark);

    /* A synchronous call among asynchronous ones: it submits what was prepared, and the
     * completions it sees pass by stay queued for paged_reap. */
    uint64_t mixed[15];
    for (int i = 0; i < 15; i++) {
        mixed[i] = tap_rng_u64(&rng);
        paged_request r = { .op = PAGED_OP_NOP, .tag = mixed[i] };
        paged_prep(c, &r);
        if (i == 9)
            paged_submit(c);
    }
    int32_t one;
    is_int(PAGED_OK, paged_alloc(p, 1, &one), "mixed: a synchronous ALLOC among 15 async requests");
    is_int(15, paged_inflight(c), "mixed: it submitted the 5 prepared ones; 15 are unreaped");
    n = collect(c, got, 15);
    ok(tags_once(got, n, mixed, 15), "mixed: all 15 async completions come back, each once");
    is_int(PAGED_OK, paged_free(p, 1, &one), "mixed: the block is freed");

    paged_request bad = { .op = PAGED_OP_ALLOC, .pool = NULL };
    is_int(PAGED_E_INVAL, paged_prep(c, &bad), "async: a request without a pool is PAGED_E_INVAL");
    bad.op = (paged_op) 99;
    is_int(PAGED_E_INVAL, paged_prep(c, &bad), "async: opcode 99 is PAGED_E_INVAL");
}

/* A small ring: a full SQ and a full CQ budget refuse with PAGED_E_AGAIN; waits time out. */
static void test_ring_full(const struct pagedd *h)
{
    enum { SQ = 8, CQ = 16 };
    paged_connect_opts o = { .socket_path = h->socket, .sq_entries = SQ, .cq_entries = CQ,
                             .host_arena_size = 1u << 20 };
    paged_client *c = NULL;
    if (paged_client_connect(&o, &c) != PAGED_OK)
        bail("connect with small rings");
    uint64_t tags[CQ];
    paged_completion got[CQ];
    int n = 0;
    for (; n < SQ; n++) {
        tags[n] = 1000 + (uint64_t) n;
        paged_request r = { .op = PAGED_OP_NOP, .tag = tags[n] };
        if (paged_prep(c, &r) != PAGED_OK)
            break;
    }
    is_int(SQ, n, "ring full: %d requests fill the submission ring", SQ);
    paged_request r = { .op = PAGED_OP_NOP, .tag = 1 };
    is_int(PAGED_E_AGAIN, paged_prep(c, &r), "ring full: one more is PAGED_E_AGAIN");
    is_int(SQ, paged_submit(c), "ring full: submitted");
    /* Keep submitting without reaping: the completion budget stops us at CQ. Bounded:
     * the daemon drains the SQ in microseconds; 2 ms pauses, 1000 of them at most. */
    int again = 0;
    for (int i = 0; i < 1000 && n < CQ + 1; i++) {
        if (n < CQ)
            tags[n] = 1000 + (uint64_t) n;
        paged_request q = { .op = PAGED_OP_NOP, .tag = 1000 + (uint64_t) n };
        int rc = paged_prep(c, &q);
        if (rc == PAGED_OK) {
            n++;
            paged_submit(c);
        } else if (rc == PAGED_E_AGAIN && n == CQ) {
            again = 1;
            break;
        } else {
            poll(NULL, 0, 2);
        }
    }
    is_int(CQ, n, "ring full: exactly cq_entries (%d) requests go out unreaped", CQ);
    ok(again, "ring full: the next prep is PAGED_E_AGAIN though the SQ has room");
    is_int(CQ, paged_inflight(c), "ring full: %d in flight", CQ);
    is_int(PAGED_E_AGAIN, paged_nop(c), "ring full: a synchronous call says PAGED_E_AGAIN too");
    ok(contains(paged_client_error(c), "reap"), "ring full: and says to reap (%s)", paged_client_error(c));
    n = collect(c, got, CQ);
    ok(tags_once(got, n, tags, CQ), "ring full: all %d completions reaped, each tag once", CQ);
    is_int(PAGED_OK, paged_prep(c, &r), "ring full: after reaping, prep works again");
    paged_submit(c);
    n = collect(c, got, 1);
    ok(n == 1 && got[0].tag == 1, "ring full: and completes");

    double t0 = now_ms();
    int rc = paged_wait(c, got, 1, 50);
    double dt = now_ms() - t0;
    is_int(PAGED_E_TIMEOUT, rc, "wait: nothing in flight, 50 ms: PAGED_E_TIMEOUT");
    ok(dt >= 45 && dt < 3000, "wait: it waited about 50 ms (%.1f)", dt);
    is_int(0, paged_reap(c, got, CQ), "reap: nothing ready gives 0");
    struct pollfd pf = { .fd = paged_client_fd(c), .events = POLLIN };
    is_int(0, poll(&pf, 1, 0), "client fd: not readable while nothing is pending");
    paged_prep(c, &r);
    paged_submit(c);
    int readable = poll(&pf, 1, 5000);
    ok(readable == 1, "client fd: readable once a completion is posted (after a reap of 0)");
    n = collect(c, got, 1);
    is_int(1, n, "client fd: and the completion is there");

    /* A synchronous call with the SQ full of prepared requests: it hands them to the daemon,
     * waits for room, and runs; the prepared ones complete for paged_reap. */
    for (n = 0; n < SQ; n++) {
        tags[n] = 2000 + (uint64_t) n;
        paged_request q = { .op = PAGED_OP_NOP, .tag = tags[n] };
        if (paged_prep(c, &q) != PAGED_OK)
            break;
    }
    is_int(SQ, n, "full SQ: %d requests prepared, none submitted", SQ);
    is_int(PAGED_OK, paged_nop(c), "full SQ: a synchronous NOP submits them, waits for room and completes");
    n = collect(c, got, SQ);
    ok(tags_once(got, n, tags, SQ), "full SQ: the %d prepared requests complete, each tag once", SQ);
    paged_client_close(c);
}

/* APPEND writes what the mapping then shows, at the layout formula's places. */
static void test_map(paged_client *c, paged_pool *p)
{
    enum { NT = 20 };
    int32_t ids[3];
    if (paged_alloc(p, 3, ids) != PAGED_OK)
        bail("alloc for the mapping test");
    int32_t slots[NT];
    /* Tokens land in shuffled offsets of the three blocks. */
    for (int t = 0; t < NT; t++)
        slots[t] = ids[t % 3] * (int32_t) PB + (t / 3) * 2 + (t % 2);
    size_t per = (size_t) NT * PH * PD;
    float *k = bmalloc(per * PL * sizeof *k), *v = bmalloc(per * PL * sizeof *v);
    harness_fill(&rng, k, per * PL);
    harness_fill(&rng, v, per * PL);
    is_int(PAGED_OK, paged_append(p, 1, NT, PAGED_DTYPE_F32, k, v, slots), "map: APPEND %d tokens to layer 1", NT);
    void *base = NULL;
    is_int(PAGED_OK, paged_pool_map(p, &base), "map: the pool maps");
    void *again = NULL;
    paged_pool_map(p, &again);
    ok(base != NULL && again == base, "map: a second call gives the same mapping");
    const float *pool = base;
    int same = 1;
    for (int t = 0; t < NT; t++)
        for (uint32_t hh = 0; hh < PH; hh++)
            for (uint32_t d = 0; d < PD; d++) {
                size_t b = (size_t) slots[t] / PB, off = (size_t) slots[t] % PB;
                size_t ki = ((((1 * 2 + 0) * (size_t) PN + b) * PH + hh) * PB + off) * PD + d;
                size_t vi = ((((1 * 2 + 1) * (size_t) PN + b) * PH + hh) * PB + off) * PD + d;
                size_t src = ((size_t) t * PH + hh) * PD + d;
                same &= pool[ki] == k[src] && pool[vi] == v[src];
            }
    ok(same, "map: every K and V element sits where the layout formula says");

    /* All layers at once: k is [L][NT][H][D]. */
    harness_fill(&rng, k, per * PL);
    harness_fill(&rng, v, per * PL);
    is_int(PAGED_OK, paged_append(p, PAGED_ALL_LAYERS, NT, PAGED_DTYPE_F32, k, v, slots), "map: APPEND to all layers");
    same = 1;
    for (uint32_t l = 0; l < PL; l++)
        for (int t = 0; t < NT; t++)
            for (uint32_t hh = 0; hh < PH; hh++) {
                size_t b = (size_t) slots[t] / PB, off = (size_t) slots[t] % PB;
                size_t ki = ((((l * 2 + 0) * (size_t) PN + b) * PH + hh) * PB + off) * PD;
                size_t vi = ((((l * 2 + 1) * (size_t) PN + b) * PH + hh) * PB + off) * PD;
                size_t src = (((size_t) l * NT + t) * PH + hh) * PD;
                same &= memcmp(pool + ki, k + src, PD * sizeof(float)) == 0
                        && memcmp(pool + vi, v + src, PD * sizeof(float)) == 0;
            }
    ok(same, "map: every layer's K and V match after an all-layers APPEND");

    /* Errors of synchronous calls name the op, the field and the element. */
    int32_t bt[2] = { ids[0], (int32_t) PN - 1 };
    int32_t lens[1] = { 20 };
    float q[PH * PD], out[PH * PD];
    harness_fill(&rng, q, PH * PD);
    paged_attn_args a = { .num_seqs = 1, .num_q_heads = PH, .dtype = PAGED_DTYPE_F32, .q = q,
                          .out = out, .block_tables = bt, .bt_stride = 2, .seq_lens = lens };
    is_int(PAGED_E_NOTHELD, paged_decode(p, 0, &a), "errors: DECODE over a block not held is PAGED_E_NOTHELD");
    ok(strncmp(paged_client_error(c), "decode: block_tables[1]: ", 25) == 0,
       "errors: the message names op, field and index (%s)", paged_client_error(c));
    bt[1] = 100000;
    is_int(PAGED_E_BLOCK, paged_decode(p, 0, &a), "errors: a block id beyond the pool is PAGED_E_BLOCK");
    ok(strncmp(paged_client_error(c), "decode: block_tables[1]: ", 25) == 0, "errors: named again (%s)",
       paged_client_error(c));
    bt[1] = ids[1];
    is_int(PAGED_E_LAYER, paged_decode(p, 7, &a), "errors: layer 7 of 2 is PAGED_E_LAYER");
    ok(strncmp(paged_client_error(c), "decode: layer: ", 15) == 0, "errors: a scalar field has no index (%s)",
       paged_client_error(c));
    is_int(PAGED_OK, paged_decode(p, 0, &a), "errors: the corrected DECODE succeeds");
    is_string("", paged_client_error(c), "errors: a success clears the message");
    free(k);
    free(v);
    paged_free(p, 3, ids);
}

/* The daemon going away ends waits and later calls with a clear error. */
static void test_daemon_gone(void)
{
    for (int sig = 0; sig < 2; sig++) {
        struct pagedd h;
        harness_start(&h);
        paged_client *c = harness_client(&h);
        const char *how = sig == 0 ? "SIGTERM" : "SIGKILL";
        /* Give the daemon time to fall asleep on its rings (it then asks to be woken). The
         * checks below hold either way; this only makes the interesting path likely. */
        paged_nop(c);
        poll(NULL, 0, 100);
        kill(h.pid, sig == 0 ? SIGTERM : SIGKILL);
        paged_completion got[1];
        if (sig == 1) {
            /* Dead for sure, and not yet noticed: waking it writes a pipe nobody reads,
             * which must give an error, not SIGPIPE. */
            pagedd_stop_with(&h, SIGKILL);
            paged_request r = { .op = PAGED_OP_NOP };
            paged_prep(c, &r);
            int rc = paged_submit(c);
            ok(rc == 1 || rc == PAGED_E_DISCONNECTED, "daemon SIGKILL: a submit after its death "
               "returns (%d), no SIGPIPE", rc);
        }
        double t0 = now_ms();
        int rc = paged_wait(c, got, 1, 10000);
        double dt = now_ms() - t0;
        if (sig == 0)
            ok(rc == PAGED_E_SHUTDOWN, "daemon %s: a wait ends with PAGED_E_SHUTDOWN (%s)", how,
               paged_strerror(rc));
        else
            ok(rc == PAGED_E_DISCONNECTED, "daemon %s: a wait ends with PAGED_E_DISCONNECTED (%s)",
               how, paged_strerror(rc));
        ok(dt < 5000, "daemon %s: promptly (%.0f ms)", how, dt);
        ok(paged_nop(c) == rc, "daemon %s: later calls say so too", how);
        paged_request r = { .op = PAGED_OP_NOP };
        ok(paged_prep(c, &r) == rc, "daemon %s: prep says so too", how);
        paged_client_close(c);
        harness_stop(&h);
    }
}

/* A control call after the daemon shut down and exited: the SHUTDOWN it sent before it
 * closed is still in the socket, so the call reports that, not a lost connection. */
static void test_control_after_shutdown(void)
{
    struct pagedd h;
    harness_start(&h);
    paged_client *c = harness_client(&h);
    pagedd_stop(&h);
    paged_pool *p = NULL;
    int rc = paged_pool_attach(c, "anything", &p);
    ok(rc == PAGED_E_SHUTDOWN, "daemon exited after SIGTERM: a control call says PAGED_E_SHUTDOWN (%s)",
       paged_strerror(rc));
    ok(strstr(paged_client_error(c), "shutting down") != NULL, "and its message says why (%s)",
       paged_client_error(c));
    ok(paged_nop(c) == PAGED_E_SHUTDOWN, "and later calls say so too");
    paged_client_close(c);
    harness_stop(&h);
}

/* Runs every API test against one daemon, then the daemon-gone tests against fresh ones. */
int main(void)
{
    plan_lazy();
    tap_rng_seed(&rng, tap_seed());
    struct pagedd h;
    harness_start(&h);
    test_connect_failures(&h);
    paged_client *c1 = harness_client(&h), *c2 = harness_client(&h);
    ok(paged_client_id(c1) != paged_client_id(c2), "client: two clients have different ids");
    test_connect(c1);
    paged_pool *p = NULL;
    test_pool_create(c1, c2, &p);
    test_pool_destroy(&h, c1, c2);
    test_read_only(&h, c1);
    test_arenas(c1);
    test_stream_words(c1);
    test_async(c1, p);
    test_ring_full(&h);
    test_map(c1, p);
    is_int(PAGED_OK, paged_pool_detach(p), "detach: the main pool");
    paged_client_close(c2);
    paged_client_close(c1);
    harness_stop(&h);
    test_daemon_gone();
    test_control_after_shutdown();
    return 0;
}
