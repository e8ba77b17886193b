/* backend.c: the backend factory: choosing and opening the backend the configuration asks for. */
/* SPDX-License-Identifier: MIT */
#include "config.h"

#include "daemon/backend.h"

#include <stdio.h>

#include "daemon/util/log.h"
#include "daemon/cpu/cpu.h"
#ifdef HAVE_CUDA
#include "daemon/cuda/cuda.h"
#endif

/* Opens the configured backend; returns it or NULL with *cause. */
pd_backend *pd_backend_open(const struct pd_config *cfg, char **cause)
{
    switch (cfg->backend) {
    case PD_BACKEND_CUDA:
#ifdef HAVE_CUDA
        return pd_backend_cuda_open(cfg->device, cause);
#else
        if (asprintf(cause, "backend cuda: this pagedd was built without CUDA (use --backend cpu)") < 0)
            *cause = NULL;
        return NULL;
#endif
    case PD_BACKEND_AUTO: {
#ifdef HAVE_CUDA
        /* A machine without a driver or a GPU is an ordinary place for the cpu backend: the
         * probe's error is only worth a debug line, unless a device was named. */
        char why[160];
        if (pd_backend_cuda_probe(why, sizeof why) > 0)
            return pd_backend_cuda_open(cfg->device, cause);
        if (cfg->device[0] != '\0')
            pd_log(PD_LOG_WARNING, "backend auto: %s: using the cpu backend (device '%s' ignored)",
                   why, cfg->device);
        else
            pd_log(PD_LOG_DEBUG, "backend auto: %s: using the cpu backend", why);
#endif
        return pd_backend_cpu_open(cfg->threads, cause);
    }
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
