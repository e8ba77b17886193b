/* example-t.c: libpaged(3)'s EXAMPLES program, built from the page, runs against a real pagedd and leaves no pool. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "paged.h"
#include "tests/client/daemon_harness.h"
#include "tests/tap/basic.h"
#include "tools/common/spawn.h"

/* How long the example may run: it decodes 16 tokens over 4 layers on the cpu backend. */
#define EXAMPLE_MS 60000

/* Runs the example program (tests/client/libpaged-example, built from man/libpaged.3 by
 * man-example.sh) against d's socket, its output in d's directory; returns its wait status,
 * or -1 with why in err. */
static int run_example(const struct pagedd *d, char *err, size_t errsize)
{
    const char *top = getenv("top_builddir");
    char prog[512], sockenv[400], out[400];
    snprintf(prog, sizeof prog, "%s/tests/client/libpaged-example", top != NULL ? top : ".");
    snprintf(sockenv, sizeof sockenv, "PAGED_SOCKET=%s", d->socket);
    snprintf(out, sizeof out, "%s/example.out", d->dir);
    const char *const argv[] = { prog, NULL };
    const char *const env[] = { sockenv, NULL };
    const struct spawn_cmd cmd = { .argv = argv, .env = env, .out = out, .err = out, .death_signal = SIGKILL };
    return spawn_run(&cmd, EXAMPLE_MS, err, errsize);
}

/* Runs the example twice (the second finds no pool left by the first), then checks the
 * daemon has no pool "llama"; returns 0 (TAP reports the result). */
int main(void)
{
    struct pagedd d;
    harness_start(&d);
    plan(6);
    for (int round = 1; round <= 2; round++) {
        char err[256] = "", how[64];
        int st = run_example(&d, err, sizeof err);
        ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "run %d: the libpaged(3) example exits 0 (%s%s)", round,
           spawn_describe(how, sizeof how, st), err);
        if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            pagedd_log_diag(&d, 20);
    }
    ok(pagedd_log_contains(&d, "created pool 'llama'"), "the example created its pool 'llama'");
    ok(pagedd_log_contains(&d, "destroyed pool 'llama'"), "and destroyed it");
    paged_client *c = harness_client(&d);
    paged_pool *p = NULL;
    is_int(PAGED_E_NOENT, paged_pool_attach(c, "llama", &p), "no pool 'llama' is left behind");
    paged_client_close(c);
    int st = harness_stop(&d);
    ok(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "pagedd exits 0");
    return 0;
}
