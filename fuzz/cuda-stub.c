/* cuda-stub.c: the cuda backend's entry points for the clang fuzzing build, which has none. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

/*
 * `make fuzz` compiles the daemon's C sources with clang and links no CUDA: the harnesses
 * run the cpu backend only. daemon/backend.c still names the cuda backend when config.h
 * says HAVE_CUDA; these stand-ins say it is not there.
 */

#ifdef HAVE_CUDA
#include <stdio.h>
#include <string.h>

#include "daemon/cuda/cuda.h"

/* Says the fuzzing build has no cuda backend; returns NULL with *cause. */
pd_backend *pd_backend_cuda_open(const char *device, char **cause)
{
    (void) device;
    *cause = strdup("backend cuda: not in the fuzzing build");
    return NULL;
}

/* Returns 0: no device, with why. */
int pd_backend_cuda_probe(char *why, size_t whylen)
{
    snprintf(why, whylen, "not in the fuzzing build");
    return 0;
}
#else
/* Nothing to stand in for: ISO C wants a declaration in every file. */
typedef int pd_fuzz_cuda_stub_unused;
#endif
