/* backend.c: choosing and opening the backend the configuration asks for. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/backend.h"

#include <stdio.h>
#include <stdlib.h>

/* Opens the configured backend; returns it or NULL with *cause. */
pd_backend *pd_backend_open(const struct pd_config *cfg, char **cause)
{
    switch (cfg->backend) {
    case PD_BACKEND_CUDA:
#ifdef HAVE_CUDA
        if (asprintf(cause, "backend cuda: not implemented in this pagedd yet (use --backend cpu)") < 0)
            *cause = NULL;
#else
        if (asprintf(cause, "backend cuda: this pagedd was built without CUDA (use --backend cpu)") < 0)
            *cause = NULL;
#endif
        return NULL;
    case PD_BACKEND_AUTO:
        /* The cuda backend's probe goes here: it opens cuda when a device is usable. */
        return pd_backend_cpu_open(cfg->threads, cause);
    case PD_BACKEND_CPU:
    default:
        return pd_backend_cpu_open(cfg->threads, cause);
    }
}

/* Closes a backend; returns nothing. */
void pd_backend_close(pd_backend *b)
{
    if (b != NULL)
        b->ops->destroy(b);
}
