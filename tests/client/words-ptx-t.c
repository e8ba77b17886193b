/* words-ptx-t.c: libpaged's dependency-word kernels, as PTX, compile with ptxas for each architecture they serve. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/cuda_driver.h"
#include "tests/tap/basic.h"

/*
 * libpaged hands its word kernels to the driver as PTX text (lib/cuda_words.c); a mistake in
 * that text shows only when a worker first asks for a kernel, on a machine with a GPU. Here
 * the toolkit's ptxas compiles the sm_90 variant for sm_90 and the base variant (written for
 * sm_60) for every architecture from sm_75, the oldest that CUDA 13's ptxas still takes, on
 * any machine with the toolkit. As a control, the sm_90
 * variant must be refused for sm_80 (it uses griddepcontrol), so a ptxas that accepted
 * anything would fail the test.
 */

/* Writes text to a new temporary file, storing its name in path (64 bytes); bails on failure. */
static void write_temp(char *path, const char *text)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(path, 64, "%s/words-ptx-t.XXXXXX", tmp != NULL && *tmp && strlen(tmp) < 40 ? tmp : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0)
        sysbail("mkstemp %s", path);
    size_t n = strlen(text);
    if (write(fd, text, n) != (ssize_t) n || close(fd) != 0)
        sysbail("writing %s", path);
}

/* Runs ptxas for arch on the file at path, its output to /dev/null; returns its exit status,
 * or -1 when it did not run to an exit. */
static int run_ptxas(const char *arch, const char *path)
{
    pid_t pid = fork();
    if (pid < 0)
        sysbail("fork");
    if (pid == 0) {
        char archarg[32];
        snprintf(archarg, sizeof archarg, "-arch=%s", arch);
        if (freopen("/dev/null", "w", stdout) == NULL)
            _exit(126);
        execl(PAGED_PTXAS, "ptxas", archarg, "-o", "/dev/null", path, (char *) NULL);
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            sysbail("waitpid");
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Compiles both variants for their architectures and the control; returns 0. */
int main(void)
{
    if (access(PAGED_PTXAS, X_OK) != 0)
        skip_all("no ptxas at %s", PAGED_PTXAS);
    plan_lazy();
    char sm90[64], base[64];
    write_temp(sm90, pc_cuda_words_ptx(1));
    write_temp(base, pc_cuda_words_ptx(0));
    is_int(0, run_ptxas("sm_90", sm90), "ptxas compiles the sm_90 variant for sm_90");
    is_int(0, run_ptxas("sm_90a", sm90), "and for sm_90a");
    static const char *const archs[] = { "sm_75", "sm_80", "sm_86", "sm_89", "sm_90" };
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        is_int(0, run_ptxas(archs[i], base), "ptxas compiles the base variant for %s", archs[i]);
    int control = run_ptxas("sm_80", sm90);
    ok(control > 0 && control != 127, "ptxas refuses the sm_90 variant for sm_80 (exit %d)", control);
    ok(strstr(pc_cuda_words_ptx(1), "griddepcontrol.wait") != NULL
           && strstr(pc_cuda_words_ptx(0), "griddepcontrol") == NULL,
       "only the sm_90 variant uses programmatic dependent launch");
    unlink(sm90);
    unlink(base);
    return 0;
}
