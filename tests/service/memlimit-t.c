/* memlimit-t.c: pagedd out of address space: a client or pool it cannot map is refused by name, and it recovers. */
/* SPDX-License-Identifier: MIT */
/* The other clients go on meanwhile. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "paged.h"
#include "lib/core/proto.h"
#include "tests/service/rawclient.h"
#include "tests/service/proc.h"
#include "tests/tap/basic.h"

/*
 * A running pagedd (cpu backend) with one client and a control connection has its address
 * space limited (prlimit RLIMIT_AS) to 1 MiB more than it uses. A second client's channel and
 * a 1 GiB pool cannot be mapped: each is refused with PAGED_E_NOMEM and a message naming what
 * could not be made, and nothing else changes (the first client is served, the daemon's
 * descriptors are as before). With the limit lifted, both succeed, and pagedd exits 0 on
 * SIGTERM. Skipped under AddressSanitizer or a wrapper ($PAGED_DAEMON_WRAPPER): their own
 * allocations would meet the limit first.
 */

static struct pagedd daemon_;

/* Returns the daemon's VmSize in bytes, or 0. */
static uint64_t vm_size(void)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int) daemon_.pid);
    FILE *f = fopen(path, "r");
    long kb = 0;
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "VmSize: %ld kB", &kb) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return (uint64_t) kb * 1024u;
}

/* Creates a pool of 1 GiB (4096 blocks of 256 KiB) named name over ctl; returns 0 or the error. */
static int big_pool(struct rc_client *ctl, const char *name)
{
    return rc_pool_create(ctl, name, 4, 8, 128, 16, PAGED_DTYPE_F16, 4096, 0600, 0, NULL, NULL);
}

/* Starts the daemon, limits its address space and drives the clients; returns 0. */
int main(void)
{
#if defined(__SANITIZE_ADDRESS__)
    skip_all("AddressSanitizer's allocator would meet the limit before the daemon does");
#endif
    if (getenv("PAGED_DAEMON_WRAPPER") != NULL)
        skip_all("the daemon runs under $PAGED_DAEMON_WRAPPER, whose memory is not the daemon's");
    plan_lazy();
    int st = 0;
    if (pagedd_start(&daemon_, NULL, NULL, &st) != 0)
        bail("pagedd did not start (status %d)", st);
    struct rc_client c1, c2, ctl;
    if (rc_connect(daemon_.socket, "memlimit-1", 0, &c1) != 0
        || rc_connect(daemon_.socket, "memlimit-ctl", PCORE_HELLO_CONTROL, &ctl) != 0)
        bail("the first clients could not connect");
    const int fds = td_fd_count_stable(daemon_.pid);
    const uint64_t vm = vm_size();
    ok(vm > 0 && td_limit(daemon_.pid, RLIMIT_AS, vm + (1u << 20)) == 0,
       "the daemon's address space limited to 1 MiB more than the %llu bytes it uses (prlimit)",
       (unsigned long long) vm);

    int rc = rc_connect(daemon_.socket, "memlimit-2", 0, &c2);
    ok(rc == PAGED_E_NOMEM && strstr(c2.errmsg, "cannot map the channel memory") != NULL,
       "a second client is refused with PAGED_E_NOMEM naming what could not be mapped (%s: %s)", paged_strerror(rc),
       c2.errmsg);
    if (rc == 0)
        rc_close(&c2);
    rc = big_pool(&ctl, "memlimit-big");
    ok(rc == PAGED_E_NOMEM && strstr(ctl.errmsg, "memlimit-big") != NULL,
       "a 1 GiB pool is refused with PAGED_E_NOMEM naming it (%s: %s)", paged_strerror(rc), ctl.errmsg);
    ok(rc_nop(&c1) == 0, "the first client is served meanwhile");
    int now = td_fd_count_stable(daemon_.pid);
    ok(now == fds, "the refusals leave no descriptor behind (%d, %d before)", now, fds);

    ok(td_limit(daemon_.pid, RLIMIT_AS, RLIM_INFINITY) == 0, "the limit lifted");
    rc = rc_connect(daemon_.socket, "memlimit-2", 0, &c2);
    ok(rc == 0 && rc_nop(&c2) == 0, "the second client connects and is served (%s)", paged_strerror(rc));
    if (rc == 0)
        rc_close(&c2);
    rc = big_pool(&ctl, "memlimit-big");
    ok(rc == 0, "the 1 GiB pool is made (%s)", paged_strerror(rc));
    rc_close(&c1);
    rc_close(&ctl);
    st = pagedd_stop(&daemon_);
    ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "pagedd exits 0 on SIGTERM");
    pagedd_cleanup(&daemon_);
    return 0;
}
